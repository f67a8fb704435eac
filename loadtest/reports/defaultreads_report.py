"""What :mod:`loadtest.scenarios.defaultreads` measures, its budgets and its Markdown report.

Budgets are judged here, never asserted: lists through the default daemon at least
:data:`LIST_SPEEDUP` times faster (the API server's p50 over the daemon's) and a GET at least
:data:`GET_SPEEDUP`; every read of the strict daemon at most :data:`STRICT_SLOWDOWN` times the
API server's p50; at ``clients`` clients, label lists :data:`LABEL_THROUGHPUT` and GETs
:data:`GET_THROUGHPUT` times the API server's requests/s; a write visible through the default
daemon within :data:`VISIBLE_P99_MS` (p99); full lists growing its RSS at most
:data:`MEMORY_GROWTH` times.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from loadtest.clients.fanout import percentile
from loadtest.reports.figures import X, div, mb, times
from loadtest.reports.passthroughbench_report import Timing

__all__ = [
    "GET_SPEEDUP",
    "GET_THROUGHPUT",
    "LABEL_THROUGHPUT",
    "LIST_SPEEDUP",
    "MEMORY_GROWTH",
    "SIDES",
    "STRICT_SLOWDOWN",
    "VISIBLE_P99_MS",
    "Condition",
    "DefaultReadsResult",
    "Memory",
    "ReadRow",
    "Visibility",
    "load_result",
    "render_report",
    "verdicts",
]

SIDES = ("apiserver", "default", "strict")
"""Straight to the API server (TLS), the daemon in its default configuration, the daemon whose
pods are read strictly (both plain HTTP on loopback)."""
LIST_SPEEDUP = 10.0
GET_SPEEDUP = 1.0
STRICT_SLOWDOWN = 1.2
LABEL_THROUGHPUT = 10.0
GET_THROUGHPUT = 2.0
VISIBLE_P99_MS = 50.0
MEMORY_GROWTH = 1.1


@dataclass
class ReadRow:
    key: str
    target: str
    timings: dict[str, Timing]
    items: dict[str, int]
    """Items in one answer of each side (a GET: 1), -1 when it was not a 200."""

    @property
    def is_list(self) -> bool:
        return self.key != "get"

    def speedup(self, side: str = "default") -> float:
        return div(self.timings["apiserver"].p50_ms, self.timings[side].p50_ms)

    def counts_agree(self) -> bool:
        return len(set(self.items.values())) == 1 and min(self.items.values()) >= 0


@dataclass
class Condition:
    key: str
    title: str
    seconds: float
    writes: int
    write_errors: int
    writer_seconds: float
    reads: list[ReadRow]


@dataclass
class Visibility:
    writes: int
    seen: int
    p50_ms: float
    p99_ms: float
    max_ms: float
    polls: int
    background_writes: int
    delays_ms: list[float] = field(default_factory=list)
    """Per write seen through the daemon: from the write's answer to a GET showing it."""
    watch_ms: list[float | None] = field(default_factory=list)
    """Per write: from its answer to its event on a watch straight on the API server (None: not
    seen within the timeout); the floor the daemon's own watch delivers on."""

    def watch_percentile(self, q: float) -> float:
        """The direct watch's delivery, at quantile ``q`` (NaN without a baseline)."""
        got = sorted(d for d in self.watch_ms if d is not None)
        return percentile(got, q, total=len(self.watch_ms))  # one never seen: infinite

    def excess_percentile(self, q: float) -> float:
        """What the daemon added to the direct watch's delivery, write by write, at ``q``."""
        got = sorted(
            ours - watch
            for ours, watch in zip(self.delays_ms, self.watch_ms, strict=False)
            if watch is not None
        )
        return percentile(got, q)


@dataclass
class Memory:
    lists: int
    before: int
    after: int
    peak: int


@dataclass
class DefaultReadsResult:
    command: str
    kube: str
    pods: int
    seconds: float
    rounds: int
    clients: int
    strict_value: str
    strict_refused: str
    """Why this cacheproxy refused ``strict``, when it did ("" when it did not)."""
    source: str
    load_at_start: str
    load_at_end: str
    uptime: str
    others_cores: float
    conditions: list[Condition]
    throughput_condition: str
    throughput: dict[str, dict[str, Timing]]
    """Per read (``label list``, ``get``, ``get rv=0``), per side (API server, default)."""
    visibility: Visibility | None
    """None when the run left it out (``--phases``), as ``memory``."""
    memory: Memory | None
    metrics: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    """Per phase, per daemon: how much each consistency/probe/pass-through counter grew."""
    daemon_complaints: dict[str, list[str]] = field(default_factory=dict)


def load_result(doc: dict[str, Any]) -> DefaultReadsResult:
    """A result from its JSON (``dataclasses.asdict``)."""

    def timings(d: dict[str, Any]) -> dict[str, Timing]:
        return {side: Timing(**t) for side, t in d.items()}

    conditions = [
        Condition(
            **{
                **c,
                "reads": [ReadRow(**{**r, "timings": timings(r["timings"])}) for r in c["reads"]],
            }
        )
        for c in doc["conditions"]
    ]
    return DefaultReadsResult(
        **{
            **doc,
            "conditions": conditions,
            "throughput": {k: timings(v) for k, v in doc["throughput"].items()},
            "visibility": doc["visibility"] and Visibility(**doc["visibility"]),
            "memory": doc["memory"] and Memory(**doc["memory"]),
        }
    )


# ---------------------------------------------------------------------- verdicts


def _at_least(value: float, budget: float) -> bool | None:
    return None if math.isnan(value) else value >= budget


def _at_most(value: float, budget: float) -> bool | None:
    return None if math.isnan(value) else value <= budget


def _word(met: bool | None) -> str:
    return "n/a" if met is None else "met" if met else "**NOT met**"


def _ms(value: float) -> str:
    return f"{value:.2f}" if math.isfinite(value) else "n/a"


def verdicts(result: DefaultReadsResult) -> list[tuple[str, bool | None]]:
    """Every budget judged: (what, met)."""
    out: list[tuple[str, bool | None]] = []
    for c in result.conditions:
        for row in c.reads:
            want = LIST_SPEEDUP if row.is_list else GET_SPEEDUP
            out.append((f"{c.key}: {row.key} speed-up", _at_least(row.speedup(), want)))
            strict = div(1, row.speedup("strict"))
            out.append((f"{c.key}: {row.key} strict", _at_most(strict, STRICT_SLOWDOWN)))
    for key, want in _THROUGHPUT_BUDGETS.items():
        if key in result.throughput:
            out.append((f"throughput: {key}", _at_least(_throughput_ratio(result, key), want)))
    if result.visibility is not None:
        out.append(("visible", _at_most(result.visibility.p99_ms, VISIBLE_P99_MS)))
    if result.memory is not None:
        memory = div(result.memory.after, result.memory.before)
        out.append(("memory", _at_most(memory, MEMORY_GROWTH)))
    return out


_THROUGHPUT_BUDGETS = {
    "label list": LABEL_THROUGHPUT,
    "get": GET_THROUGHPUT,
    "get rv=0": GET_THROUGHPUT,
}


def _throughput_ratio(result: DefaultReadsResult, key: str) -> float:
    sides = result.throughput.get(key, {})
    if "apiserver" not in sides or "default" not in sides:
        return math.nan
    return div(sides["default"].rate, sides["apiserver"].rate)


# ---------------------------------------------------------------------- the report


def render_report(result: DefaultReadsResult) -> str:
    judged = verdicts(result)
    met = sum(1 for _, ok in judged if ok)
    missed = [what for what, ok in judged if ok is False]
    lines = [
        "# Default reads (resourceVersion unset): cacheproxy beside kube-apiserver",
        "",
        f"- command: `{result.command}`",
        f"- kube-apiserver {result.kube}, {result.pods} pods; cacheproxy: {result.source}",
        "- the default daemon: `consistentReads` unset (its default); the strict daemon: pods "
        f"with `consistentReads: {result.strict_value}`"
        + (f" (`strict` was refused: {result.strict_refused})" if result.strict_refused else "")
        + "; every request carries the API server's admin bearer token",
        f"- load average at start {result.load_at_start}, at end {result.load_at_end}; other "
        f"processes kept {result.others_cores:.2f} cores busy on average; `{result.uptime}`",
        f"- latency: one client, {result.rounds} rounds of {result.seconds:g} s per side and "
        "read, the sides' order rotated each round, a new keep-alive HTTP/1.1 connection per "
        "batch, each connection warmed up by a few untimed requests",
        "",
        f"Budgets met: {met} of {len(judged)}"
        + (f"; NOT met: {', '.join(missed)}." if missed else "."),
        "",
    ]
    for c in result.conditions:
        lines += _condition(c)
    if result.throughput:
        lines += _throughput(result)
    lines += _visibility(result.visibility) if result.visibility else []
    lines += _memory(result.memory) if result.memory else []
    lines += _metrics(result.metrics)
    for name, complaints in result.daemon_complaints.items():
        if complaints:
            lines += [f"The {name} daemon's warnings ({len(complaints)}, the first 10):", ""]
            lines += [f"    {line}" for line in complaints[:10]] + [""]
    return "\n".join(lines)


def _visibility(v: Visibility) -> list[str]:
    lines = [
        "## A write straight to the API server, visible through the default daemon",
        "",
        f"{v.writes} patches of one pod's annotation while {v.background_writes} other pod "
        "writes went on (20/s); after each answer, RV-unset GETs of the pod through the default "
        f"daemon until the new value showed ({v.polls} GETs in all): seen {v.seen} of "
        f"{v.writes}.",
        "",
        "| p50 ms | p99 ms | max ms | budget p99 ≤ 50 ms |",
        "|---:|---:|---:|---|",
        f"| {_ms(v.p50_ms)} | {_ms(v.p99_ms)} | {_ms(v.max_ms)} | "
        f"{_word(_at_most(v.p99_ms, VISIBLE_P99_MS))} |",
        "",
    ]
    if v.watch_ms:
        seen = sum(d is not None for d in v.watch_ms)
        lines += [
            "The floor: a watch of the pod straight on the API server, from each write's answer "
            f"to its event (seen {seen} of {len(v.watch_ms)}); and what the daemon added to it, "
            "write by write (its own watch, then a GET):",
            "",
            "| | p50 ms | p99 ms | max ms |",
            "|---|---:|---:|---:|",
            f"| direct watch delivers the event | {_ms(v.watch_percentile(0.5))} | "
            f"{_ms(v.watch_percentile(0.99))} | {_ms(v.watch_percentile(1.0))} |",
            f"| the daemon's GET shows it, less the direct watch | "
            f"{_ms(v.excess_percentile(0.5))} | {_ms(v.excess_percentile(0.99))} | "
            f"{_ms(v.excess_percentile(1.0))} |",
            "",
        ]
    return lines


def _memory(m: Memory) -> list[str]:
    growth = div(m.after, m.before)
    return [
        "## Memory of the default daemon",
        "",
        f"| RSS before | after {m.lists} full lists | peak (VmHWM) | after ÷ before | "
        f"budget ≤ {MEMORY_GROWTH:g}{X} |",
        "|---:|---:|---:|---:|---|",
        f"| {mb(m.before)} | {mb(m.after)} | {mb(m.peak)} | {times(growth)} | "
        f"{_word(_at_most(growth, MEMORY_GROWTH))} |",
        "",
    ]


def _condition(c: Condition) -> list[str]:
    writer = (
        f"{c.writes} writes ({c.write_errors} errors) in {c.writer_seconds:.0f} s"
        if c.writes or c.write_errors
        else "no writes"
    )
    rows = []
    for r in c.reads:
        t = r.timings
        want = LIST_SPEEDUP if r.is_list else GET_SPEEDUP
        strict = div(1, r.speedup("strict"))
        same = "same" if r.counts_agree() else "**DIFFER**"
        errors = sum(x.errors for x in t.values())
        rows.append(
            f"| {r.key} | {_pair(t['apiserver'])} | {_pair(t['default'])} | "
            f"{times(r.speedup())} | ≥ {want:g}{X}: {_word(_at_least(r.speedup(), want))} | "
            f"{_pair(t['strict'])} | {times(strict)} | "
            f"{_word(_at_most(strict, STRICT_SLOWDOWN))} | "
            f"{' / '.join(str(r.items[s]) for s in SIDES)} {same} | {errors} |"
        )
    return [
        f"## {c.title}",
        "",
        f"The condition lasted {c.seconds:.0f} s; its writer: {writer}.",
        "",
        "| read | API server p50 / p99 ms | default p50 / p99 ms | speed-up | budget | "
        f"strict p50 / p99 ms | strict ÷ API server | ≤ {STRICT_SLOWDOWN:g}{X} | "
        "items (API server / default / strict) | errors |",
        "|---|---:|---:|---:|---|---:|---:|---|---|---:|",
        *rows,
        "",
        "Targets: " + "; ".join(f"{r.key} `{r.target}`" for r in c.reads) + ".",
        "",
    ]


def _pair(t: Timing) -> str:
    return f"{_ms(t.p50_ms)} / {_ms(t.p99_ms)}"


def _throughput(result: DefaultReadsResult) -> list[str]:
    rows = []
    for key, want in _THROUGHPUT_BUDGETS.items():
        sides = result.throughput.get(key)
        if not sides:
            continue
        ratio = _throughput_ratio(result, key)
        api, ours = sides["apiserver"], sides["default"]
        rows.append(
            f"| {key} | {api.rate:.0f} ({api.errors} errors) | {ours.rate:.0f} "
            f"({ours.errors} errors) | {times(ratio)} | ≥ {want:g}{X}: "
            f"{_word(_at_least(ratio, want))} | {api.daemon_cpu_ms_per_request:.2f} / "
            f"{ours.daemon_cpu_ms_per_request:.2f} |"
        )
    return [
        f"## Throughput at {result.clients} clients ({result.throughput_condition})",
        "",
        "Closed loop, label lists over `app=app-0..19`, GETs over every pod; RV unset unless "
        "`rv=0`.",
        "",
        "| read | API server /s | default daemon /s | ratio | budget | server CPU ms per read "
        "(kube-apiserver / daemon) |",
        "|---|---:|---:|---:|---|---:|",
        *rows,
        "",
    ]


def _metrics(metrics: dict[str, dict[str, dict[str, float]]]) -> list[str]:
    rows = [
        f"| {phase} | {daemon} | {name} | {delta:g} |"
        for phase, daemons in metrics.items()
        for daemon, counters in daemons.items()
        for name, delta in sorted(counters.items())
        if delta
    ]
    if not rows:
        return ["No consistency, probe or pass-through counter moved (or none was found).", ""]
    return [
        "## What the reads cost the daemons (counters that grew, from `/metrics`)",
        "",
        "| phase | daemon | counter | grew by |",
        "|---|---|---|---:|",
        *rows,
        "",
    ]
