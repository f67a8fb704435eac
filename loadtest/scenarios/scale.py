"""Scaling curve: every cost of the daemon against the number of cached pods, its growth checked.

``python -m loadtest scale [--pods 10000 25000 50000 100000 200000] [--storage plain ...]
[--out DIR]`` starts, for each pod count N, the simulator (``cacheproxy sim --pods N`` with
N/``--selected`` apps and as many nodes, so that ``app=app-K`` and ``spec.nodeName=node-K``
select ~``--selected`` pods whatever N), and for each ``--storage`` the daemon (pods with a
``spec.nodeName`` index; ``storage`` in its config when not ``plain``), each in its own process
on 127.0.0.1 (:mod:`loadtest.harness.processes`). It measures, in this order:

1. **Memory and first sync**: a daemon caching nothing (its RSS: the fixed cost), stopped; then
   the daemon: its first sync (URL → ``/readyz``), RSS over the empty one, ÷ stored JSON.
2. **Lists** (:mod:`loadtest.clients.listbench`, one client on the daemon's CPU): the full list,
   the label and index field lists (a constant ~``--selected`` items) and a GET, p50 on each of
   ``--connections`` connections.
3. **Ingest**: ``--ingest-writes`` merge patches made while the daemon's watch is silent, then
   delivered to it at once: how fast it applies them and its CPU per event (``/proc``, its
   ``/status``), nobody watching.
4. **Watch delivery** (:mod:`loadtest.clients.fanout`): p99 lag at 100 and 1 000 watchers, at
   ``--fanout-rate`` events/s.
5. **Relists**: ``--relists`` times, the simulator fails the daemon's next watch with 410 and
   ends its watches; the relist's time from ``/status`` (the reflector's backoff left out).

One full list at a time only: the 16-client lists of :mod:`loadtest.scenarios.serve` would hold
16 bodies of ~1 GB at 200 000 pods. Writes ``scale.md`` (also printed), ``scale.json`` and one PNG
per cost (:mod:`loadtest.reports.scale_report`: the growth exponents and their verdicts) to
``--out`` (default ``loadtest/results/<today>-scale``). Verdicts are reported, never asserted:
the exit status is 0 unless something crashed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import datetime as dt
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson

from loadtest.clients import fanout
from loadtest.clients.httpclient import fetch, open_connection
from loadtest.clients.listbench import Measurement, Scenario, measure, scenarios, verify
from loadtest.harness.processes import (
    Service,
    machine_cpu,
    rss_bytes,
    start_daemon,
    start_sim,
    write_daemon_config,
)
from loadtest.harness.scale_records import IngestReading, RelistTiming, ScalePoint, ScaleResult
from loadtest.reports.report import collect_machine_info
from loadtest.reports.scale_report import growth, render_scale_report, write_charts
from loadtest.scenarios.ingest import _loop_factory, _python_command

__all__ = ["main"]

LISTS = ("full", "label", "field", "get")
STORAGES = ("plain", "compressed")
_AS_FAST = 1e6
"""A write rate no simulator takes: the writer sends each write when the previous is answered."""


def _progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


async def _pods_status(url: str) -> dict[str, Any]:
    code, body = await fetch(url, "/status")
    if code != 200:
        raise RuntimeError(f"GET {url}/status: {code}")
    pods: dict[str, Any] = orjson.loads(body)["resources"]["pods"]
    return pods


async def _post(url: str, target: str, body: dict[str, Any] | None = None) -> None:
    conn = await open_connection(url)
    try:
        response = await conn.request(target, method="POST", body=orjson.dumps(body or {}))
    finally:
        conn.close()
    if response.status != 200:
        raise RuntimeError(f"POST {url}{target}: {response.status}")


# ---------------------------------------------------------------------- measurements


async def _lists(url: str, plan: Sequence[Scenario], args: argparse.Namespace) -> list[Measurement]:
    """An untimed round of every scenario, then ``--connections`` rounds of each in turn (the
    full list: ``--repeats``), each on a connection of its own. A connection keeps a speed:
    500-pod lists on one settled at 1.4 ms, on the next at 1.9 ms (the socket buffers it grew),
    so one connection's p50 is one draw of two."""
    for scenario in plan:
        await _measure(url, scenario, args, seconds=0.2)
    out = []
    for i in range(args.connections):
        for scenario in plan:
            if scenario.key != "full" or i < args.repeats:
                out.append(await _measure(url, scenario, args, seconds=args.list_seconds))
    return out


async def _measure(
    url: str, scenario: Scenario, args: argparse.Namespace, *, seconds: float
) -> Measurement:
    full = scenario.key == "full"
    return await measure(
        url,
        scenario,
        server="daemon",
        concurrency=1,
        min_requests=args.heavy_requests if full else 20,
        min_seconds=seconds,
        max_seconds=max(60.0, seconds * 4) if full else seconds * 4,
    )


@contextlib.contextmanager
def _one_cpu(*pids: int) -> Iterator[None]:
    """``pids`` (0: this process) on one CPU, the last this one may use, then back as they were.
    A client and a server on two CPUs wake each other across them, which here costs 0.1-0.3 ms
    a request and varies with where the scheduler puts them: a GET's p50 was 0.14 ms on one CPU,
    0.18 to 0.48 ms on two."""
    if not hasattr(os, "sched_setaffinity"):
        yield
        return
    before = {pid: os.sched_getaffinity(pid) for pid in pids}
    cpu = {max(os.sched_getaffinity(0))}
    try:
        for pid in pids:
            os.sched_setaffinity(pid, cpu)
        yield
    finally:
        for pid, cpus in before.items():
            with contextlib.suppress(OSError):  # a process that exited meanwhile
                os.sched_setaffinity(pid, cpus)


async def _ingest(
    daemon: Service, sim: Service, writer: fanout.StampWriter, writes: int
) -> IngestReading:
    """One burst of ``writes`` MODIFIED events: the simulator's next watch stream is silent and
    its watches end, so the daemon watches again and hears nothing; the writes are made; its
    watches end again, and the daemon's resumed watch gets every write from the simulator's
    history at once. Timed from there until the daemon's ``/status`` counted them all."""
    before = int((await _pods_status(daemon.url))["events"]["MODIFIED"])
    injected = await _faults_injected(sim.url)
    await _post(sim.url, "/_sim/stream-fault", {"fault": "silent"})
    await _post(sim.url, "/_sim/end-watches")
    for _ in range(3000):
        if await _faults_injected(sim.url) > injected:
            break  # the daemon's silent watch started
        await asyncio.sleep(0.01)
    else:
        raise RuntimeError("the daemon did not watch again within 30 s")
    acked, write_rate = await writer.run(_AS_FAST, writes / _AS_FAST)
    early = int((await _pods_status(daemon.url))["events"]["MODIFIED"]) - before
    cpu0, sim0 = daemon.cpu(), sim.cpu()
    started = time.monotonic()
    await _post(sim.url, "/_sim/end-watches")
    applied = 0
    while time.monotonic() - started < 60.0:
        applied = int((await _pods_status(daemon.url))["events"]["MODIFIED"]) - before - early
        if applied >= acked - early:
            break
        await asyncio.sleep(0.01)
    return IngestReading(
        writes=acked,
        write_rate=write_rate,
        early=early,
        applied=applied,
        burst_s=time.monotonic() - started,
        daemon_cpu_s=daemon.cpu() - cpu0,
        sim_cpu_s=sim.cpu() - sim0,
    )


async def _faults_injected(sim: str) -> int:
    _, body = await fetch(sim, "/_sim/stats")
    return int(orjson.loads(body)["faultsInjected"])


async def _fanout(
    daemon: Service, sim: Service, writer: fanout.StampWriter, args: argparse.Namespace
) -> list[fanout.FanoutPoint]:
    points = []
    for watchers in args.watchers:
        for i in range(args.repeats):
            _progress(
                f"watch delivery: {watchers} watchers x {args.fanout_rate:g} events/s"
                f" ({i + 1} of {args.repeats})"
            )
            points.append(
                await fanout.run_point(
                    target="daemon",
                    url=daemon.url,
                    writer=writer,
                    watchers=watchers,
                    rate=args.fanout_rate,
                    duration=args.fanout_seconds,
                    drain=args.drain_seconds,
                    max_procs=args.watch_procs,
                    evictions=lambda: fanout.daemon_evictions(daemon.url),
                    server_cpu=daemon.cpu,
                    sim_cpu=sim.cpu,
                )
            )
            await fanout.wait_watchers_gone(daemon.url)
    return points


async def _relist(daemon: str, sim: str, *, poll: float, deadline: float) -> RelistTiming:
    """One relist forced by a 410 on the daemon's next watch (see the module docstring)."""
    relists = int((await _pods_status(daemon))["relists"])
    await _post(sim, "/_sim/fail", {"verb": "watch", "code": 410})
    started = time.monotonic()
    await _post(sim, "/_sim/end-watches")
    backing_off = started
    while time.monotonic() - started < deadline:
        asked = time.monotonic()
        status = await _pods_status(daemon)
        if status["phase"] == "backing-off":
            backing_off = asked
        elif int(status["relists"]) > relists and status["phase"] == "watching":
            done = time.monotonic()
            return RelistTiming(seconds=done - backing_off, total_s=done - started)
        await asyncio.sleep(poll)
    raise RuntimeError(f"the daemon did not relist its pods within {deadline:g} s")


# ---------------------------------------------------------------------- one N


def _reset_peak(pid: int) -> bool:
    """``VmHWM`` of ``pid`` set back to its RSS now (``/proc/PID/clear_refs``, Linux 4.0+): the
    peak after it is that of what follows. False when not allowed."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def _empty_rss(workdir: Path, sim: Service) -> int:
    config = write_daemon_config(
        workdir, name="daemon-empty", upstream=sim.url, label_selector="loadtest/none=1"
    )
    empty = start_daemon(workdir, config, name="daemon-empty")
    try:
        empty.wait_ready(60)
        time.sleep(0.5)  # as long as the daemon's settle below
        return empty.rss()
    finally:
        empty.stop()


def _measure_daemon(
    n: int,
    storage: str,
    *,
    sim: Service,
    sim_start_s: float,
    sim_rss: int,
    rss_empty: int,
    args: argparse.Namespace,
    workdir: Path,
    runner: asyncio.Runner,
) -> ScalePoint:
    """Every reading of one daemon of ``storage`` over the simulator's ``n`` pods."""
    config = write_daemon_config(
        workdir, name=f"daemon-{storage}", upstream=sim.url, storage=storage
    )
    spawned = time.monotonic()
    daemon = start_daemon(workdir, config, name=f"daemon-{storage}")
    try:
        start_s = time.monotonic() - spawned
        _progress(f"N={n}, {storage}: first sync")
        sync_s = daemon.wait_ready(120 + n / 500)
        time.sleep(0.5)  # the daemon's post-sync gc.freeze
        rss = daemon.rss()
        status = runner.run(_pods_status(daemon.url))
        _, names = runner.run(fetch(daemon.url, "/api/v1/pods?limit=1000"))
        pods = [
            (i["metadata"]["namespace"], i["metadata"]["name"])
            for i in orjson.loads(names)["items"]
        ]
        apps = max(1, n // args.selected)
        plan = [
            s
            for s in scenarios(namespaces=args.namespaces, apps=apps, nodes=apps, pods=pods)
            if s.key in LISTS
        ]
        items = {s.key: runner.run(verify(daemon.url, s))[0] for s in plan if s.key != "full"}
        items["full"] = int(status["objects"])
        _progress(f"N={n}, {storage}: lists")
        with _one_cpu(0, daemon.pid):
            lists = runner.run(_lists(daemon.url, plan, args))
        writer = fanout.StampWriter(sim.url)
        runner.run(writer.open())
        try:
            ingest = []
            for i in range(args.repeats):
                _progress(
                    f"N={n}, {storage}: ingest, a burst of {args.ingest_writes} writes ({i + 1} of {args.repeats})"
                )
                ingest.append(runner.run(_ingest(daemon, sim, writer, args.ingest_writes)))
            fanned = runner.run(_fanout(daemon, sim, writer, args))
        finally:
            writer.close()
        hwm = rss_bytes(daemon.pid, "VmHWM")
        rss_before_relists = daemon.rss()
        reset = _reset_peak(daemon.pid)
        relists = []
        for i in range(args.relists):
            _progress(f"N={n}, {storage}: relist {i + 1} of {args.relists}")
            relists.append(
                runner.run(
                    _relist(daemon.url, sim.url, poll=args.poll_seconds, deadline=120 + n / 500)
                )
            )
            time.sleep(1.0)  # the old state let go before the next
        return ScalePoint(
            pods=n,
            storage=storage,
            selected=args.selected,
            sim_start_s=sim_start_s,
            sim_rss=sim_rss,
            start_s=start_s,
            sync_s=sync_s,
            objects=int(status["objects"]),
            stored_bytes=int(status["bytes"]),
            rss=rss,
            rss_empty=rss_empty,
            hwm=hwm,
            rss_before_relists=rss_before_relists,
            relist_peak=rss_bytes(daemon.pid, "VmHWM") if reset else 0,
            items=items,
            lists=lists,
            ingest=ingest,
            fanout=fanned,
            relists=relists,
        )
    finally:
        daemon.stop()


def _measure_size(
    n: int, args: argparse.Namespace, workdir: Path, runner: asyncio.Runner
) -> list[ScalePoint]:
    apps = max(1, n // args.selected)
    _progress(f"N={n}: starting the simulator ({apps} apps, {apps} nodes)")
    usage = _Usage()
    started = time.monotonic()
    sim = start_sim(
        workdir,
        pods=n,
        namespaces=args.namespaces,
        nodes=apps,
        apps=apps,
        # Room for an ingest burst: every event the resumed watch needs, and no more kept (each
        # holds its pod's old and new versions: ~1.5 GB for the 100 000 of the default).
        history=args.ingest_writes + 10_000,
        seed=args.seed,
    )
    try:
        sim_start_s, sim_rss = time.monotonic() - started, sim.rss()
        _progress(f"N={n}: the empty daemon")
        rss_empty = _empty_rss(workdir, sim)
        points = [
            _measure_daemon(
                n,
                storage,
                sim=sim,
                sim_start_s=sim_start_s,
                sim_rss=sim_rss,
                rss_empty=rss_empty,
                args=args,
                workdir=workdir,
                runner=runner,
            )
            for storage in args.storage
        ]
    finally:
        sim.stop()
    wall_s, other_cpu_s = usage.other()
    return [dataclasses.replace(p, wall_s=wall_s, other_cpu_s=other_cpu_s) for p in points]


class _Usage:
    """The machine's busy CPU time beyond this process and its children (each server and client
    process is one, waited for once stopped): other work on the machine, and the kernel's
    network work, which no process is charged with."""

    def __init__(self) -> None:
        self._at = time.monotonic()
        self._busy = machine_cpu()[0]
        self._own = self._own_cpu()

    @staticmethod
    def _own_cpu() -> float:
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system

    def other(self) -> tuple[float, float]:
        """(Seconds since made, CPU-seconds of other work over them.)"""
        busy = machine_cpu()[0] - self._busy
        return time.monotonic() - self._at, busy - (self._own_cpu() - self._own)


# ---------------------------------------------------------------------- command line


def _parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m loadtest scale", description=__doc__)
    parser.add_argument(
        "--pods", type=int, nargs="+", default=[10_000, 25_000, 50_000, 100_000, 200_000]
    )
    parser.add_argument(
        "--storage",
        choices=STORAGES,
        action="append",
        help="the pods' storage (repeatable; default plain)",
    )
    parser.add_argument("--out", type=Path, help="default loadtest/results/<YYYY-MM-DD>-scale")
    parser.add_argument("--namespaces", type=int, default=10)
    parser.add_argument(
        "--selected", type=int, default=500, help="pods per app and per node (N/this of each)"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--list-seconds", type=float, default=1.0, help="least time per list, per connection"
    )
    parser.add_argument(
        "--connections", type=int, default=8, help="connections each list but the full is timed on"
    )
    parser.add_argument("--heavy-requests", type=int, default=3, help="full lists, at least")
    parser.add_argument(
        "--ingest-writes", type=int, default=10_000, help="MODIFIED events in an ingest burst"
    )
    parser.add_argument("--watchers", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--fanout-rate", type=float, default=20.0, help="events/s")
    parser.add_argument("--fanout-seconds", type=float, default=5.0)
    parser.add_argument("--drain-seconds", type=float, default=3.0)
    parser.add_argument("--watch-procs", type=int, default=2, help="watch client processes")
    parser.add_argument(
        "--repeats", type=int, default=3, help="runs of the full list, ingest and watch delivery"
    )
    parser.add_argument("--relists", type=int, default=3, help="relists per N")
    parser.add_argument("--poll-seconds", type=float, default=0.02, help="/status polls")
    parser.add_argument("--keep-logs", action="store_true", help="keep the servers' logs")
    args = parser.parse_args(argv)
    args.storage = list(dict.fromkeys(args.storage or ["plain"]))
    args.pods = sorted(set(args.pods))
    args.out = args.out or Path("loadtest/results") / f"{dt.date.today().isoformat()}-scale"
    return args


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parse_args(argv)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    command = " ".join([_python_command(), "-m", "loadtest", "scale", *argv])
    machine = collect_machine_info(command=command, loop="uvloop (every process)", cpu=None)
    workdir = Path(tempfile.mkdtemp(prefix="loadtest-scale-"))
    points: list[ScalePoint] = []
    ok = False
    try:
        with asyncio.Runner(loop_factory=_loop_factory("uvloop")) as runner:
            for n in args.pods:
                points += _measure_size(n, args, workdir, runner)
        ok = True
    finally:
        if ok and not args.keep_logs:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            _progress(f"server logs kept in {workdir}")
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    settings.pop("keep_logs")
    result = ScaleResult(
        machine=machine,
        points=points,
        settings=settings,
        load_average_end=" ".join(f"{x:.2f}" for x in os.getloadavg()),
        storages=args.storage,
    )
    charts = write_charts(result, out)
    report = render_scale_report(result, charts=charts)
    (out / "scale.md").write_text(report)
    (out / "scale.json").write_bytes(orjson.dumps(_jsonable(result), option=orjson.OPT_INDENT_2))
    print(report, flush=True)
    _progress(f"report written to {out / 'scale.md'}")
    return 0


def _jsonable(result: ScaleResult) -> dict[str, Any]:
    """The result as JSON: each list's latencies as p50/p99/rate, each point's derived costs."""
    doc = dataclasses.asdict(result)
    for point, raw in zip(result.points, doc["points"], strict=True):
        for m, d in zip(point.lists, raw["lists"], strict=True):
            d.pop("latencies")
            d.update(p50=m.p50, p99=m.p99, rate=m.rate)
        for g, d in zip(point.ingest, raw["ingest"], strict=True):
            d.update(cpu_us_per_event=g.cpu_us_per_event, events_per_s=g.events_per_s)
        raw.update(net_rss=point.net_rss, rss_ratio=point.rss_ratio, relist_s=point.relist_s)
    doc["growth"] = growth(result)
    return doc


if __name__ == "__main__":
    raise SystemExit(main())
