"""Benchmark against a real kube-apiserver: first sync, memory, event lag, queries (docs/design.md §6).

``python -m loadtest realserver --out DIR [--pods 10000] [--writes 500]`` starts etcd and
kube-apiserver on loopback (:mod:`cacheproxy.envtest`; ``--kube`` picks the version, by default
the oldest of ``$KUBEBUILDER_ASSETS`` or ``../shared/envtest`` and its folders: 1.28), creates N pods of ~7 KB
and some ConfigMaps, Secrets, ServiceAccounts, Deployments and Events (:mod:`loadtest.harness.realcluster`),
then, each daemon a ``cacheproxy serve --config FILE`` process caching pods, configmaps,
namespaces, serviceaccounts, secrets, apps/v1/deployments and events, default settings:

1. **First sync**, ``--repeat`` times: one ``curl`` of the very request the daemon makes for pods
   (with its headers), a new daemon from start to ready, and the Python decode floor (the same
   request read with httpx and parsed item by item, nothing kept); the daemon's pods sync (its
   log: from the list request to synced) against curl, budget at most 1.5 times, and against the
   floor. The daemon's RSS after sync, less an empty daemon's, per stored JSON byte; the API
   server's and etcd's RSS.
2. **Event delivery lag** (:mod:`loadtest.clients.lagprobe`), with the upstream over HTTP/1.1 (the
   default) and then HTTP/2 (``upstream.http2: true``): ``--writes`` writes at ``--rate``/s, each
   timed from its response to its event on a watch through the daemon, to a GET through the
   daemon returning it, and to its event on a watch on the API server (the baseline). Budget:
   p99 ≤ 50 ms through the daemon.
3. **Queries** (:mod:`loadtest.clients.realqueries`; ``--no-queries`` skips them): the same lists and
   GETs to a daemon with pods indexed by ``spec.nodeName`` and to the API server, at
   resourceVersion unset and 0: latency at 1 client, requests/s at 16, the items compared.
   Budgets: the full list ≥ 15 times and the label list ≥ 10 times faster than the API server at
   RV=0 (p50), GETs/s at 16 clients ≥ 2 times the API server's, the same items everywhere.

Writes ``realserver.md`` (the budget table is also printed), ``realserver.json``, ``lag.png``
and ``queries.png`` to ``--out``. Budgets are judged in the report, never asserted. Without the
assets it exits 2 with a hint, or 0 after saying it skipped with ``--skip-without-assets``
(``make bench``).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime as dt
import gc
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from cacheproxy.envtest import Assets, Cluster
from cacheproxy.informer.syncing import gc_paused
from cacheproxy.kube.liststream import ListSplitter
from loadtest.clients.httpclient import fetch
from loadtest.clients.lagprobe import LagRun, measure_lag
from loadtest.clients.realqueries import QueriesResult, measure_queries, write_queries_config
from loadtest.harness.processes import Service, rss_bytes, start_daemon
from loadtest.harness.realcluster import (
    NAMESPACES,
    POD_LIST,
    NoServer,
    add_kube_option,
    build_objects,
    cacheproxy_source,
    curl,
    daemon_headers,
    load,
    port_of,
    required_assets,
    upstream_connections,
    write_config,
)
from loadtest.harness.relists import measure_relists
from loadtest.reports.realserver_report import (
    DaemonRun,
    RealServerResult,
    RelistResult,
    SyncRep,
    SyncResult,
    render_report,
    render_summary,
    write_chart,
)
from loadtest.reports.report import collect_machine_info
from loadtest.scenarios.ingest import _loop_factory, _python_command
from loadtest.scenarios.serve import _progress

__all__ = ["main"]

_NOTHING = "loadtest/none=1"
_SYNCED = re.compile(r"pods: synced (\d+) objects by (.+?) in ([\d.]+) s")
_RESPONSES = re.compile(r"^cacheproxy_upstream_responses_total\{([^}]*)\} (\S+)", re.MULTILINE)


# ---------------------------------------------------------------------- one daemon


def _run_daemon(
    workdir: Path, config: Path, name: str, timeout: float
) -> tuple[DaemonRun, Service]:
    """Start a daemon, wait until ready; its timings and memory, and the running service."""
    started = time.monotonic()
    service = start_daemon(workdir, config, name=name)
    listening = time.monotonic() - started
    try:
        service.wait_ready(timeout)
        ready = time.monotonic() - started
        cpu = service.cpu()
        time.sleep(0.5)  # the post-sync gc.freeze and frees settle before memory is read
        synced = _SYNCED.search(service.log.read_text(errors="replace"))
    except BaseException:
        service.stop()
        raise
    run = DaemonRun(
        ready_s=ready,
        listening_s=listening,
        pods_list_s=float(synced.group(3)) if synced else float("nan"),
        pods_sync_how=synced.group(2) if synced else "n/a",
        cpu_s=cpu,
        rss=service.rss(),
        hwm=rss_bytes(service.pid, "VmHWM"),
    )
    return run, service


def _get(runner: asyncio.Runner, url: str, target: str) -> bytes:
    status, body = runner.run(fetch(url, target))
    if status != 200:
        raise RuntimeError(f"GET {url}{target}: {status}")
    return body


def _pods_responses(metrics: bytes) -> dict[str, int]:
    out: dict[str, int] = {}
    for labels, value in _RESPONSES.findall(metrics.decode()):
        found = dict(re.findall(r'(\w+)="([^"]*)"', labels))
        if found.get("resource") == "pods":
            out[f"{found.get('verb')} {found.get('code')}"] = int(float(value))
    return out


# ---------------------------------------------------------------------- first sync


def _first_sync(
    cluster: Cluster, workdir: Path, args: argparse.Namespace, runner: asyncio.Runner
) -> SyncResult:
    timeout = 120 + args.pods / 500
    config = write_config(workdir, cluster, name="daemon")
    headers = runner.run(daemon_headers(config))
    _progress("first sync: an empty daemon (its RSS is the baseline of memory)")
    empty_config = write_config(workdir, cluster, name="daemon-empty", label_selector=_NOTHING)
    _, empty = _run_daemon(workdir, empty_config, "daemon-empty", timeout)
    empty_rss = empty.rss()
    empty.stop()
    gzip = {**headers, "Accept-Encoding": "gzip"}
    reps: list[SyncRep] = []
    status: dict[str, Any] = {}
    responses: dict[str, int] = {}
    for rep in range(args.repeat):
        _progress(f"first sync: run {rep + 1} of {args.repeat}")
        curl_first = rep % 2 == 0  # alternated: neither always sees the other's aftermath
        if curl_first:
            as_daemon = curl(cluster, POD_LIST, headers, workdir=workdir, decode=True)
            gzip_run = curl(cluster, POD_LIST, gzip, workdir=workdir, decode=True)
            floor = runner.run(_decode_floor(cluster, headers))
        daemon, service = _run_daemon(workdir, config, f"daemon-sync-{rep}", timeout)
        try:
            status = orjson.loads(_get(runner, service.url, "/status"))["resources"]
            responses = _pods_responses(_get(runner, service.url, "/metrics"))
        finally:
            service.stop()
        if not curl_first:
            as_daemon = curl(cluster, POD_LIST, headers, workdir=workdir, decode=True)
            gzip_run = curl(cluster, POD_LIST, gzip, workdir=workdir, decode=True)
            floor = runner.run(_decode_floor(cluster, headers))
        reps.append(SyncRep(curl=as_daemon, curl_gzip=gzip_run, floor_s=floor, daemon=daemon))
    return SyncResult(
        reps=reps,
        headers=headers,
        pods_responses=responses,
        objects={k: int(v["objects"]) for k, v in status.items()},
        stored_bytes=sum(int(v["bytes"]) for v in status.values()),
        empty_rss=empty_rss,
        apiserver_rss=rss_bytes(cluster.apiserver_pid),
        etcd_rss=rss_bytes(cluster.etcd_pid),
    )


# ---------------------------------------------------------------------- event delivery


async def _decode_floor(cluster: Cluster, headers: dict[str, str]) -> float:
    """Seconds for the least a Python client does with the daemon's pod list request: read it
    (httpx, the daemon's client library) and parse each item as it arrives (orjson, with the
    cyclic GC paused, as the daemon does), keeping nothing — no transform, no store."""
    async with cluster.async_client(headers=headers, timeout=600) as client:
        started = time.perf_counter()
        with gc_paused():
            splitter = ListSplitter()
            async with client.stream("GET", POD_LIST) as response:
                async for chunk in response.aiter_bytes():
                    splitter.feed(chunk)
            splitter.close()
        return time.perf_counter() - started


def _relists(
    cluster: Cluster,
    workdir: Path,
    args: argparse.Namespace,
    runner: asyncio.Runner,
    *,
    pods: Sequence[tuple[str, str]],
) -> RelistResult | None:
    if not args.relists:
        return None
    _progress(f"relists: starting the daemon ({args.relists} relists to come)")
    config = write_config(workdir, cluster, name="daemon-relists")
    daemon, service = _run_daemon(workdir, config, "daemon-relists", 120 + args.pods / 500)
    try:
        points = runner.run(
            measure_relists(
                cluster,
                service.url,
                service.pid,
                pods=pods,
                count=args.relists,
                rate=args.rate,
                progress=_progress,
            )
        )
    finally:
        service.stop()
    return RelistResult(after_sync_rss=daemon.rss, after_sync_hwm=daemon.hwm, points=points)


def _lag(
    cluster: Cluster,
    workdir: Path,
    args: argparse.Namespace,
    runner: asyncio.Runner,
    *,
    pods: Sequence[tuple[str, str]],
    http2: bool,
) -> tuple[LagRun, dict[str, float]]:
    transport = "HTTP/2" if http2 else "HTTP/1.1"
    name = f"daemon-lag-{'h2' if http2 else 'h1'}"
    _progress(f"event delivery, {transport} upstream: starting the daemon")
    config = write_config(workdir, cluster, name=name, http2=http2)
    daemon, service = _run_daemon(workdir, config, name, 120 + args.pods / 500)
    try:
        connections = upstream_connections(service.pid, port_of(cluster.url))
        run = runner.run(
            measure_lag(
                cluster,
                service.url,
                transport=transport,
                pods=pods,
                namespaces=NAMESPACES,
                writes=args.writes,
                rate=args.rate,
                daemon_pid=service.pid,
                deadline=args.deadline,
                progress=_progress,
            )
        )
    finally:
        service.stop()
    return run, {"ready_s": daemon.ready_s, "connections": float(connections)}


def _queries(
    cluster: Cluster,
    workdir: Path,
    args: argparse.Namespace,
    runner: asyncio.Runner,
    *,
    pods: Sequence[tuple[str, str]],
) -> QueriesResult | None:
    if not args.queries:
        return None
    _progress("queries: starting the daemon (pods indexed by spec.nodeName)")
    config = write_queries_config(workdir, cluster)
    _, service = _run_daemon(workdir, config, "daemon-queries", 120 + args.pods / 500)
    try:
        return runner.run(
            measure_queries(
                cluster,
                service.url,
                daemon_pid=service.pid,
                pods=pods,
                seconds=args.query_seconds,
                progress=_progress,
            )
        )
    finally:
        service.stop()


# ---------------------------------------------------------------------- the run


def _upstream(cluster: Cluster, assets: Assets) -> dict[str, str]:
    with cluster.client() as client:
        version = client.get("/version").json()
        one = client.get("/api/v1/pods", params={"limit": "50"}, headers={"User-Agent": "bench"})
    items = one.json()["items"]
    pod_bytes = sum(len(orjson.dumps(i)) for i in items) / len(items) if items else float("nan")
    etcd = subprocess.run(
        [str(assets.etcd), "--version"], capture_output=True, text=True, check=False
    ).stdout
    found = re.search(r"etcd Version: (\S+)", etcd)
    return {
        "gitVersion": str(version.get("gitVersion", "?")),
        "goVersion": str(version.get("goVersion", "?")),
        "etcd": found.group(1) if found else "?",
        "podBytes": f"{pod_bytes:,.0f}".replace(",", " "),
    }


def _parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m loadtest realserver", description=__doc__)
    parser.add_argument("--out", type=Path, help="default loadtest/results/<YYYY-MM-DD>-real")
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--writes", type=int, default=500, help="timed writes per transport")
    parser.add_argument("--rate", type=float, default=20.0, help="writes/s")
    parser.add_argument("--repeat", type=int, default=5, help="first-sync runs (medians)")
    parser.add_argument("--deadline", type=float, default=5.0, help="a lag beyond is 'not seen'")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--relists", type=int, default=10, help="kube-apiserver restarts, each a relist (0: none)"
    )
    parser.add_argument(
        "--queries",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the same queries to the daemon and to the API server",
    )
    parser.add_argument(
        "--query-seconds",
        type=float,
        default=0.4,
        help="each 1-client batch of a query (3 per server) at least; at 16 clients twice that",
    )
    parser.add_argument(
        "--skip-without-assets",
        action="store_true",
        help="without a kube-apiserver, say so and exit 0 (for make bench)",
    )
    parser.add_argument("--keep-logs", action="store_true", help="keep the processes' logs")
    add_kube_option(parser)
    args = parser.parse_args(argv)
    if args.pods < 1 or args.writes < 1 or args.repeat < 1 or args.rate <= 0:
        parser.error("--pods, --writes, --repeat and --rate must be positive")
    if args.query_seconds <= 0:
        parser.error("--query-seconds must be positive")
    args.out = args.out or Path("loadtest/results") / f"{dt.date.today().isoformat()}-real"
    return args


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parse_args(argv)
    try:
        assets = required_assets(args, "python -m loadtest realserver")
    except NoServer as none:
        return none.code
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    command = " ".join([_python_command(), "-m", "loadtest.scenarios.realserver", *argv])
    machine = collect_machine_info(command=command, loop="uvloop (every process)", cpu=None)
    source = cacheproxy_source()
    workdir = Path(tempfile.mkdtemp(prefix="loadtest-real-"))
    ok = False
    cluster = Cluster(assets, workdir=workdir / "cluster")
    try:
        _progress("starting etcd and kube-apiserver")
        cluster.start()
        objects, pods = build_objects(args.pods, seed=args.seed)
        created = dict(Counter(resource for resource, _ in objects))
        with asyncio.Runner(loop_factory=_loop_factory("uvloop")) as runner:
            load_s = runner.run(load(cluster, objects, progress=_progress))
            del objects
            gc.collect()
            upstream = _upstream(cluster, assets)
            sync = _first_sync(cluster, workdir, args, runner)
            relists = _relists(cluster, workdir, args, runner, pods=pods)
            lag: list[LagRun] = []
            lag_daemons: dict[str, dict[str, float]] = {}
            for http2 in (False, True):
                run, daemon = _lag(cluster, workdir, args, runner, pods=pods, http2=http2)
                lag.append(run)
                lag_daemons[run.transport] = daemon
            queries = _queries(cluster, workdir, args, runner, pods=pods)
        ok = True
    finally:
        cluster.stop()
        if ok and not args.keep_logs:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            _progress(f"logs kept in {workdir}")
    if cacheproxy_source() != source:
        source += f"; at the end: {cacheproxy_source()}"
    result = RealServerResult(
        machine=machine,
        source=source,
        upstream=upstream,
        pods=args.pods,
        created=created,
        load_s=load_s,
        sync=sync,
        lag=lag,
        lag_daemons=lag_daemons,
        relists=relists,
        queries=queries,
        settings={
            k: str(v)
            for k, v in vars(args).items()
            if k not in ("out", "keep_logs", "skip_without_assets")
        },
        load_average_end=" ".join(f"{x:.2f}" for x in os.getloadavg()),
    )
    _write(result, out)
    print(render_summary(result), flush=True)
    _progress(f"report written to {out / 'realserver.md'}")
    return 0


def _write(result: RealServerResult, out: Path) -> None:
    charts = write_chart(result, out)
    (out / "realserver.md").write_text(render_report(result, charts=charts))
    doc = dataclasses.asdict(result)
    (out / "realserver.json").write_bytes(
        orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS)
    )


if __name__ == "__main__":
    raise SystemExit(main())
