"""Watches through the daemon against the real API server: what is written upstream reaches a
downstream watcher, as the API server's own watch delivers it (types, order, resourceVersions),
with the same rules for resumes, selectors, bookmarks, deadlines and too-old RVs."""

from __future__ import annotations

import asyncio
import re
import socket
from pathlib import Path

import httpx
import pytest

from cacheproxy.daemon.runtime import Daemon
from cacheproxy.envtest import Cluster
from tests.e2e.support import create, daemon_over, delete, fresh_namespace, merge_patch, rv_of
from tests.e2e.watch_support import GUARD, watching
from tests.support import until

pytestmark = pytest.mark.every_server

CMS = "/api/v1/configmaps"


def _cm(name: str, **labels: str) -> dict[str, object]:
    return {"metadata": {"name": name, "labels": labels}, "data": {"k": "v"}}


async def _cache_rv(proxy: httpx.AsyncClient, path: str) -> str:
    body = (await proxy.get(path, params={"limit": "1"})).json()
    return str(body["metadata"]["resourceVersion"])


async def test_changes_written_upstream_reach_a_downstream_watcher_as_upstream_sends_them(
    upstream: httpx.AsyncClient, proxy: httpx.AsyncClient
) -> None:
    ns = await fresh_namespace(upstream)
    path = f"/api/v1/namespaces/{ns}/configmaps"
    rv = await _cache_rv(proxy, path)
    async with (
        watching(proxy, path, {"resourceVersion": rv}) as down,
        watching(upstream, path, {"resourceVersion": rv}) as up,
    ):
        a = await create(upstream, path, _cm("a"))
        await merge_patch(upstream, f"{path}/a", {"data": {"k": "v2"}})
        await create(upstream, path, _cm("b"))
        await delete(upstream, f"{path}/a")
        for watch in (up, down):
            await watch.wait_named("a", "DELETED")
        assert down.changes() == up.changes()
        assert [t for t, _, _ in down.changes()] == ["ADDED", "MODIFIED", "ADDED", "DELETED"]
        assert down.changes()[0][2] == a["metadata"]["resourceVersion"]
    # The objects themselves, not only their names (but for the fields the daemon drops).
    assert [e["object"] for e in down.events] == _without_managed(up.events)


def _without_managed(events: list[dict[str, object]]) -> list[object]:
    out = []
    for event in events:
        obj = dict(event["object"])  # type: ignore[arg-type]
        meta = dict(obj["metadata"])  # type: ignore[arg-type]
        meta.pop("managedFields", None)
        obj["metadata"] = meta
        out.append(obj)
    return out


async def test_a_watch_resumed_from_an_rv_gets_exactly_what_followed_it(
    upstream: httpx.AsyncClient, proxy: httpx.AsyncClient
) -> None:
    ns = await fresh_namespace(upstream)
    path = f"/api/v1/namespaces/{ns}/configmaps"
    first = await create(upstream, path, _cm("first"))
    await create(upstream, path, _cm("second"))
    await merge_patch(upstream, f"{path}/first", {"data": {"k": "changed"}})
    last = await create(upstream, path, _cm("third"))
    # Wait until the daemon has it all, then resume both from the first write.
    async with watching(proxy, path, {"resourceVersion": str(rv_of(last) - 1)}) as probe:
        await probe.wait_named("third")
    params = {"resourceVersion": first["metadata"]["resourceVersion"]}
    async with watching(proxy, path, params) as down, watching(upstream, path, params) as up:
        for watch in (up, down):
            await watch.wait_named("third")
        assert down.changes() == up.changes()
        assert [n for _, n, _ in down.changes()] == ["second", "first", "third"]


async def test_selector_transitions_are_delivered_as_the_api_server_delivers_them(
    upstream: httpx.AsyncClient, proxy: httpx.AsyncClient
) -> None:
    ns = await fresh_namespace(upstream)
    path = f"/api/v1/namespaces/{ns}/configmaps"
    rv = await _cache_rv(proxy, path)
    params = {"resourceVersion": rv, "labelSelector": "shown=yes"}
    async with watching(proxy, path, params) as down, watching(upstream, path, params) as up:
        await create(upstream, path, _cm("moves", shown="no"))
        await merge_patch(upstream, f"{path}/moves", {"metadata": {"labels": {"shown": "yes"}}})
        await merge_patch(upstream, f"{path}/moves", {"data": {"k": "in"}})
        await merge_patch(upstream, f"{path}/moves", {"metadata": {"labels": {"shown": "no"}}})
        await create(upstream, path, _cm("end", shown="yes"))
        for watch in (up, down):
            await watch.wait_named("end")
        assert down.changes() == up.changes()
        assert [t for t, _, _ in down.changes()] == ["ADDED", "MODIFIED", "DELETED", "ADDED"]
        # Moved out: the object as it was before, at the RV of the change that moved it.
        gone = next(e for e in down.events if e["type"] == "DELETED")
        assert gone["object"]["metadata"]["labels"] == {"shown": "yes"}


async def test_a_named_watch_sees_only_its_object(
    upstream: httpx.AsyncClient, proxy: httpx.AsyncClient
) -> None:
    ns = await fresh_namespace(upstream)
    path = f"/api/v1/namespaces/{ns}/configmaps"
    rv = await _cache_rv(proxy, path)
    params = {"resourceVersion": rv, "fieldSelector": "metadata.name=mine"}
    async with watching(proxy, path, params) as down, watching(upstream, path, params) as up:
        await create(upstream, path, _cm("other"))
        await create(upstream, path, _cm("mine"))
        await merge_patch(upstream, f"{path}/mine", {"data": {"k": "2"}})
        for watch in (up, down):
            await watch.wait_named("mine", "MODIFIED")
        assert down.changes() == up.changes()
        assert {n for _, n, _ in down.changes()} == {"mine"}


async def test_a_watch_at_rv_0_starts_with_the_state_as_added_events(
    upstream: httpx.AsyncClient, proxy: httpx.AsyncClient
) -> None:
    path = "/api/v1/namespaces/ns-1/pods"
    params = {"resourceVersion": "0"}
    async with watching(proxy, path, params) as down, watching(upstream, path, params) as up:
        listed = (await upstream.get(path)).json()["items"]
        for watch in (up, down):
            await watch.wait_for(lambda events: len(events) >= len(listed), "the initial state")
        # The same objects (the API server's watch cache sends them in no particular order).
        assert sorted(down.changes()) == sorted(up.changes())
        assert {t for t, _, _ in down.changes()} == {"ADDED"}


async def test_a_watch_from_an_rv_the_cache_has_not_reached_waits_for_the_events_after_it(
    upstream: httpx.AsyncClient, proxy: httpx.AsyncClient
) -> None:
    # The API server's rule (no 504 for watches): clients resuming on a replica that is behind
    # get what follows their RV, and nothing up to it.
    ns = await fresh_namespace(upstream)
    path = f"/api/v1/namespaces/{ns}/configmaps"
    current = (await upstream.get(path)).json()  # RV unset: etcd's current revision
    future = rv_of(current) + 2  # two writes from now, unless something else writes first
    params = {"resourceVersion": str(future)}
    async with watching(proxy, path, params) as down, watching(upstream, path, params) as up:
        assert down.status == up.status == 200
        await asyncio.sleep(0.2)  # neither may answer before the RV exists (no 504, no 410)
        assert not down.ended.is_set() and not up.ended.is_set()
        made = [
            await create(upstream, path, _cm(name))
            for name in ("skipped-1", "skipped-2", "after-1", "after-2")
        ]
        for watch in (up, down):
            await watch.wait_named("after-2")
        assert down.changes() == up.changes()
        # Exactly the writes after the RV (the API server's own writes, its leases, may move
        # etcd's revision in between: the RV then falls on an earlier one of these).
        after = [m["metadata"]["name"] for m in made if rv_of(m) > future]
        assert [n for _, n, _ in down.changes()] == after
        assert after[-1:] == ["after-2"]  # the fourth write is past two writes from then


async def test_too_old_an_rv_is_one_410_event_naming_the_oldest_rv_that_works(
    upstream: httpx.AsyncClient, proxy: httpx.AsyncClient
) -> None:
    # The daemon's history starts at its own sync; the API server's at its own start (so RV 1
    # works there on a fresh cluster): compared here is the rule, on each server's own history.
    path = "/api/v1/namespaces/ns-0/configmaps"
    async with watching(proxy, path, {"resourceVersion": "1"}) as down:
        await down.wait_for(lambda events: bool(events), "an event")
        await asyncio.wait_for(down.ended.wait(), GUARD)
    [error] = down.events
    assert error["type"] == "ERROR"
    status = error["object"]
    assert (status["kind"], status["code"], status["reason"]) == ("Status", 410, "Expired")
    prefix = "too old resource version: 1 ("
    assert status["message"].startswith(prefix)
    oldest = status["message"].removeprefix(prefix).rstrip(")")
    # The named RV itself is the oldest that works; one less is 410.
    async with watching(proxy, path, {"resourceVersion": oldest, "timeoutSeconds": "1"}) as ok:
        await asyncio.wait_for(ok.ended.wait(), GUARD)
    assert not any(e["type"] == "ERROR" for e in ok.events)
    async with watching(proxy, path, {"resourceVersion": str(int(oldest) - 1)}) as old:
        await old.wait_for(lambda events: bool(events), "the 410")
    assert old.events[0]["type"] == "ERROR" and old.events[0]["object"]["code"] == 410


async def test_a_quiet_watch_ends_at_its_timeout_without_bookmarks(
    upstream: httpx.AsyncClient, proxy: httpx.AsyncClient
) -> None:
    # Bookmarks only move a client forward: with nothing newer than its RV, none is sent.
    path = "/api/v1/namespaces/ns-2/configmaps"
    rv = await _cache_rv(proxy, path)
    params = {"resourceVersion": rv, "allowWatchBookmarks": "true", "timeoutSeconds": "3"}
    async with watching(proxy, path, params) as down, watching(upstream, path, params) as up:
        for watch in (up, down):
            await asyncio.wait_for(watch.ended.wait(), GUARD)
    assert down.events == up.events == []


async def test_a_bookmark_before_the_deadline_carries_the_resources_newer_rv(
    upstream: httpx.AsyncClient, proxy: httpx.AsyncClient
) -> None:
    ns, elsewhere = await fresh_namespace(upstream), await fresh_namespace(upstream)
    path = f"/api/v1/namespaces/{ns}/configmaps"
    rv = await _cache_rv(proxy, path)
    params = {"resourceVersion": rv, "allowWatchBookmarks": "true", "timeoutSeconds": "4"}
    async with watching(proxy, path, params) as down, watching(upstream, path, params) as up:
        # A change elsewhere in the resource moves its RV past the watch's.
        other = await create(upstream, f"/api/v1/namespaces/{elsewhere}/configmaps", _cm("x"))
        for watch in (up, down):
            await asyncio.wait_for(watch.ended.wait(), GUARD)
    reached = int(await _cache_rv(upstream, "/api/v1/configmaps"))
    # One before the deadline at least (the API server may repeat it), each at an RV the
    # resource reached, in the same shape. Other tests may write configmaps on the same server
    # meanwhile, so the two bookmarks need not name the same RV: each names one between the
    # change made here and the resource's RV after both watches ended.
    marks = [e["object"] for e in up.events + down.events]
    assert down.events and up.events
    assert {e["type"] for e in up.events + down.events} == {"BOOKMARK"}
    shapes = [{**m, "metadata": sorted(m["metadata"])} for m in marks]
    assert all(shape == shapes[0] for shape in shapes), (up.events, down.events)
    for mark in marks:
        assert rv_of(other) <= int(mark["metadata"]["resourceVersion"]) <= reached, marks


async def test_a_watch_on_a_table_carries_rows(
    upstream: httpx.AsyncClient, proxy: httpx.AsyncClient
) -> None:
    ns = await fresh_namespace(upstream)
    path = f"/api/v1/namespaces/{ns}/configmaps"
    rv = await _cache_rv(proxy, path)
    accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
    params = {"resourceVersion": rv}
    headers = {"Accept": accept}
    async with (
        watching(proxy, path, params, headers=headers) as down,
        watching(upstream, path, params, headers=headers) as up,
    ):
        await create(upstream, path, _cm("row"))
        for watch in (up, down):
            await watch.wait_for(lambda events: bool(events), "a row")
    up_table, down_table = up.events[0]["object"], down.events[0]["object"]
    assert down_table["kind"] == up_table["kind"] == "Table"
    assert [c["name"] for c in down_table["columnDefinitions"]] == [
        c["name"] for c in up_table["columnDefinitions"]
    ]
    assert down_table["rows"][0]["cells"][:2] == up_table["rows"][0]["cells"][:2]


async def test_a_client_that_reads_nothing_is_dropped_and_counted(
    cluster: Cluster, upstream: httpx.AsyncClient, tmp_path: Path
) -> None:
    extra = {"server.limits.watchStallSeconds": 0.5}
    ns = await fresh_namespace(upstream)
    path = f"/api/v1/namespaces/{ns}/configmaps"
    async with daemon_over(cluster, tmp_path, resources=["configmaps"], extra=extra) as daemon:
        stalled = await _raw_watch(daemon, f"{path}?watch=1")
        try:
            ballast = "x" * 60_000
            for i in range(400):
                await create(
                    upstream, path, {"metadata": {"name": f"c{i}"}, "data": {"b": ballast}}
                )
                if _evicted(daemon):
                    break
            await until(lambda: _evicted(daemon) == 1, "the client is dropped", within=GUARD)
            async with httpx.AsyncClient(base_url=daemon.url) as http:
                metrics = (await http.get("/metrics")).text
            cut = re.findall(
                r'^cacheproxy_watch_evicted_total\{reason="(\w+)",resource="configmaps"\} 1\.0$',
                metrics,
                re.MULTILINE,
            )
            # Whichever bound it passed first (its socket buffers fill at ~64 KB per event):
            # the stall, or its queue's events or bytes; once, under one reason.
            assert len(cut) == 1 and cut[0] in {"stall", "events", "bytes"}, metrics
        finally:
            stalled.close()


def _evicted(daemon: Daemon) -> int:
    assert daemon.server is not None
    return sum(hub.evicted for hub in daemon.server.hubs.values())


async def _raw_watch(daemon: Daemon, target: str) -> socket.socket:
    """A client that sends a watch and never reads (a tiny receive window)."""
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    sock.setblocking(False)
    await loop.sock_connect(sock, ("127.0.0.1", daemon.port))
    await loop.sock_sendall(sock, f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    return sock
