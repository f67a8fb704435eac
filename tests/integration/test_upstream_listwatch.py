"""ApiListerWatcher, list_all and get_version against the simulator on a loopback port."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from cacheproxy import __version__
from cacheproxy.errors import ApiError, TransportError
from cacheproxy.informer import (
    Collection,
    ListerWatcher,
    ListRequest,
    SharedInformerFactory,
    WatchEvent,
    WatchRequest,
)
from cacheproxy.kube.resources import builtin
from cacheproxy.sim import SimConfig, SimServer, Simulator
from cacheproxy.upstream import (
    ApiListerWatcher,
    UpstreamConfig,
    build_client,
    get_version,
    list_all,
    lister_watchers,
)
from tests.support import until

CONFIGMAPS = builtin("configmaps")
PODS = builtin("pods")
BULK = 1200


class Recorder:
    """The requests a client sent, as the server saw their paths and queries."""

    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []

    async def __call__(self, request: httpx.Request) -> None:
        self.requests.append(request)

    def params(self) -> list[dict[str, str]]:
        return [dict(r.url.params) for r in self.requests]


@pytest.fixture
async def upstream(demo_server: SimServer) -> AsyncIterator[httpx.AsyncClient]:
    async with build_client(UpstreamConfig(server=demo_server.url)) as client:
        yield client


@pytest.fixture
def recorder(upstream: httpx.AsyncClient) -> Recorder:
    rec = Recorder()
    upstream.event_hooks["request"].append(rec)
    return rec


def _bulk_configmaps(sim: Simulator, count: int = BULK) -> None:
    sim.load([("namespaces", {"metadata": {"name": "bulk"}})])
    sim.load(
        (
            "configmaps",
            {"metadata": {"name": f"cm-{i:05d}", "namespace": "bulk"}, "data": {"i": "x"}},
        )
        for i in range(count)
    )


async def _collect(
    events: AsyncIterator[WatchEvent], *, until: Callable[[WatchEvent], bool]
) -> list[WatchEvent]:
    seen: list[WatchEvent] = []
    async with asyncio.timeout(10):
        async for event in events:
            seen.append(event)
            if until(event):
                break
    return seen


async def _take(events: AsyncIterator[WatchEvent], count: int) -> list[WatchEvent]:
    counted = iter(range(1, count + 1))
    return await _collect(events, until=lambda _: next(counted) == count)


async def _watch_to_the_end(lw: ApiListerWatcher, request: WatchRequest) -> list[WatchEvent]:
    async with lw.watch(request) as events:
        return await _collect(events, until=lambda _: False)


# ---------------------------------------------------------------------------- list


async def test_a_list_page_carries_items_resource_version_and_continue_token(
    upstream: httpx.AsyncClient, demo_sim: Simulator
) -> None:
    lw = ApiListerWatcher(upstream, PODS, namespace="ns-1")
    page = await lw.list(ListRequest(limit=2))
    assert [p["metadata"]["namespace"] for p in page.items] == ["ns-1", "ns-1"]
    assert page.resource_version == str(demo_sim.store.rv)
    assert page.continue_token
    rest = await lw.list(ListRequest(limit=100, continue_token=page.continue_token))
    assert rest.continue_token == ""
    names = [p["metadata"]["name"] for p in page.items + rest.items]
    assert len(names) == 20 == len(set(names))


async def test_list_all_follows_continue_in_pages_of_500(
    upstream: httpx.AsyncClient, demo_sim: Simulator, recorder: Recorder
) -> None:
    _bulk_configmaps(demo_sim)
    before = demo_sim.requests["list"]
    lw: ListerWatcher = ApiListerWatcher(upstream, CONFIGMAPS, namespace="bulk")
    result = await list_all(lw, resource_version="0")

    names = [item["metadata"]["name"] for item in result.items]
    assert names == [f"cm-{i:05d}" for i in range(BULK)]
    assert result.resource_version == str(demo_sim.store.rv)
    assert result.continue_token == ""
    assert demo_sim.requests["list"] - before == 3
    params = recorder.params()
    assert [p.get("limit") for p in params] == ["500", "500", "500"]
    # The first page names the RV; later pages may not (RV + continue is a 400).
    assert params[0].get("resourceVersion") == "0" and "continue" not in params[0]
    assert all("continue" in p and "resourceVersion" not in p for p in params[1:])
    assert all(r.url.path == "/api/v1/namespaces/bulk/configmaps" for r in recorder.requests)


async def test_list_all_lists_once_in_full_at_the_same_rv_when_a_continue_token_expires(
    upstream: httpx.AsyncClient, demo_sim: Simulator, recorder: Recorder
) -> None:
    _bulk_configmaps(demo_sim)
    rv = str(demo_sim.store.rv)

    async def compact_after_first_page(response: httpx.Response) -> None:
        if len(recorder.requests) == 1:
            # A write, then compaction: the first page's snapshot is gone (410 on page 2).
            demo_sim.load([("configmaps", {"metadata": {"name": "late", "namespace": "bulk"}})])
            demo_sim.compact()

    upstream.event_hooks["response"].append(compact_after_first_page)
    result = await list_all(
        ApiListerWatcher(upstream, CONFIGMAPS, namespace="bulk"), resource_version=rv
    )

    params = recorder.params()
    assert len(params) == 3
    assert params[0] == {"resourceVersion": rv, "limit": "500"}
    assert set(params[1]) == {"limit", "continue"}
    assert params[2] == {"resourceVersion": rv}  # one full list: no limit, no continue
    assert len(result.items) == BULK + 1
    assert result.resource_version == str(demo_sim.store.rv)


async def test_list_all_raises_an_expired_first_page_instead_of_retrying(
    upstream: httpx.AsyncClient, demo_sim: Simulator
) -> None:
    demo_sim.faults.fail_next("list", 410)
    before = demo_sim.requests["list"]
    with pytest.raises(ApiError) as caught:
        await list_all(ApiListerWatcher(upstream, PODS), resource_version="0")
    assert caught.value.code == 410 and caught.value.reason == "Expired"
    assert demo_sim.requests["list"] - before == 1


async def test_label_and_field_selectors_reach_the_server(
    upstream: httpx.AsyncClient, recorder: Recorder
) -> None:
    everything = await ApiListerWatcher(upstream, PODS).list(ListRequest())
    expected = sorted(
        p["metadata"]["name"]
        for p in everything.items
        if p["metadata"]["labels"]["app"] == "app-1" and p["spec"]["nodeName"] == "node-2"
    )
    assert expected  # the demo data has such pods, or this test proves nothing
    lw = ApiListerWatcher(
        upstream, PODS, label_selector="app=app-1", field_selector="spec.nodeName=node-2"
    )
    listed = await lw.list(ListRequest())
    assert sorted(p["metadata"]["name"] for p in listed.items) == expected

    async with lw.watch(WatchRequest(resource_version="0", timeout_seconds=30)) as events:
        initial = await _take(events, len(expected))
    assert sorted(e.object["metadata"]["name"] for e in initial) == expected
    assert recorder.params()[-1]["labelSelector"] == "app=app-1"
    assert recorder.params()[-1]["fieldSelector"] == "spec.nodeName=node-2"


async def test_requests_say_who_is_asking(upstream: httpx.AsyncClient, recorder: Recorder) -> None:
    await ApiListerWatcher(upstream, PODS).list(ListRequest(limit=1))
    assert recorder.requests[0].headers["user-agent"] == f"cacheproxy/{__version__}"
    assert recorder.requests[0].headers["accept"] == "application/json"


async def test_get_version_reads_the_servers_version(upstream: httpx.AsyncClient) -> None:
    version = await get_version(upstream)
    assert version["gitVersion"] == "v1.33.0"
    assert (version["major"], version["minor"]) == ("1", "33")


# ---------------------------------------------------------------------------- watch


@pytest.fixture
def bookmarking_sim() -> Simulator:
    return Simulator(config=SimConfig(bookmark_interval=0.2))


@pytest.fixture
async def bookmarking_client(bookmarking_sim: Simulator) -> AsyncIterator[httpx.AsyncClient]:
    async with (
        SimServer(bookmarking_sim) as server,
        build_client(UpstreamConfig(server=server.url)) as client,
    ):
        yield client


async def test_watch_decodes_added_modified_deleted_and_bookmark_events(
    bookmarking_client: httpx.AsyncClient, bookmarking_sim: Simulator
) -> None:
    sim = bookmarking_sim
    lw = ApiListerWatcher(bookmarking_client, CONFIGMAPS, namespace="default")
    start = (await lw.list(ListRequest())).resource_version
    async with lw.watch(WatchRequest(resource_version=start, timeout_seconds=30)) as events:
        sim.api.create(CONFIGMAPS, "default", {"metadata": {"name": "w"}, "data": {"a": "1"}})
        sim.api.update(CONFIGMAPS, "default", "w", {"metadata": {"name": "w"}, "data": {"a": "2"}})
        deleted = sim.api.delete(CONFIGMAPS, "default", "w")
        seen = await _collect(
            events,
            until=lambda e: (
                e.type == "BOOKMARK"
                and int(e.resource_version) >= int(deleted["metadata"]["resourceVersion"])
            ),
        )
    changes = [e for e in seen if e.type != "BOOKMARK"]
    assert [e.type for e in changes] == ["ADDED", "MODIFIED", "DELETED"]
    assert all(e.object["kind"] == "ConfigMap" for e in changes)
    assert [e.object["data"]["a"] for e in changes[:2]] == ["1", "2"]
    rvs = [int(e.resource_version) for e in changes]
    assert rvs == sorted(rvs) and rvs[0] > int(start)
    bookmark = seen[-1]
    assert bookmark.type == "BOOKMARK" and not bookmark.is_initial_events_end
    assert bookmark.object["kind"] == "ConfigMap"


async def test_a_watch_list_sends_initial_added_events_then_the_initial_events_end_bookmark(
    upstream: httpx.AsyncClient, recorder: Recorder
) -> None:
    lw = ApiListerWatcher(upstream, PODS, namespace="ns-2")
    listed = await lw.list(ListRequest())
    request = WatchRequest(resource_version="", timeout_seconds=30, send_initial_events=True)
    async with lw.watch(request) as events:
        seen = await _collect(events, until=lambda e: e.is_initial_events_end)
    assert {e.type for e in seen[:-1]} == {"ADDED"}
    assert sorted(e.object["metadata"]["name"] for e in seen[:-1]) == sorted(
        p["metadata"]["name"] for p in listed.items
    )
    end = seen[-1]
    assert end.type == "BOOKMARK" and end.is_initial_events_end
    assert end.resource_version == listed.resource_version
    sent = recorder.params()[-1]
    assert sent["sendInitialEvents"] == "true"
    assert sent["resourceVersionMatch"] == "NotOlderThan"
    assert sent["allowWatchBookmarks"] == "true"
    assert "resourceVersion" not in sent


async def test_a_watch_from_a_compacted_rv_raises_the_410_error_event(
    upstream: httpx.AsyncClient, demo_sim: Simulator
) -> None:
    old = demo_sim.store.rv
    demo_sim.load([("configmaps", {"metadata": {"name": "x", "namespace": "ns-0"}})])
    demo_sim.compact()
    lw = ApiListerWatcher(upstream, CONFIGMAPS)
    with pytest.raises(ApiError) as caught:
        await _watch_to_the_end(lw, WatchRequest(resource_version=str(old), timeout_seconds=30))
    assert caught.value.code == 410
    assert caught.value.reason == "Expired"
    assert caught.value.message.startswith("too old resource version")


async def test_a_garbage_line_in_a_watch_is_a_transport_error(
    upstream: httpx.AsyncClient, demo_sim: Simulator
) -> None:
    demo_sim.faults.next_watch_stream("garbage")
    lw = ApiListerWatcher(upstream, PODS)
    with pytest.raises(TransportError, match="not JSON") as caught:
        await _watch_to_the_end(lw, WatchRequest(resource_version="0", timeout_seconds=30))
    assert "/api/v1/pods" in str(caught.value)


async def test_a_watch_cut_in_the_middle_of_a_line_is_a_transport_error(
    upstream: httpx.AsyncClient, demo_sim: Simulator
) -> None:
    demo_sim.faults.next_watch_stream("truncate")
    lw = ApiListerWatcher(upstream, PODS)
    with pytest.raises(TransportError, match="middle of an event"):
        await _watch_to_the_end(lw, WatchRequest(resource_version="0", timeout_seconds=30))


async def test_a_watch_ends_normally_when_the_server_closes_it(
    upstream: httpx.AsyncClient, demo_sim: Simulator
) -> None:
    lw = ApiListerWatcher(upstream, PODS)
    rv = str(demo_sim.store.rv)
    seen = await _watch_to_the_end(lw, WatchRequest(resource_version=rv, timeout_seconds=1))
    assert all(e.type == "BOOKMARK" for e in seen)  # the deadline bookmark at most


async def test_a_server_restart_ends_the_watch_cleanly_or_as_a_transport_error(
    demo_server: SimServer, demo_sim: Simulator, upstream: httpx.AsyncClient
) -> None:
    lw = ApiListerWatcher(upstream, PODS)
    rv = str(demo_sim.store.rv)
    outcome: str | TransportError = "still open"
    async with lw.watch(WatchRequest(resource_version=rv, timeout_seconds=60)) as events:
        demo_sim.load([("configmaps", {"metadata": {"name": "y", "namespace": "ns-0"}})])
        restart = asyncio.create_task(demo_server.restart(), name="test-restart")
        try:
            await _collect(events, until=lambda _: False)
            outcome = "ended"
        except TransportError as exc:
            outcome = exc
        await restart
    assert outcome == "ended" or isinstance(outcome, TransportError)
    # The same client reconnects; the restarted server lost its history: 410 for the old RV.
    assert len((await lw.list(ListRequest())).items) == 60
    with pytest.raises(ApiError) as caught:
        await _watch_to_the_end(lw, WatchRequest(resource_version=rv, timeout_seconds=30))
    assert caught.value.code == 410


# ---------------------------------------------------------------------------- failures


async def test_429_with_retry_after_is_an_api_error_carrying_retry_after(
    upstream: httpx.AsyncClient, demo_sim: Simulator
) -> None:
    lw = ApiListerWatcher(upstream, PODS)
    demo_sim.faults.fail_next("list", 429, retry_after=7)
    with pytest.raises(ApiError) as listed:
        await lw.list(ListRequest())
    demo_sim.faults.fail_next("watch", 429, retry_after=3)
    with pytest.raises(ApiError) as watched:
        async with lw.watch(WatchRequest(resource_version="", timeout_seconds=30)):
            pass
    assert (listed.value.code, listed.value.reason, listed.value.retry_after) == (
        429,
        "TooManyRequests",
        7,
    )
    assert (watched.value.code, watched.value.retry_after) == (429, 3)


async def test_a_stopped_server_is_a_transport_error_saying_connection_refused() -> None:
    sim = Simulator()
    async with SimServer(sim) as server:
        url = server.url
    async with build_client(UpstreamConfig(server=url)) as client:
        lw = ApiListerWatcher(client, PODS)
        with pytest.raises(TransportError) as listed:
            await lw.list(ListRequest())
        with pytest.raises(TransportError) as watched:
            async with lw.watch(WatchRequest(resource_version="", timeout_seconds=30)):
                pass
    for caught in (listed, watched):
        assert f"GET {url}/api/v1/pods: connection to {url} refused" in str(caught.value)
        assert isinstance(caught.value.__cause__, httpx.ConnectError)
        assert caught.value.connection_refused


async def test_a_demo_watch_and_list_share_the_client_concurrently(
    upstream: httpx.AsyncClient, demo_sim: Simulator
) -> None:
    """Over HTTP/1.1 (the simulator) each open watch holds a connection; lists still go."""
    lws = [ApiListerWatcher(upstream, builtin(name)) for name in ("pods", "configmaps", "nodes")]
    rv = str(demo_sim.store.rv)
    async with (
        lws[0].watch(WatchRequest(resource_version=rv, timeout_seconds=30)),
        lws[1].watch(WatchRequest(resource_version=rv, timeout_seconds=30)),
    ):
        nodes = await lws[2].list(ListRequest())
    assert len(nodes.items) == 5


async def test_a_factorys_informers_list_and_watch_each_collection_as_it_is_named(
    upstream: httpx.AsyncClient, recorder: Recorder, demo_server: SimServer
) -> None:
    # The namespace and both selectors of each Collection reach upstream, list and watch alike,
    # with nothing passed again by hand.
    collection = Collection(
        PODS,
        namespace="ns-1",
        label_selector="app=app-2",
        field_selector="status.phase=Running",
    )
    factory = SharedInformerFactory(lister_watchers(upstream))
    pods = factory.informer(collection)
    async with factory:
        assert await factory.wait_for_cache_sync()
        await until(lambda: any(p.get("watch") for p in recorder.params()), "the watch starts")
    sent = recorder.params()  # the informer's requests (the check below sends one more)
    expected = {
        f"ns-1/{p['metadata']['name']}"
        for p in (await upstream.get("/api/v1/namespaces/ns-1/pods")).json()["items"]
        if p["metadata"]["labels"].get("app") == "app-2" and p["status"]["phase"] == "Running"
    }
    assert expected and set(pods.store.keys()) == expected
    asked = [p for p in sent if p.get("labelSelector")]
    assert asked and all(
        (p["labelSelector"], p["fieldSelector"]) == ("app=app-2", "status.phase=Running")
        for p in asked
    )
    assert any(p.get("watch") for p in asked)
    assert len(asked) == len(sent)  # every request carried them
