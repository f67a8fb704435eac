"""The ingest benchmark runs end to end on a few pods of each shape and reports sane numbers.

No assertion here is about speed: the machine running the tests is not the one the budgets are
for. They check that every path ran over every event, that the report has its rows, and that the
``sample`` shape is the reference pod's shape and size with per-pod values varied.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from loadtest.harness.records import IngestResult, Phase
from loadtest.harness.workload import SHAPES, Shape, build_workload, load_sample
from loadtest.reports.report import MachineInfo, render_report, render_tables
from loadtest.scenarios.ingest import main, measure_ingest

PODS = 200

MAIN_ROWS = (
    "initial sync (N ADDED): events/s per CPU-second",
    "initial sync: events/s (wall)",
    "initial sync: CPU s (parse / GC)",
    "N MODIFIED: events/s per CPU-second",
    "N MODIFIED: events/s (wall)",
    "N MODIFIED: CPU s (parse / GC)",
    "events applied (sync + MODIFIED)",
    "memory ÷ stored JSON (tracemalloc)",
    "bytes/object held (tracemalloc)",
    "bytes/object (deep sys.getsizeof, cross-check)",
    "stored JSON bytes/object",
    "peak bytes/object during the sync (tracemalloc)",
    "bytes/object after N MODIFIED (Store + EventLog)",
)
PATH_ROWS = (
    "`orjson.loads` of the line only (floor)",
    "loads + drop managedFields + `orjson.dumps` (codec floor)",
    "loads + `Store.make_entry` + `replace` / `put`, no asyncio",
    "pipeline: fake LW → Reflector → EventQueue → SharedInformer → handler",
    "pipeline with the cyclic GC disabled (what-if, not a fix)",
    "pipeline, MODIFIED all queued at once (backlog)",
    "naive: loads + dict insert + indexes, no asyncio",
)


def _machine() -> MachineInfo:
    return MachineInfo(
        command="python -m loadtest ingest --pods 200",
        date="2026-01-01 00:00:00 UTC",
        python="CPython 3.11",
        loop="asyncio",
        orjson="3",
        nproc=1,
        cpu_model="test",
        memory="1 kB",
        load_average="0.00 0.00 0.00",
        pinned_cpu=None,
    )


def _assert_sane(phase: Phase, *, events: int) -> None:
    assert phase.events == events
    for value in (phase.wall_s, phase.cpu_s, phase.rate_cpu, phase.rate_wall):
        assert math.isfinite(value)
        assert value > 0
    assert 0 <= phase.gc_s <= phase.wall_s
    assert 0 <= phase.parse_s <= phase.wall_s


def _row(table: str, name: str) -> list[str]:
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0].startswith(name):
            return cells
    raise AssertionError(f"no row {name!r} in:\n{table}")


def _number(cell: str) -> float:
    """The leading number of a cell such as ``12 345 (median 12 000)`` or ``1.80`` + "times"."""
    head = cell.split("(")[0].split("/s")[0].replace(" ", "").rstrip("\N{MULTIPLICATION SIGN}")
    return float(head)


@pytest.fixture
def sample_path(samples_dir: Path) -> Path:
    return samples_dir / "protocol" / "pod.json"


def _build(shape: Shape, sample_path: Path, n: int = PODS, **kwargs: Any) -> Any:
    return build_workload(n, seed=7, shape=shape, sample=sample_path, **kwargs)


def _paths(value: Any, at: str = "") -> Iterator[str]:
    """Every key path of a JSON value (list items by position): its shape, without the values."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield f"{at}/{k}"
            yield from _paths(v, f"{at}/{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, f"{at}[{i}]")


@pytest.mark.parametrize("shape", SHAPES)
def test_workload_has_distinct_pods_with_managed_fields_and_ascending_rvs(
    shape: Shape, sample_path: Path
) -> None:
    w = _build(shape, sample_path)
    assert w.shape == shape
    added = [orjson.loads(line) for line in w.added]
    modified = [orjson.loads(line) for line in w.modified]
    keys = {(e["object"]["metadata"]["namespace"], e["object"]["metadata"]["name"]) for e in added}
    assert len(keys) == PODS
    assert {e["type"] for e in added} == {"ADDED"}
    assert {e["type"] for e in modified} == {"MODIFIED"}
    assert all(e["object"]["metadata"]["managedFields"] for e in added)
    assert len({e["object"]["metadata"]["uid"] for e in added}) == PODS
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in added + modified]
    assert rvs == list(range(1, 2 * PODS + 1))
    assert {
        (e["object"]["metadata"]["namespace"], e["object"]["metadata"]["name"]) for e in modified
    } == keys
    assert _build(shape, sample_path).modified == w.modified  # a seed reproduces it
    assert _build(shape, sample_path, jobs=2).added == w.added  # whatever the processes


def test_sample_shape_is_the_reference_pod_varied(sample_path: Path) -> None:
    reference = load_sample(sample_path)
    compact = len(orjson.dumps(reference))
    w = _build("sample", sample_path)
    pods = [orjson.loads(line)["object"] for line in w.added]

    # The sample's shape (every key, managedFields included) and about its size.
    assert all(list(_paths(pod)) == list(_paths(reference)) for pod in pods)
    assert (
        0.97 * compact < w.mean_line_bytes() - len(b'{"type":"ADDED","object":}') < 1.03 * compact
    )
    assert abs(w.mean_modified_line_bytes() - w.mean_line_bytes()) < 0.01 * compact
    # What differs between real pods differs.
    for path in (
        ("metadata", "name"),
        ("metadata", "uid"),
        ("metadata", "creationTimestamp"),
        ("metadata", "labels", "pod-template-hash"),
        ("metadata", "annotations", "checksum/config"),
        ("metadata", "annotations", "bench/seq"),
        ("spec", "nodeName"),
        ("spec", "volumes", 0, "name"),
    ):
        values = set()
        for pod in pods:
            value = pod
            for key in path:
                value = value[key]
            values.add(value)
        assert len(values) > 1, path
    assert len({p["metadata"]["namespace"] for p in pods}) == PODS // 250 + 1
    assert len({p["metadata"]["labels"]["app"] for p in pods}) == PODS // 25
    for pod in pods:
        meta, spec = pod["metadata"], pod["spec"]
        assert meta["managedFields"][0]["time"] == meta["creationTimestamp"]
        assert spec["containers"][0]["volumeMounts"][0]["name"] == spec["volumes"][0]["name"]
        assert meta["name"].startswith(f"{meta['labels']['app']}-")

    # A MODIFIED event bumps the counter annotation and its manager's time, nothing else here
    # (the sample's status has no container statuses to change).
    by_name = {p["metadata"]["name"]: p for p in pods}
    for line in w.modified:
        new = orjson.loads(line)["object"]
        old = by_name[new["metadata"]["name"]]
        seq = int(old["metadata"]["annotations"]["bench/seq"])
        assert new["metadata"]["annotations"]["bench/seq"] == str(seq + 1)
        assert (
            new["metadata"]["managedFields"][1]["time"]
            > old["metadata"]["managedFields"][1]["time"]
        )
        assert new["spec"] == old["spec"]
        assert new["status"] == old["status"]
        assert list(_paths(new)) == list(_paths(old))


def test_sample_shape_varies_and_updates_a_running_status_when_the_sample_has_one(
    sample_path: Path,
) -> None:
    reference = load_sample(sample_path)
    ready = {"type": "Ready", "status": "True", "lastProbeTime": None}
    reference["status"] = {
        "phase": "Running",
        "conditions": [ready | {"lastTransitionTime": "2026-11-29T14:10:30Z"}],
        "hostIP": "10.0.0.40",
        "hostIPs": [{"ip": "10.0.0.40"}],
        "podIP": "10.244.40.7",
        "podIPs": [{"ip": "10.244.40.7"}],
        "startTime": "2026-11-29T14:10:15Z",
        "containerStatuses": [
            {
                "name": "main",
                "state": {"running": {"startedAt": "2026-11-29T14:10:30Z"}},
                "ready": True,
                "restartCount": 0,
            }
        ],
        "qosClass": "Burstable",
    }
    w = build_workload(PODS, seed=7, shape="sample", sample=reference)
    pods = [orjson.loads(line)["object"] for line in w.added]
    assert all(list(_paths(pod)) == list(_paths(reference)) for pod in pods)
    assert len({p["status"]["podIP"] for p in pods}) > 1
    assert all(p["status"]["hostIPs"] == [{"ip": p["status"]["hostIP"]}] for p in pods)
    assert len({p["status"]["hostIP"] for p in pods}) == len({p["spec"]["nodeName"] for p in pods})

    by_name = {p["metadata"]["name"]: p["status"] for p in pods}
    flips = restarts = 0
    for line in w.modified:
        new = orjson.loads(line)["object"]
        old, status = by_name[new["metadata"]["name"]], new["status"]
        was, now = old["containerStatuses"][0], status["containerStatuses"][0]
        if now["ready"] != was["ready"]:
            flips += 1
            assert status["conditions"][0]["status"] == ("True" if now["ready"] else "False")
            assert (
                status["conditions"][0]["lastTransitionTime"]
                > old["conditions"][0]["lastTransitionTime"]
            )
        if now["restartCount"] != was["restartCount"]:
            restarts += 1
            assert now["restartCount"] == was["restartCount"] + 1
    assert flips > PODS // 5
    assert restarts > PODS // 10


@pytest.mark.parametrize("shape", SHAPES)
async def test_ingest_benchmark_measures_every_path_over_every_event(
    shape: Shape, sample_path: Path
) -> None:
    result: IngestResult = await measure_ingest(_build(shape, sample_path), repeats=1)
    assert result.shape == shape
    assert result.modified_line_bytes > 0

    both = (
        result.parse_floor,
        result.codec_floor,
        result.store_only,
        result.naive,
        (result.pipeline.sync, result.pipeline.modified),
    )
    for sync, modified in both:
        _assert_sane(sync, events=PODS)
        _assert_sane(modified, events=PODS)
        assert sync.applied == modified.applied == PODS
    assert result.pipeline_gc_off is not None
    assert result.pipeline_gc_off.modified.applied == PODS
    assert result.backlog is not None
    assert result.backlog.applied == PODS  # fewer than 1 024 queued: nothing to lose
    assert result.pipeline.sync.parse_s > 0

    for memory in (result.pipeline_memory, result.naive_memory):
        assert memory.objects == PODS
        assert memory.held_bytes > 0
        assert memory.sizeof_bytes > 0
        assert memory.peak_bytes >= memory.held_bytes
        assert math.isfinite(memory.ratio)
        assert memory.ratio > 0
    # Both caches keep the same objects (managedFields dropped): the same JSON.
    assert result.pipeline_memory.json_bytes == result.naive_memory.json_bytes
    assert result.pipeline_memory.json_bytes < PODS * result.line_bytes
    after = result.pipeline_memory.after_modified_bytes
    assert after is not None
    assert after > 0
    assert result.dumps_overallocation >= 1.0

    tables = render_tables([result])
    for name in MAIN_ROWS:
        cells = _row(tables, name)
        assert len(cells) == 6
    for name in (
        "initial sync (N ADDED): events/s per CPU-second",
        "N MODIFIED: events/s per CPU-second",
        "memory ÷ stored JSON (tracemalloc)",
        "bytes/object held (tracemalloc)",
    ):
        cacheproxy, naive = _row(tables, name)[1:3]
        assert _number(cacheproxy) > 0
        assert _number(naive) > 0
        assert _row(tables, name)[5] in ("PASS", "FAIL", "")
    assert _row(tables, "events applied (sync + MODIFIED)")[5] == "PASS"
    for name in PATH_ROWS:
        assert len(_row(tables, name)) == 3

    assert f"shape `{shape}`" in tables
    report = render_report(
        [result], _machine(), load_average_end="0.00 0.00 0.00", workload_source="pod.json"
    )
    for heading in ("# Ingest benchmark", "## Budgets", "## N = 200", "**Method.**"):
        assert heading in report
    header = report.split("## Budgets")[0]
    assert f"- workload shape `{shape}`" in header
    assert f"N = 200: {round(result.line_bytes):,}".replace(",", " ") in header
    assert "`python -m loadtest ingest --pods 200`" in report
    budgets = _row(report, "200")
    assert len(budgets) == 5
    assert all(cell.endswith(("PASS", "FAIL")) for cell in budgets[1:])


@pytest.mark.parametrize("shape", [None, *SHAPES])
def test_command_line_writes_the_report_and_prints_the_tables(
    shape: str | None, sample_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--pods", "60", "--out", str(tmp_path), "--jobs", "1", "--repeat", "1"]
    args += ["--sample", str(sample_path)] + (["--shape", shape] if shape else [])
    code = main([*args, "--no-pin", "--loop", "asyncio"])

    expected = shape or "sample"  # the budget's reference pod unless told otherwise
    assert code == 0
    report = (tmp_path / "ingest.md").read_text()
    assert "## N = 60" in report
    assert "Python:" in report
    assert "nproc" in report
    assert f"- workload shape `{expected}`" in report
    printed = capsys.readouterr().out
    assert "| N = 60 |" in printed
    assert "memory ÷ stored JSON (tracemalloc)" in printed
    assert f"shape `{expected}`" in printed
    raw = orjson.loads((tmp_path / "ingest.json").read_bytes())
    assert [r["n"] for r in raw["results"]] == [60]
    assert raw["workload"]["shape"] == expected
    assert [r["shape"] for r in raw["results"]] == [expected]
    line_bytes = raw["workload"]["mean_line_bytes"]["60"]
    assert line_bytes["added"] == raw["results"][0]["line_bytes"]
    assert (4_000 < line_bytes["added"] < 5_000) == (expected == "sample")
