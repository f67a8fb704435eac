"""The soak's checker is not vacuous: a client that drops one DELETED event in five, or repeats
one event in a hundred (``SoakConfig.sabotage``, a test-only switch of the harness), makes the
run fail with the right violation, and with no other."""

from __future__ import annotations

import pytest

from loadtest.scenarios.soak import SoakConfig, run_soak


@pytest.mark.parametrize(
    ("sabotage", "violation"),
    [("skip-event", "view-mismatch"), ("duplicate-event", "duplicate-event")],
)
async def test_a_client_that_loses_or_repeats_an_event_is_caught(
    sabotage: str, violation: str
) -> None:
    config = SoakConfig(seconds=6.0, seed=3, clients=5, sabotage=sabotage, restart_port="new")
    report = await run_soak(config)
    assert report.violations.counts[violation] >= 1, report.render()
    assert set(report.violations.counts) == {violation}, report.render()
    details = report.violations.details[violation]
    assert details and all(d.startswith("client-0 ") for d in details)
