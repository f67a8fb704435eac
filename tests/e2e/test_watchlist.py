"""Watch-lists (KEP-3157, ``sendInitialEvents``) against a real API server with the ``WatchList``
feature gate: the daemon's own first sync cannot hang on a server that sends the end bookmark
late (1.27-1.30 send it only after the next write to the resource), and watch-lists served by
the daemon give what the API server gives.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from cacheproxy.daemon.runtime import Daemon
from cacheproxy.envtest import Cluster
from cacheproxy.informer import Phase, Reflector
from cacheproxy.informer.reflector import Watching
from tests.e2e.support import converged, create, daemon_over, fresh_namespace, upstream_requests
from tests.e2e.watch_support import GUARD, watching
from tests.support import POD_LIST_BLUEPRINT, end_annotations

pytestmark = pytest.mark.every_server

END = "k8s.io/initial-events-end"
WATCH_LIST = {
    "sendInitialEvents": "true",
    "resourceVersionMatch": "NotOlderThan",
    "allowWatchBookmarks": "true",
}


@pytest.fixture
async def wl_upstream(watchlist_cluster: Cluster) -> AsyncIterator[httpx.AsyncClient]:
    async with watchlist_cluster.async_client() as c:
        yield c


@pytest.fixture
async def wl_daemon(watchlist_cluster: Cluster, tmp_path: Path) -> AsyncIterator[Daemon]:
    """The daemon over the WatchList server, giving a late end bookmark up after 1 s."""
    extra = {"upstream.watchListTimeoutSeconds": 1}
    async with daemon_over(watchlist_cluster, tmp_path, extra=extra) as d:
        yield d


@pytest.fixture
async def wl_proxy(wl_daemon: Daemon) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=wl_daemon.url, timeout=30) as c:
        yield c


async def test_the_first_sync_is_by_watch_list_unless_its_end_bookmark_comes_late(
    watchlist_cluster: Cluster, tmp_path: Path
) -> None:
    # The default configuration (watch-list first, 10 s for the end bookmark) on a quiet cluster.
    async with daemon_over(watchlist_cluster, tmp_path, ready_within=60) as daemon:
        assert daemon.factory is not None
        reflectors = {i.reflector.name: i.reflector for i in daemon.factory}
        assert all(r.phase is Phase.WATCHING for r in reflectors.values())
        if watchlist_cluster.assets.minor < (1, 32):
            # 1.28 sends the end bookmark of a quiet resource only after its next write: every
            # resource gave it up (ready once the fallback lists were done, not when the server
            # ended the watch 5-10 min later) and lists from now on.
            assert not any(_syncs_by_watch_list(r) for r in reflectors.values())
        else:
            # 1.32 ends the initial events at once (its cache asks etcd for progress), events
            # (no watch cache) included: every resource synced by watch-list, and keeps it.
            assert all(_syncs_by_watch_list(r) for r in reflectors.values())
            assert set(upstream_requests(daemon, "watch-list")) == set(reflectors)
            assert upstream_requests(daemon, "list") == {}


async def test_a_resource_that_gets_its_end_bookmark_keeps_the_watch_list(
    watchlist_cluster: Cluster, wl_upstream: httpx.AsyncClient, tmp_path: Path
) -> None:
    ns = await fresh_namespace(wl_upstream)
    path = f"/api/v1/namespaces/{ns}/configmaps"
    extra = {"upstream.watchListTimeoutSeconds": 30}
    writes = asyncio.create_task(_keep_writing(wl_upstream, path), name="writes")
    try:
        async with daemon_over(
            watchlist_cluster, tmp_path, resources=["configmaps"], extra=extra
        ) as daemon:
            assert daemon.factory is not None
            [informer] = list(daemon.factory)
            reflector = informer.reflector
            assert _syncs_by_watch_list(reflector), "synced by watch-list, not by the fallback"
    finally:
        writes.cancel()
        await asyncio.gather(writes, return_exceptions=True)


def _syncs_by_watch_list(reflector: Reflector) -> bool:
    """Whether a watching reflector's next (re)sync tries a watch-list first."""
    state = reflector.state
    assert isinstance(state, Watching), state
    return state.server.watch_list


async def _keep_writing(upstream: httpx.AsyncClient, path: str) -> None:
    for i in range(10_000):
        await create(upstream, path, {"metadata": {"name": f"w{i}"}})
        await asyncio.sleep(0.2)


@pytest.mark.also_on(
    "1.32"
)  # 1.32's end bookmark carries the list blueprint, 1.28's and 1.36's not
async def test_a_watch_list_served_by_the_daemon_has_the_api_servers_initial_events(
    watchlist_cluster: Cluster, wl_upstream: httpx.AsyncClient, wl_proxy: httpx.AsyncClient
) -> None:
    path = "/api/v1/namespaces/ns-1/pods"
    listed, _ = await converged(wl_upstream, wl_proxy, path)
    async with (
        watching(wl_proxy, path, WATCH_LIST) as down,
        watching(wl_upstream, path, WATCH_LIST) as up,
    ):
        for watch in (up, down):
            await watch.wait_for(lambda e: len(e) >= len(listed["items"]), "the initial events")
        # The daemon sends the end bookmark at once, as current API servers do (1.28 waits for
        # the next write to the resource).
        await down.wait_for(lambda e: any(x["type"] == "BOOKMARK" for x in e), "the bookmark")
    initial = len(listed["items"])
    assert sorted(down.changes()[:initial]) == sorted(up.changes()[:initial])
    assert {t for t, _, _ in down.changes()} == {"ADDED"}
    bookmark = down.events[initial]
    assert bookmark["type"] == "BOOKMARK"
    # As the API server annotates it: 1.32 and 1.33 with the list's blueprint.
    blueprint = POD_LIST_BLUEPRINT if (1, 32) <= watchlist_cluster.assets.minor < (1, 34) else None
    assert bookmark["object"]["metadata"]["annotations"] == end_annotations(blueprint)
    items_rv = max(int(rv) for _, _, rv in down.changes())
    assert int(bookmark["object"]["metadata"]["resourceVersion"]) >= items_rv


@pytest.mark.parametrize("rv", ["", "0", "N"], ids=["rv-unset", "rv-0", "rv-N"])
async def test_both_keep_the_watch_list_protocol_across_a_write_during_it(
    wl_upstream: httpx.AsyncClient, wl_proxy: httpx.AsyncClient, rv: str
) -> None:
    # Where the end bookmark falls differs (1.28 sends it at its next bookmark tick, the daemon
    # and 1.32 at once); the protocol both keep: initial ADDED events, one annotated bookmark not
    # older than them (annotated alike), then only newer events — and together, every write.
    ns = await fresh_namespace(wl_upstream)
    path = f"/api/v1/namespaces/{ns}/configmaps"
    made = await create(wl_upstream, path, {"metadata": {"name": "before"}})
    await converged(wl_upstream, wl_proxy, path)
    params = dict(WATCH_LIST)
    if rv:
        params["resourceVersion"] = made["metadata"]["resourceVersion"] if rv == "N" else rv

    def ended(events: list[dict[str, Any]]) -> bool:
        return any(_is_end(e) for e in events) and any(_name(e) == "after" for e in events)

    async with (
        watching(wl_proxy, path, params) as down,
        watching(wl_upstream, path, params) as up,
    ):
        for watch in (up, down):
            await watch.wait_named("before")
        await create(wl_upstream, path, {"metadata": {"name": "after"}})
        for watch in (up, down):
            await watch.wait_for(ended, "the end bookmark and the write")
    annotations = []
    for watch in (up, down):
        [end] = [i for i, e in enumerate(watch.events) if _is_end(e)]
        initial, rest = watch.events[:end], watch.events[end + 1 :]
        end_rv = _rv(watch.events[end])
        annotations.append(watch.events[end]["object"]["metadata"]["annotations"])
        assert all(e["type"] == "ADDED" and _rv(e) <= end_rv for e in initial)
        assert all(_rv(e) > end_rv for e in rest if e["type"] != "BOOKMARK")
        assert {_name(e) for e in initial + rest if e["type"] != "BOOKMARK"} == {"before", "after"}
        assert "before" in {_name(e) for e in initial}  # the state it started from
    assert annotations[1] == annotations[0]


def _is_end(event: dict[str, Any]) -> bool:
    annotations = event["object"]["metadata"].get("annotations") or {}
    return bool(event["type"] == "BOOKMARK" and annotations.get(END) == "true")


def _name(event: dict[str, Any]) -> str:
    return str(event["object"]["metadata"].get("name", ""))


def _rv(event: dict[str, Any]) -> int:
    return int(event["object"]["metadata"]["resourceVersion"])


async def test_a_watch_list_without_resource_version_match_is_refused_as_by_the_api_server(
    wl_upstream: httpx.AsyncClient, wl_proxy: httpx.AsyncClient
) -> None:
    params = {"watch": "1", "sendInitialEvents": "true"}
    up = await wl_upstream.get("/api/v1/pods", params=params)
    down = await wl_proxy.get("/api/v1/pods", params=params)
    assert down.status_code == up.status_code == 422
    assert down.json() == up.json()


async def test_initial_events_without_bookmarks_have_no_end_bookmark(
    wl_upstream: httpx.AsyncClient, wl_proxy: httpx.AsyncClient
) -> None:
    # The API server's rule: the end bookmark needs allowWatchBookmarks=true as well.
    path = "/api/v1/namespaces/ns-2/configmaps"
    listed, _ = await converged(wl_upstream, wl_proxy, path)
    params = {"sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan"}
    params["timeoutSeconds"] = "2"
    async with watching(wl_proxy, path, params) as down, watching(wl_upstream, path, params) as up:
        for watch in (up, down):
            await asyncio.wait_for(watch.ended.wait(), GUARD)
    assert sorted(down.changes()) == sorted(up.changes())
    assert len(down.events) == len(listed["items"])
