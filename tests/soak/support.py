"""What every soak test asserts: no violation, and enough work done that none could be vacuous."""

from __future__ import annotations

from loadtest.harness.soak_model import SoakReport


def assert_clean(report: SoakReport) -> None:
    """Zero violations; the run converged; every figure shows real traffic was checked."""
    text = report.render()
    print(text)  # the figures, in the test's captured output
    assert report.violations.total == 0, text
    clients = report.clients
    assert report.converge_after_faults is not None, text
    assert report.converge_after_churn is not None, text
    assert report.clients_converge is not None, text
    assert clients.events_checked >= 0.9 * clients.events, text
    assert clients.checkpoints > 500, text
    assert clients.bookmarks > 0, text
    assert clients.lists > 0 and clients.paged_lists > 0 and clients.watch_lists > 0, text
    assert clients.relists["client-restart"] > 0, text
