"""A 60 s chaos soak (``loadtest.scenarios.soak``): the daemon in front of a churning simulator that
suffers every kind of fault, 16 clients checking every view against upstream's history.

Part of the regular suite (about 65 s). ``python -m loadtest soak --seconds 600`` runs it long.
"""

from __future__ import annotations

import pytest

from loadtest.scenarios.soak import FAULT_KINDS, SoakConfig, run_soak
from tests.soak.support import assert_clean

pytestmark = pytest.mark.slow

TAKEN = {
    "watch 410",
    "watch 429",
    "watch 500",
    "watch 503",
    "list 410",
    "list 429",
    "stream garbage",
    "stream truncate",
    "stream silent",
}
"""Faults every run must have seen requests actually take (not only scheduled)."""


@pytest.mark.timeout(180)
async def test_a_minute_of_churn_and_every_fault_breaks_no_invariant() -> None:
    report = await run_soak(SoakConfig(seconds=60.0, seed=1, restart_port="new"))
    assert_clean(report)
    assert set(report.injected) == set(FAULT_KINDS), report.injected
    assert min(report.injected.values()) >= 1
    assert set(report.consumed) >= TAKEN, report.consumed
    assert report.consumed["list 500"] + report.consumed["list 503"] >= 1, report.consumed
    assert report.sim_restarts >= 1
    assert report.daemon_relists >= 5  # compactions, 410s and restarts made the daemon relist
    assert report.upstream_writes > 1500  # 40 writes/s
    assert report.clients.events_checked > 8000
    assert report.clients.checkpoints > 3000
