"""What :mod:`loadtest.scenarios.realserver` measures, and its Markdown report and chart.

Every figure is shown beside its baseline, as a ratio: the daemon's first sync against one
``curl`` of the same request; its memory against the JSON it stores; each event-delivery lag
through the daemon against the same event on a watch opened directly on the API server; each
query's latency and throughput through the daemon against the same query to the API server.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadtest.clients.lagprobe import SOURCES, LagRun
from loadtest.clients.realqueries import QueriesResult
from loadtest.harness.realcluster import APPS, NAMESPACES, NODES, POD_LIST, CurlRun
from loadtest.harness.relists import RelistPoint
from loadtest.reports.figures import X, div, mb, seconds, times, verdict
from loadtest.reports.realqueries_report import (
    GET_THROUGHPUT_BUDGET,
    QUERY_SPEEDUP_BUDGETS,
    queries_chart,
    queries_section,
    query_budgets,
)
from loadtest.reports.report import MEMORY_BUDGET, MachineInfo, _markdown, _num
from loadtest.reports.serve_report import _ms

__all__ = [
    "GET_THROUGHPUT_BUDGET",
    "LAG_BUDGET",
    "QUERY_SPEEDUP_BUDGETS",
    "SYNC_BUDGET",
    "DaemonRun",
    "RealServerResult",
    "RelistResult",
    "SyncRep",
    "SyncResult",
    "render_report",
    "render_summary",
    "write_chart",
]

SYNC_BUDGET = 1.5
"""The daemon's pods sync ÷ the Python decode floor of the same list in the same run (the
same request read with the daemon's HTTP client and parsed item by item), at most. ``curl`` of
the list is beside it, for reference: a Python client cannot read a list as fast as curl."""
LAG_BUDGET = 0.050
"""p99 of an event through the daemon's watch, and of a GET seeing a write (seconds), at most."""
RELIST_GROWTH_BUDGET = 1.10
"""RSS after the last of the relists, at most this many times the RSS after the first."""
_TITLES = {
    "watch": "(a) event on a watch through the daemon",
    "get": "(b) GET through the daemon returns the write",
    "direct": "(c) event on a watch on the API server (baseline)",
}


@dataclass(frozen=True, slots=True)
class DaemonRun:
    """One daemon from ``cacheproxy serve`` to ready, with its own log's view of the sync."""

    ready_s: float
    """Process start → ``/readyz`` answers 200."""
    listening_s: float
    """Process start → its URL logged (imports, config, kubeconfig, server bound)."""
    pods_list_s: float
    """The daemon's log: the pods list, from its request to its objects prepared."""
    pods_sync_how: str
    cpu_s: float
    """The daemon's CPU seconds when ready."""
    rss: int
    hwm: int


@dataclass(frozen=True, slots=True)
class SyncRep:
    curl: CurlRun
    """The daemon's request with its headers (its Accept-Encoding too), decoded as it arrives."""
    curl_gzip: CurlRun
    """The same asking for gzip (for comparison: what a distant upstream is asked for)."""
    floor_s: float
    """The same request read with httpx and parsed item by item, nothing kept: the least any
    Python client spends on it."""
    daemon: DaemonRun


@dataclass(frozen=True, slots=True)
class SyncResult:
    reps: list[SyncRep]
    headers: dict[str, str]
    pods_responses: dict[str, int]
    """The daemon's upstream answers for pods during its sync (``verb code`` → count)."""
    objects: dict[str, int]
    stored_bytes: int
    empty_rss: int
    """RSS of the same daemon caching nothing (every resource selects no object)."""
    apiserver_rss: int
    etcd_rss: int

    def median(self, value: Callable[[SyncRep], float]) -> float:
        return statistics.median(value(r) for r in self.reps) if self.reps else math.nan


@dataclass(frozen=True, slots=True)
class RelistResult:
    """One daemon made to relist its pods again and again (kube-apiserver restarts) under churn."""

    after_sync_rss: int
    after_sync_hwm: int
    points: list[RelistPoint]


@dataclass
class RealServerResult:
    machine: MachineInfo
    source: str
    """The cacheproxy the daemons ran (commit, uncommitted changes)."""
    upstream: dict[str, str]
    pods: int
    created: dict[str, int]
    load_s: float
    sync: SyncResult
    lag: list[LagRun]
    lag_daemons: dict[str, dict[str, float]]
    """Per transport: its daemon's start → ready (s) and upstream TCP connections."""
    settings: dict[str, Any]
    relists: RelistResult | None = None
    queries: QueriesResult | None = None
    load_average_end: str = ""


# ---------------------------------------------------------------------- the budgets


def _memory_ratio(sync: SyncResult) -> float:
    rss = sync.median(lambda r: r.daemon.rss)
    return div(rss - sync.empty_rss, sync.stored_bytes)


def render_summary(result: RealServerResult) -> str:
    sync = result.sync
    pods, curl = sync.median(lambda r: r.daemon.pods_list_s), sync.median(lambda r: r.curl.seconds)
    floor = sync.median(lambda r: r.floor_s)
    ratio = div(pods, floor)
    memory = _memory_ratio(sync)
    rows = [
        (
            f"first sync of the pods (the daemon's log) ÷ the Python decode floor of the same "
            f"list (medians of {len(sync.reps)})",
            f"{seconds(pods)} s ÷ {seconds(floor)} s = {times(ratio)}; one curl of the list "
            f"{seconds(curl)} s: the sync {times(div(pods, curl))} of curl, the floor "
            f"{times(div(floor, curl))}",
            f"≤ {SYNC_BUDGET}{X}",
            verdict(ratio, SYNC_BUDGET),
        ),
        (
            "memory: (daemon RSS - empty daemon) ÷ stored JSON",
            f"{times(memory)}",
            f"≤ {MEMORY_BUDGET}{X}",
            verdict(memory, MEMORY_BUDGET),
        ),
    ]
    budget = 1.5 * sync.stored_bytes + sync.empty_rss
    rss, hwm = sync.median(lambda r: r.daemon.rss), sync.median(lambda r: r.daemon.hwm)
    rows.append(
        (
            f"memory: daemon RSS after sync ÷ (1.5{X} stored JSON + empty daemon)",
            f"{mb(rss)} ÷ {mb(budget)} = {times(div(rss, budget))}",
            f"≤ 1.00{X}",
            verdict(div(rss, budget), 1.0),
        )
    )
    rows.append(
        (
            f"memory: daemon peak RSS during the first sync ÷ (1.5{X} stored JSON + empty daemon)",
            f"{mb(hwm)} ÷ {mb(budget)} = {times(div(hwm, budget))}",
            f"≤ 2.00{X}",
            verdict(div(hwm, budget), 2.0),
        )
    )
    relists = result.relists
    if relists is not None and relists.points:
        first, last = relists.points[0], relists.points[-1]
        peak = max(p.hwm for p in relists.points)
        growth = div(last.rss, first.rss)
        rows.append(
            (
                f"memory: peak RSS over {len(relists.points)} relists under churn ÷ "
                f"(1.5{X} stored JSON + empty daemon)",
                f"{mb(peak)} ÷ {mb(budget)} = {times(div(peak, budget))}",
                f"≤ 2.00{X}",
                verdict(div(peak, budget), 2.0),
            )
        )
        rows.append(
            (
                f"memory: RSS after relist {last.relists} ÷ after relist {first.relists}",
                f"{mb(last.rss)} ÷ {mb(first.rss)} = {times(growth)}",
                f"≤ {RELIST_GROWTH_BUDGET:.2f}{X}",
                verdict(growth, RELIST_GROWTH_BUDGET),
            )
        )
    for run in result.lag:
        base = run.stats["direct"]
        for source in ("watch", "get"):
            stats = run.stats[source]
            rows.append(
                (
                    f"{run.transport} upstream: {_TITLES[source]}, p99 (÷ direct watch p99)",
                    f"{_ms(stats.p99)} ms ({times(div(stats.p99, base.p99))}), "
                    f"{stats.missed} of {stats.writes} not seen in time",
                    f"≤ {_ms(LAG_BUDGET)} ms",
                    verdict(stats.p99, LAG_BUDGET),
                )
            )
    rows += query_budgets(result.queries)
    return _markdown(("budget (docs/design.md §6)", "measured", "budget", "verdict"), rows)


# ---------------------------------------------------------------------- sections


_SYNC_COLUMNS: tuple[tuple[str, Callable[[SyncRep], float]], ...] = (
    ("curl s", lambda r: r.curl.seconds),
    ("curl first byte s", lambda r: r.curl.first_byte_s),
    ("curl, gzip s", lambda r: r.curl_gzip.seconds),
    ("Python decode floor s", lambda r: r.floor_s),
    ("daemon start → listening s", lambda r: r.daemon.listening_s),
    ("listening → ready s", lambda r: r.daemon.ready_s - r.daemon.listening_s),
    ("pods list s (the daemon's log)", lambda r: r.daemon.pods_list_s),
    ("daemon start → ready s", lambda r: r.daemon.ready_s),
    ("daemon CPU s", lambda r: r.daemon.cpu_s),
)
"""The first-sync table's columns; the first is the baseline of the "÷ curl" row."""


def _sync_section(result: RealServerResult) -> str:
    sync = result.sync
    rows: list[tuple[str, ...]] = [
        (
            str(i),
            *(seconds(value(r)) for _, value in _SYNC_COLUMNS),
            times(div(r.daemon.ready_s, r.curl.seconds)),
        )
        for i, r in enumerate(sync.reps, 1)
    ]
    medians = [sync.median(value) for _, value in _SYNC_COLUMNS]
    curl, ready = medians[0], sync.median(lambda r: r.daemon.ready_s)
    rows.append(("**median**", *(seconds(m) for m in medians), times(div(ready, curl))))
    rows.append(("÷ curl", *(times(div(m, curl)) for m in medians), ""))
    table = _markdown(("run", *(title for title, _ in _SYNC_COLUMNS), "ready ÷ curl"), rows)
    first = sync.reps[0] if sync.reps else None
    responses = ", ".join(f"{k}: {v}" for k, v in sorted(sync.pods_responses.items()))
    headers = "; ".join(f"`{k}: {v}`" for k, v in sync.headers.items())
    lists = sum(v for k, v in sync.pods_responses.items() if k.startswith("list "))
    how = first.daemon.pods_sync_how if first else "n/a"
    wire = (
        f"{mb(first.curl.wire_bytes)} on the wire as the daemon asks for it, "
        f"{mb(first.curl_gzip.wire_bytes)} with gzip"
        if first
        else "n/a"
    )
    return f"""\
## First sync

The daemon's upstream answers for pods during a sync (its `/metrics`): {responses or "n/a"}. Its
watch-list is refused (no WatchList gate), then it lists `GET {POD_LIST}`: {lists} list
request(s), synced by **{how}** (its log); the answer is {wire}. The baseline is
`curl --http1.1 --compressed` of that request with the daemon's own headers ({headers}), timed
by curl (`time_total`); the daemon is timed from `cacheproxy serve` starting to `/readyz`
answering 200 (polled every 50 ms), its 7 resources synced.

{table}
"""


def _relist_section(result: RealServerResult) -> str:
    relists = result.relists
    if relists is None:
        return ""
    rows = [("after the first sync", "", mb(relists.after_sync_rss), mb(relists.after_sync_hwm))]
    rows += [
        (f"after relist {p.relists}", seconds(p.recovery_s), mb(p.rss), mb(p.hwm))
        for p in relists.points
    ]
    table = _markdown(
        ("daemon", "relist done after the API server was ready, s", "RSS", "peak RSS (VmHWM)"),
        rows,
    )
    return f"""## Memory across relists

One daemon, pods changing at ~20 writes/s, kube-apiserver restarted {len(relists.points)} times:
each restart re-initialises its watch cache at etcd's current revision, so the daemon's resumed
pod watch is 410 "too old resource version" and it relists — the whole collection in one
response, while its old state is still held. Memory is read 2 s after each relist is done (the
daemon's `/status`: one relist more, watching again).

{table}
"""


def _memory_section(result: RealServerResult) -> str:
    sync = result.sync
    rss = sync.median(lambda r: r.daemon.rss)
    hwm = sync.median(lambda r: r.daemon.hwm)
    stored = sync.stored_bytes
    objects = ", ".join(f"{k} {_num(v)}" for k, v in sync.objects.items())
    rows = [
        ("daemon RSS after sync (median)", mb(rss), times(div(rss, stored))),
        ("daemon peak RSS during sync (VmHWM, median)", mb(hwm), times(div(hwm, stored))),
        ("empty daemon RSS (same config, nothing selected)", mb(sync.empty_rss), ""),
        ("daemon RSS - empty daemon", mb(rss - sync.empty_rss), times(_memory_ratio(sync))),
        ("stored JSON (`/status` bytes)", mb(stored), "1"),
        ("kube-apiserver RSS", mb(sync.apiserver_rss), times(div(sync.apiserver_rss, stored))),
        ("etcd RSS", mb(sync.etcd_rss), times(div(sync.etcd_rss, stored))),
    ]
    table = _markdown(("memory", "bytes", "÷ stored JSON"), rows)
    return f"## Memory\n\nObjects cached: {objects}.\n\n{table}\n"


def _lag_section(result: RealServerResult) -> str:
    rows: list[tuple[str, ...]] = []
    for run in result.lag:
        base = run.stats["direct"]
        for source in SOURCES:
            s = run.stats[source]
            added = run.added.get(source)
            rows.append(
                (
                    run.transport,
                    _TITLES[source],
                    _ms(s.p50),
                    _ms(s.p99),
                    _ms(s.max),
                    str(s.missed),
                    times(div(s.p99, base.p99)),
                    times(div(s.max, base.max)),
                    f"{_ms(added.p50)} / {_ms(added.p99)}" if added else "",
                )
            )
    table = _markdown(
        (
            "upstream",
            "from the write's response to",
            "p50 ms",
            "p99 ms",
            "max ms",
            "not seen in 5 s",
            "p99 ÷ (c)",
            "max ÷ (c)",
            "added to (c), per write: p50 / p99 ms",
        ),
        rows,
    )
    runs = []
    for run in result.lag:
        daemon = result.lag_daemons.get(run.transport, {})
        verbs = ", ".join(f"{v} {k}" for k, v in run.by_verb.items())
        runs.append(
            (
                run.transport,
                f"{run.writes} ({verbs})",
                f"{run.write_rate:.1f}",
                f"{daemon.get('connections', math.nan):.0f}",
                seconds(daemon.get("ready_s", math.nan)),
                seconds(run.daemon_cpu_s),
                seconds(run.apiserver_cpu_s),
                _num(run.polls),
            )
        )
    context = _markdown(
        (
            "upstream",
            "writes",
            "writes/s",
            "daemon's TCP connections to the API server",
            "its start → ready s",
            "daemon CPU s",
            "kube-apiserver CPU s",
            "GETs polled",
        ),
        runs,
    )
    errors = "".join(f"- {run.transport}: {e}\n" for run in result.lag for e in run.errors)
    if errors:
        errors = f"\nWhat went wrong with the watches:\n\n{errors}"
    return f"## Event delivery lag\n\n{_LAG_NOTE}\n\n{table}\n\n{context}\n{errors}"


_LAG_NOTE = """\
The direct watch often reads a write's event *before* the writer reads its response (the API
server sends both at once; the response travels through more of it), so (c) can be ≤ 0 and a
ratio to it says little at p50; the last column is what the daemon adds, write by write."""


_METHOD = """\
## Method

One process (this benchmark) starts etcd and kube-apiserver with `cacheproxy.envtest`, creates
the objects with their statuses (`Cluster.load`), then runs each daemon as `cacheproxy serve
--config FILE` in its own process (the config: the 7 resources, the admin kubeconfig, port 0,
every other setting its default; `upstream.http2: true` for the HTTP/2 row). Memory is read
from `/proc/PID/status` half a second after the daemon is ready (after its post-sync GC work).

**First sync.** Each run times a `curl` of the pod list (with the daemon's headers, and asking
for gzip, decoded as it arrives) and
a new daemon from start to ready, alternating which goes first. The ratio is the ratio of the
medians.

**Event delivery.** With the daemon synced, one watch of ConfigMaps and one of Pods are opened
through it and the same two directly on the API server (from each one's current
resourceVersion, httpx over HTTP/1.1, the same code reading both). Writes go to the API server
at a steady rate from one connection: ConfigMap creates and merge patches, and every fifth a
merge patch of a pod's annotation (a whole pod event). A write's lag is from its response read
here to (a) its event (same object, same resourceVersion) read on the daemon's watch, (b) a
GET through the daemon, polled every 2 ms on keep-alive connections from the response, first
answering that resourceVersion or newer, (c) its event read on the API server's watch. Two
writes (one of each kind) first warm every path up. Missing after 5 s counts as not seen (an
infinite lag in the percentiles). Everything is timed on one clock in one event loop, so a
baseline lag near zero makes a ratio large; the absolute milliseconds are beside it.
"""


def render_report(result: RealServerResult, *, charts: Sequence[str] = ()) -> str:
    m = result.machine
    up = result.upstream
    created = ", ".join(f"{k} {_num(v)}" for k, v in result.created.items())
    settings = ", ".join(f"{k}={v}" for k, v in result.settings.items())
    header = f"""\
# Real API server benchmark: first sync, memory, event delivery, queries (docs/design.md §6)

- command: `{m.command}`
- date: {m.date}; cacheproxy: {result.source}
- upstream: **a real kube-apiserver {up.get("gitVersion", "?")}** ({up.get("goVersion", "?")}),
  etcd {up.get("etcd", "?")}, both on 127.0.0.1 (TLS, bearer token, RBAC; no feature gates set),
  started by `cacheproxy.envtest`; nothing else runs (no controllers, no kubelets)
- workload: {created}; pods spread over {len(NAMESPACES)} namespaces,
  `app=app-0..{len(APPS) - 1}`, `spec.nodeName` `node-0..{NODES - 1}`; the API server returns {up.get("podBytes", "?")} bytes of JSON per pod
  (managedFields included); loaded in {result.load_s:.0f} s
- Python: {m.python}; event loop: {m.loop}; orjson {m.orjson}
- machine: nproc {m.nproc}, {m.cpu_model}, {m.memory} RAM; load average at start
  {m.load_average}, at the end {result.load_average_end or "n/a"} (the machine is shared: the
  runs are repeated and medians kept; every ratio compares figures of the same run)
- settings: {settings}
"""
    parts = [
        header,
        "## Budgets\n\n" + render_summary(result) + "\n",
        _sync_section(result),
        _memory_section(result),
        _relist_section(result),
        _lag_section(result),
        queries_section(result.queries),
    ]
    parts += [f"![{c}]({c})\n" for c in charts]
    parts.append(_METHOD)
    return "\n".join(parts)


def write_chart(result: RealServerResult, out: Path) -> list[str]:
    """The charts' file names in ``out``: ``lag.png`` and ``queries.png``; none without
    matplotlib."""
    return _lag_chart(result, out) + queries_chart(result.queries, out)


def _lag_chart(result: RealServerResult, out: Path) -> list[str]:
    """``lag.png``: the distribution of each lag (ms, log scale above 1 ms), one panel per transport."""
    if not result.lag:
        return []
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    fig, axes = plt.subplots(
        1, len(result.lag), figsize=(6 * len(result.lag), 4.5), squeeze=False, sharey=True
    )
    for ax, run in zip(axes[0], result.lag, strict=True):
        for i, source in enumerate(SOURCES):
            lags = sorted(x * 1000 for x in run.lags[source] if x is not None)
            if lags:
                ys = [(k + 1) / len(run.lags[source]) for k in range(len(lags))]
                ax.step(lags, ys, where="post", color=f"C{i}", label=_TITLES[source])
        ax.axvline(LAG_BUDGET * 1000, color="grey", linestyle=":", label="50 ms budget")
        ax.set_xscale("symlog", linthresh=1.0)  # a lag may be slightly negative
        ax.set_xlabel("lag from the write's response, ms (linear below 1 ms)")
        ax.set_title(f"{run.transport} upstream, {run.writes} writes")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("fraction of writes seen")
    axes[0][0].legend(fontsize="small", loc="lower right")
    fig.tight_layout()
    fig.savefig(out / "lag.png", dpi=90)
    plt.close(fig)
    return ["lag.png"]
