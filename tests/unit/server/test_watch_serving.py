"""One watch request served end to end over fakes of the connection: where it starts (initial
state, history, 410), its order and batches, bookmarks only newer than its start, its deadline,
and the two ways a slow client is dropped (buffer full, taking nothing)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlencode

import orjson
import pytest

from cacheproxy.informer import FakeListerWatcher, SharedInformer, Store
from cacheproxy.kube.listoptions import parse_list_options
from cacheproxy.kube.resources import builtin
from cacheproxy.server.admission import ServedRequest
from cacheproxy.server.options import ServerOptions
from cacheproxy.server.query import Query
from cacheproxy.server.resource import ServedResource
from cacheproxy.server.watchhub import WatchHub
from cacheproxy.server.watching import INITIAL_BATCH_BYTES, serve_watch
from cacheproxy.serving import BODY_WRITER, RESPONSE_FLOW, Message
from tests.support import CONFIGMAP_LIST_BLUEPRINT, end_annotations, until

CONFIGMAPS = builtin("configmaps")


class Writer:
    def __init__(self) -> None:
        self.chunks: list[list[bytes]] = []

    async def write(self, parts: Sequence[bytes], size: int) -> None:
        raise AssertionError("a watch is chunked")

    async def write_chunk(self, parts: Sequence[bytes]) -> bool:
        self.chunks.append(list(parts))
        return True


class Flow:
    def __init__(self) -> None:
        self.takes = True
        self.aborted = False

    async def writable(self, within: float) -> bool:
        return self.takes

    def abort(self) -> None:
        self.aborted = True

    def close_after(self) -> None:
        self.closes_after = True


class Rig:
    """A cached resource whose changes are applied by hand, its hub, and one client."""

    def __init__(self, **options: Any) -> None:
        self.store = Store(kind="ConfigMap", api_version="v1")
        self.informer = SharedInformer(FakeListerWatcher(), name="cms", store=self.store)
        self.informer._synced.set()
        self.res = ServedResource(CONFIGMAPS, self.informer)
        self.hub = WatchHub(CONFIGMAPS, self.store)
        self.options = ServerOptions(**options)
        self.writer, self.flow = Writer(), Flow()
        self.sent: list[dict[str, Any]] = []
        self.gone = asyncio.Event()
        self.rv = 0

    def put(self, name: str, size: int = 0) -> None:
        self.rv += 1
        meta = {"name": name, "namespace": "default", "resourceVersion": str(self.rv)}
        entry = self.store.make_entry({"metadata": meta, "data": {"x": "x" * size}})
        prev = self.store.put(entry, rv=self.rv)
        event_type = "ADDED" if prev is None else "MODIFIED"
        self.hub.on_event(self.informer.event_log.append(event_type, entry, prev, self.rv))

    async def send(self, message: Message) -> None:
        self.sent.append(dict(message))

    async def receive(self) -> dict[str, Any]:
        await self.gone.wait()
        return {"type": "http.disconnect"}

    def watch(self, **params: str) -> asyncio.Task[None]:
        query = {k: [v] for k, v in params.items()}
        scope = {
            "type": "http",
            "method": "GET",
            "path": "/api/v1/configmaps",
            "query_string": urlencode({"watch": "1", **params}).encode(),
            "headers": [],
            "extensions": {BODY_WRITER: self.writer, RESPONSE_FLOW: self.flow},
        }
        req = ServedRequest(scope, self.receive)
        coro = serve_watch(
            req,
            self.send,
            res=self.res,
            hub=self.hub,
            query=Query(),
            opts=parse_list_options(query, watch=True),
            tables=None,
            options=self.options,
            refusing=lambda: False,
        )
        return asyncio.create_task(coro, name="watch-under-test")

    def events(self) -> list[tuple[str, str, int]]:
        body = b"".join(part for chunk in self.writer.chunks for part in chunk)
        body += b"".join(m.get("body", b"") for m in self.sent[1:])
        out = []
        for line in body.splitlines():
            event = orjson.loads(line)
            meta = event["object"]["metadata"]
            out.append((event["type"], meta.get("name", ""), int(meta["resourceVersion"])))
        return out

    @property
    def ended(self) -> bool:
        return bool(self.sent) and self.sent[-1].get("more_body") is False


async def _finish(task: asyncio.Task[None]) -> None:
    await asyncio.wait_for(task, 5)


async def test_a_watch_from_an_rv_sends_history_then_live_events_until_the_client_leaves() -> None:
    rig = Rig()
    for name in ("a", "b", "c"):
        rig.put(name)
    task = rig.watch(resourceVersion="1")
    await until(lambda: len(rig.hub.watchers) == 1, "the watcher is registered")
    rig.put("d")
    await until(lambda: len(rig.events()) == 3, "the live event is written")
    rig.gone.set()
    await _finish(task)
    assert rig.events() == [("ADDED", "b", 2), ("ADDED", "c", 3), ("ADDED", "d", 4)]
    assert rig.ended and not rig.hub.watchers


async def test_a_watch_list_sends_the_state_then_its_end_bookmark() -> None:
    rig = Rig()
    rig.put("a")
    rig.put("b")
    task = rig.watch(
        sendInitialEvents="true",
        allowWatchBookmarks="true",
        resourceVersionMatch="NotOlderThan",
        timeoutSeconds="1",
    )
    await until(lambda: len(rig.events()) == 3, "the initial events are written")
    rig.gone.set()
    await _finish(task)
    assert rig.events() == [("ADDED", "a", 1), ("ADDED", "b", 2), ("BOOKMARK", "", 2)]
    last = b"".join(rig.writer.chunks[-1]).splitlines()[-1]
    annotations = orjson.loads(last)["object"]["metadata"]["annotations"]
    assert annotations == end_annotations(CONFIGMAP_LIST_BLUEPRINT)


async def test_a_large_initial_state_goes_out_in_batches_of_about_128_kib() -> None:
    rig = Rig()
    for i in range(5):
        rig.put(f"big-{i}", size=50_000)
    task = rig.watch(timeoutSeconds="1")
    await until(lambda: len(rig.events()) == 5, "the initial state is written")
    rig.gone.set()
    await _finish(task)
    assert [len(chunk) for chunk in rig.writer.chunks] == [12, 8]  # 3 + 2 objects, 4 parts each
    assert 3 * 50_000 >= INITIAL_BATCH_BYTES > 2 * 50_000


async def test_a_watch_from_an_rv_older_than_the_history_gets_one_410_error_event() -> None:
    rig = Rig()
    rig.informer.event_log.reset(5)
    rig.rv = 5
    rig.put("a")
    task = rig.watch(resourceVersion="2")
    await _finish(task)
    [start, end] = rig.sent
    error = orjson.loads(end["body"])
    assert error["type"] == "ERROR" and error["object"]["code"] == 410
    assert end["more_body"] is False and start["status"] == 200


async def test_bookmarks_are_sent_only_once_newer_than_the_watch_start() -> None:
    rig = Rig(bookmark_interval=0.01)
    rig.put("a")
    task = rig.watch(resourceVersion="1", allowWatchBookmarks="true", timeoutSeconds="1")
    await until(lambda: len(rig.hub.watchers) == 1, "the watcher is registered")
    await asyncio.sleep(0.1)
    assert rig.events() == []  # a quiet resource: nothing newer to tell
    rig.put("b")
    await until(lambda: ("BOOKMARK", "", 2) in rig.events(), "a bookmark at the new RV")
    rig.gone.set()
    await _finish(task)
    assert rig.events()[0] == ("ADDED", "b", 2)
    assert set(rig.events()[1:]) == {("BOOKMARK", "", 2)}


async def test_a_watch_ends_at_its_deadline() -> None:
    rig = Rig(min_watch_timeout=0.05)
    task = rig.watch()
    await _finish(task)  # within [0.05, 0.1) s
    assert rig.ended and not rig.hub.watchers


async def test_a_client_whose_buffer_overflows_is_evicted_and_ends_cleanly() -> None:
    rig = Rig(watch_buffer=1)
    task = rig.watch(timeoutSeconds="10")
    await until(lambda: len(rig.hub.watchers) == 1, "the watcher is registered")
    for name in ("a", "b", "c"):  # all at once: the stream gets no turn in between
        rig.put(name)
    await _finish(task)
    assert rig.hub.evicted == 1 and not rig.hub.watchers
    assert rig.events() == [("ADDED", "a", 1)] and rig.ended and not rig.flow.aborted


async def test_a_client_that_takes_nothing_while_events_wait_is_evicted_and_dropped() -> None:
    rig = Rig(watch_stall=0.01)
    task = rig.watch(timeoutSeconds="10")
    await until(lambda: len(rig.hub.watchers) == 1, "the watcher is registered")
    rig.flow.takes = False
    rig.put("a")
    await _finish(task)
    assert rig.hub.evicted == 1 and not rig.hub.watchers
    assert rig.flow.aborted and not rig.ended and rig.events() == []


@pytest.mark.parametrize("closed_by", ["client", "server"])
async def test_a_watch_closed_by_either_side_ends(closed_by: str) -> None:
    rig = Rig()
    task = rig.watch(timeoutSeconds="10")
    await until(lambda: len(rig.hub.watchers) == 1, "the watcher is registered")
    if closed_by == "client":
        rig.gone.set()
    else:
        rig.hub.close_all("server shutting down")
    await _finish(task)
    assert rig.ended and not rig.hub.watchers and rig.hub.evicted == 0
