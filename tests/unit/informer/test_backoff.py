"""The Backoff's arithmetic on a fake clock: doubling to the cap, jitter on top, started over by
``reset()`` (a success) and not by time alone unless ``reset_after`` asks for it."""

from __future__ import annotations

import random

import pytest

from cacheproxy.informer import Backoff


class FixedRandom(random.Random):
    """``random()`` is always ``value``: the jitter is known."""

    def __init__(self, value: float) -> None:
        super().__init__(0)
        self.value = value

    def random(self) -> float:
        return self.value


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def backoff(*, jitter: float = 0.0, **options: float) -> tuple[Backoff, FakeClock]:
    clock = FakeClock()
    return Backoff(clock=clock, rng=FixedRandom(jitter), **options), clock


def test_consecutive_delays_double_up_to_the_cap() -> None:
    b, _ = backoff()
    assert [b.next_delay() for _ in range(8)] == [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0]


def test_the_jitter_adds_up_to_the_whole_delay_on_top_even_at_the_cap() -> None:
    b, _ = backoff(jitter=0.5)
    assert [b.next_delay() for _ in range(3)] == pytest.approx([1.2, 2.4, 4.8])
    b, _ = backoff(jitter=0.999_999)
    delays = [b.next_delay() for _ in range(10)]
    assert 59.9 < delays[-1] < 60.0


def test_a_reset_starts_over_at_the_initial_delay() -> None:
    b, _ = backoff()
    for _ in range(5):
        b.next_delay()
    b.reset()
    assert [b.next_delay() for _ in range(2)] == [0.8, 1.6]


def test_time_alone_does_not_start_it_over() -> None:
    b, clock = backoff()
    b.next_delay()
    clock.now += 3600
    assert b.next_delay() == 1.6


def test_reset_after_also_starts_it_over_after_a_quiet_period() -> None:
    b, clock = backoff(reset_after=120.0)
    b.next_delay()
    clock.now += 60
    assert b.next_delay() == 1.6
    clock.now += 121
    assert b.next_delay() == 0.8
