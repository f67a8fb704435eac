"""cacheproxy's own API under /cacheproxy/ (FastAPI) beside the Kubernetes paths: the status, the
configuration without secrets, the indexes and the index queries — answered as a full scan
answers — its OpenAPI description, access control as for /metrics plus ``list`` on the resource
queried, and the Kubernetes paths never reaching FastAPI."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from cacheproxy.daemon.config import AuthMode, AuthSettings, ResourceConfig, load_config
from cacheproxy.daemon.runtime import Daemon
from cacheproxy.daemon.wiring import effective_config
from cacheproxy.kube.resources import builtin
from cacheproxy.serving import Receive, Scope, Send
from cacheproxy.sim import SimConfig, SimServer, Simulator
from cacheproxy.sim.policy import Policy
from cacheproxy.sim.workload import DemoSpec, demo_objects
from cacheproxy.upstream import TokenSource, UpstreamConfig
from tests.integration.daemon_support import daemon_for

INDEXES = ("spec.nodeName", "metadata.ownerReferences[*].uid")


async def _pods(proxy: httpx.AsyncClient, **params: str) -> list[dict[str, Any]]:
    response = await proxy.get("/api/v1/pods", params=params)
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


async def test_the_status_is_the_status_page(proxy: httpx.AsyncClient) -> None:
    mine = (await proxy.get("/cacheproxy/v1/status")).json()
    page = (await proxy.get("/status")).json()
    assert mine["kind"] == page["kind"] == "CacheStatus"
    assert mine["ready"] is True
    assert mine["resources"].keys() == page["resources"].keys()
    for name, res in mine["resources"].items():
        assert res["objects"] == page["resources"][name]["objects"]


async def test_each_resource_is_listed_with_its_indexes(proxy: httpx.AsyncClient) -> None:
    listed = {r["name"]: r for r in (await proxy.get("/cacheproxy/v1/resources")).json()}
    assert set(listed) == {"pods", "configmaps", "namespaces", "apps/v1/deployments"}
    pods = listed["pods"]
    assert pods["synced"] is True
    assert pods["objects"] == len(await _pods(proxy))
    assert [i["path"] for i in pods["indexes"]] == list(INDEXES)
    assert listed["apps/v1/deployments"]["qualified"] == "deployments.apps"


async def test_an_index_says_what_a_full_scan_says(proxy: httpx.AsyncClient) -> None:
    pods = await _pods(proxy)
    nodes = Counter(p["spec"]["nodeName"] for p in pods if p["spec"].get("nodeName"))
    owners = Counter(o["uid"] for p in pods for o in p["metadata"].get("ownerReferences", []))

    summary = (await proxy.get("/cacheproxy/v1/resources/pods/indexes", params={"top": 2})).json()
    by_path = {i["path"]: i for i in summary["indexes"]}
    assert by_path["spec.nodeName"]["cardinality"] == len(nodes)
    assert by_path["metadata.ownerReferences[*].uid"]["cardinality"] == len(owners)
    top = by_path["spec.nodeName"]["top"]
    assert [t["count"] for t in top] == sorted(nodes.values(), reverse=True)[:2]

    values = (await proxy.get("/cacheproxy/v1/resources/pods/indexes/spec.nodeName/values")).json()
    assert {v["value"]: v["count"] for v in values["values"]} == dict(nodes)
    counts = [v["count"] for v in values["values"]]
    assert counts == sorted(counts, reverse=True)

    node = next(iter(nodes))
    found = (
        await proxy.get(
            "/cacheproxy/v1/resources/pods/indexes/spec.nodeName/objects",
            params={"value": node},
        )
    ).json()
    scanned = [
        {"namespace": p["metadata"]["namespace"], "name": p["metadata"]["name"]}
        for p in await _pods(proxy, fieldSelector=f"spec.nodeName={node}")
    ]
    assert found["count"] == len(scanned) == nodes[node]
    assert found["objects"] == scanned  # key order, as the list


async def test_several_values_and_a_namespace_narrow_the_objects(proxy: httpx.AsyncClient) -> None:
    pods = await _pods(proxy, fieldSelector="metadata.namespace=ns-1")
    pick = sorted({p["spec"]["nodeName"] for p in pods if p["spec"].get("nodeName")})[:2]
    found = (
        await proxy.get(
            "/cacheproxy/v1/resources/pods/indexes/spec.nodeName/objects",
            params={"value": pick, "namespace": "ns-1"},
        )
    ).json()
    expected = sorted(p["metadata"]["name"] for p in pods if p["spec"].get("nodeName") in pick)
    assert [o["name"] for o in found["objects"]] == expected
    assert {o["namespace"] for o in found["objects"]} == {"ns-1"}


@pytest.mark.parametrize(
    ("path", "code", "says"),
    [
        ("/cacheproxy/v1/resources/services/indexes", 404, 'does not cache "services"'),
        ("/cacheproxy/v1/resources/pods/indexes/spec.nope/values", 404, 'no index "spec.nope"'),
        ("/cacheproxy/v1/resources/pods/indexes/spec.nodeName/objects", 400, "value"),
        ("/cacheproxy/v1/resources/pods/indexes?top=-1", 400, "top"),
        ("/cacheproxy/v2/anything", 404, "no /cacheproxy/v2/anything"),
    ],
)
async def test_errors_are_statuses(
    proxy: httpx.AsyncClient, path: str, code: int, says: str
) -> None:
    response = await proxy.get(path)
    assert response.status_code == code
    body = response.json()
    assert (body["kind"], body["code"]) == ("Status", code)
    assert says in body["message"]


async def test_the_api_is_described_by_openapi(proxy: httpx.AsyncClient) -> None:
    doc = (await proxy.get("/cacheproxy/openapi.json")).json()
    assert doc["info"]["title"] == "cacheproxy"
    assert {
        "/cacheproxy/v1/status",
        "/cacheproxy/v1/config",
        "/cacheproxy/v1/resources",
        "/cacheproxy/v1/resources/{resource}/indexes",
        "/cacheproxy/v1/resources/{resource}/indexes/{index}/values",
        "/cacheproxy/v1/resources/{resource}/indexes/{index}/objects",
    } <= set(doc["paths"])
    page = await proxy.get("/cacheproxy/docs")
    assert page.status_code == 200
    assert "/cacheproxy/openapi.json" in page.text


class _Spy:
    """Wraps the daemon's FastAPI app, recording every path handed to it."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.paths: list[str] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.paths.append(scope["path"])
        await self.app(scope, receive, send)


async def test_the_kubernetes_paths_never_reach_fastapi(
    daemon: Daemon, proxy: httpx.AsyncClient
) -> None:
    assert daemon.server is not None
    spy = _Spy(daemon.server.api)
    daemon.server.api = spy
    for path in (
        "/api/v1/pods",
        "/api/v1/namespaces/ns-0/pods",
        "/apis/apps/v1/deployments",
        "/api/v1/pods?watch=1&timeoutSeconds=1",
        "/api",
        "/apis",
        "/version",
        "/status",
        "/metrics",
        "/readyz",
        "/api/v1/namespaces/ns-0/pods/nope",
        "/api/v1/secrets",
    ):
        await proxy.get(path)
    await proxy.post("/api/v1/namespaces/ns-0/pods", json={})
    assert spy.paths == []
    assert (await proxy.get("/cacheproxy/v1/status")).status_code == 200
    assert spy.paths == ["/cacheproxy/v1/status"]


async def test_the_configuration_never_shows_a_secret(demo_sim: Simulator, tmp_path: Path) -> None:
    token_file = tmp_path / "tokens.csv"
    token_file.write_text('local-secret-token,alice,1,"system:masters"\n')
    key = tmp_path / "client.key"
    key.write_text("-----BEGIN PRIVATE KEY-----\nkey-material\n-----END PRIVATE KEY-----\n")
    async with SimServer(demo_sim) as server:
        upstream = UpstreamConfig(
            server=server.url,
            token_source=TokenSource.static("upstream-secret-token"),
            client_key=key,
            source="test",
        )
        async with (
            daemon_for(
                server.url,
                upstream=upstream,
                auth=AuthSettings(mode=AuthMode.TOKEN, token_file=token_file),
            ) as daemon,
            httpx.AsyncClient(base_url=daemon.url) as client,
        ):
            response = await client.get(
                "/cacheproxy/v1/config", headers={"Authorization": "Bearer local-secret-token"}
            )
    assert response.status_code == 200, response.text
    text = response.text
    for secret in ("local-secret-token", "upstream-secret-token", "proxy-password", "key-material"):
        assert secret not in text
    doc = response.json()
    assert doc["server"]["auth"] == doc["server"]["auth"] | {
        "mode": "token",
        "tokenFile": str(token_file),
    }
    assert doc["upstream"]["resolved"]["server"] == upstream.server
    assert doc["upstream"]["resolved"]["clientKeyFile"] == str(key)
    assert [r["resource"] for r in doc["resources"]] == [
        "pods",
        "configmaps",
        "namespaces",
        "apps/v1/deployments",
    ]
    assert doc["resources"][0]["indexes"] == list(INDEXES)


def test_a_proxy_urls_password_is_never_shown() -> None:
    config = load_config(None, env={}, overrides={"resources": "pods"})
    upstream = UpstreamConfig(server="https://k8s:6443", proxy="http://u:proxy-password@p:3128")
    resolved = effective_config(config, upstream)["upstream"]["resolved"]
    assert resolved["proxy"] == "http://p:3128"


# ---------------------------------------------------------------------------- access control

POLICY = {
    "users": [
        {"name": "cacheproxy", "token": "daemon-token", "groups": ["system:masters"]},
        {"name": "operator", "token": "operator-token"},
        {"name": "viewer", "token": "viewer-token"},
        {"name": "reader", "token": "reader-token"},
    ],
    "rules": [
        {
            "subjects": [{"kind": "User", "name": "operator"}, {"kind": "User", "name": "viewer"}],
            "verbs": ["get"],
            "nonResourceURLs": ["/cacheproxy/*"],
        },
        {
            "subjects": [{"kind": "User", "name": "operator"}, {"kind": "User", "name": "reader"}],
            "verbs": ["list"],
            "apiGroups": [""],
            "resources": ["pods"],
        },
    ],
}


@dataclass
class Secured:
    daemon: Daemon
    client: httpx.AsyncClient

    async def get(self, path: str, token: str | None) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return await self.client.get(path, headers=headers)


@pytest.fixture
async def secured() -> AsyncIterator[Secured]:
    sim = Simulator(config=SimConfig(policy=Policy.from_mapping(POLICY)))
    sim.load(demo_objects(DemoSpec(namespaces=2, nodes=2, apps=2, pods=10)))
    resources = (ResourceConfig(rtype=builtin("pods"), indexes=("spec.nodeName",)),)
    async with (
        SimServer(sim) as server,
        daemon_for(
            server.url,
            resources=resources,
            upstream=UpstreamConfig(
                server=server.url, token_source=TokenSource.static("daemon-token")
            ),
            auth=AuthSettings(mode=AuthMode.DELEGATED),
        ) as daemon,
        httpx.AsyncClient(base_url=daemon.url) as client,
    ):
        yield Secured(daemon, client)


@pytest.mark.parametrize(
    ("token", "status_code", "indexes_code"),
    [
        (None, 401, 401),
        ("reader-token", 403, 403),  # may list pods, not read /cacheproxy/*
        ("viewer-token", 200, 403),  # may read /cacheproxy/*, not list pods
        ("operator-token", 200, 200),
    ],
)
async def test_access_is_a_non_resource_url_and_list_on_the_resource_queried(
    secured: Secured, token: str | None, status_code: int, indexes_code: int
) -> None:
    status = await secured.get("/cacheproxy/v1/status", token)
    assert status.status_code == status_code, status.text
    for path in (
        "/cacheproxy/v1/resources/pods/indexes",
        "/cacheproxy/v1/resources/pods/indexes/spec.nodeName/values",
        "/cacheproxy/v1/resources/pods/indexes/spec.nodeName/objects?value=node-0",
    ):
        response = await secured.get(path, token)
        assert response.status_code == indexes_code, (path, response.text)
        if indexes_code != 200:
            assert response.json()["kind"] == "Status"
