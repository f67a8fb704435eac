"""The work queue keeps client-go's ``util/workqueue`` guarantees: deduplication, FIFO order, no
item processed by two workers at once, re-adds during processing deferred until ``done``,
delayed adds in deadline order from one timer task, the controller rate limiters' arithmetic,
and a shutdown that wakes getters and leaves no task behind. Time is virtual throughout.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cacheproxy.informer import (
    BucketRateLimiter,
    DelayingQueue,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    RateLimitingQueue,
    ShutDown,
    WorkQueue,
    default_controller_rate_limiter,
    workqueue,
)

T = TypeVar("T", bound=Hashable)

TIMER_TASK = "workqueue[q]-delays"


async def settle() -> None:
    """Let every task that can run, run (wake-ups chain through a few loop iterations)."""
    for _ in range(20):
        await asyncio.sleep(0)


class VirtualTime:
    """A monotonic clock and a sleep that move only when the test calls :meth:`advance`."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def clock(self) -> float:
        return self.now

    async def sleep(self, delay: float) -> None:
        if delay <= 0:
            await asyncio.sleep(0)
            return
        wake = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self.now + delay, next(self._seq), wake))
        await wake

    def sleeping(self) -> int:
        return sum(1 for *_, wake in self._sleepers if not wake.done())

    async def advance(self, seconds: float) -> None:
        """Move time forward, waking each sleeper at its own deadline, in order."""
        target = self.now + seconds
        while self._sleepers and self._sleepers[0][0] <= target:
            deadline, _, wake = heapq.heappop(self._sleepers)
            self.now = max(self.now, deadline)
            if not wake.done():
                wake.set_result(None)
                await settle()
        self.now = target
        await settle()


def timer_tasks() -> list[asyncio.Task[object]]:
    return [t for t in asyncio.all_tasks() if t.get_name() == TIMER_TASK and not t.done()]


async def get_ready(queue: WorkQueue[T]) -> T:
    """``get`` when an item is ready: it must not wait (a guard fails the test, not hang it)."""
    return await asyncio.wait_for(queue.get(), 1)


async def take_ready(queue: WorkQueue[str]) -> list[str]:
    """``get`` + ``done`` every item that is ready now, in the order handed out."""
    items = []
    while len(queue):
        item = await get_ready(queue)
        queue.done(item)
        items.append(item)
    return items


# --- the basic queue ---------------------------------------------------------------------------


async def test_an_item_added_twice_before_get_is_handed_out_once() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    queue.add("a")
    assert len(queue) == 1
    assert await queue.get() == "a"
    queue.done("a")
    assert len(queue) == 0


async def test_items_are_handed_out_in_the_order_they_were_first_added() -> None:
    queue: WorkQueue[str] = WorkQueue()
    for item in ["c", "a", "c", "b", "a"]:
        queue.add(item)
    assert await take_ready(queue) == ["c", "a", "b"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=20), max_size=50))
async def test_any_sequence_of_adds_is_handed_out_in_first_add_order_without_duplicates(
    adds: list[int],
) -> None:
    queue: WorkQueue[int] = WorkQueue()
    for item in adds:
        queue.add(item)
    handed_out = []
    while len(queue):
        handed_out.append(await get_ready(queue))
    assert handed_out == list(dict.fromkeys(adds))


async def test_an_item_added_while_processing_is_processed_once_more_after_done() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    assert await queue.get() == "a"
    queue.add("a")
    queue.add("a")
    assert len(queue) == 0, "deferred until done, not ready for another worker"
    queue.done("a")
    assert len(queue) == 1
    assert await queue.get() == "a"
    queue.done("a")
    assert len(queue) == 0


async def test_a_waiting_worker_does_not_get_an_item_another_worker_is_processing() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    assert await queue.get() == "a"
    second_worker = asyncio.create_task(queue.get())
    queue.add("a")
    await settle()
    assert not second_worker.done()
    queue.done("a")
    assert await asyncio.wait_for(second_worker, 1) == "a"
    queue.done("a")


async def test_waiting_getters_are_served_in_the_order_they_started_waiting() -> None:
    queue: WorkQueue[str] = WorkQueue()
    getters = [asyncio.create_task(queue.get()) for _ in range(3)]
    await settle()
    for item in ["x", "y", "z"]:
        queue.add(item)
    assert await asyncio.wait_for(asyncio.gather(*getters), 1) == ["x", "y", "z"]


async def test_a_cancelled_getter_passes_its_wake_up_on_to_the_next_getter() -> None:
    queue: WorkQueue[str] = WorkQueue()
    first = asyncio.create_task(queue.get())
    second = asyncio.create_task(queue.get())
    await settle()
    queue.add("a")  # wakes `first` ...
    first.cancel()  # ... which is cancelled before it can take the item
    assert await asyncio.wait_for(second, 1) == "a"
    with pytest.raises(asyncio.CancelledError):
        await first


async def test_done_for_an_item_not_being_processed_is_an_error() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    with pytest.raises(ValueError, match="without get"):
        queue.done("a")


@dataclass
class _Run:
    """What one scenario observed, stamped with a logical clock."""

    tick: int = 0
    in_flight: set[int] = field(default_factory=set)
    last_add: dict[int, int] = field(default_factory=dict)
    starts: dict[int, list[int]] = field(default_factory=dict)

    def now(self) -> int:
        self.tick += 1
        return self.tick

    def started(self, item: int) -> None:
        assert item not in self.in_flight, f"{item} handed to two workers at once"
        self.in_flight.add(item)
        self.starts.setdefault(item, []).append(self.now())

    def check_every_add_processed_once_afterwards(self) -> None:
        for item, added in self.last_add.items():
            after = [t for t in self.starts.get(item, []) if t > added]
            assert len(after) == 1, f"{item} last added at {added}, processing starts {after}"


op = st.one_of(
    st.tuples(st.just("add"), st.integers(min_value=0, max_value=5)),
    st.tuples(st.just("get"), st.just(0)),
    st.tuples(st.just("done"), st.integers(min_value=0, max_value=10)),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(op, max_size=80))
async def test_random_adds_gets_and_dones_never_process_an_item_twice_at_once(
    ops: list[tuple[str, int]],
) -> None:
    queue: WorkQueue[int] = WorkQueue()
    run = _Run()
    processing: list[int] = []  # in get order, to pick which one a `done` finishes
    for kind, arg in ops:
        if kind == "add":
            queue.add(arg)
            run.last_add[arg] = run.now()
        elif kind == "get" and len(queue):
            item = await get_ready(queue)
            run.started(item)
            processing.append(item)
        elif kind == "done" and processing:
            item = processing.pop(arg % len(processing))
            run.in_flight.discard(item)
            queue.done(item)
        assert len(queue) + len(processing) <= len(run.last_add)
    for item in processing:  # finish what is in flight, then drain
        run.in_flight.discard(item)
        queue.done(item)
    while len(queue):
        item = await get_ready(queue)
        run.started(item)
        run.in_flight.discard(item)
        queue.done(item)
    run.check_every_add_processed_once_afterwards()


@settings(max_examples=150, deadline=None)
@given(
    adds=st.lists(
        st.tuples(st.integers(min_value=0, max_value=6), st.integers(min_value=0, max_value=3)),
        min_size=1,
        max_size=40,
    ),
    work_yields=st.lists(st.integers(min_value=0, max_value=4), min_size=1, max_size=10),
    workers=st.integers(min_value=1, max_value=4),
)
async def test_concurrent_workers_never_process_one_item_at_once_and_miss_no_add(
    adds: list[tuple[int, int]], work_yields: list[int], workers: int
) -> None:
    queue: WorkQueue[int] = WorkQueue()
    run = _Run()
    durations = itertools.cycle(work_yields)

    async def worker() -> None:
        while True:
            try:
                item = await queue.get()
            except ShutDown:
                return
            run.started(item)
            for _ in range(next(durations)):
                await asyncio.sleep(0)
            run.in_flight.discard(item)
            queue.done(item)

    async with asyncio.timeout(5), asyncio.TaskGroup() as group:  # a guard: fails, not hangs
        for n in range(workers):
            group.create_task(worker(), name=f"worker-{n}")
        for item, pause in adds:
            queue.add(item)
            run.last_add[item] = run.now()
            for _ in range(pause):
                await asyncio.sleep(0)
        await queue.shut_down_with_drain()
    run.check_every_add_processed_once_afterwards()
    assert len(queue) == 0


# --- shutdown ----------------------------------------------------------------------------------


async def test_shut_down_wakes_every_waiting_getter_with_shut_down() -> None:
    queue: WorkQueue[str] = WorkQueue()
    getters = [asyncio.create_task(queue.get()) for _ in range(3)]
    await settle()
    queue.shut_down()
    results = await asyncio.wait_for(asyncio.gather(*getters, return_exceptions=True), 1)
    assert all(isinstance(r, ShutDown) for r in results)
    assert queue.shutting_down


async def test_items_queued_before_shut_down_are_still_handed_out_then_get_raises() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    queue.shut_down()
    queue.add("b")  # ignored
    assert await queue.get() == "a"
    queue.done("a")
    with pytest.raises(ShutDown):
        await queue.get()


async def test_shut_down_with_drain_waits_for_items_being_processed() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    await queue.get()
    drain = asyncio.create_task(queue.shut_down_with_drain())
    await settle()
    assert not drain.done()
    assert queue.shutting_down
    queue.done("a")
    await asyncio.wait_for(drain, 1)


async def test_shut_down_ends_a_drain_that_is_still_waiting() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    await queue.get()
    drain = asyncio.create_task(queue.shut_down_with_drain())
    await settle()
    queue.shut_down()
    await asyncio.wait_for(drain, 1)
    queue.done("a")


async def test_shut_down_with_drain_returns_at_once_when_nothing_is_processing() -> None:
    queue: WorkQueue[str] = WorkQueue()
    await asyncio.wait_for(queue.shut_down_with_drain(), 1)
    with pytest.raises(ShutDown):
        await queue.get()


# --- delayed adds ------------------------------------------------------------------------------


async def test_add_after_makes_an_item_ready_exactly_at_its_deadline() -> None:
    time = VirtualTime()
    queue: DelayingQueue[str] = DelayingQueue(name="q", clock=time.clock, sleep=time.sleep)
    queue.add_after("a", 0.05)
    await time.advance(0.049)
    assert len(queue) == 0
    assert queue.waiting() == 1
    await time.advance(0.001)
    assert len(queue) == 1
    assert queue.waiting() == 0
    assert await queue.get() == "a"
    queue.done("a")
    queue.shut_down()


async def test_delayed_items_are_handed_out_in_deadline_order() -> None:
    time = VirtualTime()
    queue: DelayingQueue[str] = DelayingQueue(name="q", clock=time.clock, sleep=time.sleep)
    queue.add_after("first", 1.0)
    queue.add_after("second", 0.5)
    queue.add_after("third", 0.25)
    await time.advance(2.0)
    assert await take_ready(queue) == ["third", "second", "first"]
    queue.shut_down()


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from("abcdef"), st.integers(min_value=1, max_value=8)),
        min_size=1,
        max_size=25,
    )
)
async def test_delayed_items_become_ready_at_their_earliest_deadline_in_order(
    delays: list[tuple[str, int]],
) -> None:
    time = VirtualTime()
    queue: DelayingQueue[str] = DelayingQueue(name="q", clock=time.clock, sleep=time.sleep)
    earliest: dict[str, tuple[int, int]] = {}  # item -> (delay, index of the add that set it)
    for index, (item, delay) in enumerate(delays):
        queue.add_after(item, delay)
        if item not in earliest or delay < earliest[item][0]:
            earliest[item] = (delay, index)
    for second in range(1, 9):
        await time.advance(1)
        due = sorted((d, i, item) for item, (d, i) in earliest.items() if d == second)
        assert await take_ready(queue) == [item for *_, item in due]
    assert queue.waiting() == 0
    assert timer_tasks() == [], "the timer ends when nothing waits"
    queue.shut_down()


async def test_an_earlier_deadline_added_while_the_timer_sleeps_wakes_it_sooner() -> None:
    time = VirtualTime()
    queue: DelayingQueue[str] = DelayingQueue(name="q", clock=time.clock, sleep=time.sleep)
    queue.add_after("late", 10)
    await settle()  # the timer now sleeps toward t+10
    queue.add_after("early", 0.1)
    await time.advance(0.1)
    assert await take_ready(queue) == ["early"]
    await settle()
    assert len(timer_tasks()) == 1, "the replaced timer ended; one sleeps toward 'late'"
    await time.advance(9.9)
    assert await take_ready(queue) == ["late"]
    queue.shut_down()


async def test_add_after_with_an_earlier_deadline_moves_the_item_earlier() -> None:
    time = VirtualTime()
    queue: DelayingQueue[str] = DelayingQueue(name="q", clock=time.clock, sleep=time.sleep)
    queue.add_after("a", 0.05)
    queue.add_after("a", 0.03)
    await time.advance(0.03)
    assert await take_ready(queue) == ["a"]
    await time.advance(0.05)
    assert len(queue) == 0, "the later deadline was replaced, not kept as a second add"
    queue.shut_down()


async def test_add_after_with_a_later_deadline_keeps_the_earlier_one() -> None:
    time = VirtualTime()
    queue: DelayingQueue[str] = DelayingQueue(name="q", clock=time.clock, sleep=time.sleep)
    queue.add_after("a", 0.05)
    queue.add_after("a", 0.07)
    await time.advance(0.05)
    assert await take_ready(queue) == ["a"]
    await time.advance(0.05)
    assert len(queue) == 0
    queue.shut_down()


async def test_add_after_without_delay_adds_at_once_and_starts_no_timer() -> None:
    time = VirtualTime()
    queue: DelayingQueue[str] = DelayingQueue(name="q", clock=time.clock, sleep=time.sleep)
    queue.add_after("a", 0)
    queue.add_after("b", -1)
    assert len(queue) == 2
    assert timer_tasks() == []
    queue.shut_down()


async def test_many_delayed_items_share_one_timer_task() -> None:
    time = VirtualTime()
    queue: DelayingQueue[int] = DelayingQueue(name="q", clock=time.clock, sleep=time.sleep)
    for n in range(100):
        queue.add_after(n, 1 + n % 7)
    await settle()
    assert len(timer_tasks()) == 1
    assert time.sleeping() == 1
    await time.advance(3.5)
    assert len(queue) == sum(1 for n in range(100) if 1 + n % 7 <= 3.5)
    assert len(timer_tasks()) == 1
    queue.shut_down()


async def test_a_delayed_add_of_an_item_being_processed_is_deferred_until_done() -> None:
    time = VirtualTime()
    queue: DelayingQueue[str] = DelayingQueue(name="q", clock=time.clock, sleep=time.sleep)
    queue.add("a")
    await queue.get()
    queue.add_after("a", 0.01)  # "retry later", then done
    await time.advance(0.01)
    assert len(queue) == 0
    queue.done("a")
    assert await take_ready(queue) == ["a"]
    queue.shut_down()


async def test_shut_down_cancels_the_timer_and_drops_delayed_items() -> None:
    time = VirtualTime()
    queue: DelayingQueue[str] = DelayingQueue(name="q", clock=time.clock, sleep=time.sleep)
    queue.add_after("a", 1)
    await settle()
    [timer] = timer_tasks()
    queue.shut_down()
    await settle()
    assert timer.cancelled()
    await time.advance(2)
    assert len(queue) == 0
    assert queue.waiting() == 0
    queue.add_after("b", 1)  # ignored, and starts nothing
    assert timer_tasks() == []


async def test_shut_down_with_drain_also_stops_the_timer() -> None:
    time = VirtualTime()
    queue: DelayingQueue[str] = DelayingQueue(name="q", clock=time.clock, sleep=time.sleep)
    queue.add_after("a", 1)
    await settle()
    await queue.shut_down_with_drain()
    await settle()
    assert timer_tasks() == []


# --- rate limiters -----------------------------------------------------------------------------


def test_exponential_backoff_doubles_from_5ms_per_failure_and_is_capped_at_1000s() -> None:
    limiter = ItemExponentialFailureRateLimiter()
    delays = [limiter.when("a") for _ in range(20)]
    assert delays[:5] == pytest.approx([0.005, 0.010, 0.020, 0.040, 0.080])
    assert delays[17] == pytest.approx(0.005 * 2**17)  # 655.36 s, the last below the cap
    assert delays[18:] == [1000.0, 1000.0]
    assert limiter.num_requeues("a") == 20


def test_exponential_backoff_stays_at_the_cap_after_very_many_failures() -> None:
    limiter = ItemExponentialFailureRateLimiter(base=0.005, max=1000.0)
    for _ in range(5000):
        delay = limiter.when("a")
    assert delay == 1000.0


def test_forget_resets_the_exponential_backoff_of_that_item_only() -> None:
    limiter = ItemExponentialFailureRateLimiter()
    for _ in range(3):
        limiter.when("a")
        limiter.when("b")
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    assert limiter.when("a") == pytest.approx(0.005)
    assert limiter.when("b") == pytest.approx(0.040)


def test_bucket_limiter_allows_a_burst_then_spaces_tries_by_its_rate() -> None:
    time = VirtualTime()
    limiter = BucketRateLimiter(qps=10, burst=100, clock=time.clock)
    assert [limiter.when(n) for n in range(100)] == [0.0] * 100
    assert [limiter.when(n) for n in range(3)] == pytest.approx([0.1, 0.2, 0.3])
    time.now += 1.0  # 10 tokens back; 3 were already promised
    assert [limiter.when(n) for n in range(8)] == pytest.approx([0.0] * 7 + [0.1])
    assert limiter.num_requeues(0) == 0


def test_bucket_limiter_refills_to_its_burst_and_no_further() -> None:
    time = VirtualTime()
    limiter = BucketRateLimiter(qps=10, burst=5, clock=time.clock)
    for _ in range(5):
        limiter.when("x")
    time.now += 3600.0
    assert [limiter.when("x") for _ in range(6)] == pytest.approx([0.0] * 5 + [0.1])


def test_max_of_limiters_waits_the_longest_counts_the_most_and_forgets_everywhere() -> None:
    time = VirtualTime()
    slow = ItemExponentialFailureRateLimiter(base=1.0, max=60.0)
    fast = ItemExponentialFailureRateLimiter(base=0.001, max=60.0)
    bucket = BucketRateLimiter(qps=1, burst=1, clock=time.clock)
    limiter: MaxOfRateLimiter[Hashable] = MaxOfRateLimiter(fast, slow, bucket)
    assert [limiter.when("a") for _ in range(3)] == pytest.approx([1.0, 2.0, 4.0])
    assert fast.num_requeues("a") == 3, "every limiter is asked"
    assert limiter.num_requeues("a") == 3
    limiter.forget("a")
    assert (slow.num_requeues("a"), fast.num_requeues("a")) == (0, 0)
    assert limiter.when("b") == pytest.approx(3.0), "the bucket, 3 tries in debt, waits longest"


def test_default_controller_rate_limiter_is_5ms_exponential_max_10qps_burst_100_bucket() -> None:
    time = VirtualTime()
    limiter = default_controller_rate_limiter(clock=time.clock)
    assert [limiter.when(n) for n in range(100)] == pytest.approx([0.005] * 100)
    assert limiter.when(100) == pytest.approx(0.1), "burst spent: the bucket dominates"
    time.now += 60
    assert [limiter.when("a") for _ in range(4)] == pytest.approx([0.005, 0.01, 0.02, 0.04])
    for _ in range(30):
        limiter.when("a")
    assert limiter.when("a") == 1000.0


# --- the rate-limiting queue -------------------------------------------------------------------


async def test_failed_items_are_retried_after_5_10_20ms_and_forget_starts_over() -> None:
    time = VirtualTime()
    queue: RateLimitingQueue[str] = RateLimitingQueue(
        ItemExponentialFailureRateLimiter(), name="q", clock=time.clock, sleep=time.sleep
    )
    queue.add("a")
    for backoff in [0.005, 0.010, 0.020]:
        item = await queue.get()
        queue.add_rate_limited(item)  # the try failed
        queue.done(item)
        await time.advance(backoff - 0.0001)
        assert len(queue) == 0
        await time.advance(0.0001)
        assert len(queue) == 1
    assert queue.num_requeues("a") == 3
    item = await queue.get()
    queue.forget(item)  # the try succeeded
    queue.done(item)
    assert queue.num_requeues("a") == 0
    queue.add_rate_limited("a")
    await time.advance(0.005)
    assert await take_ready(queue) == ["a"]
    queue.shut_down()


async def test_rate_limiting_queue_defaults_to_the_controller_rate_limiter() -> None:
    time = VirtualTime()
    queue: RateLimitingQueue[int] = RateLimitingQueue(name="q", clock=time.clock, sleep=time.sleep)
    for n in range(101):
        queue.add_rate_limited(n)
    await time.advance(0.005)
    assert len(queue) == 100, "100 within the burst after 5 ms; the 101st waits for a token"
    await time.advance(0.095)
    assert len(queue) == 101
    queue.shut_down()


async def test_add_rate_limited_after_shut_down_is_ignored_and_not_counted() -> None:
    queue: RateLimitingQueue[str] = RateLimitingQueue(ItemExponentialFailureRateLimiter())
    queue.shut_down()
    queue.add_rate_limited("a")
    assert queue.num_requeues("a") == 0
    assert len(queue) == 0


# --- metrics -----------------------------------------------------------------------------------


@dataclass
class RecordingMetrics:
    depths: list[int] = field(default_factory=list)
    adds: int = 0
    latencies: list[float] = field(default_factory=list)
    durations: list[float] = field(default_factory=list)
    retries: int = 0

    def set_depth(self, depth: int) -> None:
        self.depths.append(depth)

    def inc_adds(self) -> None:
        self.adds += 1

    def observe_queue_latency(self, seconds: float) -> None:
        self.latencies.append(seconds)

    def observe_work_duration(self, seconds: float) -> None:
        self.durations.append(seconds)

    def inc_retries(self) -> None:
        self.retries += 1


async def test_metrics_hooks_see_depth_adds_latency_work_duration_and_retries() -> None:
    time = VirtualTime()
    metrics = RecordingMetrics()
    queue: RateLimitingQueue[str] = RateLimitingQueue(
        ItemExponentialFailureRateLimiter(),
        name="q",
        clock=time.clock,
        sleep=time.sleep,
        metrics=metrics,
    )
    queue.add("a")
    queue.add("a")  # deduplicated: not an add
    queue.add("b")
    await time.advance(2)
    item = await queue.get()
    await time.advance(3)
    queue.add_rate_limited(item)
    queue.done(item)
    assert metrics.adds == 2
    assert metrics.depths == [1, 2, 1]
    assert metrics.latencies == [2.0]
    assert metrics.durations == [3.0]
    assert metrics.retries == 1
    queue.shut_down()


async def test_queues_work_with_the_default_no_op_metrics_and_real_time() -> None:
    queue: DelayingQueue[str] = DelayingQueue(name="q")
    queue.add_after("a", 0.001)
    assert await asyncio.wait_for(queue.get(), 1) == "a"
    queue.done("a")
    queue.shut_down()


def test_the_public_surface_is_what_we_mean_it_to_be() -> None:
    assert sorted(workqueue.__all__) == [
        "BucketRateLimiter",
        "DelayingQueue",
        "ItemExponentialFailureRateLimiter",
        "MaxOfRateLimiter",
        "NoopMetrics",
        "RateLimiter",
        "RateLimitingQueue",
        "ShutDown",
        "WorkQueue",
        "WorkQueueMetrics",
        "default_controller_rate_limiter",
    ]
