"""Watches served by the daemon follow the API server's watch cache (docs/design.md §4, research §2.5-2.9).

Every test runs a daemon in front of a simulator, both on 127.0.0.1 with port 0, writes through
the simulator's Python API and reads what the daemon streams. Resumes, 410s, selector
transitions, bookmarks, deadlines, eviction of a stalled client, relists, the 429 before the
first sync and the RV rules of list/get live here; test_daemon_serving covers the basics.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest

from cacheproxy.daemon.config import DaemonConfig, ResourceConfig, ServerLimits, ServerSettings
from cacheproxy.daemon.runtime import Daemon
from cacheproxy.kube.resources import ResourceType, builtin
from cacheproxy.sim import SimServer, Simulator
from cacheproxy.sim.churn import ChurnDriver
from cacheproxy.upstream import UpstreamConfig
from tests.integration.daemon_support import daemon_for, default_resources
from tests.support import POD_LIST_BLUEPRINT, end_annotations, raw_watch, until

PODS = builtin("pods")
CONFIGMAPS = builtin("configmaps")
GUARD = 10.0
"""Seconds any single read may take before the test fails (a guard, never an assertion)."""

Json = dict[str, Any]
"""A Kubernetes object or a watch event, as parsed JSON."""


# ---------------------------------------------------------------------------------- helpers


def cache_rv(daemon: Daemon, rtype: ResourceType) -> int:
    assert daemon.server is not None
    return daemon.server.resources[rtype].resource_version


async def caught_up(daemon: Daemon, rtype: ResourceType, rv: int) -> None:
    await until(lambda: cache_rv(daemon, rtype) >= rv, f"the daemon's {rtype.resource} reach {rv}")


def rv_of(obj: dict[str, Any]) -> int:
    return int(obj["metadata"]["resourceVersion"])


def pod(name: str, *, node: str = "node-1", phase: str = "Running", **labels: str) -> Json:
    return {
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "busybox"}]},
        "status": {"phase": phase},
    }


def changed(obj: Json, **parts: Any) -> Json:
    """``obj`` with top-level parts replaced (``metadata`` merged), for an update."""
    out = {**obj, **{k: v for k, v in parts.items() if k != "metadata"}}
    out["metadata"] = {**obj["metadata"], **parts.get("metadata", {})}
    return out


class WatchStream:
    """The events of one streamed watch response, one JSON line at a time."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self._lines = response.aiter_lines()

    async def next(self) -> Json | None:
        """The next event, or None when the server ended the stream."""
        while True:
            try:
                line = await asyncio.wait_for(anext(self._lines), GUARD)
            except StopAsyncIteration:
                return None
            if line:
                event: Json = orjson.loads(line)
                return event

    async def take(self, n: int) -> list[Json]:
        events = []
        for _ in range(n):
            event = await self.next()
            assert event is not None, f"the stream ended after {events}"
            events.append(event)
        return events

    async def rest(self) -> list[Json]:
        """Every event until the server ends the stream."""
        events = []
        while (event := await self.next()) is not None:
            events.append(event)
        return events


@contextlib.asynccontextmanager
async def watching(
    client: httpx.AsyncClient, path: str, **params: str
) -> AsyncIterator[WatchStream]:
    async with client.stream("GET", path, params={"watch": "1", **params}) as response:
        assert response.status_code == 200, (await response.aread()).decode()
        yield WatchStream(response)


def summary(events: list[Json]) -> list[tuple[str, str, int]]:
    return [
        (e["type"], e["object"]["metadata"].get("name", ""), rv_of(e["object"])) for e in events
    ]


@pytest.fixture
async def http(daemon: Daemon) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=daemon.url, timeout=GUARD) as c:
        yield c


# ---------------------------------------------------------------------------------- resumes


async def test_a_watch_resumed_from_an_rv_gets_every_later_event_once_and_in_order(
    daemon: Daemon, http: httpx.AsyncClient, demo_sim: Simulator
) -> None:
    store, cms = demo_sim.store, demo_sim.resource("configmaps")
    made = [
        store.create(cms, {"metadata": {"name": f"r{i}", "namespace": "default"}}) for i in range(4)
    ]
    resume_from = rv_of(made[2])
    # History the daemon must replay from its EventLog: what happened after the resume point.
    history = [
        ("ADDED", "r3", rv_of(made[3])),
        ("MODIFIED", "r0", rv_of(store.update(cms, changed(made[0], data={"v": "1"})))),
        ("DELETED", "r1", rv_of(store.delete(cms, "default", "r1"))),
    ]
    await caught_up(daemon, CONFIGMAPS, history[-1][2])
    path = "/api/v1/namespaces/default/configmaps"
    async with watching(http, path, resourceVersion=str(resume_from)) as stream:
        live = [
            ("ADDED", "r4", rv_of(store.create(cms, {"metadata": {"name": "r4"}}))),
            ("MODIFIED", "r2", rv_of(store.update(cms, changed(made[2], data={"v": "2"})))),
        ]
        events = await stream.take(len(history) + len(live))
        sentinel = rv_of(store.create(cms, {"metadata": {"name": "sentinel"}}))
        after = await stream.next()
    assert summary(events) == history + live
    # Nothing repeated between the replay and the live events: the next one is the sentinel.
    assert after is not None and summary([after]) == [("ADDED", "sentinel", sentinel)]


async def test_an_rv_the_event_log_dropped_is_410_for_watch_exact_list_and_continue(
    demo_server: SimServer, demo_sim: Simulator
) -> None:
    resources = (ResourceConfig(rtype=PODS, history=1000),)
    async with (
        daemon_for(demo_server.url, resources=resources) as daemon,
        httpx.AsyncClient(base_url=daemon.url, timeout=GUARD) as http,
    ):
        start = cache_rv(daemon, PODS)
        first_page = (await http.get("/api/v1/pods", params={"limit": "5"})).json()
        token = first_page["metadata"]["continue"]
        pods = demo_sim.resource("pods")
        obj = demo_sim.store.create(pods, pod("busy"))
        for i in range(1001):
            obj = demo_sim.store.update(pods, changed(obj, metadata={"labels": {"n": str(i)}}))
        await caught_up(daemon, PODS, rv_of(obj))
        assert daemon.server is not None
        log = daemon.server.resources[PODS].informer.event_log
        assert log.oldest_resumable > start, (
            f"history=1000 is configured, yet the EventLog holds {len(log)} events "
            f"(max_events={log.max_events}) and still reaches back to {start}"
        )

        async with watching(http, "/api/v1/pods", resourceVersion=str(start)) as stream:
            events = await stream.rest()
        assert [e["type"] for e in events] == ["ERROR"]
        error = events[0]["object"]
        assert (error["kind"], error["code"], error["reason"]) == ("Status", 410, "Expired")
        assert error["message"].startswith(f"too old resource version: {start} (")

        exact = await http.get(
            "/api/v1/pods", params={"resourceVersion": str(start), "resourceVersionMatch": "Exact"}
        )
        assert exact.status_code == 410 and exact.json()["reason"] == "Expired"

        stale = await http.get("/api/v1/pods", params={"limit": "5", "continue": token})
        assert stale.status_code == 410 and stale.json()["reason"] == "Expired"
        # The 410 hands back an "inconsistent" token that continues at the latest state.
        latest = await http.get(
            "/api/v1/pods", params={"limit": "5", "continue": stale.json()["metadata"]["continue"]}
        )
        assert latest.status_code == 200
        assert int(latest.json()["metadata"]["resourceVersion"]) == rv_of(obj)
        # A resume from an RV the EventLog still holds goes on working.
        async with watching(http, "/api/v1/pods", resourceVersion=str(rv_of(obj) - 3)) as stream:
            kept = await stream.take(3)
        assert [rv_of(e["object"]) for e in kept] == [rv_of(obj) - 2, rv_of(obj) - 1, rv_of(obj)]


# ---------------------------------------------------------------------------------- selectors


def owners(*uids: str) -> dict[str, Any]:
    refs = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": u, "uid": u} for u in uids]
    return {"metadata": {"ownerReferences": refs}}


@pytest.mark.parametrize(
    ("param", "selector", "inside", "outside", "still_outside", "back_inside"),
    [
        pytest.param(
            "fieldSelector",
            "spec.nodeName=node-1",
            {"spec": {"nodeName": "node-1"}},
            {"spec": {"nodeName": "node-2"}},
            {"spec": {"nodeName": "node-3"}},
            {"spec": {"nodeName": "node-1"}},
            id="field-on-an-index-path",
        ),
        pytest.param(
            "fieldSelector",
            "spec.nodeName=",
            {"spec": {"nodeName": None}},
            {"spec": {"nodeName": "node-1"}},
            {"spec": {"nodeName": "node-2"}},
            {"spec": {"nodeName": None}},
            id="field-on-an-index-path-absent-from-the-object",
        ),
        pytest.param(
            "fieldSelector",
            "status.phase=Running",
            {"status": {"phase": "Running"}},
            {"status": {"phase": "Failed"}},
            {"status": {"phase": "Succeeded"}},
            {"status": {"phase": "Running"}},
            id="field-without-an-index",
        ),
        pytest.param(
            "indexSelector",
            "spec.nodeName in (node-1,node-2)",
            {"spec": {"nodeName": "node-1"}},
            {"spec": {"nodeName": "node-3"}},
            {"spec": {"nodeName": "node-4"}},
            {"spec": {"nodeName": "node-2"}},
            id="index-selector-set",
        ),
        pytest.param(
            "fieldSelector",
            "metadata.ownerReferences[*].uid=owner-b",
            owners("owner-b"),
            owners("owner-a"),
            owners(),
            owners("owner-a", "owner-b"),
            id="field-on-a-multi-valued-index-path",
        ),
    ],
)
async def test_a_watch_with_a_field_or_index_selector_sees_objects_move_in_and_out(
    daemon: Daemon,
    http: httpx.AsyncClient,
    demo_sim: Simulator,
    param: str,
    selector: str,
    inside: dict[str, Any],
    outside: dict[str, Any],
    still_outside: dict[str, Any],
    back_inside: dict[str, Any],
) -> None:
    store, pods = demo_sim.store, demo_sim.resource("pods")

    def shaped(obj: Json, parts: dict[str, Any]) -> Json:
        """``obj`` with the given spec/status/metadata fields set (None: removed)."""
        spec = {**obj["spec"], **parts.get("spec", {})}
        status = {**obj["status"], **parts.get("status", {})}
        return changed(
            obj,
            spec={k: v for k, v in spec.items() if v is not None},
            status={k: v for k, v in status.items() if v is not None},
            metadata=parts.get("metadata", {}),
        )

    created = store.create(pods, shaped(pod("mover"), inside))
    await caught_up(daemon, PODS, rv_of(created))
    path = "/api/v1/namespaces/default/pods"
    async with watching(http, path, resourceVersion=str(rv_of(created)), **{param: selector}) as s:
        moved_out = store.update(pods, shaped(created, outside))
        still_out = store.update(pods, shaped(moved_out, still_outside))  # nothing to say
        moved_in = store.update(pods, shaped(still_out, back_inside))
        relabelled = store.update(pods, changed(moved_in, metadata={"labels": {"x": "y"}}))
        deleted = store.delete(pods, "default", "mover")
        events = await s.take(4)
    assert summary(events) == [
        ("DELETED", "mover", rv_of(moved_out)),
        ("ADDED", "mover", rv_of(moved_in)),
        ("MODIFIED", "mover", rv_of(relabelled)),
        ("DELETED", "mover", rv_of(deleted)),
    ]
    # Moving out is reported with the *old* object (still matching), at the event's RV.
    gone = events[0]["object"]
    assert gone["spec"].get("nodeName") == created["spec"].get("nodeName")
    assert gone["status"] == created["status"]
    assert gone["metadata"].get("ownerReferences") == created["metadata"].get("ownerReferences")


# ---------------------------------------------------------------------------------- bookmarks


def empty_pod(rv: int) -> Json:
    """A Pod bookmark's object, as the API server writes it (watch_bookmarks_ns1_app3.txt)."""
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": str(rv), "creationTimestamp": None},
        "spec": {"containers": None},
        "status": {},
    }


async def test_bookmarks_come_only_when_asked_as_empty_pods_at_the_cache_rv(
    demo_server: SimServer, demo_sim: Simulator
) -> None:
    # Faster than an operator may configure (at least 1 s): built without validation.
    limits = ServerLimits.model_construct(bookmark_interval_seconds=0.2)
    store, pods = demo_sim.store, demo_sim.resource("pods")
    async with (
        daemon_for(demo_server.url, limits=limits) as daemon,
        httpx.AsyncClient(base_url=daemon.url, timeout=GUARD) as http,
    ):
        start = str(cache_rv(daemon, PODS))
        path = "/api/v1/namespaces/default/pods"
        async with watching(
            http, path, resourceVersion=start, labelSelector="app=bm", allowWatchBookmarks="true"
        ) as stream:
            seen = store.create(pods, pod("seen", app="bm"))
            unseen = store.create(pods, pod("unseen", app="other"))
            last = store.update(pods, changed(unseen, metadata={"labels": {"app": "other2"}}))
            events: list[Json] = []
            while (
                not events
                or events[-1]["type"] != "BOOKMARK"
                or rv_of(events[-1]["object"]) < rv_of(last)
            ):
                event = await stream.next()
                assert event is not None
                events.append(event)
        changes = [e for e in events if e["type"] != "BOOKMARK"]
        bookmarks = [e["object"] for e in events if e["type"] == "BOOKMARK"]
        assert summary(changes) == [("ADDED", "seen", rv_of(seen))]
        assert all(b == empty_pod(rv_of(b)) for b in bookmarks)
        rvs = [rv_of(b) for b in bookmarks]
        assert rvs == sorted(rvs) and rvs[0] >= int(start)
        # A bookmark after an event never goes back before it …
        after_seen = events.index(changes[0])
        assert all(rv_of(e["object"]) >= rv_of(seen) for e in events[after_seen:])
        # … and carries the cache's RV, past events this watcher never saw.
        assert rvs[-1] == rv_of(last)

        began = time.monotonic()
        quiet_rv = str(rv_of(last))
        async with watching(http, path, resourceVersion=quiet_rv, timeoutSeconds="1") as quiet:
            unasked = await quiet.rest()
        assert time.monotonic() - began >= 1.0  # five bookmark intervals passed …
        assert unasked == []  # … and no bookmark was sent unasked


@pytest.mark.parametrize("rv", ["unset", "fresh"])
async def test_a_watch_list_sends_the_state_then_one_end_bookmark_then_later_events(
    daemon: Daemon, http: httpx.AsyncClient, demo_sim: Simulator, rv: str
) -> None:
    store, pods = demo_sim.store, demo_sim.resource("pods")
    fresh = store.create(pods, pod("fresh") | {"metadata": {"name": "fresh", "namespace": "ns-1"}})
    params = {
        "sendInitialEvents": "true",
        "resourceVersionMatch": "NotOlderThan",
        "allowWatchBookmarks": "true",
    }
    if rv == "fresh":
        params["resourceVersion"] = str(rv_of(fresh))  # the daemon may not have it yet: it waits
    else:
        await caught_up(daemon, PODS, rv_of(fresh))
    async with watching(http, "/api/v1/namespaces/ns-1/pods", **params) as stream:
        initial: list[Json] = []
        while (event := await stream.next()) is not None and event["type"] == "ADDED":
            initial.append(event)
        assert event is not None and event["type"] == "BOOKMARK"
        end = event["object"]
        later = store.update(pods, changed(fresh, metadata={"labels": {"later": "yes"}}))
        after = await stream.take(1)
    bookmark_rv = rv_of(end)
    assert bookmark_rv >= rv_of(fresh)
    marked = empty_pod(bookmark_rv)
    marked["metadata"]["annotations"] = end_annotations(POD_LIST_BLUEPRINT)
    assert end == marked
    # The initial events are exactly the state at the bookmark's RV, in key order.
    at_bookmark = sorted(
        (k, o.rv) for k, o in store.snapshot(pods, bookmark_rv).items() if k.startswith("ns-1/")
    )
    assert [
        (f"ns-1/{e['object']['metadata']['name']}", rv_of(e["object"])) for e in initial
    ] == at_bookmark
    assert summary(after) == [("MODIFIED", "fresh", rv_of(later))]
    assert rv_of(later) > bookmark_rv


# ---------------------------------------------------------------------------------- shapes


async def test_timeout_seconds_ends_the_stream_without_a_final_event(
    daemon: Daemon, http: httpx.AsyncClient
) -> None:
    began = time.monotonic()
    path = "/api/v1/namespaces/default/configmaps"
    rv = str(cache_rv(daemon, CONFIGMAPS))
    async with watching(http, path, resourceVersion=rv, timeoutSeconds="1") as stream:
        events = await stream.rest()
    assert events == []
    assert time.monotonic() - began >= 1.0


async def test_a_named_watch_sees_only_that_object(
    daemon: Daemon, http: httpx.AsyncClient, demo_sim: Simulator
) -> None:
    store, pods = demo_sim.store, demo_sim.resource("pods")
    solo = store.create(pods, pod("solo"))
    other = store.create(pods, pod("other"))
    await caught_up(daemon, PODS, rv_of(other))
    async with watching(http, "/api/v1/watch/namespaces/default/pods/solo") as stream:
        store.update(pods, changed(other, metadata={"labels": {"n": "1"}}))
        modified = store.update(pods, changed(solo, metadata={"labels": {"n": "1"}}))
        store.delete(pods, "default", "other")
        deleted = store.delete(pods, "default", "solo")
        events = await stream.take(3)
    assert summary(events) == [
        ("ADDED", "solo", rv_of(solo)),
        ("MODIFIED", "solo", rv_of(modified)),
        ("DELETED", "solo", rv_of(deleted)),
    ]
    conflicting = await http.get(
        "/api/v1/watch/namespaces/default/pods/solo",
        params={"fieldSelector": "metadata.name=other"},
    )
    assert conflicting.status_code == 400
    assert (
        conflicting.json()["message"] == "fieldSelector metadata.name doesn't match requested name"
    )


# ---------------------------------------------------------------------------------- slow clients


async def _read_chunked_events(sock: socket.socket) -> list[Json]:
    """Everything the server wrote on ``sock``, up to the end of the chunked body."""
    loop = asyncio.get_running_loop()
    data = b""
    while not data.endswith(b"\r\n0\r\n\r\n"):
        chunk = await asyncio.wait_for(loop.sock_recv(sock, 1 << 20), GUARD)
        assert chunk, "the connection closed before the end of the body"
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    body = b""
    while True:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            break
        body, rest = body + rest[:size], rest[size + 2 :]
    return [orjson.loads(line) for line in body.splitlines() if line]


async def test_a_stalled_client_is_evicted_while_a_hundred_others_get_every_event(
    demo_server: SimServer, demo_sim: Simulator
) -> None:
    resources = (ResourceConfig(rtype=CONFIGMAPS),)
    limits = ServerLimits(watch_buffer=4)
    store, cms = demo_sim.store, demo_sim.resource("configmaps")
    async with (
        daemon_for(demo_server.url, resources=resources, limits=limits) as daemon,
        httpx.AsyncClient(
            base_url=daemon.url, timeout=GUARD, limits=httpx.Limits(max_connections=128)
        ) as http,
    ):
        assert daemon.server is not None
        hub = daemon.server.hubs[CONFIGMAPS]
        rv = cache_rv(daemon, CONFIGMAPS)
        path = f"/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={rv}"
        received: list[list[tuple[str, str, int]]] = [[] for _ in range(100)]

        async def read(i: int) -> None:
            async with http.stream("GET", path) as response:
                async for line in response.aiter_lines():
                    event = orjson.loads(line)
                    received[i].extend(summary([event]))
                    if event["object"]["metadata"]["name"] == "end":
                        return

        readers = [asyncio.create_task(read(i), name=f"reader-{i}") for i in range(100)]
        stalled = await raw_watch(daemon.port, path)
        try:
            await until(lambda: len(hub.watchers) == 101, "101 watchers are registered")
            written: list[tuple[str, str, int]] = []

            def wrote(event_type: str, obj: Json) -> None:
                written.append((event_type, obj["metadata"]["name"], rv_of(obj)))

            ballast = "x" * 65536  # big events fill the stalled client's socket buffers fast
            while not hub.evicted:
                assert len(written) < 300, "the stalled client was never evicted"
                name = f"big-{len(written)}"
                wrote(
                    "ADDED", store.create(cms, {"metadata": {"name": name}, "data": {"b": ballast}})
                )
                # Every reader keeps up: only the stalled client can fall behind.
                await until(
                    lambda: all(len(r) == len(written) for r in received), "readers keep up"
                )
            first = store.create(cms, {"metadata": {"name": "after"}})
            wrote("ADDED", first)
            wrote("MODIFIED", store.update(cms, changed(first, data={"a": "1"})))
            wrote("DELETED", store.delete(cms, "default", "big-0"))
            wrote("ADDED", store.create(cms, {"metadata": {"name": "end"}}))
            await asyncio.wait_for(asyncio.gather(*readers), GUARD)
            assert all(r == written for r in received)
            assert hub.evicted == 1
            # The readers left; the evicted watcher had already been dropped.
            await until(lambda: not hub.watchers, "every watcher is gone")
            # The evicted client, once it reads, finds a prefix of the events and a clean end.
            prefix = summary(await _read_chunked_events(stalled))
            assert 0 < len(prefix) < len(written) and prefix == written[: len(prefix)]
        finally:
            stalled.close()
            for task in readers:
                task.cancel()
            await asyncio.gather(*readers, return_exceptions=True)


async def test_a_client_that_takes_nothing_is_dropped_after_the_stall_budget(
    demo_server: SimServer, demo_sim: Simulator
) -> None:
    # Small events and a roomy buffer: the buffer never fills, only the time budget can act.
    resources = (ResourceConfig(rtype=CONFIGMAPS),)
    limits = ServerLimits(watch_buffer=1_000_000, watch_stall_seconds=0.3)
    store, cms = demo_sim.store, demo_sim.resource("configmaps")
    async with daemon_for(demo_server.url, resources=resources, limits=limits) as daemon:
        assert daemon.server is not None
        hub = daemon.server.hubs[CONFIGMAPS]
        rv = cache_rv(daemon, CONFIGMAPS)
        stalled = await raw_watch(
            daemon.port, f"/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={rv}"
        )
        try:
            await until(lambda: len(hub.watchers) == 1, "the watcher is registered")
            ballast = "x" * 4096
            for i in range(5000):
                if hub.evicted:
                    break
                store.create(cms, {"metadata": {"name": f"c-{i}"}, "data": {"b": ballast}})
                await asyncio.sleep(0.002 if i % 50 == 0 else 0)
            await until(lambda: hub.evicted == 1, "the stalled client is dropped")
            assert not hub.watchers
            # Its connection is gone: reading finds what the kernel held, then the end.
            loop = asyncio.get_running_loop()
            with contextlib.suppress(ConnectionResetError):
                while await asyncio.wait_for(loop.sock_recv(stalled, 1 << 20), GUARD):
                    pass
        finally:
            stalled.close()


async def test_clients_that_go_away_are_not_counted_as_evicted(
    daemon: Daemon, http: httpx.AsyncClient, demo_sim: Simulator
) -> None:
    assert daemon.server is not None
    hub = daemon.server.hubs[PODS]
    churn = ChurnDriver(
        demo_sim.store,
        rate=2000,
        rng=random.Random(5),
        namespaces=["ns-0"],
        nodes=["node-1"],
        apps=["app-1"],
        max_pods=100,
    )
    writing = asyncio.create_task(churn.run(), name="churn")
    try:

        async def read_two_then_leave() -> None:
            rv = str(cache_rv(daemon, PODS))
            async with watching(http, "/api/v1/pods", resourceVersion=rv) as stream:
                await stream.take(2)

        for _ in range(3):
            await asyncio.gather(*(read_two_then_leave() for _ in range(20)))
    finally:
        writing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await writing
    await until(lambda: not hub.watchers, "every watcher is gone")
    assert hub.delivered >= 120
    assert hub.evicted == 0


# ---------------------------------------------------------------------------------- relists


def apply_events(state: dict[str, int], events: list[Json]) -> dict[str, int]:
    """A client's view: name → RV, after applying watch events in order."""
    for event in events:
        meta = event["object"]["metadata"]
        if event["type"] in ("ADDED", "MODIFIED"):
            state[f"{meta.get('namespace', '')}/{meta['name']}"] = rv_of(event["object"])
        elif event["type"] == "DELETED":
            state.pop(f"{meta.get('namespace', '')}/{meta['name']}", None)
    return state


@pytest.mark.parametrize("cause", ["watch-410", "compaction"])
async def test_watchers_survive_an_upstream_relist_and_end_with_upstreams_state(
    demo_server: SimServer, demo_sim: Simulator, cause: str
) -> None:
    """Beyond the API server (which closes every watcher when its cache reinitialises): after an
    upstream relist the connected watchers get the difference as events — ADDED/MODIFIED in RV
    order, vanished objects DELETED at the relist's RV — then a bookmark at it, and end with
    exactly upstream's state, without a 410 or a relist of their own."""
    store, pods, cms = demo_sim.store, demo_sim.resource("pods"), demo_sim.resource("configmaps")
    async with (
        daemon_for(demo_server.url, resources=(ResourceConfig(rtype=PODS),)) as daemon,
        httpx.AsyncClient(base_url=daemon.url, timeout=GUARD) as http,
    ):
        assert daemon.server is not None
        informer = daemon.server.resources[PODS].informer
        hub = daemon.server.hubs[PODS]
        keep = store.create(pods, pod("keep", app="app-1"))
        store.create(pods, pod("doomed", app="app-1"))
        leaving = store.create(pods, pod("leaving", app="app-1"))
        await caught_up(daemon, PODS, rv_of(leaving))
        start = cache_rv(daemon, PODS)
        listed = (await http.get("/api/v1/pods")).json()
        state = {f"{o['metadata']['namespace']}/{o['metadata']['name']}": rv_of(o) for o in listed["items"]}  # fmt: skip
        selected = {k: v for k, v in state.items() if k.split("/")[1] in ("keep", "doomed", "leaving")}  # fmt: skip
        relists = informer.relists
        async with contextlib.AsyncExitStack() as stack:
            everything = await stack.enter_async_context(
                watching(
                    http,
                    "/api/v1/pods",
                    resourceVersion=listed["metadata"]["resourceVersion"],
                    allowWatchBookmarks="true",
                )
            )
            by_label = await stack.enter_async_context(
                watching(
                    http, "/api/v1/pods", labelSelector="app=app-1", resourceVersion=str(start)
                )
            )
            await until(lambda: len(hub.watchers) == 2, "both watches are registered")
            # The daemon stops hearing from upstream (a silent watch) while pods change...
            demo_sim.faults.next_watch_stream("silent")
            demo_sim.end_watches()
            await until(lambda: informer.reflector.phase.value == "watching", "the silent watch")
            await asyncio.sleep(0.1)
            store.delete(pods, "default", "doomed")
            moved = store.update(pods, changed(keep, metadata={"labels": {"app": "app-2"}}))
            store.update(pods, changed(leaving, status={"phase": "Succeeded"}))
            created = store.create(pods, pod("arrived", app="app-1"))
            # ...then its watch breaks in a way only a relist repairs.
            if cause == "watch-410":
                demo_sim.faults.fail_next("watch", 410)
            else:
                store.create(cms, {"metadata": {"name": "unseen-by-pods"}})
                demo_sim.compact()
            demo_sim.end_watches()
            await until(lambda: informer.relists == relists + 1, "the daemon relisted")
            relist_rv = cache_rv(daemon, PODS)
            events: list[Json] = []
            while not (events and events[-1]["type"] == "BOOKMARK"):
                event = await everything.next()
                assert event is not None, f"the watch was closed after {events}"
                events.append(event)
            selected_events = await by_label.take(4)
            assert len(hub.watchers) == 2  # still connected
        assert all(e["type"] != "ERROR" for e in events + selected_events)
        upstream = {
            f"{o['metadata']['namespace']}/{o['metadata']['name']}": rv_of(o)
            for o in (store.get(pods, ns, name) for ns, name in store.names(pods))
            if o is not None
        }
        assert apply_events(dict(state), events[:-1]) == upstream
        assert rv_of(events[-1]["object"]) == relist_rv
        rvs = [rv_of(e["object"]) for e in events[:-1]]
        assert rvs == sorted(set(rvs))  # one event per RV, ascending
        assert start < rvs[0] and rvs[-1] <= relist_rv
        deleted = [e for e in events if e["type"] == "DELETED"]
        assert [e["object"]["metadata"]["name"] for e in deleted] == ["doomed"]
        # The label watch: "keep" left the selector, "doomed" vanished, "arrived" came in.
        assert sorted((e["type"], e["object"]["metadata"]["name"]) for e in selected_events) == [
            ("ADDED", "arrived"),
            ("DELETED", "doomed"),
            ("DELETED", "keep"),
            ("MODIFIED", "leaving"),
        ]
        expected = {k: v for k, v in upstream.items() if k.split("/")[1] in ("leaving", "arrived")}
        assert apply_events(dict(selected), selected_events) == expected
        assert rv_of(created) <= relist_rv and rv_of(moved) <= relist_rv
        assert informer.relists == relists + 1
        # The event log restarted at the relist: older resumes are 410, newer ones work.
        async with watching(http, "/api/v1/pods", resourceVersion=str(start)) as stream:
            too_old = await stream.rest()
        assert [(e["type"], e["object"]["code"]) for e in too_old] == [("ERROR", 410)]
        async with watching(http, "/api/v1/pods", resourceVersion=str(relist_rv)) as stream:
            new = store.create(pods, pod("after-relist"))
            resumed = await stream.take(1)
        assert summary(resumed) == [("ADDED", "after-relist", rv_of(new))]


# ---------------------------------------------------------------------------------- readiness


async def test_before_the_first_sync_lists_and_watches_are_429_with_retry_after(
    demo_server: SimServer, demo_sim: Simulator
) -> None:
    demo_sim.faults.fail_next("any", 500, count=10_000)  # the daemon cannot sync
    config = DaemonConfig(resources=default_resources(), server=ServerSettings(port=0))
    daemon = Daemon(config, UpstreamConfig(server=demo_server.url), manage_gc=False)
    async with daemon, httpx.AsyncClient(base_url=daemon.url, timeout=GUARD) as http:
        for path in ("/api/v1/pods", "/api/v1/pods?watch=1", "/apis/apps/v1/deployments?watch=1"):
            r = await http.get(path)
            assert r.status_code == 429, path
            assert r.headers["retry-after"] == "1"
            body = r.json()
            assert (body["reason"], body["details"]["retryAfterSeconds"]) == ("TooManyRequests", 1)
        assert (await http.get("/readyz")).status_code == 503
        assert demo_sim.faults.injected > 0
        demo_sim.faults.clear()
        assert await daemon.wait_ready(GUARD), "the daemon never synced once the faults stopped"
        assert (await http.get("/api/v1/pods")).status_code == 200
        assert (await http.get("/readyz")).status_code == 200


# ---------------------------------------------------------------------------------- RV rules


@pytest.fixture
async def slow_rv_daemon(demo_server: SimServer) -> AsyncIterator[Daemon]:
    async with daemon_for(demo_server.url, limits=ServerLimits(rv_wait_seconds=0.5)) as d:
        yield d


def _read_path(verb: str, name: str) -> tuple[str, dict[str, str]]:
    if verb == "get":
        return f"/api/v1/namespaces/default/pods/{name}", {}
    if verb == "watch":
        return "/api/v1/namespaces/default/pods", {"watch": "1"}
    return "/api/v1/namespaces/default/pods", {}


@pytest.mark.parametrize("verb", ["list", "get"])
async def test_a_future_rv_waits_then_is_504_resource_version_too_large(
    slow_rv_daemon: Daemon, demo_sim: Simulator, verb: str
) -> None:
    pods = demo_sim.resource("pods")
    existing = demo_sim.store.create(pods, pod("existing"))
    await caught_up(slow_rv_daemon, PODS, rv_of(existing))
    future = demo_sim.store.rv + 5
    path, params = _read_path(verb, "existing")
    async with httpx.AsyncClient(base_url=slow_rv_daemon.url, timeout=GUARD) as http:
        began = time.monotonic()
        r = await http.get(path, params={**params, "resourceVersion": str(future)})
    assert time.monotonic() - began >= 0.5  # it waited rv_wait_seconds first
    assert r.status_code == 504
    assert r.headers["retry-after"] == "1"
    body = r.json()
    assert body["reason"] == "Timeout"
    assert body["message"] == (
        f"Timeout: Too large resource version: {future}, current: {rv_of(existing)}"
    )
    assert body["details"]["causes"] == [
        {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
    ]


@pytest.mark.parametrize("verb", ["list", "get"])
async def test_a_future_rv_reached_during_the_wait_is_served(
    slow_rv_daemon: Daemon, demo_sim: Simulator, verb: str
) -> None:
    pods = demo_sim.resource("pods")
    awaited = demo_sim.store.rv + 1
    path, params = _read_path(verb, "arriving")
    async with httpx.AsyncClient(base_url=slow_rv_daemon.url, timeout=GUARD) as http:
        request = asyncio.create_task(
            http.get(path, params={**params, "resourceVersion": str(awaited)})
        )
        await asyncio.sleep(0.2)
        assert not request.done(), "the read should wait for its RV"
        arrived = demo_sim.store.create(pods, pod("arriving"))
        r = await request
    assert rv_of(arrived) == awaited
    assert r.status_code == 200
    body = r.json()
    if verb == "get":
        assert rv_of(body) == awaited
    else:
        assert int(body["metadata"]["resourceVersion"]) >= awaited
        assert [i["metadata"]["name"] for i in body["items"]] == ["arriving"]


async def test_a_watch_from_a_future_rv_waits_for_the_events_after_it(
    slow_rv_daemon: Daemon, demo_sim: Simulator
) -> None:
    # The API server's watch cache: no timeout, no 504; events up to the RV are skipped, the
    # ones after it delivered (a client resuming on a replica that is behind loses nothing).
    pods = demo_sim.resource("pods")
    future = demo_sim.store.rv + 3
    async with (
        httpx.AsyncClient(base_url=slow_rv_daemon.url, timeout=GUARD) as http,
        http.stream(
            "GET",
            "/api/v1/namespaces/default/pods",
            params={"watch": "1", "resourceVersion": str(future), "allowWatchBookmarks": "true"},
        ) as response,
    ):
        assert response.status_code == 200
        created = [demo_sim.store.create(pods, pod(f"later-{i}")) for i in range(6)]
        assert [rv_of(p) for p in created] == list(range(future - 2, future + 4))
        lines = response.aiter_lines()
        events = [orjson.loads(await anext(lines)) for _ in range(3)]
    assert summary(events) == [("ADDED", f"later-{i}", future + i - 2) for i in range(3, 6)]


def _keys_and_rvs(body: dict[str, Any]) -> list[tuple[str, str, int]]:
    return [(i["metadata"]["namespace"], i["metadata"]["name"], rv_of(i)) for i in body["items"]]


async def test_an_exact_list_at_an_rv_in_the_event_log_is_the_state_at_that_rv(
    daemon: Daemon, http: httpx.AsyncClient, demo_server: SimServer, demo_sim: Simulator
) -> None:
    exact_rv = cache_rv(daemon, PODS)
    churn = ChurnDriver(
        demo_sim.store,
        rate=0,
        rng=random.Random(7),
        namespaces=["ns-0", "ns-1", "ns-2"],
        nodes=[f"node-{i}" for i in range(5)],
        apps=[f"app-{i}" for i in range(4)],
    )
    done = churn.step(60)
    assert done.created and done.updated and done.deleted
    await caught_up(daemon, PODS, demo_sim.store.rv)
    queries = [
        ("/api/v1/pods", {}),
        ("/api/v1/namespaces/ns-1/pods", {"labelSelector": "app in (app-1,app-2)"}),
        ("/api/v1/pods", {"fieldSelector": "spec.nodeName=node-2"}),
        ("/api/v1/pods", {"fieldSelector": "status.phase!=Running"}),
    ]
    exact = {"resourceVersion": str(exact_rv), "resourceVersionMatch": "Exact"}
    async with httpx.AsyncClient(base_url=demo_server.url, timeout=GUARD) as upstream:
        for path, params in queries:
            mine = await http.get(path, params={**params, **exact})
            theirs = await upstream.get(path, params={**params, **exact})
            assert mine.status_code == theirs.status_code == 200
            assert int(mine.json()["metadata"]["resourceVersion"]) == exact_rv
            assert _keys_and_rvs(mine.json()) == _keys_and_rvs(theirs.json()), (path, params)
        current = (await http.get("/api/v1/pods")).json()
        then = (await http.get("/api/v1/pods", params=exact)).json()
        assert _keys_and_rvs(current) != _keys_and_rvs(then), "the churn should have changed pods"
        # Paging at the exact RV walks that same snapshot.
        walked: list[tuple[str, str, int]] = []
        params = {"limit": "7", **exact}
        while True:
            page = (await http.get("/api/v1/pods", params=params)).json()
            assert int(page["metadata"]["resourceVersion"]) == exact_rv
            walked += _keys_and_rvs(page)
            if not page["metadata"].get("continue"):
                break
            params = {"limit": "7", "continue": page["metadata"]["continue"]}
        assert walked == _keys_and_rvs(then)
