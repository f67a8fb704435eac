"""Consistent reads from the cache against a real kube-apiserver: what the probe costs, and
what RV-unset label lists through the daemon give against the API server's own.

``python -m loadtest consistentbench [--pods N] [--seconds S] [--clients C] [--writes W]
[--probe-rate P] [--out DIR] [--skip-without-assets]`` (``make bench``: 10 000 pods):

1. starts etcd and kube-apiserver (envtest assets), creates N pods (:mod:`loadtest.harness.realcluster`,
   ``app=app-0..19`` over ``ns-0..9``), starts ``cacheproxy serve`` caching ``pods`` with
   ``consistentReads: consistent``;
2. **probe cost**: sequential requests to the API server of each way to learn its current
   resourceVersion (the daemon's probe, a ``limit=1`` list; the same as a metadata list; of one
   namespace; with a label selector, which makes the API server read etcd until a
   match; the RV-unset label list itself, what passing the read through would cost): mean
   latency and bytes;
3. **throughput** at C closed-loop clients for S seconds each, while a writer patches a pod W
   times a second: the API server's RV-unset label list (``app=app-K``), the daemon's (a
   consistent read) and the daemon's at ``resourceVersion=0`` (no probe); requests/s, the
   daemon's probes and listings per second and its waits, confirmations and fallbacks (from
   ``/metrics``);
4. **quiet**: the daemon's consistent reads again once the writer stopped: the pods' cache then
   never reaches upstream's RV by its events (the API server's leases move it), and listings of
   the pods' metadata confirm it.

Judged against the budget (docs/design.md §6): consistent RV-unset label lists at C clients
≥ 10 times the API server's, at most ``P`` probes per second.

Prints one JSON document; with ``--out DIR`` writes it to ``DIR/consistentbench.json`` and a
summary to ``DIR/consistentbench.md``. Without envtest assets it exits 2 with a hint, or 0 after
saying it skipped with ``--skip-without-assets``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

from cacheproxy.envtest import Cluster
from loadtest.clients.httpclient import Connection, fetch, open_connection
from loadtest.harness.processes import start_daemon
from loadtest.harness.realcluster import (
    APPS,
    NoServer,
    add_kube_option,
    build_objects,
    load,
    required_assets,
)

__all__ = ["BenchResult", "main"]

JSON = "application/json"
METADATA = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
PROBES: dict[str, tuple[str, str]] = {
    "limit=1 (the daemon's probe)": ("/api/v1/pods?limit=1", JSON),
    "limit=1, as metadata": ("/api/v1/pods?limit=1", METADATA),
    "limit=1, one namespace": ("/api/v1/namespaces/ns-0/pods?limit=1", JSON),
    "limit=1 with a label selector": ("/api/v1/pods?limit=1&labelSelector=app%3Dapp-7", JSON),
    "the RV-unset label list itself": (
        "/api/v1/pods?labelSelector=app%3Dapp-7",
        "application/json",
    ),
}
_SAMPLE = re.compile(r'^(cacheproxy_consistent_\w+)\{(?:reason="(\w+)",)?resource="pods"\} (\S+)$')

Connect = Callable[[], Awaitable[Connection]]


@dataclass
class ProbeCost:
    mean_ms: float
    p50_ms: float
    bytes: int


@dataclass
class Throughput:
    requests: int
    seconds: float
    per_second: float
    errors: int
    mean_ms: float
    daemon: dict[str, float] = field(default_factory=dict)
    """The daemon's consistent-read counters over the run (probes, waits, fallbacks…)."""


@dataclass
class BenchResult:
    command: str
    pods: int
    clients: int
    writes_per_second: float
    probe_rate: int
    probe_cost: dict[str, ProbeCost]
    throughput: dict[str, Throughput]
    ratio_consistent_to_apiserver: float
    probes_per_second: float
    listings_per_second: float
    quiet_ratio_to_apiserver: float
    quiet_listings_per_second: float


async def _probe_cost(cluster: Cluster, target: str, accept: str, count: int) -> ProbeCost:
    """``count`` sequential requests on one keep-alive connection (httpx: the client's own
    overhead is the same for every kind of request)."""
    times, size = [], 0
    async with cluster.async_client(headers={"Accept": accept}) as client:
        for _ in range(count):
            started = time.perf_counter()
            response = await client.get(target)
            times.append(1000 * (time.perf_counter() - started))
            assert response.status_code == 200, response.text[:200]
            size = len(response.content)
    return ProbeCost(statistics.fmean(times), statistics.median(times), size)


async def _closed_loop(
    connect: Connect, target: Callable[[int], str], *, clients: int, seconds: float
) -> Throughput:
    conns = [await connect() for _ in range(clients)]
    counter = iter(range(10**9))
    latencies: list[float] = []
    errors = 0
    started = time.perf_counter()

    async def worker(conn: Connection) -> None:
        nonlocal errors
        while time.perf_counter() - started < seconds:
            response = await conn.request(target(next(counter)))
            if response.status != 200:
                errors += 1
            latencies.append(response.seconds)

    try:
        await asyncio.gather(*(worker(c) for c in conns))
    finally:
        for conn in conns:
            conn.close()
    wall = time.perf_counter() - started
    return Throughput(
        requests=len(latencies),
        seconds=wall,
        per_second=len(latencies) / wall,
        errors=errors,
        mean_ms=1000 * statistics.fmean(latencies) if latencies else float("nan"),
    )


async def _daemon_counters(url: str) -> dict[str, float]:
    _, body = await fetch(url, "/metrics")
    out: dict[str, float] = {}
    for line in body.decode().splitlines():
        if (m := _SAMPLE.match(line)) is not None:
            name = m.group(1).removeprefix("cacheproxy_consistent_").removesuffix("_total")
            out[f"{name}:{m.group(2)}" if m.group(2) else name] = float(m.group(3))
    return out


async def _writer(cluster: Cluster, pods: Sequence[tuple[str, str]], rate: float) -> None:
    """Patch one pod after the other ``rate`` times a second, until cancelled."""
    if rate <= 0:
        return
    async with cluster.async_client() as client:
        for i in range(10**9):
            ns, name = pods[i % len(pods)]
            await client.patch(
                f"/api/v1/namespaces/{ns}/pods/{name}",
                json={"metadata": {"annotations": {"bench/write": str(i)}}},
                headers={"Content-Type": "application/merge-patch+json"},
            )
            await asyncio.sleep(1 / rate)


async def _measure(
    cluster: Cluster, daemon_url: str, pods: Sequence[tuple[str, str]], args: argparse.Namespace
) -> tuple[dict[str, ProbeCost], dict[str, Throughput]]:
    tls = cluster.ssl_context()

    def apiserver() -> Awaitable[Connection]:
        return open_connection(cluster.url, ssl=tls, headers=cluster.admin.headers)

    def daemon() -> Awaitable[Connection]:
        return open_connection(daemon_url)

    costs = {
        name: await _probe_cost(cluster, target, accept, args.probe_requests)
        for name, (target, accept) in PROBES.items()
    }

    def labels(rv: str | None) -> Callable[[int], str]:
        suffix = f"&resourceVersion={rv}" if rv is not None else ""
        return lambda i: f"/api/v1/pods?labelSelector=app%3D{APPS[i % len(APPS)]}{suffix}"

    runs: dict[str, Throughput] = {}
    writer = asyncio.create_task(_writer(cluster, pods, args.writes), name="bench-writer")
    try:
        await asyncio.sleep(1.0)
        for name, connect, target in (
            ("apiserver, RV unset", apiserver, labels(None)),
            ("daemon, RV unset (consistent)", daemon, labels(None)),
            ("daemon, RV=0", daemon, labels("0")),
        ):
            before = await _daemon_counters(daemon_url)
            run = await _closed_loop(connect, target, clients=args.clients, seconds=args.seconds)
            after = await _daemon_counters(daemon_url)
            run.daemon = {k: after[k] - before.get(k, 0.0) for k in after}
            runs[name] = run
            print(f"{name}: {run.per_second:.0f} requests/s", file=sys.stderr, flush=True)
    finally:
        writer.cancel()
        await asyncio.gather(writer, return_exceptions=True)
    await asyncio.sleep(1.0)  # the last writes' events are in
    before = await _daemon_counters(daemon_url)
    run = await _closed_loop(daemon, labels(None), clients=args.clients, seconds=args.seconds)
    after = await _daemon_counters(daemon_url)
    run.daemon = {k: after[k] - before.get(k, 0.0) for k in after}
    runs[QUIET] = run
    print(f"{QUIET}: {run.per_second:.0f} requests/s", file=sys.stderr, flush=True)
    return costs, runs


QUIET = "daemon, RV unset (consistent), no pod writes"


def _report(result: BenchResult) -> str:
    runs = result.throughput
    rows = [
        f"| {name} | {run.per_second:.0f} | {run.mean_ms:.1f} | {run.errors} | "
        f"{run.daemon.get('probes', 0) / run.seconds:.1f} | "
        f"{run.daemon.get('listings', 0) / run.seconds:.1f} | "
        f"{run.daemon.get('confirmed', 0):.0f} | "
        f"{sum(v for k, v in run.daemon.items() if k.startswith('fallbacks')):.0f} |"
        for name, run in runs.items()
    ]
    # The rate spaces the starts of probes (and of listings) 1/rate s apart: a run of S seconds
    # may hold rate * S + 1 of them.
    consistent = runs["daemon, RV unset (consistent)"]
    allowed = result.probe_rate * consistent.seconds + 1
    probes_met = consistent.daemon.get("probes", 0) <= allowed
    listings_met = consistent.daemon.get("listings", 0) <= allowed
    met = result.ratio_consistent_to_apiserver >= 10 and probes_met and listings_met
    return "\n".join(
        [
            f"# Consistent reads against kube-apiserver ({result.pods} pods)",
            "",
            f"- command: `{result.command}`",
            f"- {result.clients} closed-loop clients, RV-unset label lists "
            f"(`labelSelector=app=app-K`), a writer patching pods {result.writes_per_second:g}/s "
            f"(none in the quiet run); `consistentProbesPerSecond: {result.probe_rate}`",
            "",
            "| budget | measured | verdict |",
            "|---|---:|---|",
            f"| consistent label lists ÷ the API server's (≥ 10x) | "
            f"{result.ratio_consistent_to_apiserver:.1f}x | "
            f"{'met' if result.ratio_consistent_to_apiserver >= 10 else 'not met'} |",
            f"| probes ≤ {result.probe_rate}/s, one at a time ({result.probe_rate} x "
            f"{consistent.seconds:.2f} s + 1 = {allowed:.0f}) | "
            f"{consistent.daemon.get('probes', 0):.0f} ({result.probes_per_second:.1f}/s) | "
            f"{'met' if probes_met else 'not met'} |",
            f"| listings ≤ {result.probe_rate}/s (the same bound) | "
            f"{consistent.daemon.get('listings', 0):.0f} ({result.listings_per_second:.1f}/s) | "
            f"{'met' if listings_met else 'not met'} |",
            "",
            f"All met: {'yes' if met else 'no'}. Quiet pods (no writes): consistent reads "
            f"{result.quiet_ratio_to_apiserver:.1f}x the API server's, "
            f"{result.quiet_listings_per_second:.1f} listings/s.",
            "",
            "| run | requests/s | mean ms | errors | probes/s | listings/s | confirmed | "
            "fallbacks |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
            *rows,
            "",
            "| learning upstream's RV | mean ms | p50 ms | bytes |",
            "|---|---:|---:|---:|",
            *(
                f"| {name} | {cost.mean_ms:.2f} | {cost.p50_ms:.2f} | {cost.bytes} |"
                for name, cost in result.probe_cost.items()
            ),
            "",
        ]
    )


def _load(path: Path) -> BenchResult:
    doc = json.loads(path.read_text())
    doc["probe_cost"] = {k: ProbeCost(**v) for k, v in doc["probe_cost"].items()}
    doc["throughput"] = {k: Throughput(**v) for k, v in doc["throughput"].items()}
    return BenchResult(**doc)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtest consistentbench")
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--writes", type=float, default=20.0, help="pod writes per second")
    parser.add_argument("--probe-requests", type=int, default=200)
    parser.add_argument(
        "--probe-rate", type=int, default=10, help="server.limits.consistentProbesPerSecond"
    )
    parser.add_argument("--out", type=Path, help="a directory for the JSON and the summary")
    parser.add_argument(
        "--skip-without-assets",
        action="store_true",
        help="without a kube-apiserver, say so and exit 0 (for make bench)",
    )
    parser.add_argument(
        "--report-from", type=Path, help="write the summary of a run's JSON again, and exit"
    )
    add_kube_option(parser)
    args = parser.parse_args(argv)
    if args.report_from is not None:
        result = _load(args.report_from)
        args.report_from.with_suffix(".md").write_text(_report(result))
        return 0
    try:
        assets = required_assets(args, "python -m loadtest consistentbench")
    except NoServer as none:
        return none.code
    workdir = Path(tempfile.mkdtemp(prefix="loadtest-consistent-"))
    cluster = Cluster(assets, workdir=workdir / "cluster")
    daemon = None
    try:
        cluster.start()
        objects, pods = build_objects(args.pods)
        asyncio.run(load(cluster, [o for o in objects if o[0] == "pods"]))
        config = workdir / "daemon.yaml"
        doc = {
            "resources": [{"resource": "pods", "consistentReads": "consistent"}],
            "upstream": {"kubeconfig": str(cluster.admin.kubeconfig)},
            "server": {"port": 0, "limits": {"consistentProbesPerSecond": args.probe_rate}},
        }
        config.write_text(yaml.safe_dump(doc))
        daemon = start_daemon(workdir, config, name="daemon")
        daemon.wait_ready(120)
        costs, runs = asyncio.run(_measure(cluster, daemon.url, pods, args))
    finally:
        if daemon is not None:
            daemon.stop()
        cluster.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    consistent = runs["daemon, RV unset (consistent)"]
    result = BenchResult(
        command=" ".join(["python -m loadtest consistentbench", *(argv or sys.argv[1:])]),
        pods=args.pods,
        clients=args.clients,
        writes_per_second=args.writes,
        probe_rate=args.probe_rate,
        probe_cost=costs,
        throughput=runs,
        ratio_consistent_to_apiserver=consistent.per_second
        / runs["apiserver, RV unset"].per_second,
        probes_per_second=consistent.daemon.get("probes", 0.0) / consistent.seconds,
        listings_per_second=consistent.daemon.get("listings", 0.0) / consistent.seconds,
        quiet_ratio_to_apiserver=runs[QUIET].per_second / runs["apiserver, RV unset"].per_second,
        quiet_listings_per_second=runs[QUIET].daemon.get("listings", 0.0) / runs[QUIET].seconds,
    )
    text = json.dumps(asdict(result), indent=2)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "consistentbench.json").write_text(text + "\n")
        (args.out / "consistentbench.md").write_text(_report(result))
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
