"""Numbers and verdicts as the benchmark reports write them (seconds, ratios, MiB)."""

from __future__ import annotations

import math

__all__ = ["MIB", "X", "div", "mb", "seconds", "times", "verdict", "verdict_at_least"]

X = "\N{MULTIPLICATION SIGN}"
MIB = 1 << 20


def seconds(value: float) -> str:
    return f"{value:.3f}" if math.isfinite(value) else "n/a"


def times(value: float) -> str:
    return f"{value:.2f}{X}" if math.isfinite(value) else "n/a"


def div(a: float, b: float) -> float:
    return a / b if b > 0 and math.isfinite(a) and math.isfinite(b) else math.nan


def mb(value: float) -> str:
    return f"{value / MIB:,.1f} MiB".replace(",", " ")


def verdict(value: float, budget: float) -> str:
    """PASS when ``value`` is at most ``budget``."""
    return "n/a" if math.isnan(value) else "PASS" if value <= budget else "FAIL"


def verdict_at_least(value: float, budget: float) -> str:
    return "n/a" if math.isnan(value) else "PASS" if value >= budget else "FAIL"
