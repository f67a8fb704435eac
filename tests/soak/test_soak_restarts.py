"""A 24 s chaos soak with daemon restarts: 2-3 s after a daemon started, it is stopped and a new
one started on a new port (syncing alternately by watch-list and by paged list), on top of the
simulator's faults; clients reconnect and relist, and no view ever differs from upstream's.

Part of the regular suite (about 25 s; the known shutdown race can make a stop take 5 s).
"""

from __future__ import annotations

import pytest

from loadtest.scenarios.soak import SoakConfig, run_soak
from tests.soak.support import assert_clean

pytestmark = pytest.mark.slow


@pytest.mark.timeout(120)
async def test_daemon_restarts_under_churn_and_faults_break_no_invariant() -> None:
    config = SoakConfig(
        seconds=24.0, seed=2, daemon_restarts=True, restart_every=(2.0, 3.0), restart_port="new"
    )
    report = await run_soak(config)
    assert_clean(report)
    assert report.daemon_restarts >= 2, report.daemon_restarts
    assert report.clients.retries["ConnectError"] > 0  # clients did meet a stopped daemon
    assert report.clients.events_checked > 2000
    assert len(report.injected) >= 8, report.injected
