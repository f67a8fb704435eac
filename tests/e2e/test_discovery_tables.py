"""Discovery and Table output through the daemon against the real API server's: the daemon
advertises the cached resources as the API server describes them (read verbs only), and prints
them in the API server's columns."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from cacheproxy.envtest import Cluster
from cacheproxy.kube.resources import BUILTIN_RESOURCES, ResourceType
from tests.e2e.support import agreeing, converged, daemon_over

# Tables on 1.32 too: its columns are neither 1.28's nor 1.36's.
pytestmark = [pytest.mark.every_server, pytest.mark.also_on("1.32", only=("*table*",))]

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
AGGREGATED = "application/json;g=apidiscovery.k8s.io;v={};as=APIGroupDiscoveryList,application/json"
"""Aggregated discovery in one version (``AGGREGATED.format("v2")``), else the legacy form."""
CACHED_CORE = {"pods", "configmaps", "namespaces", "nodes", "services", "events"}
CACHED_APPS = {"deployments", "replicasets"}


def _by_name(resources: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in resources}


async def test_the_core_resource_list_describes_the_cached_resources_as_the_api_server(
    upstream: httpx.AsyncClient, proxy: httpx.AsyncClient
) -> None:
    up = _by_name((await upstream.get("/api/v1")).json()["resources"])
    down = _by_name((await proxy.get("/api/v1")).json()["resources"])
    assert set(down) == CACHED_CORE
    for name, resource in down.items():
        want = up[name]
        for key in ("kind", "namespaced", "singularName", "shortNames", "categories"):
            assert resource.get(key) == want.get(key), (name, key)
        assert resource["verbs"] == ["get", "list", "watch"]
        assert set(resource["verbs"]) <= set(want["verbs"])


async def test_the_group_list_names_the_groups_of_cached_resources(
    upstream: httpx.AsyncClient, proxy: httpx.AsyncClient
) -> None:
    up = {g["name"]: g for g in (await upstream.get("/apis")).json()["groups"]}
    down = {g["name"]: g for g in (await proxy.get("/apis")).json()["groups"]}
    assert set(down) == {"apps"}
    assert down["apps"]["preferredVersion"] == up["apps"]["preferredVersion"]
    apps = _by_name((await proxy.get("/apis/apps/v1")).json()["resources"])
    assert set(apps) == CACHED_APPS
    up_apps = _by_name((await upstream.get("/apis/apps/v1")).json()["resources"])
    for name in CACHED_APPS:
        assert apps[name]["kind"] == up_apps[name]["kind"]
        assert apps[name]["shortNames"] == up_apps[name]["shortNames"]


@pytest.mark.parametrize("version", ["v2", "v2beta1"])
@pytest.mark.parametrize("path", ["/api", "/apis"])
async def test_aggregated_discovery_answers_in_the_version_asked_for(
    cluster: Cluster,
    upstream: httpx.AsyncClient,
    proxy: httpx.AsyncClient,
    path: str,
    version: str,
) -> None:
    headers = {"Accept": AGGREGATED.format(version)}
    up = await upstream.get(path, headers=headers)
    down = await proxy.get(path, headers=headers)
    assert down.status_code == up.status_code == 200
    assert down.headers["content-type"] == up.headers["content-type"]
    up_doc, down_doc = up.json(), down.json()
    assert (down_doc.get("kind"), down_doc.get("apiVersion")) == (
        up_doc.get("kind"),
        up_doc.get("apiVersion"),
    )
    # v2 came in 1.30 and v2beta1 went in 1.33: asked for the other alone, 1.28 and 1.36 answer
    # the legacy document.
    minor = cluster.assets.minor
    served = minor >= (1, 30) if version == "v2" else minor < (1, 33)
    assert up.headers["content-type"].startswith("application/json;g=apidiscovery") == served
    if not served:
        if path == "/api":
            assert down_doc["versions"] == up_doc["versions"] == ["v1"]
        else:
            groups = {g["name"]: g for g in up_doc["groups"]}
            assert [g["name"] for g in down_doc["groups"]] == ["apps"]
            assert down_doc["groups"][0] == groups["apps"]
        return
    up_resources = {
        (v["version"], r["resource"]): r
        for g in up_doc["items"]
        for v in g["versions"]
        for r in v["resources"]
    }
    compared: set[str] = set()
    for group in down_doc["items"]:
        for version in group["versions"]:
            for resource in version["resources"]:
                want = up_resources[(version["version"], resource["resource"])]
                for key in ("responseKind", "scope", "singularResource", "shortNames"):
                    assert resource.get(key) == want.get(key), (resource["resource"], key)
                compared.add(resource["resource"])
    assert compared == (CACHED_CORE if path == "/api" else CACHED_APPS)


TABLES = [
    "/api/v1/namespaces/ns-0/pods",
    "/api/v1/nodes",
    "/api/v1/namespaces",
    "/api/v1/namespaces/ns-1/services",
    "/api/v1/namespaces/ns-1/configmaps",
    "/api/v1/namespaces/ns-2/events",
    "/apis/apps/v1/namespaces/ns-0/deployments",
    "/apis/apps/v1/namespaces/ns-0/replicasets",
]


@pytest.mark.parametrize("path", TABLES)
async def test_a_table_has_the_api_servers_columns_and_cells(
    upstream: httpx.AsyncClient, proxy: httpx.AsyncClient, path: str
) -> None:
    await converged(upstream, proxy, path)
    up, down = await agreeing(lambda: _tables(upstream, proxy, path), _same_cells)
    assert down["kind"] == up["kind"] == "Table"
    assert down["columnDefinitions"] == up["columnDefinitions"]
    assert [r["cells"] for r in down["rows"]] == [r["cells"] for r in up["rows"]]
    assert up["rows"], "the table has rows"
    # Each row carries its object's metadata, as kubectl's default includeObject asks.
    assert [r["object"]["metadata"]["name"] for r in down["rows"]] == [
        r["object"]["metadata"]["name"] for r in up["rows"]
    ]


async def test_a_get_as_a_table_is_one_row(
    upstream: httpx.AsyncClient, proxy: httpx.AsyncClient
) -> None:
    up, down = await agreeing(lambda: _tables(upstream, proxy, "/api/v1/nodes/node-0"), _same_cells)
    assert len(up["rows"]) == 1
    assert [r["cells"] for r in down["rows"]] == [r["cells"] for r in up["rows"]]


async def _tables(
    upstream: httpx.AsyncClient, proxy: httpx.AsyncClient, path: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``path`` as a Table from both, asked at once."""
    up, down = await asyncio.gather(
        upstream.get(path, headers={"Accept": TABLE}), proxy.get(path, headers={"Accept": TABLE})
    )
    return up.json(), down.json()


def _same_cells(up: dict[str, Any], down: dict[str, Any]) -> bool:
    return [r["cells"] for r in down["rows"]] == [r["cells"] for r in up["rows"]]


@pytest.fixture
async def every_kind(cluster: Cluster, tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    """The daemon caching every built-in kind it knows."""
    resources = [r.config_name for r in BUILTIN_RESOURCES if r.resource != "secrets"]
    resources.append({"resource": "secrets"})  # cached only when named explicitly: it is
    async with (
        daemon_over(cluster, tmp_path, resources=resources) as daemon,
        httpx.AsyncClient(base_url=daemon.url, timeout=30) as proxy,
    ):
        yield proxy


@pytest.mark.parametrize("rtype", BUILTIN_RESOURCES, ids=lambda r: r.config_name)
async def test_every_kinds_table_columns_and_discovery_are_the_api_servers(
    upstream: httpx.AsyncClient, every_kind: httpx.AsyncClient, rtype: ResourceType
) -> None:
    # Column definitions come with every Table, even an empty one.
    path = rtype.collection_path("team-a" if rtype.namespaced else None)
    up = (await upstream.get(path, headers={"Accept": TABLE})).json()
    down = (await every_kind.get(path, headers={"Accept": TABLE})).json()
    assert down["columnDefinitions"] == up["columnDefinitions"]
    group_version = "/api/v1" if not rtype.group else f"/apis/{rtype.group}/{rtype.version}"
    want = _by_name((await upstream.get(group_version)).json()["resources"])[rtype.resource]
    have = _by_name((await every_kind.get(group_version)).json()["resources"])[rtype.resource]
    for key in ("kind", "namespaced", "singularName", "shortNames", "categories"):
        assert have.get(key) == want.get(key), key
