"""A work queue for controllers: client-go's ``util/workqueue`` on asyncio.

Side consumers of the informer (hooks, index maintenance, anything that reconciles by key) put
keys here and process them from a few worker tasks. Three layers, as in client-go:

* :class:`WorkQueue` — ``add`` / ``get`` / ``done``. Its guarantees:

  - **No concurrent processing of one item.** An item handed out by ``get`` is *processing*
    until ``done``; adding it meanwhile marks it dirty, and ``done`` queues it again, once
    (client-go ``queue.go``: the ``dirty`` and ``processing`` sets).
  - **Deduplication.** An item that waits in the queue is not queued twice: ten adds before a
    ``get`` mean one processing.
  - **Every add is seen.** An item added at time *t* is handed out by a ``get`` that starts after
    *t* — exactly once if it is not added again.
  - **Fairness.** Items are handed out in the order they were queued (FIFO); waiting getters are
    woken in the order they started waiting.

* :class:`DelayingQueue` adds ``add_after``: delayed items wait in one heap, promoted by one
  timer task that sleeps until the earliest deadline — never a task per item. The task exists
  only while something waits, and ``shut_down`` cancels it and drops the waiting items. Two
  ``add_after`` of one item keep the earlier deadline. Unlike a recent client-go change, a
  delayed add of an item being processed is *not* dropped: it is the usual "retry later"
  (``add_rate_limited`` before ``done``), and on expiry it is deferred like any re-add.

* :class:`RateLimitingQueue` adds ``add_rate_limited`` / ``forget`` / ``num_requeues`` on top of
  a :class:`RateLimiter`; :func:`default_controller_rate_limiter` is client-go's
  ``DefaultControllerRateLimiter`` (per-item exponential 5 ms → 1000 s, max'd with a global
  token bucket of 10 qps, burst 100; ``default_rate_limiters.go``).

Shutdown: ``shut_down`` makes the queue ignore new items and wakes every waiting ``get``; items
already queued are still handed out, and ``get`` raises :class:`ShutDown` once none are left.
``shut_down_with_drain`` also waits until every item handed out is ``done``.

Time comes from an injected monotonic ``clock`` and ``sleep`` (``time.monotonic`` and
``asyncio.sleep`` by default), so tests run in virtual time. Metrics go through the small
:class:`WorkQueueMetrics` protocol; the default does nothing, and the library never imports
Prometheus. Like every asyncio object, a queue belongs to one event loop and is not thread-safe.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, Protocol, TypeVar

from cacheproxy.informer.ratelimit import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    RateLimiter,
    default_controller_rate_limiter,
)

__all__ = [
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

logger = logging.getLogger(__name__)

T = TypeVar("T", bound=Hashable)
T_contra = TypeVar("T_contra", bound=Hashable, contravariant=True)

Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]


class ShutDown(Exception):
    """Raised by :meth:`WorkQueue.get` once the queue is shut down and empty: the worker should
    return. Not a :class:`~cacheproxy.errors.CacheProxyError` on purpose — it is the normal end of
    a worker, and retry loops that catch those must not swallow it."""


class WorkQueueMetrics(Protocol):
    """What a queue reports (client-go's ``workqueue_*`` metrics); the queue keeps the clocks.
    Hooks are called after the queue's state changed, and must not raise."""

    def set_depth(self, depth: int) -> None:
        """Distinct items waiting to be processed (queued, or dirty behind their own processing)."""

    def inc_adds(self) -> None:
        """An add that made an item wait (a deduplicated add does not count)."""

    def observe_queue_latency(self, seconds: float) -> None:
        """From the add that made an item wait to the ``get`` that handed it out."""

    def observe_work_duration(self, seconds: float) -> None:
        """From ``get`` to ``done``."""

    def inc_retries(self) -> None:
        """A delayed add (``add_after``, ``add_rate_limited``)."""


class NoopMetrics:
    """The default :class:`WorkQueueMetrics`: records nothing."""

    def set_depth(self, depth: int) -> None:
        pass

    def inc_adds(self) -> None:
        pass

    def observe_queue_latency(self, seconds: float) -> None:
        pass

    def observe_work_duration(self, seconds: float) -> None:
        pass

    def inc_retries(self) -> None:
        pass


class WorkQueue(Generic[T]):
    """A deduplicating FIFO that never hands one item to two workers at once (module docstring).

    Workers loop ``item = await queue.get()`` … ``queue.done(item)`` until ``get`` raises
    :class:`ShutDown`; ``done`` must follow every ``get``, also when processing fails.
    """

    def __init__(
        self,
        *,
        name: str = "",
        clock: Clock = time.monotonic,
        metrics: WorkQueueMetrics | None = None,
    ) -> None:
        self.name = name
        self._clock = clock
        self._metrics: WorkQueueMetrics = metrics if metrics is not None else NoopMetrics()
        self._queue: deque[T] = deque()  # the order of work; each is dirty and not processing
        self._dirty: set[T] = set()  # everything that needs processing
        self._processing: set[T] = set()  # handed out by get, not yet done
        self._getters: deque[asyncio.Future[None]] = deque()
        self._queued_at: dict[T, float] = {}
        self._started_at: dict[T, float] = {}
        self._shutting_down = False
        self._drain = False
        self._drain_progress = asyncio.Event()

    def __len__(self) -> int:
        """Items ready to be handed out (for information: do not gate ``add``/``get`` on it)."""
        return len(self._queue)

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    def add(self, item: T) -> None:
        """Mark ``item`` as needing processing; ignored after shutdown."""
        if self._shutting_down or item in self._dirty:
            return
        self._dirty.add(item)
        self._queued_at[item] = self._clock()
        if item not in self._processing:  # else deferred: done() queues it
            self._queue.append(item)
            self._wake_getter()
        self._metrics.inc_adds()
        self._metrics.set_depth(len(self._dirty))

    async def get(self) -> T:
        """The next item, waiting for one; the caller must call :meth:`done` with it.

        Raises :class:`ShutDown` when the queue is shut down and nothing is left to hand out.
        """
        while not self._queue:
            if self._shutting_down:
                raise ShutDown
            waiter = asyncio.get_running_loop().create_future()
            self._getters.append(waiter)
            try:
                await waiter
            except BaseException:
                waiter.cancel()
                if waiter in self._getters:
                    self._getters.remove(waiter)
                elif self._queue:
                    self._wake_getter()  # we were woken but will not take the item: pass it on
                raise
        item = self._queue.popleft()
        self._dirty.discard(item)
        self._processing.add(item)
        now = self._clock()
        self._started_at[item] = now
        self._metrics.observe_queue_latency(now - self._queued_at.pop(item, now))
        self._metrics.set_depth(len(self._dirty))
        return item

    def done(self, item: T) -> None:
        """End the processing of ``item``; if it was added meanwhile, queue it again (once).

        Raises ``ValueError`` if ``item`` is not being processed: a worker bug worth seeing.
        """
        if item not in self._processing:
            raise ValueError(f"work queue {self.name!r}: done({item!r}) without get")
        self._processing.remove(item)
        if item in self._dirty:
            self._queue.append(item)
            self._wake_getter()
        if not self._processing:
            self._drain_progress.set()
        now = self._clock()
        self._metrics.observe_work_duration(now - self._started_at.pop(item, now))

    def shut_down(self) -> None:
        """Ignore new items, wake every waiting getter, and stop waiting in
        :meth:`shut_down_with_drain`. Queued items are still handed out. Idempotent."""
        self._drain = False
        self._drain_progress.set()
        self._begin_shutdown()

    async def shut_down_with_drain(self) -> None:
        """Shut down, then wait until every item handed out by ``get`` is ``done`` — including
        items still queued now if workers take them. A :meth:`shut_down` call ends the wait."""
        self._drain = True
        self._begin_shutdown()
        while self._processing and self._drain:
            self._drain_progress.clear()
            await self._drain_progress.wait()

    def _begin_shutdown(self) -> None:
        self._shutting_down = True
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)

    def _wake_getter(self) -> None:
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return


class DelayingQueue(WorkQueue[T]):
    """A :class:`WorkQueue` that can add an item later (module docstring)."""

    def __init__(
        self,
        *,
        name: str = "",
        clock: Clock = time.monotonic,
        sleep: Sleep = asyncio.sleep,
        metrics: WorkQueueMetrics | None = None,
    ) -> None:
        super().__init__(name=name, clock=clock, metrics=metrics)
        self._sleep = sleep
        self._seq = itertools.count()
        # A heap of (ready_at, seq, item); an entry is live while _waiting_at[item] is its
        # (ready_at, seq): moving an item earlier pushes a new entry, the old one is skipped.
        self._waiting: list[tuple[float, int, T]] = []
        self._waiting_at: dict[T, tuple[float, int]] = {}
        self._timer: asyncio.Task[None] | None = None
        self._timer_deadline = math.inf

    def add_after(self, item: T, delay: float) -> None:
        """Add ``item`` once ``delay`` seconds have passed (now if ``delay <= 0``). If it already
        waits, the earlier deadline wins. Ignored after shutdown. A delay needs a running loop."""
        if self._shutting_down:
            return
        self._metrics.inc_retries()
        if delay <= 0:
            self.add(item)
            return
        ready_at = self._clock() + delay
        current = self._waiting_at.get(item)
        if current is not None and current[0] <= ready_at:
            return
        seq = next(self._seq)
        self._waiting_at[item] = (ready_at, seq)
        heapq.heappush(self._waiting, (ready_at, seq, item))
        self._arm_timer()

    def waiting(self) -> int:
        """How many items wait for their delay (for information)."""
        return len(self._waiting_at)

    def shut_down(self) -> None:
        super().shut_down()
        self._stop_timer()

    async def shut_down_with_drain(self) -> None:
        self._stop_timer()
        await super().shut_down_with_drain()

    def _stop_timer(self) -> None:
        self._waiting.clear()
        self._waiting_at.clear()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_deadline = math.inf

    def _head_deadline(self) -> float:
        """The earliest live deadline, dropping superseded heap entries on the way."""
        while self._waiting:
            ready_at, seq, item = self._waiting[0]
            if self._waiting_at.get(item) == (ready_at, seq):
                return ready_at
            heapq.heappop(self._waiting)
        return math.inf

    def _arm_timer(self) -> None:
        """Make the one timer task sleep toward the earliest deadline."""
        head = self._head_deadline()
        if head == math.inf or (self._timer is not None and self._timer_deadline <= head):
            return
        if self._timer is not None:
            self._timer.cancel()  # it sleeps toward a later deadline
        self._timer_deadline = head
        self._timer = asyncio.get_running_loop().create_task(
            self._run_timer(), name=f"workqueue[{self.name}]-delays"
        )

    def _promote_ready(self) -> None:
        now = self._clock()
        while self._head_deadline() <= now:
            _, _, item = heapq.heappop(self._waiting)
            del self._waiting_at[item]
            self.add(item)

    async def _run_timer(self) -> None:
        me = asyncio.current_task()
        try:
            while True:
                self._promote_ready()
                head = self._head_deadline()
                if head == math.inf:
                    return
                self._timer_deadline = head
                await self._sleep(head - self._clock())
        except asyncio.CancelledError:
            raise
        except Exception:
            # Logged, not raised: nobody awaits this task. The next add_after starts a new one.
            logger.exception("work queue %r: the delay timer failed", self.name)
        finally:
            if self._timer is me:
                self._timer = None
                self._timer_deadline = math.inf


class RateLimitingQueue(DelayingQueue[T]):
    """A :class:`DelayingQueue` whose retries wait as a :class:`RateLimiter` says.

    Call :meth:`forget` when an item succeeds (or is given up on), or its backoff keeps growing.
    """

    def __init__(
        self,
        rate_limiter: RateLimiter[T] | None = None,
        *,
        name: str = "",
        clock: Clock = time.monotonic,
        sleep: Sleep = asyncio.sleep,
        metrics: WorkQueueMetrics | None = None,
    ) -> None:
        super().__init__(name=name, clock=clock, sleep=sleep, metrics=metrics)
        self.rate_limiter: RateLimiter[T] = (
            rate_limiter
            if rate_limiter is not None
            else default_controller_rate_limiter(clock=clock)
        )

    def add_rate_limited(self, item: T) -> None:
        """Add ``item`` after the rate limiter's delay for it (counting one more requeue)."""
        if self._shutting_down:
            return
        self.add_after(item, self.rate_limiter.when(item))

    def forget(self, item: T) -> None:
        """Reset ``item``'s rate limiting; it still needs its :meth:`done`."""
        self.rate_limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        return self.rate_limiter.num_requeues(item)
