"""Exponential backoff with jitter, reset after a quiet period (client-go's reflector backoff:
``NewExponentialBackoffManager(800ms, 30s, 2m, 2.0, 1.0)``).

Each ``next_delay()`` doubles the base delay up to ``cap`` and adds up to ``jitter * delay`` at
random; when more than ``reset_after`` seconds passed since the previous call, it starts over.
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
    reset_after: float = 120.0
    clock: Callable[[], float] = time.monotonic
    rng: random.Random = field(default_factory=random.Random)
    _delay: float = 0.0
    _last: float | None = None

    def next_delay(self) -> float:
        now = self.clock()
        if self._last is None or now - self._last > self.reset_after:
            self._delay = self.initial
        else:
            self._delay = min(self._delay * self.factor, self.cap) if self._delay else self.initial
        self._last = now
        return self._delay + self.rng.random() * self.jitter * self._delay

    def reset(self) -> None:
        self._delay = 0.0
        self._last = None
