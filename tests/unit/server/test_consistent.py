"""Reads with resourceVersion unset that must prove the cache fresh (mode ``strict``, the read
planner's steps carried out by :func:`carry_out`): probes shared between the reads that wait
together, one at a time and within their rate (on a fake clock), the timeouts and what they
answer."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable, Iterable

import pytest

from cacheproxy.errors import ApiError, TransportError
from cacheproxy.kube import status
from cacheproxy.kube.keys import KeyDigest, key_digest
from cacheproxy.server.consistent import (
    ConsistencyOptions,
    ConsistentReads,
    ObjectKey,
    SharedProbe,
    warning_header,
)
from cacheproxy.server.readexec import carry_out
from cacheproxy.server.readplan import ForwardRead, ReadRequest, ReadState, Refuse


class FakeTime:
    """A clock and a sleep that only move when the test says: ``await advance(seconds)``."""

    def __init__(self) -> None:
        self.now = 0.0
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        wake = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self.now + seconds, next(self._order), wake))
        await wake

    async def advance(self, seconds: float) -> None:
        """Move the clock, waking each sleeper when its time comes (in order)."""
        end = self.now + seconds
        await settle()
        while self._sleepers and self._sleepers[0][0] <= end:
            at, _, wake = heapq.heappop(self._sleepers)
            self.now = max(self.now, at)
            if not wake.done():
                wake.set_result(None)
            await settle()
        self.now = end
        await settle()


async def settle() -> None:
    """Let every runnable task run (a few loop iterations)."""
    for _ in range(20):
        await asyncio.sleep(0)


class Upstream:
    """A probe whose answers the test gives, one per probe, in order."""

    def __init__(self, time: FakeTime) -> None:
        self.time = time
        self.started: list[float] = []
        self.answers: list[asyncio.Future[int]] = []

    async def __call__(self) -> int:
        self.started.append(self.time.now)
        answer = asyncio.get_running_loop().create_future()
        self.answers.append(answer)
        return await answer

    def answer(self, rv: int) -> None:
        self.answers[len([a for a in self.answers if a.done()])].set_result(rv)

    def fail(self, error: BaseException) -> None:
        self.answers[len([a for a in self.answers if a.done()])].set_exception(error)


class Cache:
    """A :class:`ReadCache` whose RV (and keys) the test moves; a wait past ``within`` is the
    504. Its reads are ``strict`` and never forwarded unless the test says."""

    def __init__(self, time: FakeTime, rv: int = 10, keys: Iterable[str] = ()) -> None:
        self.time = time
        self.resource_version = rv
        self.keys = set(keys)
        self.objects: dict[str, int] = {}
        """Each object's resourceVersion, for gets (the test sets those it reads)."""
        self.reads: ConsistentReads | None = None
        self.quiet_at: int | None = None
        self._moved = asyncio.Event()

    def move(self, rv: int, *, add: str = "", delete: str = "") -> None:
        self.resource_version = rv
        self.keys = (self.keys | {add} if add else self.keys) - {delete}
        if add:
            self.objects[add] = rv
        self.objects.pop(delete, None)
        self._moved.set()

    def holds(self, digest: KeyDigest) -> bool:
        return key_digest(self.keys) == digest

    def object_version(self, key: str) -> int | None:
        return self.objects.get(key)

    def state(self, *, can_forward: bool = False, get: bool = False) -> ReadState:
        assert self.reads is not None
        options = self.reads.options
        return ReadState(
            self.resource_version,
            mode="strict",
            quiet=self.quiet_at == self.resource_version,
            can_forward=can_forward,
            can_confirm=self.reads.can_confirm(get=get),
            on_timeout=options.on_timeout,
            catch_up=options.confirm_after,
        )

    def quiet(self) -> None:
        self.quiet_at = self.resource_version

    async def wait_for(self, rv: int, *, within: float | None = None) -> None:
        deadline = self.time.now + (within or 0.0)
        timer = asyncio.ensure_future(self.time.sleep(max(0.0, deadline - self.time.now)))
        try:
            while self.resource_version < rv:
                self._moved.clear()
                moved = asyncio.ensure_future(self._moved.wait())
                await asyncio.wait((moved, timer), return_when=asyncio.FIRST_COMPLETED)
                moved.cancel()
                if self.resource_version < rv and timer.done():
                    raise status.too_large_resource_version(rv, self.resource_version)
        finally:
            timer.cancel()


async def warning_of(
    reads: ConsistentReads,
    cache: Cache,
    *,
    get: ObjectKey | None = None,
    read: ReadRequest | None = None,
) -> bytes | None:
    """The ``Warning`` a strict read is answered with (None: it is proven fresh); a 504
    ``Timeout`` ApiError when ``on_timeout: error`` refuses it."""
    cache.reads = reads
    read = read or ReadRequest("get" if get is not None else "list")
    answer = await carry_out(read, cache, reads, clock=reads.clock, rv_wait=3.0, get=get)
    assert not isinstance(answer, ForwardRead)
    if isinstance(answer, Refuse):
        assert answer.reason == "timeout", answer
        raise ApiError(
            status.status_body(
                code=504, reason="Timeout", message=answer.why, details={"retryAfterSeconds": 1}
            )
        )
    assert answer.at is None
    return None if answer.warning is None else warning_header(answer.warning)


@pytest.fixture
def time() -> FakeTime:
    return FakeTime()


def reads_with(
    time: FakeTime, upstream: Upstream, **options: object
) -> Callable[[Cache], asyncio.Task[bytes | None]]:
    reads = ConsistentReads(
        upstream,
        ConsistencyOptions(**options),  # type: ignore[arg-type]
        clock=time.clock,
        sleep=time.sleep,
    )

    def read(cache: Cache) -> asyncio.Task[bytes | None]:
        return asyncio.create_task(warning_of(reads, cache))

    read.reads = reads  # type: ignore[attr-defined]
    return read


async def test_reads_that_wait_together_share_one_probe(time: FakeTime) -> None:
    upstream = Upstream(time)
    read = reads_with(time, upstream)
    cache = Cache(time, rv=10)
    tasks = [read(cache) for _ in range(100)]
    await settle()
    assert len(upstream.started) == 1
    upstream.answer(10)
    await settle()
    assert [t.result() for t in tasks] == [None] * 100
    assert read.reads.stats.probes == 1  # type: ignore[attr-defined]
    assert read.reads.stats.reads == 100  # type: ignore[attr-defined]


async def test_a_read_that_comes_while_a_probe_is_in_flight_waits_for_the_next_one(
    time: FakeTime,
) -> None:
    upstream = Upstream(time)
    read = reads_with(time, upstream)
    cache = Cache(time, rv=10)
    first = read(cache)
    await settle()
    later = [read(cache) for _ in range(5)]  # their writes may postdate the probe in flight
    await settle()
    assert len(upstream.started) == 1
    upstream.answer(10)
    await time.advance(0.0)
    assert first.done() and first.result() is None
    assert not any(t.done() for t in later)
    await time.advance(0.1)  # the rate: 10 probes/s
    assert len(upstream.started) == 2
    upstream.answer(12)  # a write the cache has not seen yet
    await settle()
    assert not any(t.done() for t in later)
    cache.move(12)
    await settle()
    assert [t.result() for t in later] == [None] * 5
    assert read.reads.stats.waits == 5  # type: ignore[attr-defined]


async def test_probes_start_one_at_a_time_and_within_the_rate(time: FakeTime) -> None:
    upstream = Upstream(time)
    read = reads_with(time, upstream, probes_per_second=4)
    cache = Cache(time, rv=10)
    for _ in range(6):
        task = read(cache)
        await time.advance(0.01)
        upstream.answer(10)
        await time.advance(0.3)
        await task
    gaps = [b - a for a, b in itertools.pairwise(upstream.started)]
    assert len(upstream.started) == 6
    assert all(gap >= 0.25 for gap in gaps), gaps


async def test_a_slow_probe_holds_the_next_round_back_but_not_past_its_end(
    time: FakeTime,
) -> None:
    upstream = Upstream(time)
    read = reads_with(time, upstream, timeout=10.0)
    cache = Cache(time, rv=10)
    first = read(cache)
    await time.advance(0.05)
    second = read(cache)
    await time.advance(1.0)  # the first probe takes a second: no second probe meanwhile
    assert len(upstream.started) == 1
    upstream.answer(10)
    await time.advance(0.0)  # more than 1/rate since it started: the next starts at once
    assert len(upstream.started) == 2
    assert upstream.started[1] == pytest.approx(1.05)
    upstream.answer(10)
    await settle()
    assert first.result() is None and second.result() is None


async def test_a_probe_that_does_not_answer_in_time_serves_the_cache_with_a_warning(
    time: FakeTime,
) -> None:
    upstream = Upstream(time)
    read = reads_with(time, upstream, timeout=3.0)
    task = read(Cache(time))
    await time.advance(2.9)
    assert not task.done()
    await time.advance(0.2)
    warning = task.result()
    assert warning is not None
    assert warning.startswith(b'299 - "not a consistent read: upstream did not tell')
    assert read.reads.stats.fallbacks["probe_timeout"] == 1  # type: ignore[attr-defined]
    upstream.answer(10)  # late: nobody waits for it any more, and that is no error
    await settle()


async def test_the_error_fallback_answers_504_with_retry_after(time: FakeTime) -> None:
    upstream = Upstream(time)
    read = reads_with(time, upstream, timeout=1.0, on_timeout="error")
    task = read(Cache(time))
    await time.advance(1.5)
    with pytest.raises(ApiError) as caught:
        task.result()
    assert caught.value.code == 504
    assert caught.value.reason == "Timeout"
    assert caught.value.retry_after == 1
    upstream.answer(10)
    await settle()


async def test_a_failed_probe_falls_back_and_the_next_read_probes_again(time: FakeTime) -> None:
    upstream = Upstream(time)
    read = reads_with(time, upstream)
    cache = Cache(time)
    task = read(cache)
    await settle()
    upstream.fail(TransportError("connection refused"))
    await settle()
    assert b"upstream could not be asked (connection refused)" in (task.result() or b"")
    assert read.reads.stats.probe_errors == 1  # type: ignore[attr-defined]
    task = read(cache)
    await time.advance(0.1)
    upstream.answer(10)
    await settle()
    assert task.result() is None


async def test_a_cache_that_does_not_reach_upstreams_rv_in_time_falls_back(
    time: FakeTime,
) -> None:
    upstream = Upstream(time)
    read = reads_with(time, upstream, timeout=3.0)
    cache = Cache(time, rv=10)
    task = read(cache)
    await time.advance(1.0)
    upstream.answer(20)  # the probe took 1 s: 2 s left for the cache
    await time.advance(1.9)
    assert not task.done()
    await time.advance(0.2)
    assert b"the cache is at resourceVersion 10, upstream at 20" in (task.result() or b"")
    stats = read.reads.stats  # type: ignore[attr-defined]
    assert stats.fallbacks == {"probe_failed": 0, "probe_timeout": 0, "cache_behind": 1}
    assert stats.waits == 1
    assert stats.wait_seconds == pytest.approx(3.0)


async def test_closing_cancels_the_probe_in_flight(time: FakeTime) -> None:
    upstream = Upstream(time)
    probe = SharedProbe(upstream, clock=time.clock, sleep=time.sleep)
    answer = probe.current()
    await settle()
    assert probe.in_flight
    await probe.close()
    assert not probe.in_flight
    assert answer.cancelled()
