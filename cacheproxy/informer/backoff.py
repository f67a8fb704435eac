"""Exponential backoff with jitter, started over by a success (the Reflector's backoff).

Each ``next_delay()`` doubles the base delay, from ``initial`` up to ``cap``, and adds up to
``jitter * delay`` at random; :meth:`Backoff.reset` — its owner's word that a request succeeded —
starts it over at ``initial``. The defaults are client-go's reflector backoff
(``NewExponentialBackoffManager(800ms, 30s, 2m, 2.0, 1.0)``) but for when it starts over:
client-go does only after two minutes without an error, not after a success, so faults half a
minute apart keep it at its cap with upstream healthy in between. ``reset_after`` (off by
default) adds client-go's rule, for an owner that cannot tell a success.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Backoff"]


@dataclass
class Backoff:
    """The delays between retries (see the module); one per Reflector, not shared."""

    initial: float = 0.8
    cap: float = 30.0
    factor: float = 2.0
    jitter: float = 1.0
    reset_after: float | None = None
    """Also start over when more than this many seconds passed since the previous delay."""
    clock: Callable[[], float] = time.monotonic
    rng: random.Random = field(default_factory=random.Random)
    _delay: float = 0.0
    _last: float | None = None

    def next_delay(self) -> float:
        now = self.clock()
        quiet = (
            self.reset_after is not None
            and self._last is not None
            and now - self._last > self.reset_after
        )
        if not self._delay or quiet:
            self._delay = self.initial
        else:
            self._delay = min(self._delay * self.factor, self.cap)
        self._last = now
        return self._delay + self.rng.random() * self.jitter * self._delay

    def reset(self) -> None:
        """A success: the next delay is ``initial`` again."""
        self._delay = 0.0
        self._last = None
