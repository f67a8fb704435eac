"""The serving benchmark's Markdown report: the budgets of docs/design.md §6 judged, a table per scenario.

:func:`render_summary` is the budget table (printed at the end of a run); :func:`render_serve_report`
the whole report: machine and command, the summary, then per pod count the list tables
(concurrency 1: latency; concurrency 16: throughput), the floor, memory and offload, then the
fan-out points and capacities, the charts and the method.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from loadtest.clients.fanout import LAG_BUDGET, FanoutPoint, capacity
from loadtest.clients.listbench import Measurement
from loadtest.harness.serve_records import ServeResult, SizeResult
from loadtest.reports.figures import div, times
from loadtest.reports.report import MEMORY_BUDGET, _markdown, _num

__all__ = [
    "FANOUT_RATIO_BUDGET",
    "FLOOR_BUDGET",
    "GET_RATE_BUDGET",
    "LABEL_RATE_BUDGET",
    "NAIVE_BUDGET",
    "SELECTIVE_BUDGET",
    "render_serve_report",
    "render_summary",
]

FLOOR_BUDGET = 2.0
"""Daemon full-list time ÷ the floor's, at most."""
NAIVE_BUDGET = 3.0
"""Naive full-list time ÷ the daemon's, at least."""
SELECTIVE_BUDGET = 20.0
"""Daemon full-list time ÷ its label / index-selected list time, at least."""
LABEL_RATE_BUDGET = 400.0
"""Label-selected lists/s with 16 clients, at least."""
GET_RATE_BUDGET = 5000.0
"""Single GETs/s with 16 clients, at least."""
FANOUT_RATIO_BUDGET = 0.5
"""Daemon fan-out capacity ÷ the bare broadcaster's, at least."""
BUDGET_POINT = (1000, 20.0)
"""1 000 watchers x 20 events/s: p99 < 1 s and no eviction."""
_X = "\N{MULTIPLICATION SIGN}"
_SERVERS = ("daemon", "simulator", "naive")


def _ms(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "∞" if seconds == math.inf else "n/a"
    ms = seconds * 1000
    return f"{ms:.3f}" if ms < 1 else f"{ms:.2f}" if ms < 100 else _num(ms)


def _verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else "PASS" if ok else "FAIL"


def _check(value: float, budget: float, *, at_least: bool) -> str:
    if not math.isfinite(value):
        return "n/a"
    return _verdict(value >= budget if at_least else value <= budget)


# ---------------------------------------------------------------------- the budgets


def _p50(size: SizeResult, server: str, scenario: str, concurrency: int = 1) -> float:
    m = size.find(server, scenario, concurrency)
    return m.p50 if m is not None else math.nan


def _rate(size: SizeResult, server: str, scenario: str, concurrency: int = 16) -> float:
    m = size.find(server, scenario, concurrency)
    return m.rate if m is not None else math.nan


def _size_budgets(size: SizeResult) -> list[tuple[str, str, str, str]]:
    n = f"N = {_num(size.pods)}"
    full = _p50(size, "daemon", "full")
    floor = div(full, _p50(size, "floor", "full"))
    naive = div(_p50(size, "naive", "full"), full)
    label = div(full, _p50(size, "daemon", "label"))
    field = div(full, _p50(size, "daemon", "field"))
    floor_full = _p50(size, "floor", "full")
    floor_label = div(floor_full, _p50(size, "floor", "label"))
    floor_field = div(floor_full, _p50(size, "floor", "field"))
    label_rate = _rate(size, "daemon", "label")
    get_rate = _rate(size, "daemon", "get")
    mem = size.memory.net_ratio
    phases = size.offload.phases
    constant = bool(phases) and len({p.upstream_requests for p in phases}) == 1
    growth = (
        f"{_num(phases[0].client_requests)} → {_num(phases[-1].client_requests)}" if phases else ""
    )
    upstream = " → ".join(_num(p.upstream_requests) for p in phases)
    return [
        (f"{n}: daemon full list ÷ floor (p50, c=1)", times(floor), f"≤ {FLOOR_BUDGET:g}{_X}", _check(floor, FLOOR_BUDGET, at_least=False)),
        (f"{n}: naive ÷ daemon full list (p50, c=1)", times(naive), f"≥ {NAIVE_BUDGET:g}{_X}", _check(naive, NAIVE_BUDGET, at_least=True)),
        (f"{n}: label list speedup vs full list (p50, c=1; the floor's own: the bound)", f"{times(label)} (floor {times(floor_label)})", f"≥ {SELECTIVE_BUDGET:g}{_X}", _check(label, SELECTIVE_BUDGET, at_least=True)),
        (f"{n}: index field list speedup vs full list (p50, c=1; the floor's own: the bound)", f"{times(field)} (floor {times(floor_field)})", f"≥ {SELECTIVE_BUDGET:g}{_X}", _check(field, SELECTIVE_BUDGET, at_least=True)),
        (f"{n}: label lists/s, 16 clients", _num(label_rate), f"≥ {_num(LABEL_RATE_BUDGET)}/s", _check(label_rate, LABEL_RATE_BUDGET, at_least=True)),
        (f"{n}: single GETs/s, 16 clients", _num(get_rate), f"≥ {_num(GET_RATE_BUDGET)}/s", _check(get_rate, GET_RATE_BUDGET, at_least=True)),
        (f"{n}: memory (RSS - empty daemon) ÷ stored JSON", times(mem), f"≤ {MEMORY_BUDGET}{_X}", _check(mem, MEMORY_BUDGET, at_least=False)),
        (f"{n}: upstream pod requests as client requests grow {growth}", upstream, "constant", _verdict(constant) if phases else "n/a"),
    ]  # fmt: skip


def _capacity(points: Sequence[FanoutPoint], target: str, watchers: int) -> tuple[float, bool]:
    """(capacity, is a lower bound: the ladder's top rung was still sustained, or the writer
    could not offer more)."""
    mine = [p for p in points if p.target == target and p.watchers == watchers]
    return capacity(points, target, watchers), bool(mine) and mine[-1].sustained


def _fanout_budgets(result: ServeResult) -> list[tuple[str, str, str, str]]:
    rows = []
    k, rate = BUDGET_POINT
    case = next(
        (p for p in result.fanout if (p.target, p.watchers, p.rate) == ("daemon", k, rate)), None
    )
    rows.append(
        (
            f"fan-out {_num(k)} watchers {_X} {rate:g} events/s: p99 lag, evictions",
            f"p99 {_ms(case.lag_p99)} ms, {case.evicted + case.closed} evicted, "
            f"{_num(case.delivered)} of {_num(case.expected)} delivered"
            if case is not None
            else "not measured",
            f"< {LAG_BUDGET * 1000:.0f} ms, 0",
            _verdict(case.sustained if case is not None else None),
        )
    )
    for watchers in sorted({p.watchers for p in result.fanout}):
        ratio, note, verdict = _capacity_ratio(result.fanout, watchers)
        rows.append(
            (
                f"fan-out capacity ÷ bare broadcaster, {_num(watchers)} watchers",
                f"{ratio * 100:.0f} %{note}" if math.isfinite(ratio) else "n/a",
                f"≥ {FANOUT_RATIO_BUDGET * 100:.0f} %",
                verdict,
            )
        )
        efficiency, at = _efficiency(result.fanout, watchers)
        rows.append(
            (
                f"fan-out server CPU per delivery, broadcaster ÷ daemon, {_num(watchers)} watchers "
                "(the capacity ratio were each server alone on a core)",
                f"{efficiency * 100:.0f} % at {at:g} events/s"
                if math.isfinite(efficiency)
                else "n/a",
                f"≥ {FANOUT_RATIO_BUDGET * 100:.0f} %",
                _check(efficiency, FANOUT_RATIO_BUDGET, at_least=True),
            )
        )
    return rows


def _capacity_ratio(points: Sequence[FanoutPoint], watchers: int) -> tuple[float, str, str]:
    """(daemon ÷ broadcaster capacity, a note on its bounds, the verdict against the budget).

    A capacity whose ladder never saturated is a lower bound, so the ratio is a lower bound when
    only the daemon's is (a PASS can be trusted), an upper bound when only the broadcaster's is
    (a FAIL can), and says nothing when both are.
    """
    daemon, daemon_low = _capacity(points, "daemon", watchers)
    base, base_low = _capacity(points, "broadcaster", watchers)
    ratio = div(daemon, base)
    verdict = _check(ratio, FANOUT_RATIO_BUDGET, at_least=True)
    note = ""
    if base_low and not daemon_low:
        note = " (at most: the broadcaster never saturated)"
        verdict = verdict if verdict == "FAIL" else "n/a"
    elif daemon_low and not base_low:
        note = " (at least: the daemon never saturated)"
        verdict = verdict if verdict == "PASS" else "n/a"
    elif daemon_low and base_low:
        note = " (neither saturated: inconclusive)"
        verdict = "n/a"
    return ratio, note, verdict


def render_summary(result: ServeResult) -> str:
    rows: list[tuple[str, str, str, str]] = []
    for size in result.sizes:
        rows += _size_budgets(size)
    rows += _fanout_budgets(result)
    return _markdown(("budget (docs/design.md §6)", "measured", "budget", "verdict"), rows)


# ---------------------------------------------------------------------- per pod count


def _lat(m: Measurement | None) -> tuple[str, str]:
    return (_ms(m.p50), _ms(m.p99)) if m is not None else ("skipped", "")


def _latency_table(size: SizeResult, titles: dict[str, str]) -> str:
    rows = []
    for key, title in titles.items():
        d = size.find("daemon", key, 1)
        row = [title, _items(size, key), *_lat(d)]
        for server in _SERVERS[1:]:
            m = size.find(server, key, 1)
            row += [*_lat(m), times(div(m.p50, d.p50)) if m and d else "n/a"]
        rows.append(row)
    header = ("concurrency 1", "items", "daemon p50 ms", "p99 ms", "simulator p50 ms", "p99 ms",
              "sim ÷ daemon", "naive p50 ms", "p99 ms", "naive ÷ daemon")  # fmt: skip
    return _markdown(header, rows)


def _items(size: SizeResult, key: str) -> str:
    """The daemon's item count, and any server that answered differently."""
    mine = size.items.get("daemon", {}).get(key, -1)
    others = [
        f"{server} {_num(counts[key])}"
        for server, counts in size.items.items()
        if server != "daemon" and counts.get(key, mine) != mine
    ]
    return _num(mine) + (f" (≠ {', '.join(others)})" if others else "")


def _throughput_table(size: SizeResult, titles: dict[str, str]) -> str:
    rows = []
    for key, title in titles.items():
        d = size.find("daemon", key, 16)
        if d is None:
            continue
        cpu = div(d.server_cpu_s * 1000, d.requests)
        row = [title, _num(d.rate, 1), _ms(d.p50), _ms(d.p99), f"{cpu:.2f}"]
        for server in _SERVERS[1:]:
            m = size.find(server, key, 16)
            row += [_num(m.rate, 1), times(div(d.rate, m.rate))] if m else ["skipped", ""]
        rows.append(row)
    header = ("concurrency 16", "daemon req/s", "p50 ms", "p99 ms", "daemon CPU ms/req",
              "simulator req/s", "daemon ÷ sim", "naive req/s", "daemon ÷ naive")  # fmt: skip
    return _markdown(header, rows)


def _size_section(size: SizeResult, titles: dict[str, str]) -> str:
    mem, off = size.memory, size.offload
    per = div(mem.stored_bytes, mem.objects)
    floor_rows = []
    for key in ("full", "label", "field"):
        for c in (1, 16):
            d, f = size.find("daemon", key, c), size.find("floor", key, c)
            if d is None or f is None:
                continue
            floor_rows.append((f"{titles.get(key, key)}, {c}", _num(d.bytes_per_request), _ms(d.p50), _ms(f.p50),
                               times(div(d.p50, f.p50)), _ms(d.p50 - f.p50), _num(d.rate, 1), _num(f.rate, 1)))  # fmt: skip
    floor = _markdown(("list, concurrency", "bytes", "daemon p50 ms", "floor p50 ms", "daemon ÷ floor",
                       "daemon - floor ms", "daemon req/s", "floor req/s"), floor_rows)  # fmt: skip
    memory = _markdown(
        ("memory", "value"),
        [
            ("objects; stored JSON bytes/object (managedFields dropped)", f"{_num(mem.objects)}; {_num(per)}"),
            ("simulator's bytes/pod in a list (managedFields kept)", _num(size.sim_item_bytes)),
            ("daemon RSS after sync; empty daemon RSS", f"{_mb(mem.rss)}; {_mb(mem.rss_empty)}"),
            ("(RSS - empty) ÷ stored JSON", f"{times(mem.net_ratio)} ({_num(div(mem.rss - mem.rss_empty, mem.objects))} B/object) → {_check(mem.net_ratio, MEMORY_BUDGET, at_least=False)}"),
            ("RSS ÷ stored JSON (process total)", times(mem.gross_ratio)),
            ("daemon peak RSS (VmHWM) after the list runs", _mb(mem.hwm)),
            ("naive server: (RSS after - before loading) ÷ stored JSON", times(mem.naive_ratio)),
        ],
    )  # fmt: skip
    phases = [
        (f"{_num(p.client_requests)} client requests", _num(p.upstream_requests),
         ", ".join(f"{k} {v}" for k, v in sorted(p.upstream_by_verb.items())) or "none", f"{p.seconds:.2f}")
        for p in off.phases
    ]  # fmt: skip
    phases.insert(0, ("start → daemon synced (the daemons' watch-lists, the naive server's pages)",
                      _num(sum(off.upstream_at_sync.values())),
                      ", ".join(f"{k} {v}" for k, v in sorted(off.upstream_at_sync.items())), ""))  # fmt: skip
    offload = _markdown(("offload phase", "simulator pod requests", "by verb", "seconds"), phases)
    whole = (
        f"Whole run at this N: the daemon answered {_num(off.run_client_requests)} requests "
        f"(watches included) and made {_num(off.run_upstream_requests)} upstream requests."
    )
    skipped = f"\nSkipped: {'; '.join(size.skipped)}.\n" if size.skipped else ""
    return f"""\
## {_num(size.pods)} pods

Simulator start {size.sim_start_s:.1f} s; daemon sync {size.daemon_sync_s:.2f} s after it listened.

### Latency, one client (a page walk is timed whole)

{_latency_table(size, titles)}

### Throughput, 16 clients

{_throughput_table(size, titles)}

### The floor: the same list bytes through a bare asyncio socket

What a list costs above moving its bytes: about the same fixed time for a 5 % list as for the
full one is the cost of a request (parse, route, select, headers), not of its size. The full ÷
label ratio of the floor itself bounds the daemon's: with a fixed cost c per request, the
daemon's ratio reaches 20{_X} only if its full list spends 19·c more above the floor than the
label list does.

{floor}

### Memory

{memory}

### Offload

{offload}

{whole}
{skipped}"""


def _mb(value: int) -> str:
    return f"{value / 2**20:,.0f} MiB".replace(",", " ")


# ---------------------------------------------------------------------- fan-out


def _cores(seconds: float, wall: float) -> str:
    return f"{div(seconds, wall):.2f}"


def _efficiency(points: Sequence[FanoutPoint], watchers: int) -> tuple[float, float]:
    """(broadcaster ÷ daemon server CPU per delivery, at that rate) at the highest rate both
    sustained: what the capacity ratio would be were the server alone on a core."""
    both = [
        (d, b)
        for d in points
        if (d.target, d.watchers) == ("daemon", watchers) and d.sustained
        for b in points
        if (b.target, b.watchers, b.rate) == ("broadcaster", watchers, d.rate) and b.sustained
    ]
    if not both:
        return math.nan, math.nan
    d, b = max(both, key=lambda pair: pair[0].rate)
    return div(b.server_us_per_delivery, d.server_us_per_delivery), d.rate


def _fanout_section(result: ServeResult) -> str:
    if not result.fanout:
        return "## Watch fan-out\n\nNot run.\n"
    rows = []
    for p in result.fanout:
        w = p.wall_s
        rows.append((
            p.target, _num(p.watchers),
            f"{p.rate:g} ({p.write_rate:.1f}{'' if p.rate_reached else ', writer-limited'})",
            _num(p.deliveries_per_s),
            _ms(p.lag_p50), _ms(p.lag_p99), _ms(p.lag_max),
            f"{_num(p.delivered)} / {_num(p.expected)}", f"{p.evicted} / {p.closed}",
            f"{p.server_us_per_delivery:.1f}",
            f"{_cores(p.server_cpu_s, w)} / {_cores(p.sim_cpu_s, w)} / {_cores(p.client_cpu_s, w)} "
            f"({p.client_procs}) / {_cores(p.harness_cpu_s, w)}",
            f"{_cores(p.machine_busy_s, w)} ({_cores(p.other_cpu_s, w)})",
            _verdict(p.sustained),
        ))  # fmt: skip
    table = _markdown(
        ("server", "watchers", "events/s asked (done)", "deliveries/s", "lag p50 ms", "p99 ms",
         "max ms", "delivered / expected", "evicted / closed", "server CPU µs/delivery",
         "CPU cores: server / sim / clients (procs) / writer", "machine busy cores (unaccounted)",
         f"sustained (p99 < {LAG_BUDGET:g} s, none lost)"),
        rows,
    )  # fmt: skip
    caps = []
    for watchers in sorted({p.watchers for p in result.fanout}):
        d, d_low = _capacity(result.fanout, "daemon", watchers)
        b, b_low = _capacity(result.fanout, "broadcaster", watchers)
        ratio, note, verdict = _capacity_ratio(result.fanout, watchers)
        efficiency, at = _efficiency(result.fanout, watchers)
        caps.append((
            _num(watchers), ("≥ " if d_low else "") + _num(d), ("≥ " if b_low else "") + _num(b),
            (f"{ratio * 100:.0f} %" if math.isfinite(ratio) else "n/a") + note,
            verdict,
            f"{efficiency * 100:.0f} % (at {at:g} events/s)" if math.isfinite(efficiency) else "n/a",
        ))  # fmt: skip
    capacity_table = _markdown(
        ("watchers", "daemon capacity (deliveries/s)", "bare broadcaster", "daemon ÷ broadcaster",
         f"≥ {FANOUT_RATIO_BUDGET * 100:.0f} %", "CPU per delivery, broadcaster ÷ daemon"), caps)  # fmt: skip
    client_cpu = sum(p.client_cpu_s for p in result.fanout)
    wall = sum(p.wall_s for p in result.fanout)
    return f"""\
## Watch fan-out ({_num(result.fanout_pods)} pods cached)

{table}

Capacity: the highest deliveries/s sustained (p99 lag < {LAG_BUDGET:g} s, nothing evicted or
lost); "≥" when the ladder's top rate was still sustained. The last column divides the two
servers' CPU per delivery at the highest rate both sustained: the capacity ratio to expect were
each server alone on a core (on this machine the clients, the simulator, the writer and the
kernel's loopback work share the {result.machine.nproc} cores: see "machine busy").

{capacity_table}

The watch clients took {div(client_cpu, wall):.2f} cores on average over the fan-out points
({client_cpu:.1f} CPU-s in {wall:.1f} s). "Unaccounted" is machine busy time outside the
measured processes: the kernel's loopback TCP work (softirq) and anything else running.
"""


# ---------------------------------------------------------------------- the report


_METHOD = """\
**Method.** Every server is its own process on 127.0.0.1 (uvloop + httptools, `TCP_NODELAY`):
the simulator (`cacheproxy sim`: the API-server stand-in and the upstream, demo pods ~8 KB each
with managedFields), the daemon (`cacheproxy serve --config`, pods with a `spec.nodeName` index;
its default transform drops managedFields), the naive server (`loadtest/baselines/naiveserver.py`: the
pods as parsed dicts with the same indexes, `orjson.dumps` of the response per request) and the
floors (`loadtest/baselines/floor.py`: the daemon's full, label and field list bytes, prebuilt, one
`transport.write` per request). The client (`loadtest/clients/httpclient.py`) is one process with keep-alive HTTP/1.1
connections in a closed loop that only counts body bytes; a request's time runs from writing it
to the last byte read. Concurrency 16 = 16 connections. Items were checked on one answer of each
scenario from each server before timing. Selective lists vary the app / node / namespace per
request (K = i mod count); GETs cycle over 1 000 pods. *Fan-out*: watchers of
`/api/v1/pods?watch=1` from the current RV in `loadtest/clients/watchclient.py` processes (raw asyncio
protocols, chunked framing decoded in place, one `bytes.find` per line); a writer merge-PATCHes
pods on the simulator at the given rate, stamping `metadata.annotations["loadtest/created-at"]`
with `time.time()`; lag = the client's read time - the stamp (same clock). Deliveries still
missing after the drain count as infinite lag. *Bare broadcaster* (`loadtest/baselines/broadcaster.py`):
watches the simulator, parses each event, drops managedFields, encodes it once and writes the same
chunk to every client: the fan-out floor in Python. *Memory*: `VmRSS` after the sync minus a
daemon of the same config caching nothing (an upstream label selector matching no pod).
*Offload*: the simulator's own request counters (`/_sim/stats`) around 10 and 1 000 daemon
requests (namespace, label, field lists and GETs).
"""


def render_serve_report(result: ServeResult, *, charts: Sequence[str] = ()) -> str:
    m = result.machine
    titles = {
        "full": "full list",
        "namespace": "namespace list",
        "label": "label list (app=app-K)",
        "field": "index field list (spec.nodeName=node-K)",
        "get": "single GET",
        "pages": "limit=500 page walk",
    }
    header = f"""\
# Serving benchmark: lists, gets, watch fan-out, memory, offload (docs/design.md §6)

- command: `{m.command}`
- date: {m.date}
- Python: {m.python}; event loop: {m.loop}; orjson {m.orjson}
- machine: nproc {m.nproc}, {m.cpu_model}, {m.memory} RAM; load average at start {m.load_average},
  at the end {result.load_average_end or "n/a"}
- settings: {", ".join(f"{k}={v}" for k, v in result.settings.items() if v not in (None, False))}

## Budgets

{render_summary(result)}
"""
    sections = [_size_section(size, titles) for size in result.sizes]
    images = (
        "\n".join(f"![{name}]({name})" for name in charts)
        or "(matplotlib not installed: no charts)"
    )
    return "\n".join(
        [header, *sections, _fanout_section(result), "## Charts\n", images, "", _METHOD]
    )
