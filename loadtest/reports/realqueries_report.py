"""The queries section of :mod:`loadtest.scenarios.realserver`'s report: each list and GET to the daemon
against the same to the real API server, their budget rows and ``queries.png``."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

from loadtest.clients.realqueries import (
    BIG_LIST_PODS,
    CONCURRENCY,
    INDEX,
    SERVERS,
    QueriesResult,
    QueryRun,
    Timing,
)
from loadtest.reports.figures import MIB, X, div, mb, times, verdict_at_least
from loadtest.reports.report import _markdown, _num
from loadtest.reports.serve_report import _ms

__all__ = [
    "GET_THROUGHPUT_BUDGET",
    "QUERY_SPEEDUP_BUDGETS",
    "queries_chart",
    "queries_section",
    "query_budgets",
]

QUERY_SPEEDUP_BUDGETS = {"full": 15.0, "label": 10.0}
"""The API server's p50 at RV=0 ÷ the daemon's, 1 client, at least (per listbench query)."""
GET_THROUGHPUT_BUDGET = 2.0
"""GETs/s at 16 clients, the daemon's ÷ the API server's, at least."""


def query_budgets(queries: QueriesResult | None) -> list[tuple[str, str, str, str]]:
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
                f"{_ms(api)} ms ÷ {_ms(ours)} ms = {times(div(api, ours))}",
                f"≥ {budget:g}{X}",
                verdict_at_least(div(api, ours), budget),
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
                f"{rates} = {times(ratio)}",
                f"≥ {GET_THROUGHPUT_BUDGET:g}{X}",
                verdict_at_least(ratio, GET_THROUGHPUT_BUDGET),
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


def _r(value: float) -> str:
    """A ratio to three significant digits (they span 0.001 to 1 000 here)."""
    if not math.isfinite(value):
        return "n/a"
    return f"{_num(value)}{X}" if value >= 1000 else f"{value:.3g}{X}"


def _rate(value: float) -> str:
    return _num(value) if not math.isfinite(value) or value >= 100 else f"{value:.3g}"


def _pair(run: QueryRun, show: Callable[[Timing], str], *, concurrency: int = 1) -> str:
    """``show`` of the daemon's / the API server's timing ("skipped" for one not measured)."""
    timings = run.latency if concurrency == 1 else run.throughput
    return " / ".join(
        show(timings[s]) if s in timings else "skipped" for s in ("daemon", "apiserver")
    )


def queries_section(queries: QueriesResult | None) -> str:
    queries = queries
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
                    lambda t: _num(div(t.server_cpu_s * 1000, t.requests), 2),
                    concurrency=many,
                ),
                _pair(
                    run,
                    lambda t: _num(div(t.client_cpu_s * 1000, t.requests), 2),
                    concurrency=many,
                ),
                _pair(
                    run,
                    lambda t: f"{_num(t.server_rss_before / MIB)} → {mb(t.server_peak_rss)}",
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


def queries_chart(queries: QueriesResult | None, out: Path) -> list[str]:
    """``queries.png``: how many times the daemon beats the API server at each query, at p50 with
    1 client and in requests/s with 16 (log scale; above 1 the daemon is better), the budgets
    marked."""
    queries = queries
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
        ("1 client: API server p50 ÷ daemon p50", lambda r: div(1.0, r.ratio(lambda t: t.p50))),
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
