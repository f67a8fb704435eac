"""The watch stream both servers are made of: the bounded mailbox, the live part with its
bookmarks and deadline (in virtual time), and the writer that drops a client taking nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from cacheproxy.serving import (
    DEADLINE_BOOKMARK_MARGIN,
    Mailbox,
    Message,
    Request,
    WatchWriter,
    closed_on_disconnect,
    live_lines,
    watch_batches,
)

# ---------------------------------------------------------------------------- the mailbox


def test_a_mailbox_hands_out_what_was_put_in_order_once() -> None:
    box: Mailbox[bytes] = Mailbox(10)
    assert box.put(b"a") and box.put(b"b") and box.put(b"c")
    assert box.drain() == [b"a", b"b", b"c"]
    assert box.drain() == []


def test_a_full_mailbox_closes_itself_and_keeps_what_it_held() -> None:
    box: Mailbox[int] = Mailbox(2)
    assert box.put(1) and box.put(2)
    assert not box.put(3)
    assert box.closed and box.close_reason == "too slow: buffer full"
    assert not box.put(4)  # closed: nothing more, even once drained
    assert box.drain() == [1, 2]
    assert not box.put(5)


def test_a_mailbox_bounded_in_bytes_counts_what_is_queued_until_drained() -> None:
    box: Mailbox[bytes] = Mailbox(100, max_bytes=10)
    assert box.put(b"abcd", 4) and box.put(b"efgh", 4)
    assert box.queued_bytes == 8 and len(box) == 2
    assert box.drain() == [b"abcd", b"efgh"]
    assert box.queued_bytes == 0
    assert box.put(b"ijklmn", 6) and box.put(b"op", 2)
    assert box.queued_bytes == 8 and box.overflow is None
    assert not box.put(b"qrs", 3)  # 11 > 10
    assert box.closed and box.overflow == "bytes"
    assert box.close_reason == "too slow: more than 10 bytes queued"
    assert box.drain() == [b"ijklmn", b"op"]


def test_a_full_mailbox_says_it_overflowed_in_events() -> None:
    box: Mailbox[bytes] = Mailbox(2, max_bytes=1000)
    assert box.put(b"a", 1) and box.put(b"b", 1)
    assert not box.put(b"c", 1)
    assert box.overflow == "events"


def test_discarding_drops_what_is_queued_and_returns_it() -> None:
    box: Mailbox[bytes] = Mailbox(10)
    box.put(b"abc", 3)
    box.put(b"de", 2)
    assert box.discard() == [b"abc", b"de"]
    assert box.queued_bytes == 0 and box.drain() == []


def test_a_mailbox_keeps_the_first_reason_it_was_closed_for() -> None:
    box: Mailbox[int] = Mailbox(2)
    box.close("client went away")
    box.close("server shutting down")
    assert box.close_reason == "client went away"
    assert not box.put(1)


async def test_wait_returns_at_once_with_something_queued_or_closed() -> None:
    box: Mailbox[int] = Mailbox(2)
    box.put(1)
    await asyncio.wait_for(box.wait(60), 1)
    box.drain()
    box.close()
    await asyncio.wait_for(box.wait(60), 1)


async def test_wait_wakes_on_a_put_or_a_close_and_otherwise_times_out() -> None:
    box: Mailbox[int] = Mailbox(2)
    loop = asyncio.get_running_loop()
    loop.call_later(0.01, box.put, 7)
    await asyncio.wait_for(box.wait(60), 1)
    assert box.drain() == [7]
    loop.call_later(0.01, box.close, "bye")
    await asyncio.wait_for(box.wait(60), 1)
    other: Mailbox[int] = Mailbox(2)
    began = loop.time()
    await other.wait(0.02)
    assert loop.time() - began >= 0.015 and not other.closed


# ---------------------------------------------------------------------------- the live part


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class ScriptedWatch:
    """A watch in virtual time: lines arrive at given times, it may close at a given time, and
    waiting moves the clock to whichever comes first (or by the time waited)."""

    def __init__(
        self,
        clock: Clock,
        arrivals: Sequence[tuple[float, bytes]] = (),
        *,
        close_at: float | None = None,
    ) -> None:
        self.clock = clock
        self.arrivals = sorted(arrivals)
        self.close_at = close_at
        self.pending: list[bytes] = []
        self.closed = False

    def _deliver(self) -> None:
        while self.arrivals and self.arrivals[0][0] <= self.clock.now:
            self.pending.append(self.arrivals.pop(0)[1])
        if self.close_at is not None and self.close_at <= self.clock.now:
            self.closed = True

    async def wait(self, seconds: float) -> None:
        self._deliver()
        if self.pending or self.closed:
            return
        target = self.clock.now + max(seconds, 0.0)
        moments = [t for t, _ in self.arrivals[:1]] + ([self.close_at] if self.close_at else [])
        self.clock.now = min([target, *[t for t in moments if t <= target]])
        self._deliver()

    def take(self) -> list[bytes]:
        lines, self.pending = self.pending, []
        return lines


async def _collect(
    watch: ScriptedWatch,
    clock: Clock,
    *,
    deadline: float,
    bookmarks: bool = True,
    interval: float = 10.0,
    bookmark_line: bytes | None = b"BM",
) -> list[tuple[float, list[bytes]]]:
    def bookmark() -> bytes | None:
        return bookmark_line

    return [
        (clock.now, batch)
        async for batch in live_lines(
            watch,
            deadline=deadline,
            bookmark=bookmark if bookmarks else None,
            bookmark_interval=interval,
            clock=clock,
        )
    ]


async def test_live_lines_come_in_order_in_batches_of_what_is_pending() -> None:
    clock = Clock()
    arrivals = [(1.0, b"a"), (1.0, b"b"), (2.0, b"c"), (4.0, b"d")]
    got = await _collect(ScriptedWatch(clock, arrivals), clock, deadline=5.0, bookmarks=False)
    assert got == [(1.0, [b"a", b"b"]), (2.0, [b"c"]), (4.0, [b"d"])]
    assert clock.now == 5.0  # then nothing until the deadline


async def test_bookmarks_come_every_interval_and_once_shortly_before_the_deadline() -> None:
    clock = Clock()
    got = await _collect(ScriptedWatch(clock), clock, deadline=35.0, interval=10.0)
    assert got == [(10.0, [b"BM"]), (20.0, [b"BM"]), (30.0, [b"BM"]), (33.0, [b"BM"])]
    assert 35.0 - DEADLINE_BOOKMARK_MARGIN == 33.0
    assert clock.now == 35.0


async def test_no_bookmark_unless_asked_nor_when_there_is_nothing_new_to_tell() -> None:
    clock = Clock()
    assert await _collect(ScriptedWatch(clock), clock, deadline=35.0, bookmarks=False) == []
    clock = Clock()
    quiet = await _collect(ScriptedWatch(clock), clock, deadline=35.0, bookmark_line=None)
    assert quiet == []


async def test_events_in_between_neither_delay_a_bookmark_nor_go_out_as_one() -> None:
    clock = Clock()
    watch = ScriptedWatch(clock, [(5.0, b"a"), (9.0, b"b"), (10.0, b"c")])
    got = await _collect(watch, clock, deadline=15.0, interval=10.0)
    # The bookmark schedule runs on the clock (as the watch cache's nextBookmarkTime); a wake
    # that brings lines sends only them, and the bookmark due then follows.
    assert got == [
        (5.0, [b"a"]),
        (9.0, [b"b"]),
        (10.0, [b"c"]),
        (10.0, [b"BM"]),
        (13.0, [b"BM"]),
    ]


async def test_a_closed_watch_ends_after_its_last_lines() -> None:
    clock = Clock()
    watch = ScriptedWatch(clock, [(1.0, b"a"), (3.0, b"b")], close_at=3.0)
    got = await _collect(watch, clock, deadline=100.0)
    assert got == [(1.0, [b"a"]), (3.0, [b"b"])]
    assert clock.now == 3.0


async def test_a_watch_past_its_deadline_sends_nothing_more() -> None:
    clock = Clock()
    clock.now = 50.0
    watch = ScriptedWatch(clock, [(0.0, b"late")])
    assert await _collect(watch, clock, deadline=50.0) == []


async def test_watch_batches_sends_what_comes_first_then_the_live_lines() -> None:
    clock = Clock()
    watch = ScriptedWatch(clock, [(2.0, b"live")])
    got = [
        batch
        async for batch in watch_batches(
            watch,
            first=iter([[b"i1", b"i2"], [], [b"r1"]]),
            seconds=3.0,
            bookmark=None,
            bookmark_interval=10.0,
            clock=clock,
        )
    ]
    assert got == [[b"i1", b"i2"], [b"r1"], [b"live"]]
    assert clock.now == 3.0  # the deadline counts from the start


# ---------------------------------------------------------------------------- the writer


class Sent(list[dict[str, Any]]):
    async def __call__(self, message: Message) -> None:
        self.append(dict(message))


class Writer:
    def __init__(self) -> None:
        self.chunks: list[list[bytes]] = []

    async def write(self, parts: Sequence[bytes], size: int) -> None:
        raise AssertionError("a watch is chunked")

    async def write_chunk(self, parts: Sequence[bytes]) -> bool:
        self.chunks.append(list(parts))
        return True


class Flow:
    def __init__(self, *, takes: bool = True) -> None:
        self.takes = takes
        self.waited: list[float] = []
        self.aborted = False

    async def writable(self, within: float) -> bool:
        self.waited.append(within)
        return self.takes

    def abort(self) -> None:
        self.aborted = True

    def close_after(self) -> None:
        self.closes_after = True


def _request() -> Request:
    async def receive() -> dict[str, Any]:
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    scope = {"type": "http", "method": "GET", "path": "/w", "headers": [], "query_string": b""}
    return Request(scope, receive)


async def test_the_writer_starts_a_chunked_json_response() -> None:
    sent, req = Sent(), _request()
    await WatchWriter(sent).start(req)
    [start] = sent
    assert start["status"] == 200 and req.started
    assert (b"content-type", b"application/json") in start["headers"]
    assert not any(name == b"content-length" for name, _ in start["headers"])


async def test_with_a_body_writer_lines_go_out_as_they_are() -> None:
    sent, writer = Sent(), Writer()
    out = WatchWriter(sent, writer=writer, flow=Flow(), stall=5.0)
    lines = [b"line-1\n", b"line-2\n"]
    assert await out.write(lines)
    assert writer.chunks == [lines] and sent == []
    await out.finish()
    assert sent == [{"type": "http.response.body", "body": b"", "more_body": False}]


async def test_without_one_each_batch_is_one_message_converted_when_asked() -> None:
    sent = Sent()
    out = WatchWriter(sent, writer=Writer(), convert=lambda chunk: chunk.upper())
    assert await out.write([b"a\n", b"b\n"])
    assert sent == [{"type": "http.response.body", "body": b"A\nB\n", "more_body": True}]
    dropped = WatchWriter(sent, convert=lambda chunk: b"")
    assert await dropped.write([b"x\n"])
    assert len(sent) == 1  # a batch converted into nothing is not sent


async def test_a_client_that_takes_nothing_within_the_stall_limit_is_dropped() -> None:
    sent, flow = Sent(), Flow(takes=False)
    out = WatchWriter(sent, writer=Writer(), flow=flow, stall=0.5)
    assert not await out.write([b"line\n"])
    assert flow.aborted and flow.waited == [0.5]
    await out.finish()  # still taking nothing: no clean end either
    assert sent == []


async def test_the_end_can_carry_a_last_line() -> None:
    sent = Sent()
    await WatchWriter(sent, convert=lambda chunk: b"<" + chunk + b">").finish(b"ERROR\n")
    assert sent == [{"type": "http.response.body", "body": b"<ERROR\n>", "more_body": False}]


async def test_a_client_going_away_closes_its_watcher() -> None:
    disconnected = asyncio.Event()

    async def receive() -> dict[str, Any]:
        await disconnected.wait()
        return {"type": "http.disconnect"}

    scope = {"type": "http", "method": "GET", "path": "/w", "headers": [], "query_string": b""}
    box: Mailbox[bytes] = Mailbox(4)
    async with closed_on_disconnect(Request(scope, receive), box, "client went away"):
        await asyncio.sleep(0)
        assert not box.closed
        disconnected.set()
        await asyncio.wait_for(box.wait(60), 1)
        assert box.close_reason == "client went away"


async def test_leaving_stops_listening_for_the_disconnect() -> None:
    box: Mailbox[bytes] = Mailbox(4)
    before = asyncio.all_tasks()
    async with closed_on_disconnect(_request(), box, "gone"):
        assert len(asyncio.all_tasks() - before) == 1
    assert asyncio.all_tasks() == before


@pytest.mark.parametrize("capacity", [1, 3])
async def test_a_closed_mailbox_still_drains(capacity: int) -> None:
    box: Mailbox[int] = Mailbox(capacity)
    for i in range(capacity):
        box.put(i)
    box.close()
    await box.wait(60)
    assert box.drain() == list(range(capacity))
