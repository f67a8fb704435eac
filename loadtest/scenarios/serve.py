"""Serving benchmark (docs/design.md §6): list/get latency, watch fan-out, memory and upstream offload.

``python -m loadtest serve [--full] [--pods 10000 ...] [--out DIR]`` starts, for each pod count
N, the simulator (``cacheproxy sim --pods N``: the demo's pods, ~8 KB with managedFields, over
``--namespaces`` namespaces, ``--apps`` apps and ``--nodes`` nodes) and, each in its own process
on 127.0.0.1: the daemon (``cacheproxy serve --config FILE``, pods with a ``spec.nodeName``
index), the naive baseline (:mod:`loadtest.baselines.naiveserver`) and, for the floors, bare socket
servers of the daemon's full, label and field list bytes (:mod:`loadtest.baselines.floor`). Then, in this
order:

1. **Memory**: the daemon's RSS after its sync, less the RSS of the same daemon caching nothing,
   per stored JSON byte (``/status``).
2. **Offload**: the simulator's pod requests while the daemon answers 10, then 1 000 requests.
3. **Lists** (:mod:`loadtest.clients.listbench`): every scenario at concurrency 1 and 16 against the
   daemon, the simulator (an API-server stand-in) and the naive server; the full list also
   against the floor server of the same bytes, right after the daemon's. The floor's own
   full ÷ label ratio is the physical bound of the daemon's (a 5 % list is 5 % of the bytes).
4. **Fan-out** (:mod:`loadtest.clients.fanout`, at ``--fanout-pods`` only): for each watcher count, the
   rate ladder against the daemon and the bare broadcaster (:mod:`loadtest.baselines.broadcaster`),
   climbing until a point is not sustained.

Writes ``serve.md`` (also printed), ``serve.json`` and PNG charts to ``--out`` (default
``loadtest/results/<today>``). Budgets are judged in the report, never asserted: the exit status
is 0 unless something crashed.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime as dt
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson

from loadtest.clients import fanout
from loadtest.clients.httpclient import Connection, fetch, open_connection
from loadtest.clients.listbench import Measurement, Scenario, measure, scenarios, verify
from loadtest.harness.processes import (
    Service,
    rss_bytes,
    start_daemon,
    start_module,
    start_sim,
    write_daemon_config,
)
from loadtest.harness.serve_records import (
    MemoryReading,
    OffloadPhase,
    OffloadResult,
    ServeResult,
    SizeResult,
)
from loadtest.reports.charts import write_charts
from loadtest.reports.report import collect_machine_info
from loadtest.reports.serve_report import render_serve_report, render_summary
from loadtest.scenarios.ingest import _loop_factory, _python_command

__all__ = ["main"]

SHORT_LADDERS = {100: (100.0, 200.0, 400.0, 800.0), 1000: (20.0, 40.0, 80.0, 160.0)}
FULL_LADDERS = {
    100: (50.0, 100.0, 200.0, 400.0, 600.0, 800.0, 1200.0),
    1000: (10.0, 20.0, 40.0, 60.0, 80.0, 120.0, 160.0, 240.0),
}
_HEAVY = ("full", "pages")
_BIG_LIST_PODS = 20_000
"""Above this, the simulator's and the naive server's full lists and page walks at concurrency 16
are skipped: each full list builds its whole body in memory (16 x ~0.9 GB at 100 000 pods), and
16 concurrent walks of 200 pages take minutes (the simulator's at 100 000 pods: ~110 s)."""


def _progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _metric_sum(text: bytes, name: str) -> float:
    pattern = re.compile(rb"^" + re.escape(name.encode()) + rb"(?:\{[^}]*\})? (\S+)", re.MULTILINE)
    return sum(float(v) for v in pattern.findall(text))


async def _pod_requests(sim_url: str) -> dict[str, int]:
    _, body = await fetch(sim_url, "/_sim/stats")
    requests: dict[str, int] = orjson.loads(body)["requests"]
    return {k.split()[0]: v for k, v in requests.items() if k.endswith(" pods")}


async def _offload(daemon: str, sim: str, mix: Sequence[Scenario]) -> OffloadResult:
    at_sync = await _pod_requests(sim)
    phases = []
    before = at_sync
    for count in (10, 1000):
        started = time.perf_counter()
        conns = [await open_connection(daemon) for _ in range(4)]
        codes = await asyncio.gather(
            *(_serial(conns[w], mix, range(w, count, len(conns))) for w in range(len(conns)))
        )
        for conn in conns:
            conn.close()
        after = await _pod_requests(sim)
        delta = {k: after.get(k, 0) - before.get(k, 0) for k in after}
        phases.append(
            OffloadPhase(
                client_requests=sum(c == 200 for batch in codes for c in batch),
                upstream_requests=sum(delta.values()),
                upstream_by_verb={k: v for k, v in delta.items() if v},
                seconds=time.perf_counter() - started,
            )
        )
        before = after
    return OffloadResult(upstream_at_sync=at_sync, phases=tuple(phases))


async def _serial(conn: Connection, mix: Sequence[Scenario], indexes: range) -> list[int]:
    return [(await conn.request(mix[i % len(mix)].target(i))).status for i in indexes]


FLOORED = ("full", "label", "field")
"""Scenarios measured against a floor server of the daemon's bytes (its answer to request 0)."""


async def _lists(
    servers: dict[str, Service],
    floors: dict[str, Service],
    plan: list[Scenario],
    args: argparse.Namespace,
    n: int,
    skipped: list[str],
) -> list[Measurement]:
    out = []
    for scenario in plan:
        for concurrency in (1, 16):
            timed = dict(servers)
            if scenario.key in floors:  # right after the daemon's: both see the same machine
                timed = {"daemon": servers["daemon"], "floor": floors[scenario.key], **servers}
            for name, service in timed.items():
                big = scenario.key in _HEAVY and n > _BIG_LIST_PODS and concurrency > 1
                if big and name in ("simulator", "naive"):
                    skipped.append(f"{name} {scenario.key} list at concurrency {concurrency}")
                    continue
                heavy = scenario.key in _HEAVY
                _progress(f"N={n}: {scenario.title}, c={concurrency}, {name}")
                out.append(
                    await measure(
                        service.url,
                        scenario,
                        server=name,
                        concurrency=concurrency,
                        min_requests=concurrency * (args.heavy_requests if heavy else 4),
                        min_seconds=args.list_seconds,
                        max_seconds=args.list_seconds * 4,
                        server_cpu=service.cpu,
                    )
                )
    return out


async def _fanout(
    daemon: Service, sim: Service, broadcaster: Service, args: argparse.Namespace
) -> list[fanout.FanoutPoint]:
    ladders = FULL_LADDERS if args.full else SHORT_LADDERS
    writer = fanout.StampWriter(sim.url)
    await writer.open()
    points: list[fanout.FanoutPoint] = []
    targets: dict[str, tuple[Service, Callable[[], Any]]] = {
        "daemon": (daemon, lambda: fanout.daemon_evictions(daemon.url)),
        "broadcaster": (broadcaster, lambda: fanout.broadcaster_evictions(broadcaster.url)),
    }
    try:
        for watchers in args.watchers:
            rates = args.rates or ladders.get(watchers) or ladders[1000]
            for target, (service, evictions) in targets.items():
                for rate in rates:
                    _progress(f"fan-out: {target}, {watchers} watchers x {rate:g} events/s")
                    point = await fanout.run_point(
                        target=target,
                        url=service.url,
                        writer=writer,
                        watchers=watchers,
                        rate=rate,
                        duration=args.fanout_seconds,
                        drain=args.drain_seconds,
                        max_procs=args.watch_procs,
                        evictions=evictions,
                        server_cpu=service.cpu,
                        sim_cpu=sim.cpu,
                    )
                    points.append(point)
                    if target == "daemon":
                        await fanout.wait_watchers_gone(daemon.url)
                    await asyncio.sleep(0.5)
                    if not (point.sustained and point.rate_reached):
                        break
    finally:
        writer.close()
    return points


def _bench_size(
    n: int, args: argparse.Namespace, workdir: Path, runner: asyncio.Runner
) -> tuple[SizeResult, list[fanout.FanoutPoint]]:
    started = time.monotonic()
    _progress(f"N={n}: starting the simulator")
    sim = start_sim(
        workdir,
        pods=n,
        namespaces=args.namespaces,
        nodes=args.nodes,
        apps=args.apps,
        churn=args.churn,
        seed=args.seed,
    )
    sim_start = time.monotonic() - started
    services = [sim]
    try:
        naive = start_module(
            workdir, "naive", "loadtest.baselines.naiveserver", "--upstream", sim.url, wait=False
        )
        services.append(naive)
        empty_config = write_daemon_config(
            workdir, name="daemon-empty", upstream=sim.url, label_selector="loadtest/none=1"
        )
        empty = start_daemon(workdir, empty_config, name="daemon-empty")
        services.append(empty)
        daemon = start_daemon(
            workdir, write_daemon_config(workdir, name="daemon", upstream=sim.url)
        )
        services.append(daemon)
        sync_s = daemon.wait_ready(120 + n / 1000)
        empty.wait_ready(60)
        naive.wait_url(120 + n / 500)
        time.sleep(0.5)  # the daemon's post-sync gc.freeze and the empty one's settle
        rss, rss_empty = daemon.rss(), empty.rss()
        empty.stop()
        status = orjson.loads(runner.run(fetch(daemon.url, "/status"))[1])["resources"]["pods"]
        naive_status = orjson.loads(runner.run(fetch(naive.url, "/status"))[1])
        _, names_body = runner.run(fetch(daemon.url, "/api/v1/pods?limit=1000"))
        pods = [
            (i["metadata"]["namespace"], i["metadata"]["name"])
            for i in orjson.loads(names_body)["items"]
        ]
        plan = scenarios(namespaces=args.namespaces, apps=args.apps, nodes=args.nodes, pods=pods)
        _progress(f"N={n}: offload (upstream requests as client requests grow)")
        mix = [s for s in plan if s.key in ("namespace", "label", "field", "get")]
        offload = runner.run(_offload(daemon.url, sim.url, mix))
        servers = {"daemon": daemon, "simulator": sim, "naive": naive}
        items: dict[str, dict[str, int]] = {}
        sim_item_bytes = float("nan")
        floors: dict[str, Service] = {}
        for name, service in servers.items():
            for scenario in plan:
                count, body = runner.run(verify(service.url, scenario))
                items.setdefault(name, {})[scenario.key] = count
                if name == "daemon" and scenario.key in FLOORED:
                    path = workdir / f"{scenario.key}-list.json"
                    path.write_bytes(body)
                    floors[scenario.key] = start_module(
                        workdir,
                        f"floor-{scenario.key}",
                        "loadtest.baselines.floor",
                        "--body",
                        str(path),
                    )
                    services.append(floors[scenario.key])
                elif name == "simulator" and scenario.key == "full":
                    sim_item_bytes = len(body) / max(1, count)
                del body
        skipped: list[str] = []
        measured = runner.run(_lists(servers, floors, plan, args, n, skipped))
        measurements = [m for m in measured if m.server != "floor"]
        floor_runs = [m for m in measured if m.server == "floor"]
        for floor in floors.values():
            floor.stop()
        hwm = rss_bytes(daemon.pid, "VmHWM")
        points: list[fanout.FanoutPoint] = []
        if n == args.fanout_pods and not args.skip_fanout:
            broadcaster = start_module(
                workdir, "broadcaster", "loadtest.baselines.broadcaster", "--upstream", sim.url
            )
            services.append(broadcaster)
            broadcaster.wait_ready(30)
            points = runner.run(_fanout(daemon, sim, broadcaster, args))
        _, metrics = runner.run(fetch(daemon.url, "/metrics"))
        offload = dataclasses.replace(
            offload,
            run_client_requests=int(_metric_sum(metrics, "cacheproxy_http_requests_total")),
            run_upstream_requests=int(_metric_sum(metrics, "cacheproxy_upstream_requests_total")),
        )
        memory = MemoryReading(
            objects=int(status["objects"]),
            stored_bytes=int(status["bytes"]),
            rss=rss,
            rss_empty=rss_empty,
            hwm=hwm,
            naive_rss_before=int(naive_status["rssBeforeLoad"]),
            naive_rss_after=int(naive_status["rssAfterLoad"]),
        )
        result = SizeResult(
            pods=n,
            sim_start_s=sim_start,
            daemon_sync_s=sync_s,
            sim_item_bytes=sim_item_bytes,
            items=items,
            measurements=measurements,
            floor=floor_runs,
            memory=memory,
            offload=offload,
            skipped=skipped,
        )
        return result, points
    finally:
        for service in reversed(services):
            service.stop()


def _parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m loadtest serve", description=__doc__)
    parser.add_argument("--full", action="store_true", help="1k/10k/100k pods, longer runs")
    parser.add_argument("--pods", type=int, nargs="+", help="pod counts (default 10000)")
    parser.add_argument("--out", type=Path, help="default loadtest/results/<YYYY-MM-DD>")
    parser.add_argument("--namespaces", type=int, default=10)
    parser.add_argument("--apps", type=int, default=20, help="app=app-K selects 1/apps of pods")
    parser.add_argument("--nodes", type=int, default=20, help="node-K holds 1/nodes of pods")
    parser.add_argument("--churn", type=float, default=0.0, help="simulator writes/s (lists)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--list-seconds", type=float, help="least time per list measurement")
    parser.add_argument("--heavy-requests", type=int, help="full lists/walks per connection")
    parser.add_argument("--fanout-pods", type=int, help="the N to run fan-out at")
    parser.add_argument("--watchers", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--rates", type=float, nargs="+", help="events/s ladder (all watchers)")
    parser.add_argument("--fanout-seconds", type=float, help="writes per fan-out point (s)")
    parser.add_argument("--drain-seconds", type=float, default=3.0)
    parser.add_argument("--watch-procs", type=int, default=2, help="watch client processes")
    parser.add_argument("--skip-fanout", action="store_true")
    parser.add_argument("--keep-logs", action="store_true", help="keep the servers' logs")
    args = parser.parse_args(argv)
    args.pods = args.pods or ([1_000, 10_000, 100_000] if args.full else [10_000])
    args.list_seconds = args.list_seconds or (3.0 if args.full else 1.0)
    args.heavy_requests = args.heavy_requests or (2 if args.full else 1)
    args.fanout_seconds = args.fanout_seconds or (8.0 if args.full else 3.0)
    if args.fanout_pods is None:
        args.fanout_pods = min(args.pods, key=lambda n: abs(n - 10_000))
    args.out = args.out or Path("loadtest/results") / dt.date.today().isoformat()
    return args


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parse_args(argv)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    command = " ".join([_python_command(), "-m", "loadtest.scenarios.serve", *argv])
    machine = collect_machine_info(command=command, loop="uvloop (every process)", cpu=None)
    workdir = Path(tempfile.mkdtemp(prefix="loadtest-serve-"))
    sizes: list[SizeResult] = []
    points: list[fanout.FanoutPoint] = []
    ok = False
    try:
        with asyncio.Runner(loop_factory=_loop_factory("uvloop")) as runner:
            for n in args.pods:
                size, size_points = _bench_size(n, args, workdir, runner)
                sizes.append(size)
                points += size_points
        ok = True
    finally:
        if ok and not args.keep_logs:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            _progress(f"server logs kept in {workdir}")
    settings = {
        k: (str(v) if isinstance(v, Path) else v)
        for k, v in vars(args).items()
        if k not in ("keep_logs",)
    }
    result = ServeResult(
        machine=machine,
        sizes=sizes,
        fanout=points,
        fanout_pods=args.fanout_pods,
        settings=settings,
        load_average_end=" ".join(f"{x:.2f}" for x in os.getloadavg()),
    )
    charts = write_charts(result, out)
    report = render_serve_report(result, charts=charts)
    (out / "serve.md").write_text(report)
    (out / "serve.json").write_bytes(orjson.dumps(_jsonable(result), option=orjson.OPT_INDENT_2))
    print(render_summary(result), flush=True)
    _progress(f"report written to {out / 'serve.md'}")
    return 0


def _jsonable(result: ServeResult) -> dict[str, Any]:
    doc = dataclasses.asdict(result)
    for size, raw in zip(result.sizes, doc["sizes"], strict=True):
        for m, d in zip(
            size.measurements + size.floor, raw["measurements"] + raw["floor"], strict=True
        ):
            d.pop("latencies")
            d.update(p50=m.p50, p99=m.p99, rate=m.rate)
    return doc


if __name__ == "__main__":
    raise SystemExit(main())
