"""The simulator answers like the real kube-apiserver: every sample of
``shared/k8s-samples/protocol`` that a server answers, replayed against the simulator.

The simulated cluster is built from the samples themselves: the namespaces ``ns-0``..``ns-9`` and
every whole pod the samples carry (the first four pods of the cluster, the 50 pods of ``app-3``
in ``ns-1``, ``pod.json``…), so lists, pages and watches can be compared item by item. Values a
server picks per run (uid, resourceVersion, creationTimestamp, audit ids, dates) are compared by
presence and position only; everything else must be equal, keys in the same order.

Where the real 1.28 answer differs from current Kubernetes (``k8s-samples/README.md``), the tests
assert the current behaviour and say so. Tables (``table_limit2_kubectl_accept.http``,
``watch_table_format_kubectl_accept.jsonl``) are compared by columns, rows and row objects; the
cells of every kind are the printers' business (``tests/unit/kube``).
"""

from __future__ import annotations

import asyncio
import copy
import functools
import json
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import orjson
import pytest

from cacheproxy.sim import SimConfig, SimServer, Simulator
from cacheproxy.sim.policy import Policy
from tests.integration.samples import (
    HttpSample,
    assert_covers,
    assert_same_keys,
    comparable,
    decode_token,
    kubectl_exchanges,
    load_http,
    load_watch,
    parse_prefix,
)
from tests.support import metadata_initial_events_end, serving

KUBECTL_TABLE_ACCEPT = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,"
    "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
)
KUBECTL_128_DISCOVERY_ACCEPT = (
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
)
CURRENT_DISCOVERY_ACCEPT = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
)
# What client-go's metadata client sends (protobuf first; the simulator speaks JSON only).
METADATA_LIST_ACCEPT = (
    "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,"
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
)
APP3 = "labelSelector=app%3Dapp-3"
WATCH_LIST = "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
NS1_APP3_WATCH_LIST = f"/api/v1/namespaces/ns-1/pods?{WATCH_LIST}&{APP3}"
POLICY = {
    "users": [
        {"name": "admin", "token": "admin-token", "groups": ["system:masters"]},
        {"name": "lowpriv", "token": "lowpriv-token"},
    ]
}
LOWPRIV = {"Authorization": "Bearer lowpriv-token"}


# ---------------------------------------------------------------------------- the sample cluster


@dataclass(frozen=True)
class SampleCluster:
    namespaces: list[dict[str, Any]]
    pods: dict[str, dict[str, Any]]
    """``namespace/name`` → the pod as a sample shows it, in creation order."""
    source: dict[str, str]
    """``namespace/name`` → the sample it was taken from."""

    def pods_of(self, namespace: str, app: str) -> list[str]:
        return sorted(
            key
            for key, pod in self.pods.items()
            if key.startswith(f"{namespace}/") and pod["metadata"]["labels"].get("app") == app
        )


def _key(obj: dict[str, Any]) -> str:
    return f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"


@functools.cache
def sample_cluster(root: Path) -> SampleCluster:
    protocol = root / "protocol"
    namespaces = [
        {"kind": "Namespace", "apiVersion": "v1", **ns}
        for ns in json.loads((root / "tables" / "list_api_v1_namespaces.json").read_text())["items"]
        if ns["metadata"]["name"].startswith("ns-")
    ]
    pods: dict[str, dict[str, Any]] = {}
    source: dict[str, str] = {}

    def add(obj: dict[str, Any], name: str) -> None:
        if _key(obj) not in pods:
            pods[_key(obj)] = {"kind": "Pod", "apiVersion": "v1", **obj}
            source[_key(obj)] = name

    for name in (
        "podlist_limit2.http",
        "podlist_limit2_page2.http",
        "podlist_ns1_label_limit2.http",
    ):
        for item in load_http(protocol / name).json()["items"]:
            add(item, name)
    pod_json = json.loads((protocol / "pod.json").read_text())
    add(pod_json, "pod.json")
    name = "watch_sendInitialEvents_without_allowWatchBookmarks_accepted.http"
    for event in load_http(protocol / name).events():
        add(event["object"], name)
    # The metadata-only sample names one more pod of ns-1; its spec and status are pod.json's.
    name = "partialobjectmetadatalist_limit2.http"
    for item in load_http(protocol / name).json()["items"]:
        add(
            {"metadata": item["metadata"], "spec": pod_json["spec"], "status": pod_json["status"]},
            name,
        )
    return SampleCluster(namespaces, pods, source)


def writable(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` without what the server sets on every write."""
    out = copy.deepcopy(obj)
    for key in ("uid", "resourceVersion", "creationTimestamp", "generation"):
        out["metadata"].pop(key, None)
    return out


def load_cluster(sim: Simulator, cluster: SampleCluster) -> None:
    for ns in cluster.namespaces:
        sim.store.create(sim.resource("namespaces"), writable(ns))
    for pod in cluster.pods.values():
        sim.store.create(sim.resource("pods"), writable(pod))


def apply(sim: Simulator, obj: dict[str, Any]) -> int:
    """Write ``obj`` (a sample's version of a pod) into the simulator; its new RV."""
    pods = sim.resource("pods")
    meta = obj["metadata"]
    if sim.store.get(pods, meta["namespace"], meta["name"]) is None:
        sim.store.create(pods, writable(obj))
    else:
        sim.store.update(pods, writable(obj))
    return sim.store.rv


def current(obj: dict[str, Any]) -> dict[str, Any]:
    """The simulator's object as the 1.28 samples would show it: current servers set
    ``metadata.generation`` on pods (``podStrategy.PrepareForCreate``); 1.28 did not."""
    out = comparable(obj)
    out.get("metadata", {}).pop("generation", None)
    return out


def current_event(event: dict[str, Any]) -> dict[str, Any]:
    return {**event, "object": current(event["object"])}


def comparable_event(event: dict[str, Any]) -> dict[str, Any]:
    return {**event, "object": comparable(event["object"])}


def assert_same_envelope(event: dict[str, Any], want: dict[str, Any]) -> None:
    """For events about different objects (or versions): the event's, the object's and its
    metadata's keys begin as ``want``'s (a capture's line may be cut short)."""
    got_meta = current(event["object"])["metadata"]
    for ours, theirs in (
        (event, want),
        (event["object"], want["object"]),
        (got_meta, want["object"]["metadata"]),
    ):
        assert list(ours)[: len(theirs)] == list(theirs)
    assert (event["type"], event["object"]["kind"]) == (want["type"], want["object"]["kind"])


def sample(samples_dir: Path, name: str) -> HttpSample:
    return load_http(samples_dir / "protocol" / name)


def assert_same_object(actual: dict[str, Any], expected: dict[str, Any]) -> None:
    assert_same_keys(current(actual), comparable(expected))
    assert current(actual) == comparable(expected)


def assert_status_like(r: httpx.Response, expected: HttpSample) -> None:
    """Same code, Content-Type and body (a Status: every key, in order, and every value)."""
    assert r.status_code == expected.status
    assert r.headers["content-type"] == expected.headers["content-type"]
    assert r.headers["cache-control"] == expected.headers["cache-control"]
    assert_same_keys(r.json(), expected.json())
    assert r.json() == expected.json()


# ---------------------------------------------------------------------------- fixtures


@pytest.fixture
def cluster_sim(samples_dir: Path) -> Simulator:
    # The samples are kube-apiserver 1.28's: answered as that version (Tables, wording).
    sim = Simulator(config=SimConfig(git_version="v1.28.7", bookmark_interval=0.5, rv_wait=0.5))
    load_cluster(sim, sample_cluster(samples_dir))
    return sim


@pytest.fixture
async def _cluster_serving(
    cluster_sim: Simulator,
) -> AsyncIterator[tuple[SimServer, httpx.AsyncClient]]:
    async with serving(cluster_sim) as both:
        yield both


@pytest.fixture
def cluster_server(_cluster_serving: tuple[SimServer, httpx.AsyncClient]) -> SimServer:
    return _cluster_serving[0]


@pytest.fixture
def cluster(_cluster_serving: tuple[SimServer, httpx.AsyncClient]) -> httpx.AsyncClient:
    return _cluster_serving[1]


@pytest.fixture
async def auth_client(samples_dir: Path) -> AsyncIterator[httpx.AsyncClient]:
    """The sample cluster behind RBAC: an ``admin`` (system:masters) and ``lowpriv`` (no grants),
    as the samples were captured."""
    sim = Simulator(config=SimConfig(policy=Policy.from_mapping(POLICY)))
    load_cluster(sim, sample_cluster(samples_dir))
    async with serving(sim) as (_, c):
        yield c


@pytest.fixture
async def paging_client(samples_dir: Path) -> AsyncIterator[tuple[Simulator, httpx.AsyncClient]]:
    """The sample cluster plus 1 200 copies of pod.json (600 in ns-1): enough for kubectl's
    pages of 500, across namespaces and within one. Answered as 1.28, the samples' version
    (its continue tokens' keys are not rooted)."""
    sim = Simulator(config=SimConfig(git_version="v1.28.7"))
    cluster = sample_cluster(samples_dir)
    load_cluster(sim, cluster)
    template = writable(cluster.pods["ns-1/app-0-backend-eb04066a87-4dxlk"])
    for i in range(1200):
        pod = copy.deepcopy(template)
        pod["metadata"]["name"] = f"app-9-copy-{i:04d}"
        pod["metadata"]["namespace"] = "ns-1" if i < 600 else f"ns-{i % 10}"
        sim.store.create(sim.resource("pods"), pod)
    async with serving(sim) as (_, c):
        yield sim, c


class EventReader:
    """The events of one watch response, read one line at a time."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self._lines = response.aiter_lines()

    async def next(self, within: float = 5.0) -> dict[str, Any]:
        async with asyncio.timeout(within):
            while True:
                line = await anext(self._lines)
                if line.strip():
                    event: dict[str, Any] = orjson.loads(line)
                    return event

    async def take(self, n: int) -> list[dict[str, Any]]:
        return [await self.next() for _ in range(n)]

    async def rest(self, within: float = 10.0) -> list[dict[str, Any]]:
        """Every event until the server ends the stream."""
        out = []
        async with asyncio.timeout(within):
            async for line in self._lines:
                if line.strip():
                    out.append(orjson.loads(line))
        return out

    async def aclose(self) -> None:
        await self._lines.aclose()


@asynccontextmanager
async def watching(
    client: httpx.AsyncClient, url: str, headers: dict[str, str] | None = None
) -> AsyncIterator[EventReader]:
    async with client.stream("GET", url, headers=headers) as r:
        reader = EventReader(r)
        try:
            yield reader
        finally:
            await reader.aclose()


def names(items: list[dict[str, Any]]) -> list[str]:
    return [f"{i['metadata']['namespace']}/{i['metadata']['name']}" for i in items]


def listed(body: dict[str, Any]) -> list[dict[str, Any]]:
    """A list's items, or a Table's row objects (kubectl's ``Accept`` gets a Table)."""
    if body["kind"] == "Table":
        return [row["object"] for row in body["rows"]]
    items: list[dict[str, Any]] = body["items"]
    return items


# ---------------------------------------------------------------------------- lists and pages


async def test_a_first_page_of_two_pods_matches_the_sample_envelope_items_and_token(
    cluster: httpx.AsyncClient, cluster_sim: Simulator, samples_dir: Path
) -> None:
    expected = sample(samples_dir, "podlist_limit2.http")
    token_sample = (samples_dir / "protocol" / "podlist_limit2_continue_token.txt").read_text()
    r = await cluster.get("/api/v1/pods?limit=2")
    assert r.status_code == expected.status
    assert r.headers["content-type"] == expected.headers["content-type"]
    body, want = r.json(), expected.json()
    assert_same_keys(
        {k: v for k, v in body.items() if k != "items"},
        {k: v for k, v in want.items() if k != "items"},
    )
    assert (body["kind"], body["apiVersion"]) == ("PodList", "v1")
    assert body["metadata"]["resourceVersion"] == str(cluster_sim.store.rv)
    assert body["metadata"]["remainingItemCount"] == len(sample_cluster(samples_dir).pods) - 2
    assert names(body["items"]) == names(want["items"])
    for got, item in zip(body["items"], want["items"], strict=True):
        assert_same_object(got, item)
    # The token is the sample's, bound to our list RV: same JSON, same key order, same start.
    token_line, json_line = token_sample.splitlines()
    assert token_line == want["metadata"]["continue"]
    ours, theirs = decode_token(body["metadata"]["continue"]), json.loads(json_line)
    assert list(ours) == list(theirs) == ["v", "rv", "start"]
    assert ours == {**theirs, "rv": cluster_sim.store.rv}
    assert "=" not in body["metadata"]["continue"]


async def test_the_second_page_continues_after_the_first_at_the_same_resource_version(
    cluster: httpx.AsyncClient, cluster_sim: Simulator, samples_dir: Path
) -> None:
    first = (await cluster.get("/api/v1/pods?limit=2")).json()
    cluster_sim.store.create(
        cluster_sim.resource("configmaps"), {"metadata": {"name": "later", "namespace": "ns-0"}}
    )
    expected = sample(samples_dir, "podlist_limit2_page2.http").json()
    r = await cluster.get(f"/api/v1/pods?limit=2&continue={first['metadata']['continue']}")
    assert r.status_code == 200
    body = r.json()
    assert_same_keys(
        {k: v for k, v in body.items() if k != "items"},
        {k: v for k, v in expected.items() if k != "items"},
    )
    assert body["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    assert body["metadata"]["remainingItemCount"] == len(sample_cluster(samples_dir).pods) - 4
    assert names(body["items"]) == names(expected["items"])
    for got, item in zip(body["items"], expected["items"], strict=True):
        assert_same_object(got, item)
    theirs = decode_token(expected["metadata"]["continue"])
    assert decode_token(body["metadata"]["continue"]) == {
        **theirs,
        "rv": int(first["metadata"]["resourceVersion"]),
    }


async def test_a_get_returns_the_pod_exactly_as_pod_json_shows_it(
    cluster: httpx.AsyncClient, samples_dir: Path
) -> None:
    expected = json.loads((samples_dir / "protocol" / "pod.json").read_text())
    r = await cluster.get("/api/v1/namespaces/ns-1/pods/app-0-backend-eb04066a87-4dxlk")
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/json"
    assert_same_object(r.json(), expected)


async def test_a_limited_list_at_resource_version_0_is_paged_from_the_latest_state(
    cluster: httpx.AsyncClient, cluster_sim: Simulator, samples_dir: Path
) -> None:
    expected = sample(samples_dir, "podlist_limit2_rv0_first2000bytes.http")
    prefix = expected.prefix()
    # 1.28 ignored limit with resourceVersion=0 (the sample is the whole list, no continue);
    # current servers and cacheproxy honour it (README): two items and a continue token.
    assert list(prefix["metadata"]) == ["resourceVersion"]
    r = await cluster.get("/api/v1/pods?limit=2&resourceVersion=0")
    assert r.status_code == expected.status
    body = r.json()
    assert list(body["metadata"]) == ["resourceVersion", "continue", "remainingItemCount"]
    assert body["metadata"]["resourceVersion"] == str(cluster_sim.store.rv)
    assert len(body["items"]) == 2
    assert list(body)[: len(prefix)] == list(prefix)
    assert (body["kind"], body["apiVersion"]) == (prefix["kind"], prefix["apiVersion"])
    assert_covers([current(i) for i in body["items"]], [comparable(i) for i in prefix["items"]])


async def test_a_not_older_than_list_with_a_limit_pages_the_latest_state(
    cluster: httpx.AsyncClient, cluster_sim: Simulator, samples_dir: Path
) -> None:
    expected = sample(samples_dir, "list_notolderthan_rv1_limit2_first1500bytes.http")
    prefix = expected.prefix()
    r = await cluster.get(
        "/api/v1/pods?limit=2&resourceVersion=1&resourceVersionMatch=NotOlderThan"
    )
    assert r.status_code == expected.status
    assert r.headers["content-type"] == expected.headers["content-type"]
    body = r.json()
    assert list(body["metadata"]) == list(prefix["metadata"])
    # Not older than RV 1: the latest state, not a snapshot at 1 (the sample's RV is its latest).
    assert body["metadata"]["resourceVersion"] == str(cluster_sim.store.rv)
    assert decode_token(body["metadata"]["continue"]) == {
        **decode_token(prefix["metadata"]["continue"]),
        "rv": cluster_sim.store.rv,
    }
    assert body["metadata"]["remainingItemCount"] == len(sample_cluster(samples_dir).pods) - 2
    assert_covers([current(i) for i in body["items"]], [comparable(i) for i in prefix["items"]])


async def test_a_label_selected_page_has_a_namespace_relative_token_and_no_remaining_count(
    cluster: httpx.AsyncClient, cluster_sim: Simulator, samples_dir: Path
) -> None:
    expected = sample(samples_dir, "podlist_ns1_label_limit2.http").json()
    r = await cluster.get(f"/api/v1/namespaces/ns-1/pods?{APP3}&limit=2")
    assert r.status_code == 200
    body = r.json()
    # remainingItemCount is omitted with a selector; the token's start key is relative to ns-1.
    assert list(body["metadata"]) == list(expected["metadata"]) == ["resourceVersion", "continue"]
    assert names(body["items"]) == names(expected["items"])
    for got, item in zip(body["items"], expected["items"], strict=True):
        assert_same_object(got, item)
    theirs = decode_token(expected["metadata"]["continue"])
    assert not theirs["start"].startswith("ns-1/")
    assert decode_token(body["metadata"]["continue"]) == {**theirs, "rv": cluster_sim.store.rv}
    rest = (
        await cluster.get(
            f"/api/v1/namespaces/ns-1/pods?{APP3}&limit=100&continue={body['metadata']['continue']}"
        )
    ).json()
    assert names(body["items"] + rest["items"]) == sample_cluster(samples_dir).pods_of(
        "ns-1", "app-3"
    )


async def test_a_metadata_only_list_answers_partial_object_metadata(
    cluster: httpx.AsyncClient, cluster_sim: Simulator, samples_dir: Path
) -> None:
    expected = sample(samples_dir, "partialobjectmetadatalist_limit2.http")
    want = expected.json()
    r = await cluster.get(
        "/api/v1/namespaces/ns-1/pods?limit=2", headers={"Accept": METADATA_LIST_ACCEPT}
    )
    assert r.status_code == expected.status
    assert r.headers["content-type"] == expected.headers["content-type"]
    body = r.json()
    assert (body["kind"], body["apiVersion"]) == ("PartialObjectMetadataList", "meta.k8s.io/v1")
    assert_same_keys(
        {k: v for k, v in body.items() if k != "items"},
        {k: v for k, v in want.items() if k != "items"},
    )
    assert (
        body["metadata"]["remainingItemCount"]
        == len([k for k in sample_cluster(samples_dir).pods if k.startswith("ns-1/")]) - 2
    )
    assert names(body["items"]) == names(want["items"])
    for got, item in zip(body["items"], want["items"], strict=True):
        assert_same_object(got, item)
    assert decode_token(body["metadata"]["continue"]) == {
        **decode_token(want["metadata"]["continue"]),
        "rv": cluster_sim.store.rv,
    }
    # A GET asks for the single PartialObjectMetadata.
    one = await cluster.get(
        "/api/v1/namespaces/ns-1/pods/app-0-backend-eb04066a87-4dxlk",
        headers={"Accept": "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"},
    )
    assert_same_object(one.json(), want["items"][0])


async def test_a_metadata_only_watch_sends_partial_object_metadata_events(
    cluster: httpx.AsyncClient, samples_dir: Path
) -> None:
    # The watch half of client-go's metadata informer (no sample: shaped as the list's items).
    want = sample(samples_dir, "partialobjectmetadatalist_limit2.http").json()["items"][0]
    accept = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
    url = (
        f"/api/v1/namespaces/ns-1/pods?{WATCH_LIST}&allowWatchBookmarks=true&timeoutSeconds=1"
        f"&fieldSelector=metadata.name%3D{want['metadata']['name']}"
    )
    async with watching(cluster, url, headers={"Accept": accept}) as events:
        added, end = await events.take(2)
    assert added["type"] == "ADDED"
    assert_same_object(added["object"], want)
    assert end["type"] == "BOOKMARK"
    assert end["object"] == metadata_initial_events_end(
        end["object"]["metadata"]["resourceVersion"], blueprint=False
    )


async def test_a_table_request_gets_the_api_servers_table_and_table_events(
    cluster: httpx.AsyncClient, cluster_sim: Simulator, samples_dir: Path
) -> None:
    table = sample(samples_dir, "table_limit2_kubectl_accept.http")
    want = table.json()
    r = await cluster.get(
        "/api/v1/namespaces/ns-1/pods?limit=2", headers={"Accept": KUBECTL_TABLE_ACCEPT}
    )
    assert (r.status_code, r.headers["content-type"]) == (
        table.status,
        table.headers["content-type"],
    )
    body = r.json()
    assert list(body) == list(want)
    assert (body["kind"], body["apiVersion"]) == ("Table", "meta.k8s.io/v1")
    assert list(body["metadata"]) == list(want["metadata"])
    assert decode_token(body["metadata"]["continue"]) == {
        **decode_token(want["metadata"]["continue"]),
        "rv": cluster_sim.store.rv,
    }
    assert body["columnDefinitions"] == want["columnDefinitions"]
    assert names(listed(body)) == names(listed(want))
    for row, real in zip(body["rows"], want["rows"], strict=True):
        assert list(row) == list(real)
        assert current(row["object"]) == comparable(real["object"])
        assert len(row["cells"]) == len(real["cells"])

    (event,) = load_watch(
        samples_dir / "protocol" / "watch_table_format_kubectl_accept.jsonl"
    ).events()
    (row,) = event["object"]["rows"]
    pod = {
        **sample_cluster(samples_dir).pods[_key(row["object"])],
        "metadata": row["object"]["metadata"],
    }
    url = f"/api/v1/namespaces/ns-1/pods?watch=1&{APP3}&resourceVersion={cluster_sim.store.rv}"
    async with watching(cluster, url, headers={"Accept": KUBECTL_TABLE_ACCEPT}) as events:
        apply(cluster_sim, pod)
        got = await events.next()
    assert got["type"] == event["type"] == "MODIFIED"
    assert list(got["object"]) == list(event["object"])
    assert got["object"]["columnDefinitions"] == event["object"]["columnDefinitions"]
    (got_row,) = got["object"]["rows"]
    assert current(got_row["object"])["metadata"] == comparable(row["object"])["metadata"]


async def test_a_list_in_a_missing_namespace_is_an_empty_list(
    cluster: httpx.AsyncClient, cluster_sim: Simulator, samples_dir: Path
) -> None:
    expected = sample(samples_dir, "list_pods_in_missing_namespace.http")
    r = await cluster.get("/api/v1/namespaces/does-not-exist/pods")
    assert r.status_code == expected.status
    assert r.headers["content-type"] == expected.headers["content-type"]
    want = expected.json()
    want["metadata"]["resourceVersion"] = str(cluster_sim.store.rv)
    assert_same_keys(r.json(), want)
    assert r.json() == want


async def test_a_large_list_is_gzip_compressed_for_a_client_that_accepts_it(
    cluster: httpx.AsyncClient, samples_dir: Path
) -> None:
    expected = sample(samples_dir, "list_all_gzip_response_headers.http")
    r = await cluster.get("/api/v1/pods", headers={"Accept-Encoding": "gzip"})
    assert r.status_code == expected.status
    for header in ("content-encoding", "content-type", "cache-control", "vary"):
        assert r.headers[header] == expected.headers[header], header
    assert len(r.json()["items"]) == len(sample_cluster(samples_dir).pods)


async def test_a_small_get_is_not_compressed_even_when_gzip_is_accepted(
    cluster: httpx.AsyncClient, samples_dir: Path
) -> None:
    expected = sample(samples_dir, "get_pod_gzip_small_response_headers.http")
    r = await cluster.get(
        "/api/v1/namespaces/ns-1/pods/app-0-backend-eb04066a87-4dxlk",
        headers={"Accept-Encoding": "gzip"},
    )
    assert r.status_code == expected.status
    assert "content-encoding" not in expected.headers
    assert "content-encoding" not in r.headers
    for header in ("content-type", "cache-control"):
        assert r.headers[header] == expected.headers[header], header


# ---------------------------------------------------------------------------- error bodies


async def test_an_expired_continue_token_is_410_with_an_inconsistent_continue_token(
    cluster: httpx.AsyncClient, cluster_sim: Simulator, samples_dir: Path
) -> None:
    expected = sample(samples_dir, "err_expired_continue_token.http")
    first = (await cluster.get("/api/v1/pods?limit=2")).json()
    apply(cluster_sim, sample_cluster(samples_dir).pods["ns-0/app-0-backend-294dc88af5-7svm2"])
    cluster_sim.compact()  # etcd compacted past the token's RV
    r = await cluster.get(f"/api/v1/pods?limit=2&continue={first['metadata']['continue']}")
    # Same first page, so the token handed back (rv -1, same start key) is the sample's, byte
    # for byte.
    assert_status_like(r, expected)
    assert decode_token(r.json()["metadata"]["continue"])["rv"] == -1


@pytest.mark.parametrize(
    ("name", "url"),
    [
        ("err_invalid_continue_token.http", "/api/v1/pods?limit=2&continue=garbage"),
        ("err_invalid_labelselector.http", "/api/v1/pods?labelSelector=app%3Dapp-3%3Dx"),
        ("err_invalid_labelselector_in.http", "/api/v1/pods?labelSelector=" + quote("app in (")),
        ("err_pod_not_found.http", "/api/v1/namespaces/ns-1/pods/does-not-exist"),
        ("err_rvmatch_without_rv.http", "/api/v1/pods?resourceVersionMatch=NotOlderThan"),
        (
            "err_sendInitialEvents_without_rvmatch.http",
            "/api/v1/pods?watch=1&sendInitialEvents=true",
        ),
        ("err_unknown_resource_core.http", "/api/v1/foos"),
        ("err_unsupported_fieldselector.http", "/api/v1/pods?fieldSelector=spec.foo%3Dbar"),
    ],
)
async def test_a_rejected_request_gets_the_api_servers_status_body(
    cluster: httpx.AsyncClient, samples_dir: Path, name: str, url: str
) -> None:
    assert_status_like(await cluster.get(url), sample(samples_dir, name))


async def test_an_unparsable_resource_version_is_a_400_bad_request(
    cluster: httpx.AsyncClient, samples_dir: Path
) -> None:
    expected = sample(samples_dir, "err_invalid_resourceversion.http")
    # 1.28 answered 500 without a reason; current servers answer 400 BadRequest with the same
    # message (README), which is what we assert.
    assert expected.status == 500
    assert "reason" not in expected.json()
    real = expected.json()
    want = {**{k: v for k, v in real.items() if k != "code"}, "reason": "BadRequest", "code": 400}
    r = await cluster.get("/api/v1/pods?resourceVersion=abc")
    assert r.status_code == 400
    assert r.headers["content-type"] == expected.headers["content-type"]
    assert_same_keys(r.json(), want)
    assert r.json() == want


async def test_an_exact_list_at_a_compacted_resource_version_is_410_expired(
    cluster: httpx.AsyncClient, cluster_sim: Simulator, samples_dir: Path
) -> None:
    old = cluster_sim.store.rv
    apply(cluster_sim, sample_cluster(samples_dir).pods["ns-0/app-0-backend-294dc88af5-7svm2"])
    cluster_sim.compact()
    r = await cluster.get(f"/api/v1/pods?resourceVersion={old}&resourceVersionMatch=Exact")
    assert_status_like(r, sample(samples_dir, "err_list_exact_rv_compacted.http"))


async def test_an_unknown_group_is_a_404_status_not_a_plain_text_page(
    cluster: httpx.AsyncClient, samples_dir: Path
) -> None:
    expected = sample(samples_dir, "err_unknown_group.http")
    # 1.28 answers a plain-text "404 page not found"; clients accept either, and a Status is
    # clearer (README): the same Status as for an unknown resource.
    assert (expected.status, expected.body.strip()) == (404, b"404 page not found")
    r = await cluster.get("/apis/nope.example.com/v1/things")
    assert_status_like(r, sample(samples_dir, "err_unknown_resource_core.http"))


async def test_a_read_at_a_future_resource_version_times_out_with_retry_after(
    cluster: httpx.AsyncClient, cluster_sim: Simulator
) -> None:
    # No sample provokes it; the shape is apiserver's NewTooLargeResourceVersionError
    # (research/apiserver-semantics.md 2.3, 2.15) with the Retry-After of ErrorNegotiated.
    want_rv, have_rv = cluster_sim.store.rv + 100, cluster_sim.store.rv
    r = await cluster.get(f"/api/v1/pods?resourceVersion={want_rv}")
    assert r.status_code == 504
    assert r.headers["retry-after"] == "1"
    assert r.json() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f"Timeout: Too large resource version: {want_rv}, current: {have_rv}",
        "reason": "Timeout",
        "details": {
            "causes": [
                {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
            ],
            "retryAfterSeconds": 1,
        },
        "code": 504,
    }


async def test_a_429_carries_retry_after_in_header_and_details(
    cluster: httpx.AsyncClient, cluster_sim: Simulator
) -> None:
    cluster_sim.faults.fail_next("list", 429, retry_after=3)
    r = await cluster.get("/api/v1/pods")
    assert r.status_code == 429
    assert r.headers["retry-after"] == "3"
    body = r.json()
    assert (body["reason"], body["code"], body["details"]) == (
        "TooManyRequests",
        429,
        {"retryAfterSeconds": 3},
    )


# ---------------------------------------------------------------------------- authentication


@pytest.mark.parametrize(
    ("name", "url", "headers"),
    [
        ("err_anonymous_no_token.http", "/api/v1/pods", {}),
        ("err_unauthorized_bad_token.http", "/api/v1/pods", {"Authorization": "Bearer nope"}),
        ("err_forbidden_lowpriv_list_all.http", "/api/v1/pods", LOWPRIV),
        (
            "err_forbidden_lowpriv_get.http",
            "/api/v1/namespaces/ns-1/pods/app-3-backend-1c1606674d-4n9np",
            LOWPRIV,
        ),
        ("err_forbidden_lowpriv_watch.http", "/api/v1/namespaces/ns-1/pods?watch=1", LOWPRIV),
    ],
)
async def test_an_unauthenticated_or_unauthorized_request_gets_the_api_servers_status(
    auth_client: httpx.AsyncClient, samples_dir: Path, name: str, url: str, headers: dict[str, str]
) -> None:
    assert_status_like(await auth_client.get(url, headers=headers), sample(samples_dir, name))


async def test_a_self_subject_access_review_of_lowpriv_is_denied_with_its_managed_fields(
    auth_client: httpx.AsyncClient, samples_dir: Path
) -> None:
    expected = sample(samples_dir, "selfsubjectaccessreview_lowpriv.http")
    review = {
        "kind": "SelfSubjectAccessReview",
        "apiVersion": "authorization.k8s.io/v1",
        "spec": {"resourceAttributes": {"namespace": "ns-1", "verb": "list", "resource": "pods"}},
    }
    r = await auth_client.post(
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        json=review,
        headers={**LOWPRIV, "User-Agent": "realk8s-samples"},
    )
    assert r.status_code == expected.status
    assert r.headers["content-type"] == expected.headers["content-type"]
    body, want = r.json(), expected.json()
    when = body["metadata"]["managedFields"][0]["time"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", when)
    want["metadata"]["managedFields"][0]["time"] = when
    assert_same_keys(body, want)
    assert body == want


# ---------------------------------------------------------------------------- watches


async def test_a_watch_from_a_resource_version_sends_each_modification(
    cluster: httpx.AsyncClient, cluster_sim: Simulator, samples_dir: Path
) -> None:
    capture = load_watch(samples_dir / "protocol" / "watch_json_from_rv.jsonl")
    expected = capture.events()
    rv = cluster_sim.store.rv
    async with watching(
        cluster, f"/api/v1/namespaces/ns-1/pods?watch=1&resourceVersion={rv}"
    ) as events:
        assert events.response.status_code == 200
        assert events.response.headers["content-type"] == "application/json"
        for want in expected:
            written = apply(cluster_sim, want["object"])
            got = await events.next()
            assert got["type"] == want["type"] == "MODIFIED"
            assert list(got) == list(want) == ["type", "object"]
            assert_same_object(got["object"], want["object"])
            assert got["object"]["metadata"]["resourceVersion"] == str(written)


async def test_bookmarks_are_the_empty_typed_object_at_the_latest_resource_version(
    cluster: httpx.AsyncClient, cluster_sim: Simulator, samples_dir: Path
) -> None:
    capture = load_watch(samples_dir / "protocol" / "watch_bookmarks_ns1_app3.txt")
    assert capture.status == 200
    modified, bookmarks = capture.of_type("MODIFIED"), capture.of_type("BOOKMARK")
    url = (
        f"/api/v1/namespaces/ns-1/pods?watch=1&{APP3}&allowWatchBookmarks=true"
        f"&resourceVersion={cluster_sim.store.rv}"
    )
    async with watching(cluster, url) as events:
        assert events.response.headers["content-type"] == capture.headers["content-type"]
        written = apply(cluster_sim, modified[-1]["object"])
        got = await events.next()
        assert got["type"] == "MODIFIED"
        assert_same_object(got["object"], modified[-1]["object"])
        for want in bookmarks:
            bookmark = await events.next()
            # The sample's bookmarks carry the RV of the last write, as ours must.
            assert bookmark == _at_rv(want, written)
            assert_same_keys(bookmark, want)
        # A write the watch does not see still advances the next bookmark (a global RV).
        unrelated = cluster_sim.store.create(
            cluster_sim.resource("configmaps"),
            {"metadata": {"name": "elsewhere", "namespace": "ns-5"}},
        )
        bookmark = await events.next()
        assert bookmark["type"] == "BOOKMARK"
        assert (
            bookmark["object"]["metadata"]["resourceVersion"]
            == unrelated["metadata"]["resourceVersion"]
        )


@pytest.mark.parametrize(
    ("name", "rv_param"),
    [
        ("watch_sendInitialEvents_rv0.txt", "&resourceVersion=0"),
        ("watch_sendInitialEvents_rvempty.txt", ""),
    ],
)
async def test_a_watch_list_sends_the_state_then_the_initial_events_end_bookmark(
    cluster: httpx.AsyncClient, cluster_sim: Simulator, samples_dir: Path, name: str, rv_param: str
) -> None:
    capture = load_watch(samples_dir / "protocol" / name)
    assert capture.status == 200 and capture.elided
    expected = capture.events()
    cluster_state = sample_cluster(samples_dir)
    start_rv = cluster_sim.store.rv
    url = f"/api/v1/namespaces/ns-1/pods?{WATCH_LIST}{rv_param}&allowWatchBookmarks=true&{APP3}"
    async with watching(cluster, url) as events:
        assert events.response.headers["content-type"] == capture.headers["content-type"]
        initial = await events.take(len(cluster_state.pods_of("ns-1", "app-3")))
        assert {e["type"] for e in initial} == {"ADDED"}
        assert sorted(names([e["object"] for e in initial])) == cluster_state.pods_of(
            "ns-1", "app-3"
        )
        for event in initial:
            assert_same_object(event["object"], cluster_state.pods[_key(event["object"])])
        end = await events.next()
        want_end = expected[0]
        assert want_end["object"]["metadata"]["annotations"] == {
            "k8s.io/initial-events-end": "true"
        }
        assert_same_keys(end, want_end)
        assert end == _at_rv(want_end, start_rv)
        written = start_rv
        for want in expected[1:]:
            if want["type"] == "MODIFIED":
                written = apply(cluster_sim, want["object"])
            got = await events.next()
            assert got["type"] == want["type"]
            assert_same_keys(current_event(got), comparable_event(want))
            if want["type"] == "BOOKMARK":
                assert got == _at_rv(want, written)


def _at_rv(event: dict[str, Any], rv: int) -> dict[str, Any]:
    out = copy.deepcopy(event)
    out["object"]["metadata"]["resourceVersion"] = str(rv)
    return out


@pytest.mark.parametrize(
    ("name", "sample_timeout"),
    [
        ("watch_sendInitialEvents_timeout10_timestamped.txt", 10),
        ("watch_sendInitialEvents_timeout70_timestamped.txt", 70),
    ],
)
async def test_a_watch_list_ends_at_its_timeout_after_the_end_bookmark(
    cluster: httpx.AsyncClient, samples_dir: Path, name: str, sample_timeout: int
) -> None:
    capture = load_watch(samples_dir / "protocol" / name)
    assert capture.closed_at is not None and capture.started_at is not None
    assert abs(capture.closed_at - capture.started_at - sample_timeout) < 1
    # 1.28 on an idle cluster never sent the initial-events-end bookmark (the sample has only
    # ADDED events); current servers send it right away (README), as we must.
    assert {e["type"] for e in capture.events()} == {"ADDED"}
    timeout = 2
    url = f"{NS1_APP3_WATCH_LIST}&allowWatchBookmarks=true&timeoutSeconds={timeout}"
    started = time.monotonic()
    async with watching(cluster, url) as events:
        initial = await events.take(len(capture.lines))
        assert [e["type"] for e in initial] == ["ADDED"] * len(capture.lines)
        for got, want in zip(initial, capture.events(), strict=True):
            assert_same_envelope(got, want)
        end = await events.next(within=0.5)
        assert end["type"] == "BOOKMARK"
        assert end["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
        rest = await events.rest()
    elapsed = time.monotonic() - started
    assert timeout <= elapsed < timeout + 1.5
    # The stream just ends: no terminal event, only (deadline) bookmarks before it.
    assert {e["type"] for e in rest} <= {"BOOKMARK"}


async def test_a_watch_list_sends_every_matching_object_as_the_truncated_capture_shows(
    cluster: httpx.AsyncClient, samples_dir: Path
) -> None:
    capture = load_watch(
        samples_dir / "protocol" / "watch_sendInitialEvents_timestamped_truncated_lines.txt"
    )
    expected = {_key(e["object"]): e for e in capture.events()}
    url = f"{NS1_APP3_WATCH_LIST}&allowWatchBookmarks=true&timeoutSeconds=1"
    async with watching(cluster, url) as events:
        got = await events.rest()
    added = [e for e in got if e["type"] == "ADDED"]
    assert sorted(_key(e["object"]) for e in added) == sorted(expected)
    for event in added:
        want = expected[_key(event["object"])]
        assert_covers(
            {**event, "object": current(event["object"])},
            {**want, "object": comparable(want["object"])},
        )


async def test_the_initial_events_end_bookmark_does_not_wait_for_an_unrelated_write(
    cluster: httpx.AsyncClient, cluster_sim: Simulator, samples_dir: Path
) -> None:
    capture = load_watch(
        samples_dir / "protocol" / "watch_sendInitialEvents_with_unrelated_write_timestamped.txt"
    )
    note = (
        samples_dir / "protocol" / "watch_sendInitialEvents_with_unrelated_write_NOTE.txt"
    ).read_text()
    write_at = re.search(r"at (\d\d):(\d\d):(\d\d)\.(\d{3})", note)
    assert write_at is not None
    h, m, s, ms = (int(g) for g in write_at.groups())
    bookmarks = [line for line in capture.lines if line.event()["type"] == "BOOKMARK"]
    # 1.28 sent the end bookmark only after the unrelated write, at that write's RV; current
    # servers send it right after the initial events (README). Later bookmarks carry the RV of
    # the unrelated write although the watch never saw it.
    assert bookmarks[0].at is not None and bookmarks[0].at > h * 3600 + m * 60 + s + ms / 1000
    assert len({b.event()["object"]["metadata"]["resourceVersion"] for b in bookmarks}) == 1
    start_rv = cluster_sim.store.rv
    url = f"{NS1_APP3_WATCH_LIST}&allowWatchBookmarks=true&timeoutSeconds=10"
    async with watching(cluster, url) as events:
        initial = await events.take(len(sample_cluster(samples_dir).pods_of("ns-1", "app-3")))
        assert {e["type"] for e in initial} == {"ADDED"}
        end = await events.next(within=0.5)
        assert_covers(current_event(end), comparable_event(bookmarks[0].event()))
        assert end["object"]["metadata"]["resourceVersion"] == str(start_rv)
        unrelated = copy.deepcopy(
            sample_cluster(samples_dir).pods["ns-1/app-0-backend-eb04066a87-4dxlk"]
        )
        unrelated["metadata"]["namespace"] = "ns-5"
        written = apply(cluster_sim, unrelated)
        later = await events.next()
        assert later == _at_rv(bookmarks[1].event(), written)


async def test_a_watch_list_without_bookmarks_sends_the_initial_events_and_no_bookmark(
    cluster: httpx.AsyncClient, samples_dir: Path
) -> None:
    name = "watch_sendInitialEvents_without_allowWatchBookmarks_accepted.http"
    expected = sample(samples_dir, name)
    cluster_state = sample_cluster(samples_dir)
    url = f"/api/v1/namespaces/ns-1/pods?{WATCH_LIST}&{APP3}&timeoutSeconds=1"
    async with watching(cluster, url) as events:
        assert events.response.status_code == expected.status
        assert events.response.headers["content-type"] == expected.headers["content-type"]
        got = await events.rest()
    want = {_key(e["object"]): e for e in expected.events()}
    assert [e["type"] for e in got] == ["ADDED"] * len(want)
    assert sorted(_key(e["object"]) for e in got) == sorted(want)
    for event in got:
        key = _key(event["object"])
        assert_same_envelope(event, want[key])
        if cluster_state.source[key] == name:
            assert_same_object(event["object"], want[key]["object"])


async def test_a_watch_list_from_resource_version_1_after_a_restart_is_not_too_old(
    cluster: httpx.AsyncClient, cluster_server: SimServer, samples_dir: Path
) -> None:
    expected = sample(samples_dir, "watch_sendInitialEvents_rv1_after_restart_first1500bytes.http")
    await cluster_server.restart()
    url = f"/api/v1/namespaces/ns-1/pods?{WATCH_LIST}&resourceVersion=1&{APP3}&timeoutSeconds=1"
    async with watching(cluster, url) as events:
        assert events.response.status_code == expected.status
        got = await events.rest()
    assert {e["type"] for e in got} == {"ADDED"}
    assert_same_envelope(got[0], expected.events()[0])


@pytest.mark.parametrize(
    ("name", "url", "scope"),
    [
        (
            "watch_rv1_before_restart_NO_error_rv_cached_first3000bytes.http",
            "/api/v1/pods?watch=1&resourceVersion=1",
            "",
        ),
        (
            "watch_rv1_before_restart_NO_error_rv_ns_selector_first3000bytes.http",
            f"/api/v1/namespaces/ns-1/pods?watch=1&resourceVersion=1&{APP3}",
            "ns-1",
        ),
    ],
)
async def test_a_watch_from_resource_version_1_replays_the_history_when_it_is_kept(
    cluster: httpx.AsyncClient, samples_dir: Path, name: str, url: str, scope: str
) -> None:
    expected = sample(samples_dir, name)
    cluster_state = sample_cluster(samples_dir)
    async with watching(cluster, url + "&timeoutSeconds=1") as events:
        assert events.response.status_code == expected.status
        assert events.response.headers["content-type"] == expected.headers["content-type"]
        got = await events.rest()
    want = expected.events()[0]
    assert want["type"] == "ADDED"
    assert_same_envelope(got[0], want)
    # Every pod written since RV 1, as ADDED, in the order they were written.
    keys = [
        k for k in cluster_state.pods if not scope or k in cluster_state.pods_of(scope, "app-3")
    ]
    assert [e["type"] for e in got] == ["ADDED"] * len(keys)
    assert [_key(e["object"]) for e in got] == keys
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in got]
    assert rvs == sorted(rvs)


@pytest.mark.parametrize(
    ("name", "url"),
    [
        (
            "err_watch_too_old_rv_after_apiserver_restart.http",
            "/api/v1/pods?watch=1&resourceVersion={rv}",
        ),
        (
            "err_watch_too_old_rv1_ns_selector_after_restart.http",
            f"/api/v1/namespaces/ns-1/pods?watch=1&resourceVersion={{rv}}&{APP3}",
        ),
    ],
)
async def test_a_watch_from_before_a_restart_gets_one_410_error_event(
    cluster: httpx.AsyncClient,
    cluster_server: SimServer,
    cluster_sim: Simulator,
    samples_dir: Path,
    name: str,
    url: str,
) -> None:
    expected = sample(samples_dir, name)
    (want,) = expected.events()
    m = re.fullmatch(r"too old resource version: (\d+) \((\d+)\)", want["object"]["message"])
    assert m is not None
    old = 1 if m.group(1) == "1" else cluster_sim.store.rv
    apply(cluster_sim, sample_cluster(samples_dir).pods["ns-1/app-3-backend-1c1606674d-4n9np"])
    await cluster_server.restart()  # the watch cache's history is gone; it starts at this RV
    restarted_at = cluster_sim.store.rv
    async with watching(cluster, url.format(rv=old)) as events:
        assert events.response.status_code == expected.status == 200
        assert events.response.headers["content-type"] == expected.headers["content-type"]
        got = await events.rest()
    want["object"]["message"] = f"too old resource version: {old} ({restarted_at})"
    assert len(got) == 1
    assert_same_keys(got[0], want)
    assert got[0] == want


# ---------------------------------------------------------------------------- discovery


async def test_the_legacy_core_discovery_lists_v1_and_the_server_address(
    cluster: httpx.AsyncClient, cluster_server: SimServer, samples_dir: Path
) -> None:
    want = json.loads((samples_dir / "protocol" / "discovery_api_legacy.json").read_text())
    r = await cluster.get("/api", headers={"Accept": "application/json"})
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/json"
    want["serverAddressByClientCIDRs"][0]["serverAddress"] = f"127.0.0.1:{cluster_server.port}"
    assert_same_keys(r.json(), want)
    assert r.json() == want


async def test_the_core_resource_list_describes_each_resource_as_the_api_server_does(
    cluster: httpx.AsyncClient, samples_dir: Path
) -> None:
    want = json.loads((samples_dir / "protocol" / "discovery_api_v1_resourcelist.json").read_text())
    body = (await cluster.get("/api/v1")).json()
    assert list(body) == list(want)
    assert (body["kind"], body["groupVersion"]) == (want["kind"], want["groupVersion"])
    theirs = {r["name"]: r for r in want["resources"]}
    assert body["resources"]
    for resource in body["resources"]:
        real = theirs[resource["name"]]
        assert list(resource) == list(real), resource["name"]
        assert resource == real
    # Of the subresources, we serve (and list) status and binding.
    ours = {r["name"] for r in body["resources"]}
    assert {"pods/status", "pods/binding", "nodes/status"} <= ours
    assert not {"pods/log", "pods/exec", "pods/eviction"} & ours


async def test_the_legacy_group_list_names_each_group_as_the_api_server_does(
    cluster: httpx.AsyncClient, samples_dir: Path
) -> None:
    want = json.loads((samples_dir / "protocol" / "discovery_apis_legacy.json").read_text())
    body = (await cluster.get("/apis", headers={"Accept": "application/json"})).json()
    assert list(body) == list(want)
    assert (body["kind"], body["apiVersion"]) == (want["kind"], want["apiVersion"])
    theirs = {g["name"]: g for g in want["groups"]}
    assert {g["name"] for g in body["groups"]} >= {"apps", "batch", "authorization.k8s.io"}
    for group in body["groups"]:
        assert_same_keys(group, theirs[group["name"]])
        assert group == theirs[group["name"]]


def _aggregated_resource_matches(ours: dict[str, Any], real: dict[str, Any], where: str) -> None:
    # We serve only the status and binding subresources (and so list only those).
    served = [s for s in real.get("subresources", []) if s["subresource"] in ("status", "binding")]
    real = {k: v for k, v in real.items() if k != "subresources"}
    if served:
        real["subresources"] = served
    assert list(ours) == list(real), where
    assert ours == real, where


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("/api", "discovery_api_aggregated_v2beta1.http"),
        ("/apis", "discovery_apis_aggregated_v2beta1.http"),
    ],
)
async def test_aggregated_discovery_v2beta1_is_served_to_kubectl_1_28(
    cluster: httpx.AsyncClient, samples_dir: Path, path: str, name: str
) -> None:
    expected = sample(samples_dir, name)
    r = await cluster.get(path, headers={"Accept": KUBECTL_128_DISCOVERY_ACCEPT})
    assert r.status_code == expected.status
    for header in ("content-type", "cache-control", "vary"):
        assert r.headers[header] == expected.headers[header], header
    assert re.fullmatch(r'"[0-9A-F]{128}"', r.headers["etag"])
    assert re.fullmatch(r'"[0-9A-F]{128}"', expected.headers["etag"])
    body, want = r.json(), expected.json()
    assert list(body) == list(want)
    assert (body["kind"], body["apiVersion"], body["metadata"]) == (
        want["kind"],
        want["apiVersion"],
        want["metadata"],
    )
    theirs = {item["metadata"].get("name", ""): item for item in want["items"]}
    compared = 0
    for item in body["items"]:
        real = theirs[item["metadata"].get("name", "")]
        assert_same_keys(item["metadata"], real["metadata"])
        assert item["metadata"] == real["metadata"]
        real_versions = {v["version"]: v for v in real["versions"]}
        for version in item["versions"]:
            real_version = real_versions[version["version"]]
            assert list(version) == list(real_version)
            assert version["freshness"] == real_version["freshness"]
            real_resources = {res["resource"]: res for res in real_version["resources"]}
            for resource in version["resources"]:
                _aggregated_resource_matches(
                    resource, real_resources[resource["resource"]], resource["resource"]
                )
                compared += 1
    assert compared > 0
    # A client holding the ETag gets 304 Not Modified.
    again = await cluster.get(
        path, headers={"Accept": KUBECTL_128_DISCOVERY_ACCEPT, "If-None-Match": r.headers["etag"]}
    )
    assert (again.status_code, again.content) == (304, b"")


async def test_aggregated_discovery_v2_is_negotiated_with_the_exact_content_type(
    cluster: httpx.AsyncClient, samples_dir: Path
) -> None:
    # 1.28 knew only v2beta1 (the cluster's version: a client preferring v2 gets v2beta1, as
    # from the real 1.28); 1.30 to 1.32 serve v2 to clients that ask for it first (README),
    # with the Content-Type naming what was chosen.
    want = sample(samples_dir, "discovery_apis_aggregated_v2beta1.http").json()
    old = await cluster.get("/apis", headers={"Accept": CURRENT_DISCOVERY_ACCEPT})
    assert old.headers["content-type"] == (
        "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
    )
    sim = Simulator(config=SimConfig.kube_1_32())
    async with serving(sim) as (_, newer):
        r = await newer.get("/apis", headers={"Accept": CURRENT_DISCOVERY_ACCEPT})
        beta = await newer.get("/apis", headers={"Accept": KUBECTL_128_DISCOVERY_ACCEPT})
    assert (
        r.headers["content-type"]
        == "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    )
    body = r.json()
    assert (body["kind"], body["apiVersion"]) == ("APIGroupDiscoveryList", "apidiscovery.k8s.io/v2")
    assert list(body) == list(want)
    assert body["items"] == beta.json()["items"]
    legacy = await cluster.get("/apis", headers={"Accept": "application/json"})
    assert (legacy.headers["content-type"], legacy.json()["kind"]) == (
        "application/json",
        "APIGroupList",
    )


async def test_the_version_document_has_the_api_servers_fields(samples_dir: Path) -> None:
    want = json.loads((samples_dir / "protocol" / "discovery_version.json").read_text())
    printed = (samples_dir / "protocol" / "kubectl_version.txt").read_text()
    assert f"Server Version: {want['gitVersion']}" in printed
    sim = Simulator(config=SimConfig(git_version=want["gitVersion"]))
    async with SimServer(sim) as server, httpx.AsyncClient(base_url=server.url) as c:
        r = await c.get("/version")
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/json"
    body = r.json()
    assert list(body) == list(want)
    assert {k: body[k] for k in ("major", "minor", "gitVersion", "compiler", "platform")} == {
        k: want[k] for k in ("major", "minor", "gitVersion", "compiler", "platform")
    }


async def test_kubectl_api_resources_would_print_the_real_names_kinds_and_scopes(
    cluster: httpx.AsyncClient, samples_dir: Path
) -> None:
    lines = (samples_dir / "protocol" / "kubectl_api_resources.txt").read_text().splitlines()
    header = lines[0]
    starts = [
        header.index(col) for col in ("NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND")
    ]
    rows = {}
    for line in lines[1:]:
        cells = [line[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]
        rows[(cells[2], cells[0])] = cells
    served = 0
    for path in ("/api", "/apis"):
        doc = (await cluster.get(path, headers={"Accept": CURRENT_DISCOVERY_ACCEPT})).json()
        for item in doc["items"]:
            group = item["metadata"].get("name", "")
            for version in item["versions"]:
                api_version = f"{group}/{version['version']}" if group else version["version"]
                for res in version["resources"]:
                    real = rows[(api_version, res["resource"])]
                    ours = [
                        res["resource"],
                        ",".join(res.get("shortNames", [])),
                        api_version,
                        str(res["scope"] == "Namespaced").lower(),
                        res["responseKind"]["kind"],
                    ]
                    assert ours == real
                    served += 1
    assert served >= 20


# ---------------------------------------------------------------------------- kubectl's requests


async def test_kubectl_discovery_with_a_fresh_cache_gets_what_the_trace_shows(
    cluster: httpx.AsyncClient, samples_dir: Path
) -> None:
    exchanges = kubectl_exchanges(
        samples_dir / "protocol" / "kubectl_get_pods_fresh_discovery_cache_v8.txt"
    )
    assert [e.path_and_query for e in exchanges] == [
        "/api?timeout=32s",
        "/apis?timeout=32s",
        f"/api/v1/namespaces/ns-1/pods?{APP3}&limit=500",
    ]
    for exchange in exchanges:
        headers = {k: v for k, v in exchange.request_headers.items() if k != "Authorization"}
        r = await cluster.get(exchange.path_and_query, headers=headers)
        assert r.status_code == exchange.status
        for header in ("content-type", "cache-control", "vary"):
            if header in exchange.response_headers:
                assert r.headers[header] == exchange.response_headers[header], header
        if exchange.path_and_query.startswith("/api/v1/"):
            # A Table, with the same list metadata: one page, so no continue.
            assert r.json()["kind"] == parse_prefix(exchange.response_body)["kind"] == "Table"
            assert list(r.json()["metadata"]) == list(
                parse_prefix(exchange.response_body)["metadata"]
            )
            assert len(listed(r.json())) == len(
                sample_cluster(samples_dir).pods_of("ns-1", "app-3")
            )


def _check_kubectl_pages(sample_urls: list[str], collection: str) -> str:
    """kubectl's URLs: a first ``?limit=500``, then ``?continue=<token>&limit=500``; their tokens
    all at one RV, keys relative to the collection. Returns the sample's ``start`` shape."""
    assert sample_urls[0] == f"{collection}?limit=500"
    tokens = []
    for url in sample_urls[1:]:
        m = re.fullmatch(re.escape(collection) + r"\?continue=([A-Za-z0-9_-]+)&limit=500", url)
        assert m is not None, url
        tokens.append(decode_token(m.group(1)))
    assert tokens and {tuple(t) for t in tokens} == {("v", "rv", "start")}
    assert len({t["rv"] for t in tokens}) == 1
    return str(tokens[0]["start"])


async def _page_like_kubectl(
    client: httpx.AsyncClient, collection: str, headers: dict[str, str]
) -> list[dict[str, Any]]:
    pages = [(await client.get(f"{collection}?limit=500", headers=headers)).json()]
    while token := pages[-1]["metadata"].get("continue"):
        pages.append(
            (await client.get(f"{collection}?continue={token}&limit=500", headers=headers)).json()
        )
    return pages


@pytest.mark.parametrize(
    "name", ["kubectl_get_pods_A_v8_head80.txt", "kubectl_get_pods_A_v8_stderr_full.txt"]
)
async def test_kubectl_get_pods_across_namespaces_pages_by_500_at_one_resource_version(
    paging_client: tuple[Simulator, httpx.AsyncClient], samples_dir: Path, name: str
) -> None:
    sim, client = paging_client
    exchanges = kubectl_exchanges(samples_dir / "protocol" / name)
    start = _check_kubectl_pages([e.path_and_query for e in exchanges], "/api/v1/pods")
    assert re.fullmatch(r"ns-\d/[a-z0-9-]+\x00", start)
    headers = {k: v for k, v in exchanges[0].request_headers.items() if k != "Authorization"}
    pages = await _page_like_kubectl(client, "/api/v1/pods", headers)
    total = sim.store.count(sim.resource("pods"))
    assert len(pages) == -(-total // 500)
    assert [len(listed(p)) for p in pages[:-1]] == [500] * (len(pages) - 1)
    assert {p["metadata"]["resourceVersion"] for p in pages} == {str(sim.store.rv)}
    for page in pages[:-1]:
        token = decode_token(page["metadata"]["continue"])
        assert token == {
            "v": "meta.k8s.io/v1",
            "rv": sim.store.rv,
            "start": names(listed(page))[-1] + "\x00",
        }
    every = [key for page in pages for key in names(listed(page))]
    assert every == sorted(every) and len(every) == total


async def test_kubectl_get_pods_in_a_namespace_pages_with_namespace_relative_tokens(
    paging_client: tuple[Simulator, httpx.AsyncClient], samples_dir: Path
) -> None:
    _, client = paging_client
    exchanges = kubectl_exchanges(samples_dir / "protocol" / "kubectl_get_pods_ns1_v9_stderr.txt")
    assert [e.status for e in exchanges] == [200, 200]
    collection = "/api/v1/namespaces/ns-1/pods"
    start = _check_kubectl_pages([e.path_and_query for e in exchanges], collection)
    assert "/" not in start and start.endswith("\x00")
    headers = {k: v for k, v in exchanges[0].request_headers.items() if k != "Authorization"}
    pages = await _page_like_kubectl(client, collection, headers)
    assert len(pages) == 2
    assert len(listed(pages[0])) == 500
    token = decode_token(pages[0]["metadata"]["continue"])
    assert token["start"] == listed(pages[0])[-1]["metadata"]["name"] + "\x00"
    assert pages[1]["metadata"]["resourceVersion"] == pages[0]["metadata"]["resourceVersion"]


@pytest.mark.parametrize(
    ("trace", "stdout", "header_lines"),
    [
        (
            "kubectl_get_pods_watch_oname_v8_stderr.txt",
            "kubectl_get_pods_watch_oname_v8_stdout.txt",
            0,
        ),
        ("kubectl_get_pods_watch_v8_stderr.txt", "kubectl_get_pods_watch_v8_stdout.txt", 1),
    ],
)
async def test_kubectl_get_pods_watch_lists_then_watches_from_the_list_resource_version(
    cluster: httpx.AsyncClient,
    cluster_sim: Simulator,
    samples_dir: Path,
    trace: str,
    stdout: str,
    header_lines: int,
) -> None:
    protocol = samples_dir / "protocol"
    list_call, watch_call = kubectl_exchanges(protocol / trace)
    printed = [
        line.split()[0].removeprefix("pod/")
        for line in (protocol / stdout).read_text().splitlines()[header_lines:]
    ]
    listed_rv = re.search(r"resourceVersion=(\d+)", watch_call.path_and_query)
    assert listed_rv is not None
    headers = {k: v for k, v in list_call.request_headers.items() if k != "Authorization"}
    r = await cluster.get(list_call.path_and_query, headers=headers)
    assert (r.status_code, r.headers["content-type"]) == (
        list_call.status,
        list_call.response_headers["content-type"],
    )
    body = r.json()
    in_list = [i["metadata"]["name"] for i in listed(body)]
    # kubectl prints the list in the server's order, then one line per watch event.
    assert in_list == printed[: len(in_list)]
    url = watch_call.path_and_query.replace(
        listed_rv.group(0), f"resourceVersion={body['metadata']['resourceVersion']}"
    )
    async with watching(cluster, url, headers=headers) as events:
        assert events.response.status_code == watch_call.status
        assert (
            events.response.headers["content-type"] == watch_call.response_headers["content-type"]
        )
        for name in printed[len(in_list) :] or ["app-3-backend-1c1606674d-4n9np"]:
            apply(cluster_sim, sample_cluster(samples_dir).pods[f"ns-1/{name}"])
            event = await events.next()
            (obj,) = (
                listed(event["object"]) if event["object"]["kind"] == "Table" else [event["object"]]
            )
            assert (event["type"], obj["metadata"]["name"]) == ("MODIFIED", name)


async def test_kubectl_get_ns_lists_the_namespaces_in_the_api_servers_order(
    cluster: httpx.AsyncClient, samples_dir: Path
) -> None:
    printed = (samples_dir / "protocol" / "kubectl_get_ns.txt").read_text().splitlines()
    r = await cluster.get("/api/v1/namespaces?limit=500", headers={"Accept": KUBECTL_TABLE_ACCEPT})
    rows = r.json()["rows"]
    assert [row["cells"][0] for row in rows] == [line.split()[0] for line in printed[1:]]
    assert [row["cells"][1] for row in rows] == [line.split()[1] for line in printed[1:]]
    items = (await cluster.get("/api/v1/namespaces?limit=500")).json()["items"]
    assert [i["metadata"]["name"] for i in items] == [line.split()[0] for line in printed[1:]]
    # The namespaces loaded from the real list come back as it shows them (no generation: the
    # namespace strategy sets none).
    real = {ns["metadata"]["name"]: ns for ns in sample_cluster(samples_dir).namespaces}
    for item in items:
        if item["metadata"]["name"] in real:
            want = {
                k: v
                for k, v in real[item["metadata"]["name"]].items()
                if k not in ("kind", "apiVersion")
            }
            assert_same_keys(comparable(item), comparable(want))
            assert comparable(item) == comparable(want)
