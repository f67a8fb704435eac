"""The scaling benchmark's report: each cost as a curve against N, its growth exponent judged.

A :class:`Curve` names one cost, how to read it from a :class:`ScalePoint` and how it may grow:
``linear`` (a whole-collection cost: memory, first sync, relist, the full list) or ``flat`` (a
cost of the answer or of one event: label- and index-selected lists of a constant size, a GET,
applying one event, delivering one). :func:`growth_exponent` fits ``cost ∝ N^k`` by least
squares on log-log axes; :func:`judge` compares ``k`` with the class's bound (at most
:data:`LINEAR_MAX` or :data:`FLAT_MAX`). The local exponents between consecutive pod counts show
where a curve bends. :func:`write_charts` draws one PNG per curve (matplotlib, the optional
``bench`` extra), log-log, with a line ``∝ N`` and a constant line through the smallest N's point.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from loadtest.harness.scale_records import ScalePoint, ScaleResult
from loadtest.reports.figures import MIB, div, times
from loadtest.reports.report import _markdown, _num

__all__ = [
    "CURVES",
    "FLAT_MAX",
    "LINEAR_MAX",
    "Curve",
    "curves",
    "growth",
    "growth_exponent",
    "judge",
    "local_exponents",
    "render_scale_report",
    "write_charts",
]

LINEAR_MAX = 1.1
"""A whole-collection cost grows at most linearly: ``k`` at most this."""
FLAT_MAX = 0.2
"""A cost of a constant-size answer or of one event stays flat: ``k`` at most this."""

Growth = Literal["linear", "flat"]


@dataclass(frozen=True, slots=True)
class Curve:
    key: str
    """Also the chart's file name (``<key>.png``)."""
    title: str
    unit: str
    growth: Growth
    value: Callable[[ScalePoint], float]
    """The cost in ``unit`` at one point (NaN when not measured)."""


def _ms(seconds: float) -> float:
    return seconds * 1000


CURVES: tuple[Curve, ...] = (
    Curve("rss", "RSS over an empty daemon", "MiB", "linear", lambda p: p.net_rss / MIB),
    Curve("relist-memory", "memory a relist adds (its peak RSS less the RSS before)", "MiB", "linear", lambda p: p.relist_memory / MIB),
    Curve("first-sync", "first sync (URL → ready)", "s", "linear", lambda p: p.sync_s),
    Curve("relist", "relist after a 410 (median, backoff excluded)", "s", "linear", lambda p: p.relist_s),
    Curve("full-list", "full list p50", "ms", "linear", lambda p: _ms(p.p50("full"))),
    Curve("label-list", "label list p50 (app=app-K)", "ms", "flat", lambda p: _ms(p.p50("label"))),
    Curve("field-list", "index field list p50 (spec.nodeName)", "ms", "flat", lambda p: _ms(p.p50("field"))),
    Curve("get", "single GET p50", "ms", "flat", lambda p: _ms(p.p50("get"))),
    Curve("ingest", "ingest: daemon CPU per MODIFIED event", "µs", "flat", lambda p: p.ingest_us_per_event),
)  # fmt: skip
"""Every cost but watch delivery, which has a curve per watcher count (:func:`curves`)."""


def _watch_curve(watchers: int) -> Curve:
    return Curve(
        f"watch-{watchers}",
        f"watch delivery p99 lag, {_num(watchers)} watchers",
        "ms",
        "flat",
        lambda p: _ms(p.watch_lag_p99(watchers)),
    )


def curves(result: ScaleResult) -> list[Curve]:
    """:data:`CURVES`, then watch delivery at each watcher count measured."""
    watchers = sorted({f.watchers for p in result.points for f in p.fanout})
    return [*CURVES, *map(_watch_curve, watchers)]


# ---------------------------------------------------------------------- the growth check


def _usable(ns: Sequence[float], costs: Sequence[float]) -> list[tuple[float, float]]:
    return [
        (math.log(n), math.log(c))
        for n, c in zip(ns, costs, strict=True)
        if n > 0 and c > 0 and math.isfinite(n) and math.isfinite(c)
    ]


def growth_exponent(ns: Sequence[float], costs: Sequence[float]) -> float:
    """``k`` of ``cost ∝ N^k``: the least-squares slope of log(cost) on log(N). Points that are
    not positive and finite are left out; NaN with fewer than two distinct N left."""
    points = _usable(ns, costs)
    if len({x for x, _ in points}) < 2:
        return math.nan
    mx = sum(x for x, _ in points) / len(points)
    my = sum(y for _, y in points) / len(points)
    sxx = sum((x - mx) ** 2 for x, _ in points)
    sxy = sum((x - mx) * (y - my) for x, y in points)
    return sxy / sxx


def local_exponents(ns: Sequence[float], costs: Sequence[float]) -> list[float]:
    """The exponent between each pair of consecutive points (NaN where one is unusable)."""
    return [growth_exponent(ns[i : i + 2], costs[i : i + 2]) for i in range(max(0, len(ns) - 1))]


def judge(k: float, growth: Growth) -> str:
    """PASS when ``k`` is within the bound of ``growth``; FAIL above it; n/a without a fit."""
    if math.isnan(k):
        return "n/a"
    return "PASS" if k <= (LINEAR_MAX if growth == "linear" else FLAT_MAX) else "FAIL"


def _expected(growth: Growth) -> str:
    return f"linear: k ≤ {LINEAR_MAX:g}" if growth == "linear" else f"flat: k ≤ {FLAT_MAX:g}"


def _k(k: float) -> str:
    return f"{k:.2f}" if math.isfinite(k) else "n/a"


def _each(values: Iterable[float]) -> str:
    return ", ".join(map(_value, values))


def _fixed(x: float, digits: int) -> str:
    return f"{x:.{digits}f}" if math.isfinite(x) else "n/a"


def _value(x: float) -> str:
    if not math.isfinite(x):
        return "n/a"
    return f"{x:.3g}" if x < 100 else _num(x)


# ---------------------------------------------------------------------- the report


def _series(result: ScaleResult, storage: str) -> list[ScalePoint]:
    return sorted((p for p in result.points if p.storage == storage), key=lambda p: p.pods)


def growth(result: ScaleResult) -> list[dict[str, Any]]:
    """Per curve and storage: the costs by N, ``k``, the local exponents and the verdict."""
    rows = []
    for curve in curves(result):
        for storage in result.storages:
            series = _series(result, storage)
            ns = [p.pods for p in series]
            costs = [curve.value(p) for p in series]
            k = growth_exponent(ns, costs)
            rows.append(
                {
                    "cost": curve.key,
                    "title": curve.title,
                    "unit": curve.unit,
                    "storage": storage,
                    "pods": ns,
                    "values": costs,
                    "k": k,
                    "local_k": local_exponents(ns, costs),
                    "expected": curve.growth,
                    "verdict": judge(k, curve.growth),
                }
            )
    return rows


def _growth_table(result: ScaleResult) -> str:
    pods = sorted({p.pods for p in result.points})
    rows = []
    for row in growth(result):
        by_n = dict(zip(row["pods"], row["values"], strict=True))
        local = " · ".join(_k(x) for x in row["local_k"])
        rows.append(
            (
                f"{row['title']} ({row['unit']})",
                row["storage"],
                *(_value(by_n.get(n, math.nan)) for n in pods),
                _k(row["k"]),
                local or "—",
                _expected(row["expected"]),
                row["verdict"],
            )
        )
    header = (
        "cost",
        "storage",
        *(f"N = {_num(n)}" for n in pods),
        "k",
        "local k",
        "expected",
        "verdict",
    )
    return _markdown(header, rows)


def _details(p: ScalePoint) -> str:
    rows: list[tuple[str, str]] = [
        ("objects / stored JSON", f"{_num(p.objects)} / {p.stored_bytes / MIB:,.1f} MiB"),
        ("apps, nodes (pods each)", f"{_num(p.pods // max(1, p.selected))} ({_num(p.selected)})"),
        ("simulator start (s); its RSS", f"{p.sim_start_s:.1f}; {p.sim_rss / MIB:,.0f} MiB"),
        (
            "this N: wall s; other CPU on the machine (s; mean cores)",
            f"{_fixed(p.wall_s, 0)}; {_fixed(p.other_cpu_s, 0)};"
            f" {_fixed(div(p.other_cpu_s, p.wall_s), 2)}",
        ),
        ("daemon start → URL / URL → ready (s)", f"{p.start_s:.2f} / {p.sync_s:.2f}"),
        (
            "RSS / empty daemon / net ÷ stored JSON",
            f"{p.rss / MIB:,.0f} / {p.rss_empty / MIB:,.0f} MiB / {times(p.rss_ratio)}",
        ),
        (
            "peak RSS before the relists; RSS before them; peak during them",
            f"{p.hwm / MIB:,.0f}; {p.rss_before_relists / MIB:,.0f};"
            f" {_fixed(p.relist_peak / MIB if p.relist_peak else math.nan, 0)} MiB",
        ),
        (
            "relists: itself / fault → done (s)",
            ", ".join(f"{r.seconds:.2f} / {r.total_s:.2f}" for r in p.relists) or "n/a",
        ),
    ]
    for key in dict.fromkeys(m.scenario for m in p.lists):
        runs = [m for m in p.lists if m.scenario == key]
        rows.append(
            (
                f"{key}: p50 ms, mean (each connection); p99 ms (items; KiB; requests)",
                f"{_value(_ms(p.p50(key)))} ({_each(_ms(m.p50) for m in runs)});"
                f" {_each(_ms(m.p99) for m in runs)} ({_num(p.items.get(key, -1))};"
                f" {runs[0].bytes_per_request / 1024:,.0f}; {_num(sum(m.requests for m in runs))})",
            )
        )
    if p.ingest:
        rows += [
            (
                "ingest: writes, at /s (early: applied before the burst)",
                ", ".join(
                    f"{_num(g.writes)} at {_num(g.write_rate)} ({g.early})" for g in p.ingest
                ),
            ),
            (
                "ingest: daemon CPU µs per event, median (each run)",
                f"{p.ingest_us_per_event:.1f} ({_each(g.cpu_us_per_event for g in p.ingest)})",
            ),
            (
                "ingest: events/s applied in the burst (daemon busy; simulator CPU s)",
                ", ".join(
                    f"{_num(g.events_per_s)} ({g.daemon_busy:.0%}; {g.sim_cpu_s:.2f})"
                    for g in p.ingest
                ),
            ),
        ]
    for watchers in dict.fromkeys(f.watchers for f in p.fanout):
        points = [f for f in p.fanout if f.watchers == watchers]
        rows.append(
            (
                f"watch, {_num(watchers)} watchers x {points[0].rate:g}/s: p99 ms, median (each run);"
                " p50 ms; delivered; evicted",
                f"{_value(_ms(p.watch_lag_p99(watchers)))} ({_each(_ms(f.lag_p99) for f in points)});"
                f" {_each(_ms(f.lag_p50) for f in points)};"
                f" {_num(sum(f.delivered for f in points))} of {_num(sum(f.expected for f in points))};"
                f" {sum(f.evicted for f in points)}",
            )
        )
    return _markdown((f"N = {_num(p.pods)}, {p.storage}", ""), rows)


_METHOD = """\
**Method.** For each N, the simulator (`cacheproxy sim --pods N`: the demo's pods, ~8 KB with
managedFields, over {namespaces} namespaces) with N/{selected} apps and N/{selected} nodes, so
that `app=app-K` and `spec.nodeName=node-K` select ~{selected} pods at every N; then, each in its
own process on 127.0.0.1: a daemon caching nothing (its RSS is the fixed cost), stopped, then the
daemon (pods with a `spec.nodeName` index; `storage` as the column says). In order:
*first sync*: from the daemon's URL in its log to `/readyz` 200 (the process start before it is
beside it in the details). *RSS*: `VmRSS` 0.5 s after the sync less the empty daemon's.
*Lists* (`loadtest/clients/listbench.py`): one client, keep-alive, the client and the daemon on
one CPU (across two, each request's wake-ups cost 0.1-0.3 ms more, varying with where the
scheduler put them); after an untimed round, {connections} rounds of the label and field lists
and the GET, each on a connection of its own for at least {list_seconds:g} s (a connection
settles at one of a few speeds: 500-pod lists at 1.4 or 1.9 ms), and {repeats} of the full list
(at least {heavy} requests each); the cost is the mean of the connections' p50. The label and
field lists vary K, the GET its pod. Ingest and watch delivery run {repeats} times each; the
curves take the median run. *Ingest*: the
simulator's next watch stream is silent (`/_sim/stream-fault`) and its watches end, so the
daemon watches again and hears nothing; {ingest_writes} merge patches of an annotation on 500
pods are made as fast as the simulator takes them; its watches end again, and the daemon's
resumed watch gets them all at once from the simulator's history. From there until its
`/status` counted every one as a MODIFIED event applied: events/s, and the daemon's CPU time
(`/proc`) ÷ the events, the cost of one event through watch, decode, store, indexes and
EventLog, nobody watching. *Watch delivery* (`loadtest/clients/fanout.py`): {watchers} watchers of every
pod in watch-client processes, {fanout_rate:g} patches/s for {fanout_seconds:g} s, each stamped
with its send time; p99 of write → client read, a missing delivery counting as infinite. *Relist*
({relists} times, last): the simulator's next watch fails 410 (`/_sim/fail`) and its watches
end (`/_sim/end-watches`); the daemon's reflector backs off (0.8-1.6 s) and syncs again. The
time is from the last `/status` poll (every {poll_ms:g} ms) that saw it back off to the first
that counted the relist with the watch open again. *Memory a relist adds*: the daemon's `VmHWM`
over the relists (reset before them through `/proc/PID/clear_refs`) less its RSS before them:
the new state held beside the old until it is swapped in.
**Growth**: `k` of `cost ∝ N^k`, least squares on log-log axes over every N; *local k*
between consecutive N shows a bend. Whole-collection costs PASS with k ≤ {linear:g}; costs of
a constant-size answer or of one event (label, field, GET, ingest per event, watch delivery)
with k ≤ {flat:g}. Verdicts are reported, never asserted. The charts draw each cost with a line
∝ N (dashed) and a constant line (dotted) through the smallest N's point.
"""


def render_scale_report(result: ScaleResult, *, charts: Sequence[str] = ()) -> str:
    m = result.machine
    s = result.settings
    other = ", ".join(
        f"{_num(p.pods)}: {_fixed(div(p.other_cpu_s, p.wall_s), 2)}"
        for p in sorted(result.points, key=lambda p: p.pods)
        if p.storage == result.storages[0]
    )
    header = f"""\
# Scaling curve: each cost against the number of cached pods

- command: `{m.command}`
- date: {m.date}
- Python: {m.python}; event loop: {m.loop}; orjson {m.orjson}
- machine: nproc {m.nproc}, {m.cpu_model}, {m.memory} RAM; load average at start
  {m.load_average}, at the end {result.load_average_end or "n/a"}
- storage: {", ".join(result.storages)}
- other CPU on the machine over each N, beside this benchmark's processes (the kernel's
  loopback work included; more than a few tenths of a core is other work), mean cores:
  {other}
"""
    method = _METHOD.format(
        namespaces=s.get("namespaces"),
        selected=s.get("selected"),
        list_seconds=s.get("list_seconds", 0.0),
        heavy=s.get("heavy_requests"),
        ingest_writes=_num(s.get("ingest_writes", 0)),
        fanout_rate=s.get("fanout_rate", 0.0),
        fanout_seconds=s.get("fanout_seconds", 0.0),
        relists=s.get("relists"),
        repeats=s.get("repeats"),
        connections=s.get("connections"),
        watchers=", then ".join(_num(w) for w in s.get("watchers", ())),
        poll_ms=s.get("poll_seconds", 0.0) * 1000,
        linear=LINEAR_MAX,
        flat=FLAT_MAX,
    )
    sections = [header, "## Growth\n\n" + _growth_table(result) + "\n"]
    if charts:
        sections.append("## Charts\n\n" + "\n".join(f"![{c}]({c})" for c in charts) + "\n")
    sections.append(method)
    points = sorted(result.points, key=lambda p: (p.pods, p.storage))
    sections += [f"## {_num(p.pods)} pods, {p.storage}\n\n{_details(p)}\n" for p in points]
    return "\n".join(sections)


# ---------------------------------------------------------------------- the charts


def write_charts(result: ScaleResult, out: Path) -> list[str]:
    """One PNG per curve with at least one measured point; their file names (in ``out``).
    Empty when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FuncFormatter, NullFormatter
    except ImportError:
        return []
    plain = FuncFormatter(lambda v, _: f"{v:g}")
    pods = sorted({p.pods for p in result.points})
    names = []
    for curve in curves(result):
        fig, ax = plt.subplots(figsize=(7, 5), constrained_layout=True)
        drawn: list[float] = []
        for i, storage in enumerate(result.storages):
            series = _series(result, storage)
            xs = [p.pods for p in series]
            ys = [curve.value(p) for p in series]
            kept = [(x, y) for x, y in zip(xs, ys, strict=True) if y > 0 and math.isfinite(y)]
            if not kept:
                continue
            color = f"C{i}"
            k = growth_exponent(xs, ys)
            ax.plot(*zip(*kept, strict=True), "o-", color=color, label=f"{storage} (k = {_k(k)})")
            for x, y in kept:
                ax.annotate(
                    _value(y), (x, y), textcoords="offset points", xytext=(0, 6), ha="center",
                    fontsize="x-small", color=color,
                )  # fmt: skip
            x0, y0 = kept[0]
            x1 = kept[-1][0]
            ax.plot([x0, x1], [y0, y0 * x1 / x0], "--", color=color, alpha=0.5, label="∝ N")
            ax.plot([x0, x1], [y0, y0], ":", color=color, alpha=0.5, label="constant")
            drawn += [y for _, y in kept] + [y0 * x1 / x0]
        if not drawn:
            plt.close(fig)
            continue
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(pods, [_num(n) for n in pods])
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.yaxis.set_major_formatter(plain)
        # Minor labels only where no decade has a major one: they would crowd the axis.
        ax.yaxis.set_minor_formatter(plain if max(drawn) / min(drawn) < 10 else NullFormatter())
        ax.set_xlabel("pods cached (N)")
        ax.set_ylabel(curve.unit)
        ax.set_title(f"{curve.title}\nexpected {_expected(curve.growth)}", fontsize="medium")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="small")
        name = f"{curve.key}.png"
        fig.savefig(out / name, dpi=90)
        plt.close(fig)
        names.append(name)
    return names
