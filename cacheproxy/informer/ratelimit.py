"""Rate limiters for the work queue: when may an item be retried (client-go's
``util/workqueue/default_rate_limiters.go``).

- :class:`ItemExponentialFailureRateLimiter`: per item, ``base · 2^failures`` up to ``max``;
  ``forget`` resets the item.
- :class:`BucketRateLimiter`: a token bucket shared by all items (``qps``, ``burst``), like Go's
  ``x/time/rate``: it starts full and may go into debt.
- :class:`MaxOfRateLimiter`: the longest of several (each counts the try).
- :func:`default_controller_rate_limiter`: client-go's ``DefaultControllerRateLimiter``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Hashable
from typing import Generic, Protocol, TypeVar

__all__ = [
    "BucketRateLimiter",
    "ItemExponentialFailureRateLimiter",
    "MaxOfRateLimiter",
    "RateLimiter",
    "default_controller_rate_limiter",
]

T = TypeVar("T", bound=Hashable)
T_contra = TypeVar("T_contra", bound=Hashable, contravariant=True)
Clock = Callable[[], float]


class RateLimiter(Protocol[T_contra]):
    """Decides how long an item waits before its next try (client-go ``RateLimiter``)."""

    def when(self, item: T_contra) -> float:
        """Seconds ``item`` should wait now; counts as one more requeue."""
        ...

    def forget(self, item: T_contra) -> None:
        """Stop tracking ``item`` (it succeeded, or was given up on)."""
        ...

    def num_requeues(self, item: T_contra) -> int:
        """How many times ``item`` was requeued since it was last forgotten."""
        ...


class ItemExponentialFailureRateLimiter:
    """Per item: ``base * 2**failures``, capped at ``max``; :meth:`forget` starts over."""

    def __init__(self, base: float = 0.005, max: float = 1000.0) -> None:
        if base <= 0 or max < base:
            raise ValueError(f"need 0 < base <= max, got base={base}, max={max}")
        self.base = base
        self.max = max
        self._failures: dict[Hashable, int] = {}

    def when(self, item: Hashable) -> float:
        failures = self._failures.get(item, 0)
        self._failures[item] = failures + 1
        try:
            delay = math.ldexp(self.base, failures)
        except OverflowError:
            return self.max
        return min(delay, self.max)

    def forget(self, item: Hashable) -> None:
        self._failures.pop(item, None)

    def num_requeues(self, item: Hashable) -> int:
        return self._failures.get(item, 0)


class BucketRateLimiter:
    """One token bucket for all items (``golang.org/x/time/rate`` reservations): starts full with
    ``burst`` tokens, refills at ``qps``; each :meth:`when` takes a token, reserving a future one
    when the bucket is empty. Tracks no item, so ``num_requeues`` is always 0."""

    def __init__(
        self, qps: float = 10.0, burst: int = 100, *, clock: Clock = time.monotonic
    ) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError(f"need qps > 0 and burst >= 1, got qps={qps}, burst={burst}")
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock()

    def when(self, item: object) -> float:
        now = self._clock()
        elapsed = max(0.0, now - self._last)
        self._last = max(now, self._last)
        self._tokens = min(float(self.burst), self._tokens + elapsed * self.qps) - 1.0
        return -self._tokens / self.qps if self._tokens < 0 else 0.0

    def forget(self, item: object) -> None:
        pass

    def num_requeues(self, item: object) -> int:
        return 0


class MaxOfRateLimiter(Generic[T]):
    """The longest wait any of ``limiters`` asks for (each is asked, so each counts the try)."""

    def __init__(self, *limiters: RateLimiter[T]) -> None:
        if not limiters:
            raise ValueError("MaxOfRateLimiter needs at least one limiter")
        self.limiters = limiters

    def when(self, item: T) -> float:
        return max([limiter.when(item) for limiter in self.limiters])

    def forget(self, item: T) -> None:
        for limiter in self.limiters:
            limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        return max(limiter.num_requeues(item) for limiter in self.limiters)


def default_controller_rate_limiter(*, clock: Clock = time.monotonic) -> MaxOfRateLimiter[Hashable]:
    """client-go's ``DefaultControllerRateLimiter``: per-item exponential 5 ms → 1000 s, max'd
    with an overall token bucket of 10 qps and burst 100 (which only limits retry speed)."""
    return MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(0.005, 1000.0),
        BucketRateLimiter(10.0, 100, clock=clock),
    )
