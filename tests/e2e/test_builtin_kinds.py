"""The API server's other list-and-watch kinds through the daemon, against the real API server:
each cacheable by its name (the built-in table's by any name, the others by
``GROUP/VERSION/PLURAL``), described in discovery as upstream describes it, printed in Tables
as the API server prints it for kubectl, and none of them watched through a
CustomResourceDefinition. A name upstream does not serve stops the daemon at start, and
``check-config --live`` says so, naming the closest served names."""

from __future__ import annotations

import asyncio
import secrets
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from cacheproxy.daemon.config import load_config, resolve_upstream
from cacheproxy.daemon.runtime import Daemon
from cacheproxy.envtest import Cluster
from cacheproxy.errors import ConfigError
from tests.e2e.support import agreeing, create, daemon_over, fresh_namespace, write_config

pytestmark = pytest.mark.every_server

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
AGGREGATED = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
)
NAMES = [
    "rc",
    "quota",
    "limits",
    "podtemplates",
    "apps/v1/controllerrevisions",
    "discovery.k8s.io/v1/endpointslices",
    "coordination.k8s.io/v1/leases",
    "pdb",
    "sc",
    "storage.k8s.io/v1/csinodes",
    "storage.k8s.io/v1/csidrivers",
    "clusterroles",
    # Outside the built-in table: described by upstream's discovery alone.
    "rbac.authorization.k8s.io/v1/roles",
    "rbac.authorization.k8s.io/v1/rolebindings",
    "scheduling.k8s.io/v1/priorityclasses",
]
FORWARDED = [
    # Kinds with columns of their own the daemon has no printer for: upstream's Tables.
    "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
    "/apis/scheduling.k8s.io/v1/priorityclasses",
]
COLLECTIONS = [
    "/api/v1/namespaces/{ns}/replicationcontrollers",
    "/api/v1/namespaces/{ns}/resourcequotas",
    "/api/v1/namespaces/{ns}/limitranges",
    "/api/v1/namespaces/{ns}/podtemplates",
    "/apis/apps/v1/namespaces/{ns}/controllerrevisions",
    "/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices",
    "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases",
    "/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
    "/apis/storage.k8s.io/v1/storageclasses",
    "/apis/storage.k8s.io/v1/csinodes",
    "/apis/storage.k8s.io/v1/csidrivers",
    "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
    *FORWARDED,
]


@dataclass
class Cached:
    daemon: Daemon
    proxy: httpx.AsyncClient
    """Without credentials: every read is the cache's (none can be passed through)."""
    caller: httpx.AsyncClient
    """With credentials, as kubectl sends them: what only upstream prints is asked of it."""
    upstream: httpx.AsyncClient
    namespace: str


def _objects(suffix: str) -> list[tuple[str, dict[str, Any]]]:
    """One or two objects of each kind, in the states its printer tells apart."""
    template = {
        "metadata": {"labels": {"app": "rc", "tier": "x"}},
        "spec": {"containers": [{"name": "a", "image": "nginx:1"}, {"name": "b", "image": "bb"}]},
    }
    owner = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds-x", "controller": True}
    owner["uid"] = "0b6f0d3e-0000-4000-8000-000000000001"
    return [
        ("/api/v1/namespaces/{ns}/replicationcontrollers", {"metadata": {"name": "rc-1"}, "spec": {"replicas": 3, "selector": {"app": "rc", "tier": "x"}, "template": template}}),
        ("/api/v1/namespaces/{ns}/resourcequotas", {"metadata": {"name": "rq-1"}, "spec": {"hard": {"pods": "10", "requests.cpu": "2", "limits.memory": "4Gi", "limits.cpu": "3"}}}),
        ("/api/v1/namespaces/{ns}/limitranges", {"metadata": {"name": "lr-1"}, "spec": {"limits": [{"type": "Container", "default": {"cpu": "500m"}}]}}),
        ("/api/v1/namespaces/{ns}/podtemplates", {"metadata": {"name": "pt-1"}, "template": template}),
        ("/apis/apps/v1/namespaces/{ns}/controllerrevisions", {"metadata": {"name": "cr-1", "ownerReferences": [owner]}, "revision": 3, "data": {}}),
        ("/apis/apps/v1/namespaces/{ns}/controllerrevisions", {"metadata": {"name": "cr-2"}, "revision": 1, "data": {"a": 1}}),
        ("/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices", {"metadata": {"name": "es-1"}, "addressType": "IPv4", "ports": [{"name": "http", "port": 80}, {"name": "https", "port": 443}, {"name": "x"}, {"port": 9}], "endpoints": [{"addresses": ["10.0.0.1"]}, {"addresses": ["10.0.0.2", "10.0.0.3"]}, {"addresses": ["10.0.0.4"]}]}),
        ("/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices", {"metadata": {"name": "es-2"}, "addressType": "IPv6", "endpoints": []}),
        ("/apis/coordination.k8s.io/v1/namespaces/{ns}/leases", {"metadata": {"name": "lease-1"}, "spec": {"holderIdentity": "node-a"}}),
        ("/apis/coordination.k8s.io/v1/namespaces/{ns}/leases", {"metadata": {"name": "lease-2"}, "spec": {}}),
        ("/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets", {"metadata": {"name": "pdb-1"}, "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "a"}}}}),
        ("/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets", {"metadata": {"name": "pdb-2"}, "spec": {"maxUnavailable": "30%", "selector": {"matchLabels": {"app": "b"}}}}),
        ("/apis/storage.k8s.io/v1/storageclasses", {"metadata": {"name": f"sc-1-{suffix}", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}}, "provisioner": "example.com/disk", "reclaimPolicy": "Retain", "volumeBindingMode": "WaitForFirstConsumer", "allowVolumeExpansion": True}),
        ("/apis/storage.k8s.io/v1/storageclasses", {"metadata": {"name": f"sc-2-{suffix}"}, "provisioner": "example.com/other"}),
        ("/apis/storage.k8s.io/v1/csinodes", {"metadata": {"name": f"node-{suffix}"}, "spec": {"drivers": [{"name": "d.example.com", "nodeID": "n1"}]}}),
        ("/apis/storage.k8s.io/v1/csidrivers", {"metadata": {"name": f"d-{suffix}.csi.example.com"}, "spec": {"attachRequired": False, "podInfoOnMount": True, "volumeLifecycleModes": ["Persistent", "Ephemeral"], "tokenRequests": [{"audience": "a"}, {"audience": "b"}]}}),
        ("/apis/storage.k8s.io/v1/csidrivers", {"metadata": {"name": f"e-{suffix}.csi.example.com"}, "spec": {}}),
        ("/apis/rbac.authorization.k8s.io/v1/clusterroles", {"metadata": {"name": f"role-{suffix}"}, "rules": []}),
        ("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles", {"metadata": {"name": "role-1"}, "rules": []}),
        ("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings", {"metadata": {"name": "rb-1"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "role-1"}, "subjects": [{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}, {"kind": "ServiceAccount", "name": "default", "namespace": "{ns}"}]}),
    ]  # fmt: skip


_STATUSES = [
    # What controllers would write: the quota's usage, the budget's and the controller's counts.
    ("/api/v1/namespaces/{ns}/resourcequotas/rq-1/status", {"status": {"hard": {"pods": "10", "requests.cpu": "2", "limits.memory": "4Gi", "limits.cpu": "3"}, "used": {"pods": "1", "requests.cpu": "500m", "limits.memory": "0"}}}),
    ("/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/pdb-1/status", {"status": {"disruptionsAllowed": 1, "currentHealthy": 3, "desiredHealthy": 2, "expectedPods": 3}}),
    ("/api/v1/namespaces/{ns}/replicationcontrollers/rc-1/status", {"status": {"replicas": 3, "readyReplicas": 2}}),
]  # fmt: skip


@pytest.fixture
async def cached(cluster: Cluster, tmp_path: Path) -> AsyncIterator[Cached]:
    """Objects of every kind in a namespace of their own, and the daemon caching them all."""
    async with cluster.async_client() as upstream:
        namespace = await fresh_namespace(upstream, "kinds")
        suffix = secrets.token_hex(3)
        for path, body in _objects(suffix):
            body = orjson.loads(orjson.dumps(body).replace(b"{ns}", namespace.encode()))
            await create(upstream, path.format(ns=namespace), body)
        for path, body in _STATUSES:
            response = await upstream.patch(
                path.format(ns=namespace),
                json=body,
                headers={"Content-Type": "application/merge-patch+json"},
            )
            assert response.status_code == 200, response.text
        async with (
            daemon_over(cluster, tmp_path, resources=NAMES) as daemon,
            httpx.AsyncClient(base_url=daemon.url, timeout=30) as proxy,
            httpx.AsyncClient(
                base_url=daemon.url, timeout=30, headers=cluster.admin.headers
            ) as caller,
        ):
            yield Cached(daemon, proxy, caller, upstream, namespace)


async def test_every_kind_is_cached_without_a_crd_watch(cached: Cached) -> None:
    server = cached.daemon.server
    assert server is not None
    assert {r.config_name for r in server.resources} == {
        "replicationcontrollers",
        "resourcequotas",
        "limitranges",
        "podtemplates",
        "apps/v1/controllerrevisions",
        "discovery.k8s.io/v1/endpointslices",
        "coordination.k8s.io/v1/leases",
        "policy/v1/poddisruptionbudgets",
        "storage.k8s.io/v1/storageclasses",
        "storage.k8s.io/v1/csinodes",
        "storage.k8s.io/v1/csidrivers",
        "rbac.authorization.k8s.io/v1/clusterroles",
        "rbac.authorization.k8s.io/v1/roles",
        "rbac.authorization.k8s.io/v1/rolebindings",
        "scheduling.k8s.io/v1/priorityclasses",
    }
    assert cached.daemon.crd_factory is not None
    assert list(cached.daemon.crd_factory) == []


@pytest.mark.parametrize("collection", COLLECTIONS, ids=lambda p: p.split("/")[-1])
async def test_a_kinds_table_is_the_api_servers(cached: Cached, collection: str) -> None:
    path = collection.format(ns=cached.namespace)
    proxy = cached.caller if collection in FORWARDED else cached.proxy

    async def tables() -> tuple[dict[str, Any], dict[str, Any]]:
        up, down = await asyncio.gather(
            cached.upstream.get(path, headers={"Accept": TABLE}),
            proxy.get(path, headers={"Accept": TABLE}),
        )
        return up.json(), down.json()

    def same(up: dict[str, Any], down: dict[str, Any]) -> bool:
        return [r["cells"] for r in down["rows"]] == [r["cells"] for r in up["rows"]]

    up, down = await agreeing(tables, same)
    assert up["kind"] == down["kind"] == "Table"
    assert up["rows"], "the table has rows"
    assert down["columnDefinitions"] == up["columnDefinitions"]
    assert [r["cells"] for r in down["rows"]] == [r["cells"] for r in up["rows"]]
    assert [r["object"]["metadata"]["name"] for r in down["rows"]] == [
        r["object"]["metadata"]["name"] for r in up["rows"]
    ]


async def test_discovery_describes_every_kind_as_the_api_server(cached: Cached) -> None:
    server = cached.daemon.server
    assert server is not None
    for rtype in server.resources:
        path = rtype.group_version.path
        up = {r["name"]: r for r in (await cached.upstream.get(path)).json()["resources"]}
        down = {r["name"]: r for r in (await cached.proxy.get(path)).json()["resources"]}
        want, have = up[rtype.resource], down[rtype.resource]
        for key in ("kind", "namespaced", "singularName", "shortNames", "categories"):
            assert have.get(key) == want.get(key), (rtype.config_name, key)
        assert {"get", "list", "watch"} <= set(have["verbs"]) <= set(want["verbs"])
    # Aggregated discovery.
    for path in ("/api", "/apis"):
        up_doc, down_doc = await asyncio.gather(
            cached.upstream.get(path, headers={"Accept": AGGREGATED}),
            cached.proxy.get(path, headers={"Accept": AGGREGATED}),
        )
        # (The version each answers in is test_discovery_tables.py's: here, the entries.)
        assert up_doc.headers["content-type"].endswith(";as=APIGroupDiscoveryList")
        assert down_doc.headers["content-type"].endswith(";as=APIGroupDiscoveryList")
        theirs = _aggregated_entries(up_doc.json())
        ours = _aggregated_entries(down_doc.json())
        for rtype in server.resources:
            if bool(rtype.group) != (path == "/apis"):
                continue
            key = (rtype.group, rtype.version, rtype.resource)
            for field in ("responseKind", "scope", "singularResource", "shortNames", "categories"):
                assert ours[key].get(field) == theirs[key].get(field), (key, field)


def _aggregated_entries(doc: dict[str, Any]) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {
        (group["metadata"].get("name", ""), version["version"], entry["resource"]): entry
        for group in doc["items"]
        for version in group["versions"]
        for entry in version["resources"]
    }


async def test_a_name_upstream_does_not_serve_stops_the_start(
    cluster: Cluster, tmp_path: Path
) -> None:
    path = write_config(tmp_path, cluster, resources=["pods", "discovery.k8s.io/v1/endpointslice"])
    config = load_config(path, env={})
    daemon = Daemon(config, resolve_upstream(config.upstream))
    with pytest.raises(ConfigError) as raised:
        await daemon.start()
    assert str(raised.value) == (
        "resources upstream does not serve with list and watch:\n"
        "  discovery.k8s.io/v1/endpointslice: upstream's discovery.k8s.io/v1 has no resource "
        "endpointslice that may be listed and watched; the closest it serves: "
        "discovery.k8s.io/v1/endpointslices, endpoints"
    )


async def test_check_config_live_says_what_upstream_serves_and_what_not(
    cluster: Cluster, tmp_path: Path
) -> None:
    resources = [
        "leases",
        "rbac.authorization.k8s.io/v1/roles",
        "policy/v1beta1/poddisruptionbudgets",
    ]
    path = write_config(tmp_path, cluster, resources=resources)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cacheproxy", "check-config", "--config", str(path), "--live",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 1, (out, err)
    assert "ok   coordination.k8s.io/v1/leases: Lease, namespaced, listed" in out.decode()
    assert "ok   rbac.authorization.k8s.io/v1/roles: Role, namespaced, listed" in out.decode()
    assert (
        "FAIL policy/v1beta1/poddisruptionbudgets: upstream serves no API group version "
        "policy/v1beta1; the closest it serves: policy/v1/poddisruptionbudgets"
    ) in err.decode()
