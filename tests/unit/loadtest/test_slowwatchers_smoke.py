"""The slow-watchers benchmark's pure parts: reading an event line, the order check against the
writes, the metrics it samples, and the report."""

from __future__ import annotations

import pytest

from loadtest.clients.slowwatch import check_order, rv_of
from loadtest.scenarios.slowwatchers import (
    BOUNDED,
    UNBOUNDED,
    Run,
    Sample,
    merge_reader_summaries,
    parse_metrics,
    render,
)


def test_an_event_line_gives_its_type_and_the_objects_resource_version() -> None:
    line = (
        b'{"type":"MODIFIED","object":{"kind":"Pod","metadata":{"name":"p","resourceVersion":'
        b'"1234","annotations":{"a":"resourceVersion"}},"status":{}}}'
    )
    assert rv_of(line) == ("MODIFIED", 1234)


def test_every_write_once_in_order_matches() -> None:
    check = check_order([3, 5, 9], [3, 5, 9])
    assert check.matched
    assert (check.missing, check.duplicated, check.out_of_order, check.unexpected) == (0, 0, 0, 0)


@pytest.mark.parametrize(
    ("received", "missing", "duplicated", "out_of_order", "unexpected"),
    [
        ([3, 9], 1, 0, 0, 0),  # one missing
        ([3, 5, 5, 9], 0, 1, 0, 0),  # one twice
        ([3, 9, 5], 0, 0, 1, 0),  # swapped
        ([3, 5, 7, 9], 0, 0, 0, 1),  # never written
        ([], 3, 0, 0, 0),  # nothing at all
    ],
)
def test_what_differs_from_the_writes_is_counted_and_does_not_match(
    received: list[int], missing: int, duplicated: int, out_of_order: int, unexpected: int
) -> None:
    check = check_order(received, [3, 5, 9])
    assert not check.matched
    assert check.received == len(received)
    assert (check.missing, check.duplicated, check.out_of_order, check.unexpected) == (
        missing,
        duplicated,
        out_of_order,
        unexpected,
    )


def test_evictions_and_watchers_are_read_from_the_metrics_page() -> None:
    page = "\n".join(
        [
            "# HELP cacheproxy_watch_evicted_total Watchers closed",
            'cacheproxy_watch_evicted_total{reason="events",resource="pods"} 0.0',
            'cacheproxy_watch_evicted_total{reason="total_bytes",resource="pods"} 7.0',
            'cacheproxy_watch_evicted_total{reason="total_bytes",resource="configmaps"} 2.0',
            'cacheproxy_watch_evicted_total{reason="stall",resource="pods"} 1.0',
            'cacheproxy_watch_watchers{resource="pods"} 993.0',
        ]
    )
    evicted, watchers = parse_metrics(page)
    assert evicted == {"events": 0, "bytes": 0, "total_bytes": 9, "stall": 1}
    assert watchers == 993


def _run(name: str, limits: dict[str, int], evictions: list[dict[str, int]]) -> Run:
    run = Run(name=name, limits=limits, rss_synced=100 << 20, rss_peak=130 << 20)
    run.samples = [
        Sample(t=i * 0.5, rss=(100 + i) << 20, evicted=e, watchers=10)
        for i, e in enumerate(evictions)
    ]
    run.writes, run.write_seconds, run.line_bytes = 40, 2.0, 7000.0
    run.readers = merge_reader_summaries(
        [
            {"readers": 4, "matched": 4, "events_received": 160, "drain_seconds": 0.4},
            {"readers": 4, "matched": 3, "missing": 2, "ended_early": ["response ended"]},
        ]
    )
    return run


def test_cut_times_are_the_samples_that_first_counted_each_eviction() -> None:
    run = _run(
        "bounded",
        BOUNDED,
        [
            {"total_bytes": 0},
            {"total_bytes": 2},
            {"total_bytes": 2, "bytes": 1},
            {"total_bytes": 3},
        ],
    )
    assert run.cut_times() == {
        "events": [],
        "bytes": [1.0],
        "total_bytes": [0.5, 0.5, 1.5],
        "stall": [],
    }


def test_the_report_sets_the_runs_side_by_side() -> None:
    runs = [
        _run("bounded", BOUNDED, [{}, {"total_bytes": 2}]),
        _run("before", UNBOUNDED, [{}, {}, {"events": 1}]),
    ]
    args = {
        "watchers": 10,
        "non_readers": 2,
        "rate": 20.0,
        "seconds": 2.0,
        "object_bytes": 7000,
        "pods": 10,
        "stall_seconds": 600.0,
    }
    text = render(args, runs)
    assert "| | bounded | before |" in text
    assert (
        "| watchBufferBytes / watchBuffersTotalBytes (MiB) | 16 / 256 | 16,384 / 1,048,576 |"
        in text
    )
    assert "min(per-watcher x 2, total) | 32 | 32,768 |" in text
    assert "| evicted `total_bytes` | 2: first 0.5 s, median 0.5 s, last 0.5 s | — |" in text
    assert "| evicted `events` | — | 1: first 1.0 s, median 1.0 s, last 1.0 s |" in text
    assert "| readers with every write, in order, once (of 8) | 7 | 7 |" in text
    assert "| readers' missing / duplicated / out of order / unexpected | 2 / 0 / 0 / 0 |" in text
    assert "| non-readers not cut by the end (of 2) | 0 | 1 |" in text
    assert "| all the event lines written, once (MiB) | 0.3 | 0.3 |" in text
    assert "| 0 | 100 | 100 |" in text  # RSS over time, MiB
