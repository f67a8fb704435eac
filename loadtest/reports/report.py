"""The ingest benchmark's Markdown report: one table per N, the budgets of docs/design.md §6 judged.

Rates are events per CPU-second of the one thread doing the work (the budget is "on one core");
wall-clock rates are shown beside them. Memory is tracemalloc's, as a multiple of the stored JSON.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import platform
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from loadtest.harness.records import IngestResult, Phase

__all__ = [
    "INGEST_BUDGET",
    "MEMORY_BUDGET",
    "MachineInfo",
    "collect_machine_info",
    "render_report",
    "render_tables",
]

INGEST_BUDGET = 20_000.0
"""Pod events per CPU-second, parse + transform + index + serialize (docs/design.md §6)."""
MEMORY_BUDGET = 1.3
"""Memory per cached object, as a multiple of its stored JSON (docs/design.md §6)."""
_X = "\N{MULTIPLICATION SIGN}"


@dataclass(frozen=True, slots=True)
class MachineInfo:
    command: str
    date: str
    python: str
    loop: str
    orjson: str
    nproc: int
    cpu_model: str
    memory: str
    load_average: str
    pinned_cpu: int | None


def collect_machine_info(*, command: str, loop: str, cpu: int | None) -> MachineInfo:
    loop_text = loop
    if loop == "uvloop":
        loop_text = f"uvloop {_version('uvloop')}"
    return MachineInfo(
        command=command,
        date=dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        python=f"{platform.python_implementation()} {platform.python_version()}",
        loop=loop_text,
        orjson=_version("orjson"),
        nproc=os.cpu_count() or 0,
        cpu_model=_proc_field("/proc/cpuinfo", "model name") or platform.processor() or "unknown",
        memory=_proc_field("/proc/meminfo", "MemTotal") or "unknown",
        load_average=" ".join(f"{x:.2f}" for x in os.getloadavg()),
        pinned_cpu=cpu,
    )


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def _proc_field(path: str, name: str) -> str | None:
    try:
        text = Path(path).read_text()
    except OSError:
        return None
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == name:
            return value.strip()
    return None


# ---------------------------------------------------------------------- numbers


def _num(x: float, digits: int = 0) -> str:
    if not math.isfinite(x):
        return "n/a"
    return f"{x:,.{digits}f}".replace(",", " ")


def _times(x: float) -> str:
    return f"{x:.2f}{_X}" if math.isfinite(x) else "n/a"


def _ratio(a: float, b: float) -> str:
    return _times(a / b) if b and math.isfinite(a) and math.isfinite(b) else "n/a"


def _at_least(value: float, budget: float) -> str:
    return "PASS" if value >= budget else "FAIL"


def _at_most(value: float, budget: float) -> str:
    return "PASS" if value <= budget else "FAIL"


def _cpu(phase: Phase, with_parse: bool = True) -> str:
    parts = f"{phase.cpu_s:.2f}"
    inner = [f"GC {phase.gc_s:.2f}"]
    if with_parse:
        inner.insert(0, f"parse {phase.parse_s:.2f}")
    return f"{parts} ({' / '.join(inner)})"


def _rate(phase: Phase) -> str:
    """The best run's rate, and the median when there were several runs."""
    if len(phase.runs) > 1:
        return f"{_num(phase.rate_cpu)} (median {_num(phase.median_rate_cpu)})"
    return _num(phase.rate_cpu)


def _per_event(phase: Phase) -> str:
    return f"{_num(phase.rate_cpu)}/s · {1e6 / phase.rate_cpu:.1f} µs" if phase.applied else "n/a"


# ---------------------------------------------------------------------- tables


def render_tables(results: Sequence[IngestResult]) -> str:
    return "\n".join(_tables(r) for r in results)


def _tables(r: IngestResult) -> str:
    p, nv = r.pipeline, r.naive
    pm, nm = r.pipeline_memory, r.naive_memory
    both = p.sync.events + p.modified.events
    applied = p.sync.applied + p.modified.applied
    rows: list[tuple[str, str, str, str, str, str]] = [
        (
            "initial sync (N ADDED): events/s per CPU-second",
            _rate(p.sync),
            _rate(nv[0]),
            _ratio(p.sync.rate_cpu, nv[0].rate_cpu),
            f"≥ {_num(INGEST_BUDGET)}",
            _at_least(p.sync.rate_cpu, INGEST_BUDGET),
        ),
        (
            "initial sync: events/s (wall)",
            _num(p.sync.rate_wall),
            _num(nv[0].rate_wall),
            _ratio(p.sync.rate_wall, nv[0].rate_wall),
            "",
            "",
        ),
        (
            "initial sync: CPU s (parse / GC)",
            _cpu(p.sync),
            _cpu(nv[0], with_parse=False),
            _ratio(p.sync.cpu_s, nv[0].cpu_s),
            "",
            "",
        ),
        (
            "N MODIFIED: events/s per CPU-second",
            _rate(p.modified),
            _rate(nv[1]),
            _ratio(p.modified.rate_cpu, nv[1].rate_cpu),
            f"≥ {_num(INGEST_BUDGET)}",
            _at_least(p.modified.rate_cpu, INGEST_BUDGET),
        ),
        (
            "N MODIFIED: events/s (wall)",
            _num(p.modified.rate_wall),
            _num(nv[1].rate_wall),
            _ratio(p.modified.rate_wall, nv[1].rate_wall),
            "",
            "",
        ),
        (
            "N MODIFIED: CPU s (parse / GC)",
            _cpu(p.modified),
            _cpu(nv[1], with_parse=False),
            _ratio(p.modified.cpu_s, nv[1].cpu_s),
            "",
            "",
        ),
        (
            "events applied (sync + MODIFIED)",
            f"{_num(applied)} of {_num(both)}",
            f"{_num(nv[0].applied + nv[1].applied)} of {_num(both)}",
            "",
            "all",
            "PASS" if applied == both else f"FAIL ({both - applied} lost)",
        ),
        (
            "memory ÷ stored JSON (tracemalloc)",
            _times(pm.ratio),
            _times(nm.ratio),
            _ratio(pm.ratio, nm.ratio),
            f"≤ {MEMORY_BUDGET}{_X}",
            _at_most(pm.ratio, MEMORY_BUDGET),
        ),
        (
            "bytes/object held (tracemalloc)",
            _num(pm.per_object(pm.held_bytes)),
            _num(nm.per_object(nm.held_bytes)),
            _ratio(pm.per_object(pm.held_bytes), nm.per_object(nm.held_bytes)),
            "",
            "",
        ),
        (
            "bytes/object (deep sys.getsizeof, cross-check)",
            _num(pm.per_object(pm.sizeof_bytes)),
            _num(nm.per_object(nm.sizeof_bytes)),
            _ratio(pm.per_object(pm.sizeof_bytes), nm.per_object(nm.sizeof_bytes)),
            "",
            "",
        ),
        (
            "stored JSON bytes/object",
            _num(pm.per_object(pm.json_bytes)),
            _num(nm.per_object(nm.json_bytes)),
            "",
            "",
            "",
        ),
        (
            "peak bytes/object during the sync (tracemalloc)",
            _num(pm.per_object(pm.peak_bytes)),
            _num(nm.per_object(nm.peak_bytes)),
            _ratio(pm.per_object(pm.peak_bytes), nm.per_object(nm.peak_bytes)),
            "",
            "",
        ),
        (
            "bytes/object after N MODIFIED (Store + EventLog)",
            _num(pm.per_object(pm.after_modified_bytes)),
            "n/a",
            "",
            "",
            "",
        ),
    ]
    main = _markdown(
        (
            f"N = {_num(r.n)}",
            "cacheproxy",
            "naive dict of dicts",
            "cacheproxy ÷ naive",
            "budget (docs/design.md §6)",
            "verdict",
        ),
        rows,
    )
    paths: list[tuple[str, str, str]] = [
        (
            "`orjson.loads` of the line only (floor)",
            _per_event(r.parse_floor[0]),
            _per_event(r.parse_floor[1]),
        ),
        (
            "loads + drop managedFields + `orjson.dumps` (codec floor)",
            _per_event(r.codec_floor[0]),
            _per_event(r.codec_floor[1]),
        ),
        (
            "loads + `Store.make_entry` + `replace` / `put`, no asyncio",
            _per_event(r.store_only[0]),
            _per_event(r.store_only[1]),
        ),
        (
            "pipeline: fake LW → Reflector → EventQueue → SharedInformer → handler",
            _per_event(p.sync),
            _per_event(p.modified),
        ),
    ]
    if r.pipeline_gc_off is not None:
        g = r.pipeline_gc_off
        paths.append(
            (
                "pipeline with the cyclic GC disabled (what-if, not a fix)",
                _per_event(g.sync),
                _per_event(g.modified),
            )
        )
    if r.backlog is not None:
        lost = r.backlog.events - r.backlog.applied
        paths.append(
            (
                "pipeline, MODIFIED all queued at once (backlog)"
                + (f" — **{lost} of {_num(r.backlog.events)} events lost**" if lost else ""),
                "",
                _per_event(r.backlog),
            )
        )
    paths.append(
        ("naive: loads + dict insert + indexes, no asyncio", _per_event(nv[0]), _per_event(nv[1]))
    )
    parts = _markdown(
        ("same lines, each path (per CPU-second)", "initial (ADDED)", "MODIFIED"), paths
    )
    runs = f"best of {r.repeats} runs" if r.repeats > 1 else "one run"
    workload = (
        f"Timed paths: {runs} each. Workload: {_num(r.n)} pods, shape `{r.shape}`; "
        f"mean ADDED line {_num(r.line_bytes)} bytes (with managedFields), MODIFIED line "
        f"{_num(r.modified_line_bytes)} bytes; "
        f"stored JSON {_num(pm.per_object(pm.json_bytes))} bytes/object "
        f"(managedFields dropped); `orjson.dumps` allocates {r.dumps_overallocation:.2f} bytes "
        "per byte of JSON it returns."
    )
    return f"{main}\n\n{parts}\n\n{workload}\n"


def _markdown(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|",
    ]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


# ---------------------------------------------------------------------- the report


_METHOD = """\
**Method.** One process, one thread, pinned to one CPU; the pods are built before any timing and
kept as encoded watch lines (bytes, untracked by the GC). *Pipeline*: a fake ListerWatcher
(`loadtest/clients/linewatch.py`) parses each line with `orjson.loads` inside its watch iterator
(timed: "parse") and yields to the event loop every {chunk} lines, as a socket read of ~64 KB
would; the real `Reflector` (watch-list), `InOrderQueue`, `SharedInformer` and `Store`
(default transform drops managedFields; indexes: namespace, labels, `spec.nodeName`; EventLog)
apply them; one no-op handler is told of every event; a phase ends at the handler's last
notification. *Sync*: N ADDED lines + the initial-events-end bookmark (one `Replaced` of N).
*MODIFIED*: one update of every synced pod, in shuffled order. CPU is `time.process_time`
(user + system); "GC" is the time inside the cyclic collector (`gc.callbacks`); a collection
triggered inside `orjson.loads` counts in both "parse" and "GC". Each timed path runs several times at small N and the best run is
shown (median beside it): the machine is shared. *Naive*: the same lines parsed into a dict of
dicts (managedFields dropped) with the same indexes, in a tight loop without asyncio.
*Backlog*: the MODIFIED phase again with all N lines handed over without a loop turn, so the
queue fills up (a check that no event is lost when the informer falls behind).
**Memory** is tracemalloc's: bytes still allocated after the sync and a `gc.collect()` (transient
parse results gone), minus before the Store existed, divided by the stored JSON (`len(raw)`).
tracemalloc sees allocated sizes, so it counts spare capacity that `sys.getsizeof` does not (the
deep-getsizeof row is the cross-check; the gap is memory no object admits to). It does not see
allocator fragmentation: RSS is higher. Memory runs are separate runs (tracemalloc slows
allocation); "after N MODIFIED" also holds the EventLog (old and new entry of each event).
"""


def _losses(r: IngestResult) -> str:
    p = r.pipeline
    offered = p.sync.events + p.modified.events
    lost = offered - p.sync.applied - p.modified.applied
    text = f"{_num(lost)} of {_num(offered)} lost"
    if r.backlog is not None:
        backlog_lost = r.backlog.events - r.backlog.applied
        lost += backlog_lost
        text += f"; backlog check: {_num(backlog_lost)} of {_num(r.backlog.events)} lost"
    return f"{text} → {'PASS' if lost == 0 else 'FAIL'}"


_SHAPES = {
    "sample": "each pod is the reference pod `{source}` with what differs between pods varied "
    "(names, namespace, uid, labels, annotations, node, times; managedFields kept)",
    "generated": "pods from `{source}` (a ReplicaSet's pod with kubelet status and managedFields)",
}


def _workload_line(results: Sequence[IngestResult], source: str) -> str:
    shapes = sorted({r.shape for r in results}) or ["n/a"]
    what = "; ".join(
        f"`{shape}`: " + _SHAPES.get(shape, "{source}").format(source=source or "n/a")
        for shape in shapes
    )
    sizes = ", ".join(
        f"N = {_num(r.n)}: {_num(r.line_bytes)} / {_num(r.modified_line_bytes)}" for r in results
    )
    return (
        f"- workload shape {what}\n"
        f"- mean watch line (ADDED / MODIFIED, bytes, managedFields included): {sizes or 'n/a'}\n"
    )


def render_report(
    results: Sequence[IngestResult],
    machine: MachineInfo,
    *,
    load_average_end: str = "",
    workload_source: str = "",
) -> str:
    pinned = f"CPU {machine.pinned_cpu}" if machine.pinned_cpu is not None else "not pinned"
    header = f"""\
# Ingest benchmark: rate and memory per cached object (docs/design.md §6)

- command: `{machine.command}`
- date: {machine.date}
- Python: {machine.python}; event loop: {machine.loop}; orjson {machine.orjson}
- machine: nproc {machine.nproc}, {machine.cpu_model}, {machine.memory} RAM; load average at
  start {machine.load_average}, at the end {load_average_end or "n/a"}; measurements {pinned}
""" + _workload_line(results, workload_source)
    summary_rows: list[tuple[str, ...]] = []
    for r in results:
        p = r.pipeline
        summary_rows.append(
            (
                _num(r.n),
                f"{_num(p.sync.rate_cpu)} → {_at_least(p.sync.rate_cpu, INGEST_BUDGET)}",
                f"{_num(p.modified.rate_cpu)} → {_at_least(p.modified.rate_cpu, INGEST_BUDGET)}",
                f"{_times(r.pipeline_memory.ratio)} → "
                f"{_at_most(r.pipeline_memory.ratio, MEMORY_BUDGET)}",
                _losses(r),
            )
        )
    summary = _markdown(
        (
            "N",
            f"sync events/s ≥ {_num(INGEST_BUDGET)}",
            f"MODIFIED events/s ≥ {_num(INGEST_BUDGET)}",
            f"memory ≤ {MEMORY_BUDGET}{_X} JSON",
            "no event lost (docs/design.md §7)",
        ),
        summary_rows,
    )
    chunk = str(results[0].chunk_events) if results else "8"
    sections = [header, "## Budgets\n\n" + summary + "\n", _METHOD.replace("{chunk}", chunk)]
    sections += [f"## N = {_num(r.n)}\n\n{_tables(r)}" for r in results]
    return "\n".join(sections)
