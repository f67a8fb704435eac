"""The daemon serves list / get / watch from its cache with the API server's semantics."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import orjson
import pytest

from cacheproxy.daemon.runtime import Daemon
from cacheproxy.sim import SimServer, Simulator
from tests.integration.clients import kubectl_binary, run_kubectl
from tests.integration.daemon_support import daemon_for
from tests.support import POD_LIST_BLUEPRINT, end_annotations


def _keys(body: dict[str, object]) -> list[tuple[str, str]]:
    items = body["items"]
    assert isinstance(items, list)
    return [(i["metadata"].get("namespace", ""), i["metadata"]["name"]) for i in items]


@pytest.mark.parametrize(
    "query",
    [
        "/api/v1/pods",
        "/api/v1/namespaces/ns-1/pods",
        "/api/v1/pods?labelSelector=app%3Dapp-1",
        "/api/v1/pods?labelSelector=app+in+(app-1,app-2),tier!%3Dfrontend",
        "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-2",
        "/api/v1/pods?fieldSelector=status.phase%3DRunning",
        "/api/v1/namespaces/ns-0/pods?fieldSelector=spec.nodeName!%3Dnode-1&labelSelector=app",
        "/api/v1/namespaces",
        "/apis/apps/v1/deployments",
    ],
)
async def test_lists_answer_what_the_upstream_answers(
    both: tuple[httpx.AsyncClient, httpx.AsyncClient], query: str
) -> None:
    proxy, upstream = both
    mine, theirs = await proxy.get(query), await upstream.get(query)
    assert mine.status_code == theirs.status_code == 200
    a, b = mine.json(), theirs.json()
    assert _keys(a) == _keys(b)
    assert a["kind"] == b["kind"] and a["apiVersion"] == b["apiVersion"]
    assert a["metadata"]["resourceVersion"]
    assert [i["metadata"]["resourceVersion"] for i in a["items"]] == [
        i["metadata"]["resourceVersion"] for i in b["items"]
    ]


async def test_a_limit_walk_returns_every_object_once_in_key_order_at_one_rv(
    both: tuple[httpx.AsyncClient, httpx.AsyncClient], demo_sim: Simulator
) -> None:
    proxy, upstream = both
    full = _keys((await upstream.get("/api/v1/pods")).json())
    seen: list[tuple[str, str]] = []
    token, rvs = "", set()
    pods = demo_sim.resource("pods")
    first = True
    while True:
        r = await proxy.get(
            "/api/v1/pods", params={"limit": "7", **({"continue": token} if token else {})}
        )
        assert r.status_code == 200
        body = r.json()
        seen += _keys(body)
        rvs.add(body["metadata"]["resourceVersion"])
        if first:
            # A write after the first page must not show up in later pages (one snapshot).
            demo_sim.store.create(
                pods, {"metadata": {"name": "zzz-late", "namespace": "ns-2"}, "spec": {}}
            )
            first = False
        token = body["metadata"].get("continue", "")
        if not token:
            break
        assert body["metadata"]["remainingItemCount"] == len(full) - len(seen)
    assert seen == full
    assert len(rvs) == 1


async def test_get_and_errors_are_the_api_servers(
    both: tuple[httpx.AsyncClient, httpx.AsyncClient],
) -> None:
    proxy, upstream = both
    name = _keys((await upstream.get("/api/v1/namespaces/ns-1/pods")).json())[0][1]
    mine = await proxy.get(f"/api/v1/namespaces/ns-1/pods/{name}")
    theirs = (await upstream.get(f"/api/v1/namespaces/ns-1/pods/{name}")).json()
    theirs["metadata"].pop("managedFields")  # the default transform drops them
    assert mine.json() == theirs
    missing = await proxy.get("/api/v1/namespaces/ns-1/pods/nope")
    assert missing.status_code == 404
    assert missing.json()["message"] == 'pods "nope" not found'
    # What the cache does not answer passes through: upstream's own answers.
    bad_pod = {"metadata": {"name": "Not_A_Name"}}
    write = await proxy.post("/api/v1/namespaces/ns-1/pods", json=bad_pod)
    direct = await upstream.post("/api/v1/namespaces/ns-1/pods", json=bad_pod)
    assert write.status_code == direct.status_code == 422
    assert write.json() == direct.json()
    uncached = await proxy.get("/api/v1/secrets")
    assert uncached.status_code == 200
    assert uncached.json() == (await upstream.get("/api/v1/secrets")).json()
    bad = await proxy.get("/api/v1/pods?fieldSelector=spec.foo%3Dx")
    assert bad.status_code == 400
    assert bad.json()["message"] == (
        "field label not supported: spec.foo (supported: metadata.name, metadata.namespace, "
        "spec.nodeName, spec.restartPolicy, spec.schedulerName, spec.serviceAccountName, "
        "spec.hostNetwork, status.phase, status.podIP, status.podIPs, status.nominatedNodeName, "
        "metadata.ownerReferences[*].uid)"
    )
    future = await proxy.get("/api/v1/pods/x", params={"resourceVersion": "999999"})
    assert future.status_code in (404, 504)
    forged = await proxy.get("/api/v1/pods", params={"limit": "2", "continue": "garbage"})
    assert forged.status_code == 400
    assert forged.json()["message"] == (
        "invalid continue token: continue key is not valid: "
        "invalid character '\\u0081' looking for beginning of value"
    )
    invalid = await proxy.get("/api/v1/pods", params={"resourceVersionMatch": "Exact"})
    assert invalid.status_code == 422
    assert invalid.json()["reason"] == "Invalid"
    notacceptable = await proxy.get("/api/v1/pods", headers={"Accept": "application/xml"})
    assert notacceptable.status_code == 406


async def test_index_selector_and_index_field_selectors_come_from_the_index(
    both: tuple[httpx.AsyncClient, httpx.AsyncClient],
) -> None:
    proxy, upstream = both
    by_set = await proxy.get(
        "/api/v1/pods", params={"indexSelector": "spec.nodeName in (node-1,node-3)"}
    )
    assert by_set.status_code == 200
    expected = sorted(
        _keys((await upstream.get("/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1")).json())
        + _keys((await upstream.get("/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-3")).json())
    )
    assert _keys(by_set.json()) == expected
    unknown = await proxy.get("/api/v1/pods", params={"indexSelector": "spec.schedulerName=x"})
    assert unknown.status_code == 400
    assert "indexes: metadata.ownerReferences[*].uid, spec.nodeName" in unknown.json()["message"]


async def test_a_watch_from_an_rv_sees_create_update_delete_in_order(
    daemon: Daemon, demo_sim: Simulator
) -> None:
    cms = demo_sim.resource("configmaps")
    async with httpx.AsyncClient(base_url=daemon.url, timeout=10) as c:
        rv = (await c.get("/api/v1/configmaps")).json()["metadata"]["resourceVersion"]
        async with c.stream(
            "GET", f"/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={rv}"
        ) as r:
            created = demo_sim.store.create(
                cms, {"metadata": {"name": "w", "namespace": "default"}, "data": {"a": "1"}}
            )
            demo_sim.store.update(cms, {**created, "data": {"a": "2"}})
            demo_sim.store.delete(cms, "default", "w")
            events = []
            it = r.aiter_lines()
            try:
                while len(events) < 3:
                    events.append(orjson.loads(await asyncio.wait_for(it.__anext__(), timeout=10)))
            finally:
                await it.aclose()
    assert [(e["type"], e["object"]["data"]["a"]) for e in events] == [
        ("ADDED", "1"),
        ("MODIFIED", "2"),
        ("DELETED", "2"),
    ]
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert rvs == sorted(rvs) and rvs[0] > int(rv)


async def test_a_watch_list_ends_its_initial_events_with_the_annotated_bookmark(
    daemon: Daemon, demo_sim: Simulator
) -> None:
    async with httpx.AsyncClient(base_url=daemon.url, timeout=10) as c:
        params = "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"
        async with c.stream("GET", f"/api/v1/namespaces/ns-1/pods?{params}") as r:
            lines = []
            it = r.aiter_lines()
            try:
                while True:
                    event = orjson.loads(await asyncio.wait_for(it.__anext__(), timeout=10))
                    lines.append(event)
                    if event["type"] == "BOOKMARK":
                        break
            finally:
                await it.aclose()
    adds = [e for e in lines if e["type"] == "ADDED"]
    expected = [
        n
        for ns, n in (
            (s.obj["metadata"]["namespace"], s.obj["metadata"]["name"])
            for s in demo_sim.store.iter_range(demo_sim.resource("pods"), "ns-1")
        )
    ]
    assert [e["object"]["metadata"]["name"] for e in adds] == expected
    assert lines[-1]["object"]["metadata"]["annotations"] == end_annotations(POD_LIST_BLUEPRINT)


async def test_a_watch_with_a_selector_sees_objects_move_in_and_out(
    daemon: Daemon, demo_sim: Simulator
) -> None:
    cms = demo_sim.resource("configmaps")
    created = demo_sim.store.create(
        cms, {"metadata": {"name": "mover", "namespace": "default", "labels": {"x": "in"}}}
    )
    await asyncio.sleep(0.2)
    async with httpx.AsyncClient(base_url=daemon.url, timeout=10) as c:
        rv = (await c.get("/api/v1/configmaps")).json()["metadata"]["resourceVersion"]
        async with c.stream(
            "GET", f"/api/v1/configmaps?watch=1&labelSelector=x%3Din&resourceVersion={rv}"
        ) as r:
            out = demo_sim.store.update(
                cms, {**created, "metadata": {**created["metadata"], "labels": {"x": "out"}}}
            )
            demo_sim.store.update(
                cms, {**out, "metadata": {**out["metadata"], "labels": {"x": "in"}}}
            )
            it = r.aiter_lines()
            try:
                first = orjson.loads(await asyncio.wait_for(it.__anext__(), timeout=10))
                second = orjson.loads(await asyncio.wait_for(it.__anext__(), timeout=10))
            finally:
                await it.aclose()
    assert first["type"] == "DELETED"
    assert first["object"]["metadata"]["labels"] == {"x": "in"}  # the old object …
    assert (
        first["object"]["metadata"]["resourceVersion"] == out["metadata"]["resourceVersion"]
    )  # … at the event's RV
    assert second["type"] == "ADDED"


async def test_discovery_lists_only_cached_resources_read_only(read_only_daemon: Daemon) -> None:
    async with httpx.AsyncClient(base_url=read_only_daemon.url, timeout=10) as c:
        core = (await c.get("/api/v1")).json()
        apps = (await c.get("/apis/apps/v1")).json()
        version = (await c.get("/version")).json()
        ready = await c.get("/readyz")
    assert sorted(r["name"] for r in core["resources"]) == ["configmaps", "namespaces", "pods"]
    assert {tuple(r["verbs"]) for r in core["resources"] + apps["resources"]} == {
        ("get", "list", "watch")
    }
    assert version["gitVersion"].startswith("v1.")
    assert ready.status_code == 200


@pytest.mark.kubectl
@pytest.mark.parametrize("version", ["1.27", "1.33"])
async def test_kubectl_reads_through_the_daemon(
    version: str, daemon: Daemon, demo_server: SimServer, tmp_path: Path
) -> None:
    kubectl = kubectl_binary(version)
    code, mine, err = await run_kubectl(
        kubectl, daemon.url, tmp_path / "a", "get", "pods", "-A", "-o", "name", "-l", "app=app-1"
    )
    assert code == 0, err
    code, theirs, err = await run_kubectl(
        kubectl,
        demo_server.url,
        tmp_path / "b",
        "get",
        "pods",
        "-A",
        "-o",
        "name",
        "-l",
        "app=app-1",
    )
    assert code == 0, err
    assert mine == theirs and mine.strip()
    code, chunked, err = await run_kubectl(
        kubectl, daemon.url, tmp_path / "a", "get", "pods", "-A", "-o", "name", "--chunk-size=7"
    )
    assert code == 0, err
    code, full, err = await run_kubectl(
        kubectl, demo_server.url, tmp_path / "b", "get", "pods", "-A", "-o", "name"
    )
    assert chunked == full


async def test_a_limit_above_the_maximum_page_size_is_served_in_smaller_pages(
    demo_server: SimServer,
) -> None:
    from cacheproxy.daemon.config import ServerLimits

    async with (
        daemon_for(demo_server.url, limits=ServerLimits(max_page_size=10)) as d,
        httpx.AsyncClient(base_url=d.url, timeout=10) as c,
    ):
        body = (await c.get("/api/v1/pods", params={"limit": "1000"})).json()
    assert len(body["items"]) == 10
    assert body["metadata"]["continue"]
    assert body["metadata"]["remainingItemCount"] == 50
