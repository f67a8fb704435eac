"""What :mod:`loadtest.scenarios.passthroughbench` measures, and its Markdown report.

Every figure through cacheproxy is shown beside the same request sent straight to the API server
by the same client: latency at 1 client (p50, p99) and the overhead (cacheproxy's p50 less the
direct p50, target at most :data:`OVERHEAD_TARGET_MS`), requests/s at 16 clients, and the
events a watch through cacheproxy delivered against those of a watch on the API server.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from loadtest.harness.realcluster import RESOURCES
from loadtest.reports.figures import X, div
from loadtest.reports.report import MachineInfo, _markdown, _num

__all__ = [
    "OVERHEAD_TARGET_MS",
    "SIDES",
    "AnswerCheck",
    "OperationRun",
    "PassthroughResult",
    "Timing",
    "WatchCheck",
    "load_result",
    "render_report",
]

SIDES = ("cacheproxy", "direct")
"""Through the daemon (plain HTTP on loopback, forwarded over TLS) and straight to the API
server (TLS), in report order."""
OVERHEAD_TARGET_MS = 1.0
"""cacheproxy's p50 less the direct p50 at 1 client on loopback, at most (reported, not
asserted)."""


@dataclass(frozen=True, slots=True)
class Timing:
    """One side's answers to one operation at one concurrency (its rounds merged)."""

    requests: int
    errors: int
    wall_s: float
    p50_ms: float
    p99_ms: float
    mean_ms: float
    daemon_cpu_s: float
    """The daemon's CPU time over the batches (on the direct side: its own watches' work)."""
    client_cpu_s: float
    """This process's (the clients', TLS included on the direct side)."""
    first_error: str = ""

    @property
    def rate(self) -> float:
        return div(self.requests, self.wall_s)

    @property
    def daemon_cpu_ms_per_request(self) -> float:
        return 1000 * div(self.daemon_cpu_s, self.requests)


@dataclass(frozen=True, slots=True)
class OperationRun:
    key: str
    title: str
    latency: dict[str, Timing]
    """Per side, at 1 client."""
    throughput: dict[str, Timing]
    """Per side, at ``clients`` clients."""
    requests: int = 1
    """Requests forwarded per operation (a create + delete: two)."""

    @property
    def overhead_ms(self) -> float:
        return self.latency["cacheproxy"].p50_ms - self.latency["direct"].p50_ms

    @property
    def overhead_per_request_ms(self) -> float:
        """The overhead per forwarded request: what the target judges."""
        return self.overhead_ms / self.requests

    @property
    def throughput_ratio(self) -> float:
        return div(self.throughput["cacheproxy"].rate, self.throughput["direct"].rate)


@dataclass(frozen=True, slots=True)
class AnswerCheck:
    """One request asked both ways: the same status and body bytes?"""

    request: str
    cacheproxy_status: int
    direct_status: int
    equal: bool
    detail: str = ""


@dataclass(frozen=True, slots=True)
class WatchCheck:
    """A watch of an uncached resource through cacheproxy and one on the API server, both from
    the same resourceVersion, while ``writes`` writes were made upstream."""

    resource: str
    writes: int
    delivered: dict[str, int]
    """Per side: events that match a write (type, name, resourceVersion)."""
    events: dict[str, int]
    """Per side: every event received (ERROR and BOOKMARK included)."""
    same_as_direct: bool
    """cacheproxy's events are the direct watch's, in the same order."""
    lag_p50_ms: dict[str, float]
    """Per side: from a write's response to its event."""
    lag_p99_ms: dict[str, float]
    write_rate: float
    problems: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class PassthroughResult:
    command: str
    kube: str
    clients: int
    rounds: int
    seconds: float
    machine: MachineInfo
    load_at_end: str
    uptime: str
    operations: list[OperationRun]
    answers: list[AnswerCheck]
    watch: WatchCheck
    warmup: float = 0.0
    """Seconds of untimed requests per side before the rounds at each concurrency."""
    others_cores: float = math.nan
    """Cores kept busy by processes other than the benchmark's own (clients, daemon, API server,
    etcd) during the measurements, on average."""
    daemon_complaints: list[str] = field(default_factory=list)
    """The daemon's log lines at WARNING and above over the whole run."""
    source: str = ""
    """The cacheproxy measured: its commit and uncommitted changes (the tree may be shared)."""


def _ms(value: float) -> str:
    return f"{value:.2f}" if math.isfinite(value) else "n/a"


def _summary(result: PassthroughResult) -> str:
    rows = []
    for op in result.operations:
        lat, thr = op.latency, op.throughput
        overhead, each = op.overhead_ms, op.overhead_per_request_ms
        rows.append(
            [
                op.title,
                f"{_ms(lat['direct'].p50_ms)} / {_ms(lat['direct'].p99_ms)}",
                f"{_ms(lat['cacheproxy'].p50_ms)} / {_ms(lat['cacheproxy'].p99_ms)}",
                f"{overhead:+.2f}"
                + (f": {each:+.2f} per request" if op.requests > 1 else "")
                + ("" if each <= OVERHEAD_TARGET_MS else " (over)"),
                _num(thr["direct"].rate),
                _num(thr["cacheproxy"].rate),
                f"{op.throughput_ratio:.2f}{X}",
            ]
        )
    header = [
        "operation",
        "direct p50 / p99 ms",
        "cacheproxy p50 / p99 ms",
        f"overhead p50 ms (target ≤ {OVERHEAD_TARGET_MS:g} per forwarded request)",
        f"direct req/s at {result.clients}",
        f"cacheproxy req/s at {result.clients}",
        "cacheproxy ÷ direct",
    ]
    return _markdown(header, rows)


def _details(result: PassthroughResult) -> str:
    rows = []
    for op in result.operations:
        for clients, runs in ((1, op.latency), (result.clients, op.throughput)):
            for side in SIDES:
                t = runs[side]
                rows.append(
                    [
                        op.title,
                        str(clients),
                        side,
                        str(t.requests),
                        str(t.errors),
                        _ms(t.p50_ms),
                        _ms(t.p99_ms),
                        _ms(t.mean_ms),
                        _num(t.rate),
                        _ms(t.daemon_cpu_ms_per_request),
                        _ms(1000 * div(t.client_cpu_s, t.requests)),
                    ]
                )
    header = [
        "operation",
        "clients",
        "side",
        "requests",
        "errors",
        "p50 ms",
        "p99 ms",
        "mean ms",
        "req/s",
        "daemon CPU ms/req",
        "client CPU ms/req",
    ]
    return _markdown(header, rows)


def _watch(w: WatchCheck) -> list[str]:
    got, direct = w.delivered["cacheproxy"], w.delivered["direct"]
    verdict = "every event" if got == w.writes else f"**{w.writes - got} events missing**"
    lines = [
        f"A watch of `{w.resource}` (not cached) through cacheproxy and one on the API server, "
        f"both from the same resourceVersion; {w.writes} writes upstream (create, merge patch, "
        f"delete, in turn) at {w.write_rate:.0f}/s.",
        "",
        f"- **delivered through cacheproxy: {got} of {w.writes}** ({verdict}); on the direct "
        f"watch: {direct} of {w.writes}",
        f"- events received: cacheproxy {w.events['cacheproxy']}, direct {w.events['direct']}; "
        f"the same events in the same order: {'yes' if w.same_as_direct else '**no**'}",
        "- from a write's response to its event, p50 / p99 ms: "
        + "; ".join(
            f"{side} {_ms(w.lag_p50_ms[side])} / {_ms(w.lag_p99_ms[side])}" for side in SIDES
        ),
    ]
    lines += [f"- problem: {p}" for p in w.problems]
    return lines


def _answers(checks: Sequence[AnswerCheck]) -> str:
    rows = [
        [
            f"`{c.request}`",
            str(c.cacheproxy_status),
            str(c.direct_status),
            "yes" if c.equal else f"**no**: {c.detail}",
        ]
        for c in checks
    ]
    header = ["forwarded request", "cacheproxy", "direct", "same status and body"]
    return _markdown(header, rows)


def render_report(result: PassthroughResult) -> str:
    m = result.machine
    errors = {
        f"{op.title}, {side}": t.first_error
        for op in result.operations
        for runs in (op.latency, op.throughput)
        for side, t in runs.items()
        if t.first_error
    }
    lines = [
        f"# Pass-through against kube-apiserver {result.kube}",
        "",
        f"- command: `{result.command}`",
        f"- cacheproxy: {result.source or 'unknown'}",
        "- cacheproxy in its default configuration (pass-through on) caching "
        f"{', '.join(RESOURCES)}; every request with the API server's admin bearer token, "
        "forwarded as sent",
        f"- {result.rounds} round{'s' if result.rounds > 1 else ''} per operation and "
        "concurrency, the sides alternated (which goes first too); each batch at least "
        f"{result.seconds:g} s on new keep-alive HTTP/1.1 connections (one per client), after "
        f"{result.warmup:g} s of warm-up per side at each concurrency",
        "- the writes are forwarded whatever the kind; ConfigMaps are cached, so the daemon also "
        "reads each write's event on its own watch (on the direct side too: its CPU there)",
        "",
        "## Summary",
        "",
        _summary(result),
        "",
        "Overhead: cacheproxy's p50 less the direct p50, at 1 client. The direct client speaks "
        "TLS to the API server; the client to cacheproxy speaks plain HTTP and cacheproxy TLS "
        "upstream: the overhead is cacheproxy's whole hop less the client's TLS.",
        "",
        "## Watch of an uncached resource",
        "",
        *_watch(result.watch),
        "",
        "## Answers compared",
        "",
        _answers(result.answers),
        "",
        "## Every batch",
        "",
        _details(result),
        "",
    ]
    if errors:
        lines += ["Errors (the first of each):", ""]
        lines += [f"- {where}: {text}" for where, text in errors.items()]
        lines.append("")
    complaints = result.daemon_complaints
    lines += ["## The daemon's log", ""]
    if complaints:
        n = len(complaints)
        lines.append(f"{n} line{'s' if n > 1 else ''} at WARNING or above (the first 10 shown):")
        lines += ["", "```", *complaints[:10], "```"]
    else:
        lines.append("No line at WARNING or above.")
    lines += [
        "",
        "## Machine",
        "",
        f"{m.date}; {m.python}, {m.loop}; nproc {m.nproc}, {m.cpu_model}, {m.memory} RAM; "
        f"load average at start {m.load_average}, at the end {result.load_at_end}. "
        "Clients, cacheproxy, kube-apiserver and etcd share the machine's cores; other "
        f"processes kept {_num(result.others_cores, 2)} of its {m.nproc} cores busy during the "
        "measurements, on average.",
        "",
        f"`uptime` at start: `{result.uptime}`",
        "",
    ]
    return "\n".join(lines)


def load_result(doc: dict[str, Any]) -> PassthroughResult:
    """A :class:`PassthroughResult` from its JSON (``dataclasses.asdict``)."""

    def timings(runs: dict[str, Any]) -> dict[str, Timing]:
        return {side: Timing(**t) for side, t in runs.items()}

    operations = [
        OperationRun(
            key=op["key"],
            title=op["title"],
            latency=timings(op["latency"]),
            throughput=timings(op["throughput"]),
            requests=op.get("requests", 1),
        )
        for op in doc["operations"]
    ]
    return PassthroughResult(
        **{
            **doc,
            "machine": MachineInfo(**doc["machine"]),
            "operations": operations,
            "answers": [AnswerCheck(**a) for a in doc["answers"]],
            "watch": WatchCheck(**doc["watch"]),
        }
    )
