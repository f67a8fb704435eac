"""What :mod:`loadtest.realserver` measures, and its Markdown report and chart.

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

from loadtest.lagprobe import SOURCES, LagRun
from loadtest.realcluster import APPS, NAMESPACES, NODES, POD_LIST, CurlRun
from loadtest.realqueries import (
    BIG_LIST_PODS,
    CONCURRENCY,
    INDEX,
    SERVERS,
    QueriesResult,
    QueryRun,
    Timing,
)
from loadtest.relists import RelistPoint
from loadtest.report import MEMORY_BUDGET, MachineInfo, _markdown, _num
from loadtest.serve_report import _ms

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
"""The daemon's start → ready ÷ one curl of the same pod list, at most."""
LAG_BUDGET = 0.050
"""p99 of an event through the daemon's watch, and of a GET seeing a write (seconds), at most."""
RELIST_GROWTH_BUDGET = 1.10
"""RSS after the last of the relists, at most this many times the RSS after the first."""
QUERY_SPEEDUP_BUDGETS = {"full": 15.0, "label": 10.0}
"""The API server's p50 at RV=0 ÷ the daemon's, 1 client, at least (per listbench query)."""
GET_THROUGHPUT_BUDGET = 2.0
"""GETs/s at 16 clients, the daemon's ÷ the API server's, at least."""
_X = "\N{MULTIPLICATION SIGN}"
_MIB = 1 << 20
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


# ---------------------------------------------------------------------- numbers


def _s(seconds: float) -> str:
    return f"{seconds:.3f}" if math.isfinite(seconds) else "n/a"


def _x(value: float) -> str:
    return f"{value:.2f}{_X}" if math.isfinite(value) else "n/a"


def _div(a: float, b: float) -> float:
    return a / b if b > 0 and math.isfinite(a) and math.isfinite(b) else math.nan


def _mb(value: float) -> str:
    return f"{value / _MIB:,.1f} MiB".replace(",", " ")


def _verdict(value: float, budget: float) -> str:
    return "n/a" if math.isnan(value) else "PASS" if value <= budget else "FAIL"


def _verdict_at_least(value: float, budget: float) -> str:
    return "n/a" if math.isnan(value) else "PASS" if value >= budget else "FAIL"


# ---------------------------------------------------------------------- the budgets


def _memory_ratio(sync: SyncResult) -> float:
    rss = sync.median(lambda r: r.daemon.rss)
    return _div(rss - sync.empty_rss, sync.stored_bytes)


def render_summary(result: RealServerResult) -> str:
    sync = result.sync
    pods, curl = sync.median(lambda r: r.daemon.pods_list_s), sync.median(lambda r: r.curl.seconds)
    floor = sync.median(lambda r: r.floor_s)
    ratio = _div(pods, curl)
    memory = _memory_ratio(sync)
    rows = [
        (
            f"first sync of the pods (the daemon's log) ÷ one curl of the pod list (medians of "
            f"{len(sync.reps)})",
            f"{_s(pods)} s ÷ {_s(curl)} s = {_x(ratio)}; the Python decode floor is "
            f"{_s(floor)} s = {_x(_div(floor, curl))} of curl, the sync {_x(_div(pods, floor))} "
            "of the floor",
            f"≤ {SYNC_BUDGET}{_X}",
            _verdict(ratio, SYNC_BUDGET),
        ),
        (
            "memory: (daemon RSS - empty daemon) ÷ stored JSON",
            f"{_x(memory)}",
            f"≤ {MEMORY_BUDGET}{_X}",
            _verdict(memory, MEMORY_BUDGET),
        ),
    ]
    budget = 1.5 * sync.stored_bytes + sync.empty_rss
    rss, hwm = sync.median(lambda r: r.daemon.rss), sync.median(lambda r: r.daemon.hwm)
    rows.append(
        (
            f"memory: daemon RSS after sync ÷ (1.5{_X} stored JSON + empty daemon)",
            f"{_mb(rss)} ÷ {_mb(budget)} = {_x(_div(rss, budget))}",
            f"≤ 1.00{_X}",
            _verdict(_div(rss, budget), 1.0),
        )
    )
    rows.append(
        (
            f"memory: daemon peak RSS during the first sync ÷ (1.5{_X} stored JSON + empty daemon)",
            f"{_mb(hwm)} ÷ {_mb(budget)} = {_x(_div(hwm, budget))}",
            f"≤ 2.00{_X}",
            _verdict(_div(hwm, budget), 2.0),
        )
    )
    relists = result.relists
    if relists is not None and relists.points:
        first, last = relists.points[0], relists.points[-1]
        peak = max(p.hwm for p in relists.points)
        growth = _div(last.rss, first.rss)
        rows.append(
            (
                f"memory: peak RSS over {len(relists.points)} relists under churn ÷ "
                f"(1.5{_X} stored JSON + empty daemon)",
                f"{_mb(peak)} ÷ {_mb(budget)} = {_x(_div(peak, budget))}",
                f"≤ 2.00{_X}",
                _verdict(_div(peak, budget), 2.0),
            )
        )
        rows.append(
            (
                f"memory: RSS after relist {last.relists} ÷ after relist {first.relists}",
                f"{_mb(last.rss)} ÷ {_mb(first.rss)} = {_x(growth)}",
                f"≤ {RELIST_GROWTH_BUDGET:.2f}{_X}",
                _verdict(growth, RELIST_GROWTH_BUDGET),
            )
        )
    for run in result.lag:
        base = run.stats["direct"]
        for source in ("watch", "get"):
            stats = run.stats[source]
            rows.append(
                (
                    f"{run.transport} upstream: {_TITLES[source]}, p99 (÷ direct watch p99)",
                    f"{_ms(stats.p99)} ms ({_x(_div(stats.p99, base.p99))}), "
                    f"{stats.missed} of {stats.writes} not seen in time",
                    f"≤ {_ms(LAG_BUDGET)} ms",
                    _verdict(stats.p99, LAG_BUDGET),
                )
            )
    rows += _query_budgets(result.queries)
    return _markdown(("budget (DESIGN §6 and the brief)", "measured", "budget", "verdict"), rows)


def _query_budgets(queries: QueriesResult | None) -> list[tuple[str, str, str, str]]:
    if queries is None:
        return []
    rows = []
    for key, budget in QUERY_SPEEDUP_BUDGETS.items():
        run = queries.find(key, "0")
        lat = run.latency if run else None
        api, ours = (lat["apiserver"].p50, lat["daemon"].p50) if lat else (math.nan, math.nan)
        rows.append(
            (
                f"queries: {run.title if run else key}, RV=0, 1 client: API server p50 ÷ daemon p50",
                f"{_ms(api)} ms ÷ {_ms(ours)} ms = {_x(_div(api, ours))}",
                f"≥ {budget:g}{_X}",
                _verdict_at_least(_div(api, ours), budget),
            )
        )
    for rv in ("0", ""):
        run = queries.find("get", rv)
        ratio = run.ratio(lambda t: t.rate, concurrency=CONCURRENCY) if run else math.nan
        rates = (
            f"{_num(run.throughput['daemon'].rate)} ÷ {_num(run.throughput['apiserver'].rate)}/s"
            if run
            else "n/a"
        )
        rows.append(
            (
                f"queries: single GET, RV{'=0' if rv else ' unset'}, {CONCURRENCY} clients: daemon ÷ API "
                "server requests/s",
                f"{rates} = {_x(ratio)}",
                f"≥ {GET_THROUGHPUT_BUDGET:g}{_X}",
                _verdict_at_least(ratio, GET_THROUGHPUT_BUDGET),
            )
        )
    equal = sum(r.check.equal for r in queries.runs)
    end = "; still equal after the timings" if queries.equal_at_end else "; NOT equal at the end"
    rows.append(
        (
            "queries: the daemon's items (namespace, name, resourceVersion, in order) are the API "
            "server's",
            f"{equal} of {len(queries.runs)} queries{end}",
            "all",
            "PASS"
            if queries.runs and equal == len(queries.runs) and queries.equal_at_end
            else "FAIL",
        )
    )
    return rows


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
            *(_s(value(r)) for _, value in _SYNC_COLUMNS),
            _x(_div(r.daemon.ready_s, r.curl.seconds)),
        )
        for i, r in enumerate(sync.reps, 1)
    ]
    medians = [sync.median(value) for _, value in _SYNC_COLUMNS]
    curl, ready = medians[0], sync.median(lambda r: r.daemon.ready_s)
    rows.append(("**median**", *(_s(m) for m in medians), _x(_div(ready, curl))))
    rows.append(("÷ curl", *(_x(_div(m, curl)) for m in medians), ""))
    table = _markdown(("run", *(title for title, _ in _SYNC_COLUMNS), "ready ÷ curl"), rows)
    first = sync.reps[0] if sync.reps else None
    responses = ", ".join(f"{k}: {v}" for k, v in sorted(sync.pods_responses.items()))
    headers = "; ".join(f"`{k}: {v}`" for k, v in sync.headers.items())
    lists = sum(v for k, v in sync.pods_responses.items() if k.startswith("list "))
    how = first.daemon.pods_sync_how if first else "n/a"
    wire = (
        f"{_mb(first.curl.wire_bytes)} on the wire as the daemon asks for it, "
        f"{_mb(first.curl_gzip.wire_bytes)} with gzip"
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
    rows = [("after the first sync", "", _mb(relists.after_sync_rss), _mb(relists.after_sync_hwm))]
    rows += [
        (f"after relist {p.relists}", _s(p.recovery_s), _mb(p.rss), _mb(p.hwm))
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
        ("daemon RSS after sync (median)", _mb(rss), _x(_div(rss, stored))),
        ("daemon peak RSS during sync (VmHWM, median)", _mb(hwm), _x(_div(hwm, stored))),
        ("empty daemon RSS (same config, nothing selected)", _mb(sync.empty_rss), ""),
        ("daemon RSS - empty daemon", _mb(rss - sync.empty_rss), _x(_memory_ratio(sync))),
        ("stored JSON (`/status` bytes)", _mb(stored), "1"),
        ("kube-apiserver RSS", _mb(sync.apiserver_rss), _x(_div(sync.apiserver_rss, stored))),
        ("etcd RSS", _mb(sync.etcd_rss), _x(_div(sync.etcd_rss, stored))),
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
                    _x(_div(s.p99, base.p99)),
                    _x(_div(s.max, base.max)),
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
                _s(daemon.get("ready_s", math.nan)),
                _s(run.daemon_cpu_s),
                _s(run.apiserver_cpu_s),
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


def _r(value: float) -> str:
    """A ratio to three significant digits (they span 0.001 to 1 000 here)."""
    if not math.isfinite(value):
        return "n/a"
    return f"{_num(value)}{_X}" if value >= 1000 else f"{value:.3g}{_X}"


def _rate(value: float) -> str:
    return _num(value) if not math.isfinite(value) or value >= 100 else f"{value:.3g}"


def _pair(run: QueryRun, show: Callable[[Timing], str], *, concurrency: int = 1) -> str:
    """``show`` of the daemon's / the API server's timing ("skipped" for one not measured)."""
    timings = run.latency if concurrency == 1 else run.throughput
    return " / ".join(
        show(timings[s]) if s in timings else "skipped" for s in ("daemon", "apiserver")
    )


def _queries_section(result: RealServerResult) -> str:
    queries = result.queries
    if queries is None:
        return ""
    rows, details = [], []
    many = CONCURRENCY
    for run in queries.runs:
        rv = run.resource_version or "unset"
        one, sixteen = run.latency, run.throughput
        check = run.check
        rate = {s: _rate(sixteen[s].rate) if s in sixteen else "skipped" for s in SERVERS}
        rows.append(
            (
                run.title,
                rv,
                _ms(one["daemon"].p50),
                _ms(one["apiserver"].p50),
                _r(run.ratio(lambda t: t.p50)),
                _ms(one["daemon"].p99),
                _ms(one["apiserver"].p99),
                _r(run.ratio(lambda t: t.p99)),
                rate["daemon"],
                rate["apiserver"],
                _r(run.ratio(lambda t: t.rate, concurrency=many)),
                "yes" if check.equal else f"**NO**: {check.detail}",
            )
        )
        details.append(
            (
                run.title,
                rv,
                f"`{run.target}`",
                f"{_num(check.daemon_items)} / {_num(check.apiserver_items)}",
                f"{check.daemon_pages} / {check.apiserver_pages}",
                _pair(run, lambda t: _num(t.bytes_per_request / 1024)),
                _pair(run, lambda t: str(t.requests)),
                _pair(run, lambda t: str(t.requests), concurrency=many),
                str(sum(t.errors for t in [*one.values(), *sixteen.values()])),
                _pair(
                    run,
                    lambda t: _num(_div(t.server_cpu_s * 1000, t.requests), 2),
                    concurrency=many,
                ),
                _pair(
                    run,
                    lambda t: _num(_div(t.client_cpu_s * 1000, t.requests), 2),
                    concurrency=many,
                ),
                _pair(
                    run,
                    lambda t: f"{_num(t.server_rss_before / _MIB)} → {_mb(t.server_peak_rss)}",
                    concurrency=many,
                ),
            )
        )
    table = _markdown(
        (
            "query",
            "RV",
            "p50 ms daemon",
            "p50 ms API server",
            "p50 daemon ÷ API",
            "p99 ms daemon",
            "p99 ms API server",
            "p99 daemon ÷ API",
            f"req/s at {many} daemon",
            f"req/s at {many} API server",
            "req/s daemon ÷ API",
            "same items",
        ),
        rows,
    )
    context = _markdown(
        (
            "query",
            "RV",
            "request 0",
            "items",
            "responses",
            "KiB per answer",
            "answers timed at 1 client",
            f"at {many}",
            "errors",
            f"server CPU ms per answer at {many} (API server: + etcd)",
            f"this client's CPU ms per answer at {many}",
            f"server RSS at {many}: before → peak",
        ),
        details,
    )
    notes = []
    walk = queries.find("pages", "0")
    if walk is not None and walk.check.apiserver_pages == 1 < walk.check.daemon_pages:
        notes.append(
            "**The API server's `limit=500` walk at RV=0 is one response**: v1.28 answers a list "
            "at RV=0 from its watch cache whole, ignoring `limit`; the daemon pages it."
        )
    if queries.skipped:
        notes.append(
            f"Above {_num(BIG_LIST_PODS)} pods the API server is not asked, at {many} clients, "
            "the queries that make it hold every pod at once (with 10 000 pods, 16 full lists "
            "from etcd took its RSS from 1.8 to 8.4 GiB); skipped here: "
            + "; ".join(queries.skipped)
            + "."
        )
    caught = (
        f"{queries.caught_up_s:.1f} s after it was ready"
        if math.isfinite(queries.caught_up_s)
        else "**never**, within the deadline"
    )
    end = "" if queries.equal_at_end else " — **yet the full lists differed at its end**"
    seconds = queries.settings.get("seconds", math.nan)
    rounds = queries.settings.get("rounds", math.nan)
    least = queries.settings.get("min_requests", math.nan)
    note = "\n\n".join(notes)
    return f"""## Queries: the daemon beside the API server

The same requests to a daemon caching pods with an index on `{INDEX}` (the other daemons'
config plus `indexes: [{INDEX}]`, every other setting its default) and directly to the API
server (TLS, the admin's bearer token), each at `resourceVersion` unset (the API server reads
etcd) and `resourceVersion=0` (its watch cache); the daemon reads its cache either way. Every
ratio is the daemon's figure ÷ the API server's from the same minutes: below 1 the daemon
answers sooner, above 1 it serves more requests/s. The daemon caught up (its full list equal to
the API server's from etcd and from its watch cache) {caught}; nothing wrote during the
section{end}.

{table}

Below, each pair is daemon / API server. The items are request 0's (a walk's: all its pages'),
compared item by item — namespace, name, resourceVersion, in order — before the timings. The
daemon's answers are smaller: its default transform drops `managedFields`.

{note}

{context}

At 1 client: {rounds:.0f} rounds per server, alternating which goes first, each of at least
{least:.0f} requests and {seconds:g} s (none started after {4 * seconds:g} s, so a slow API
server list is timed fewer times). At {many} clients: one closed loop per server of at least
{many} requests and {2 * seconds:g} s; requests/s = answers ÷ the time to the last one. Request
*i* asks for the same namespace, app, node or pod of both servers. Both servers, etcd and this
client share the machine's cores; the API server's answers also cost this client TLS
decryption (the client CPU column). RSS: read as the {many}-client run starts, then sampled every
0.1 s (the peak); the API server's Go heap shrinks slowly, so what an earlier query left is in
both.
"""


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
# Real API server benchmark: first sync, memory, event delivery, queries (DESIGN §6)

- command: `{m.command}`
- date: {m.date}; cacheproxy: {result.source}
- upstream: **a real kube-apiserver {up.get("gitVersion", "?")}** ({up.get("goVersion", "?")}),
  etcd {up.get("etcd", "?")}, both on 127.0.0.1 (TLS, bearer token, RBAC; no WatchList gate),
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
        _queries_section(result),
    ]
    parts += [f"![{c}]({c})\n" for c in charts]
    parts.append(_METHOD)
    return "\n".join(parts)


def write_chart(result: RealServerResult, out: Path) -> list[str]:
    """The charts' file names in ``out``: ``lag.png`` and ``queries.png``; none without
    matplotlib."""
    return _lag_chart(result, out) + _queries_chart(result, out)


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


def _queries_chart(result: RealServerResult, out: Path) -> list[str]:
    """``queries.png``: how many times the daemon beats the API server at each query, at p50 with
    1 client and in requests/s with 16 (log scale; above 1 the daemon is better), the budgets
    marked."""
    queries = result.queries
    if queries is None or not queries.runs:
        return []
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FormatStrFormatter
    except ImportError:
        return []
    titles = list(dict.fromkeys(r.title for r in queries.runs))
    keys = list(dict.fromkeys(r.query for r in queries.runs))
    panels: tuple[tuple[str, Callable[[QueryRun], float]], ...] = (
        ("1 client: API server p50 ÷ daemon p50", lambda r: _div(1.0, r.ratio(lambda t: t.p50))),
        (
            f"{CONCURRENCY} clients: daemon req/s ÷ API server req/s",
            lambda r: r.ratio(lambda t: t.rate, concurrency=CONCURRENCY),
        ),
    )
    # Budget marks: (value, span of y around the query's row) — the speed-ups are judged at RV=0
    # (the lower bar), GETs/s at both.
    height = 0.38
    budgets = (
        {k: (v, (0.0, height)) for k, v in QUERY_SPEEDUP_BUDGETS.items()},
        {"get": (GET_THROUGHPUT_BUDGET, (-height, height))},
    )
    fig, axes = plt.subplots(1, 2, figsize=(11, 0.5 * len(titles) + 2.0), sharey=True)
    for ax, (title, value), marks in zip(axes, panels, budgets, strict=True):
        for k, rv in enumerate(("", "0")):
            ys = [i + (k - 0.5) * height for i in range(len(keys))]
            found = [queries.find(key, rv) for key in keys]
            xs = [value(r) if r is not None else math.nan for r in found]
            label = f"RV {rv or 'unset'} ({'etcd' if not rv else 'watch cache'})"
            finite = [x if math.isfinite(x) else 0.0 for x in xs]
            bars = ax.barh(ys, finite, height=height, color=f"C{k}", label=label)
            texts = [f"{x:.3g}" if x < 1000 else f"{x:.0f}" for x in finite]
            ax.bar_label(bars, labels=texts, fontsize="x-small", padding=2)
            for y, x in zip(ys, xs, strict=True):
                if not math.isfinite(x):
                    ax.text(1.1, y, "not measured", va="center", fontsize="x-small")
        for i, key in enumerate(keys):
            if key in marks:
                at, (low, high) = marks[key]
                ax.plot([at, at], [i + low, i + high], color="black", linewidth=2.5)
        ax.axvline(1.0, color="grey", linewidth=1)
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(FormatStrFormatter("%g"))
        ax.set_title(title, fontsize="medium")
        ax.grid(True, axis="x", which="both", alpha=0.3)
    axes[0].set_yticks(range(len(keys)), titles)
    axes[0].invert_yaxis()
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize="small", loc="lower center", ncol=2)
    fig.suptitle(
        "The daemon against kube-apiserver, same queries (times better; black: the budgets)",
        fontsize="medium",
    )
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(out / "queries.png", dpi=90)
    plt.close(fig)
    return ["queries.png"]
