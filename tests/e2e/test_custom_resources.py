"""Custom resources against the real API server: named in the configuration by
``GROUP/VERSION/PLURAL`` alone, served as upstream's discovery describes them — the daemon's
discovery says what the API server's says (short names, categories, singular name, storage
version hash), so ``kubectl get wd`` and ``kubectl get all`` print through it what they print
against the API server; a client asking for protobuf only gets the API server's own answer; a
CRD that is not installed is named and keeps the daemon from being ready."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from cacheproxy.daemon.config import load_config, resolve_upstream
from cacheproxy.daemon.runtime import Daemon
from cacheproxy.envtest import Cluster
from cacheproxy.kube.resources import BUILTIN_RESOURCES
from tests.e2e.support import (
    converged,
    crd,
    daemon_over,
    fresh_namespace,
    kubectl_both,
    write_config,
)
from tests.integration.clients import KUBECTL_VERSIONS, kubectl_binary

pytestmark = [pytest.mark.every_server, pytest.mark.kubectl]

GROUP_VERSION = "/apis/example.com/v1"
CRD = crd("example.com", "Widget", plural="widgets", short_names=["wd"], categories=["all", "toys"])
ALL = [r.config_name for r in BUILTIN_RESOURCES if "all" in r.categories]
"""The built-in kinds of category ``all`` (what ``kubectl get all`` lists besides widgets)."""
PROTOBUF = {"Accept": "application/vnd.kubernetes.protobuf"}


async def _installed(cluster: Cluster) -> str:
    """The widgets CRD, established, and a namespace holding two widgets."""
    async with cluster.async_client() as upstream:
        made = await upstream.post(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=CRD
        )
        assert made.status_code in (201, 409), made.text
        deadline = time.monotonic() + 30
        while (await upstream.get(f"{GROUP_VERSION}/widgets")).status_code != 200:
            assert time.monotonic() < deadline, "the CRD never served"
            await asyncio.sleep(0.1)
        ns = await fresh_namespace(upstream, "crd")
        for name in ("w-1", "w-2"):
            widget = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name}}
            created = await upstream.post(f"{GROUP_VERSION}/namespaces/{ns}/widgets", json=widget)
            assert created.status_code == 201, created.text
    return ns


@pytest.fixture
async def widgets_ns(cluster: Cluster) -> str:
    return await _installed(cluster)


@pytest.fixture
async def daemon_with_widgets(
    cluster: Cluster, widgets_ns: str, tmp_path: Path
) -> AsyncIterator[Daemon]:
    """The daemon caching the kinds of category ``all`` and widgets, named by their path only."""
    async with daemon_over(
        cluster, tmp_path, resources=[*ALL, "namespaces", "example.com/v1/widgets"]
    ) as daemon:
        yield daemon


def _by_name(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in doc["resources"]}


async def test_a_custom_resource_named_alone_is_described_as_the_api_server_describes_it(
    cluster: Cluster, daemon_with_widgets: Daemon, widgets_ns: str
) -> None:
    async with (
        cluster.async_client() as upstream,
        httpx.AsyncClient(base_url=daemon_with_widgets.url, timeout=30) as proxy,
    ):
        want = _by_name((await upstream.get(GROUP_VERSION)).json())["widgets"]
        have = _by_name((await proxy.get(GROUP_VERSION)).json())["widgets"]
        keys = ("kind", "namespaced", "singularName", "shortNames", "categories")
        assert {k: have.get(k) for k in keys} == {k: want.get(k) for k in keys}
        assert have["storageVersionHash"] == want["storageVersionHash"]
        assert have["verbs"] == ["get", "list", "watch"]
        aggregated = (  # v2 where served (1.30 on), else v2beta1 (1.28)
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
            "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
        )
        docs = [
            (await client.get("/apis", headers={"Accept": aggregated})).json()
            for client in (upstream, proxy)
        ]
        entries = [
            next(
                r
                for g in doc["items"]
                if g["metadata"].get("name") == "example.com"
                for v in g["versions"]
                for r in v["resources"]
            )
            for doc in docs
        ]
        keys = ("resource", "responseKind", "scope", "singularResource", "shortNames", "categories")
        assert {k: entries[1].get(k) for k in keys} == {k: entries[0].get(k) for k in keys}
        path = f"{GROUP_VERSION}/namespaces/{widgets_ns}/widgets"
        up, down = await converged(upstream, proxy, path)
        assert down["kind"] == up["kind"] == "WidgetList"


@pytest.mark.parametrize("version", KUBECTL_VERSIONS)
@pytest.mark.parametrize("args", [("get", "wd"), ("get", "all")], ids=["short-name", "all"])
async def test_kubectl_finds_it_by_its_short_name_and_category_as_against_the_api_server(
    cluster: Cluster,
    daemon_with_widgets: Daemon,
    widgets_ns: str,
    tmp_path: Path,
    version: str,
    args: tuple[str, ...],
) -> None:
    kubectl = kubectl_binary(version)
    async with (
        cluster.async_client() as upstream,
        httpx.AsyncClient(base_url=daemon_with_widgets.url, timeout=30) as proxy,
    ):
        await converged(upstream, proxy, f"{GROUP_VERSION}/namespaces/{widgets_ns}/widgets")
    direct, proxied = await kubectl_both(
        kubectl, cluster, daemon_with_widgets.url, tmp_path, *args, "-n", widgets_ns
    )
    assert proxied == direct
    assert "w-1" in proxied and "w-2" in proxied


async def test_a_client_asking_for_protobuf_only_gets_the_api_servers_own_answer(
    cluster: Cluster, daemon_with_widgets: Daemon, widgets_ns: str
) -> None:
    path = f"{GROUP_VERSION}/namespaces/{widgets_ns}/widgets"
    async with (
        cluster.async_client() as upstream,
        httpx.AsyncClient(base_url=daemon_with_widgets.url, timeout=30) as proxy,
    ):
        for target in (path, f"{path}/w-1"):
            up = await upstream.get(target, headers=PROTOBUF)
            down = await proxy.get(target, headers=PROTOBUF)
            assert up.status_code == down.status_code == 406
            assert down.headers["content-type"] == up.headers["content-type"]
            assert down.content == up.content  # the Status in protobuf, byte for byte


async def test_a_crd_that_is_not_installed_is_named_and_the_daemon_is_not_ready(
    cluster: Cluster, tmp_path: Path
) -> None:
    path = write_config(tmp_path, cluster, resources=["pods", "example.com/v1/nothings"])
    config = load_config(path, env={})
    async with (
        Daemon(config, resolve_upstream(config.upstream)) as daemon,
        httpx.AsyncClient(base_url=daemon.url, timeout=30) as proxy,
    ):
        assert not await daemon.wait_ready(3)
        assert (await proxy.get("/readyz")).status_code == 503
        pending = (await proxy.get("/status")).json()["pending"]
        assert list(pending) == ["example.com/v1/nothings"]
        assert "CustomResourceDefinition nothings.example.com" in pending["example.com/v1/nothings"]
        # Not served by the cache: it passes through, and the API server has no such resource.
        admin = cluster.users["admin"].headers
        missing = await proxy.get(f"{GROUP_VERSION}/nothings", headers=admin)
        assert missing.status_code == 404
        async with cluster.async_client() as upstream:
            assert missing.content == (await upstream.get(f"{GROUP_VERSION}/nothings")).content
