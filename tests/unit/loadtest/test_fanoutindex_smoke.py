"""The fanoutindex scenario runs both fan-outs and every event reaches its watchers in each."""

from __future__ import annotations

from loadtest.scenarios.fanoutindex import run


async def test_both_fan_outs_deliver_every_event_to_its_node_watchers() -> None:
    indexed, scan = await run(watchers=50, pods=100, rate=400, seconds=0.25)
    assert (indexed.mode, scan.mode) == ("indexed", "scan")
    for figures in (indexed, scan):
        # Each event reaches its pod's node watcher, a move also the old node's.
        assert figures.events <= figures.deliveries <= 2 * figures.events
        assert figures.evicted == 0
