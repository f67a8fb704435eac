"""Watch delivery through tiers: what each cacheproxy in a chain adds to a watch event's lag.

``python -m loadtest tiers [--writes 400] [--rate 20] --out DIR`` (``make bench``) starts a real kube-apiserver
on loopback (:mod:`cacheproxy.envtest`; ``--kube`` picks the version, by default the oldest of
``$KUBEBUILDER_ASSETS`` or ``../shared/envtest`` and its folders: 1.28) and a chain of three daemons, each its own process
(``cacheproxy serve --config FILE``): *top* in front of the API server, *middle* in front of top,
*bottom* in front of middle. A watcher on each of the four servers watches ConfigMaps in one
namespace; a writer creates and updates ConfigMaps there at ``--rate`` per second. For every
write, each watcher's receive time is noted: the report gives, per server, the lag after the write
was answered (p50 / p99 / max) and, per tier, what it adds to the server above it (p50 / p99 of
the per-event differences), with how many events each watcher missed or repeated (0 expected).

Every watcher runs in this process on one event loop; the servers each have a process of their
own. On a 2-core machine the figures include the machine's contention: compare the tiers of one
run, not runs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import math
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx
import orjson
import yaml

from cacheproxy.envtest import Cluster
from loadtest.clients.fanout import percentile
from loadtest.harness.processes import Service, start_daemon
from loadtest.harness.realcluster import NoServer, add_kube_option, required_assets

NAMESPACE = "tiers"
SERVERS = ("api-server", "top", "middle", "bottom")


@dataclass
class ServerLag:
    server: str
    seen: int
    missed: int
    repeated: int
    p50_ms: float
    p99_ms: float
    max_ms: float


@dataclass
class TierCost:
    tier: str
    above: str
    p50_ms: float
    p99_ms: float


@dataclass
class Report:
    command: str
    writes: int
    rate: float
    lags: list[ServerLag] = field(default_factory=list)
    tiers: list[TierCost] = field(default_factory=list)


def _progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _config(workdir: Path, name: str, kubeconfig: Path) -> Path:
    """A daemon caching ConfigMaps (served from memory, as each tier's answer), upstream per
    ``kubeconfig``, port 0."""
    path = workdir / f"{name}.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "resources": [{"resource": "configmaps", "consistentReads": "cache"}],
                "upstream": {"kubeconfig": str(kubeconfig)},
                "server": {"port": 0},
            }
        )
    )
    return path


def write_kubeconfig(workdir: Path, name: str, url: str) -> Path:
    """A kubeconfig naming the cacheproxy at ``url`` (no credentials: it serves loopback)."""
    path = workdir / f"{name}-kubeconfig.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "above", "cluster": {"server": url}}],
                "users": [{"name": "anyone", "user": {}}],
                "contexts": [{"name": "above", "context": {"cluster": "above", "user": "anyone"}}],
                "current-context": "above",
            }
        )
    )
    return path


async def _watch(
    client: httpx.AsyncClient, rv: str, seen: dict[int, float], counts: dict[str, int]
) -> None:
    """Note the receive time of every event's RV (a repeat is counted, not noted again)."""
    path = f"/api/v1/namespaces/{NAMESPACE}/configmaps"
    params = {"watch": "1", "resourceVersion": rv, "timeoutSeconds": "3600"}
    async with client.stream("GET", path, params=params) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if not line:
                continue
            now = time.monotonic()
            event = orjson.loads(line)
            if event["type"] in ("BOOKMARK", "ERROR"):
                counts[event["type"]] = counts.get(event["type"], 0) + 1
                continue
            event_rv = int(event["object"]["metadata"]["resourceVersion"])
            if event_rv in seen:
                counts["repeated"] = counts.get("repeated", 0) + 1
            else:
                seen[event_rv] = now


async def _run(cluster: Cluster, urls: dict[str, str], args: argparse.Namespace) -> Report:
    report = Report(command=args.command, writes=args.writes, rate=args.rate)
    async with contextlib.AsyncExitStack() as stack:
        upstream = await stack.enter_async_context(cluster.async_client())
        clients = {"api-server": upstream}
        for name in SERVERS[1:]:
            clients[name] = await stack.enter_async_context(
                httpx.AsyncClient(base_url=urls[name], timeout=60)
            )
        path = f"/api/v1/namespaces/{NAMESPACE}/configmaps"
        # each watcher starts at its own server's list RV (a quiet cache's RV is older than the
        # API server's, which its own leases move on): every write comes after all of them
        rvs = {
            name: (await client.get(path)).json()["metadata"]["resourceVersion"]
            for name, client in clients.items()
        }
        seen: dict[str, dict[int, float]] = {name: {} for name in SERVERS}
        counts: dict[str, dict[str, int]] = {name: {} for name in SERVERS}
        watchers = [
            asyncio.create_task(_watch(clients[name], rvs[name], seen[name], counts[name]))
            for name in SERVERS
        ]
        await asyncio.sleep(1.0)
        written: dict[int, float] = {}
        _progress(f"{args.writes} writes at {args.rate:g}/s")
        interval = 1.0 / args.rate
        started = time.monotonic()
        for i in range(args.writes):
            name = f"cm-{i % 20}"
            if i < 20:
                response = await upstream.post(path, json={"metadata": {"name": name}})
            else:
                response = await upstream.patch(
                    f"{path}/{name}",
                    json={"data": {"i": str(i)}},
                    headers={"Content-Type": "application/merge-patch+json"},
                )
            response.raise_for_status()
            written[int(response.json()["metadata"]["resourceVersion"])] = time.monotonic()
            await asyncio.sleep(max(0.0, started + (i + 1) * interval - time.monotonic()))
        await asyncio.sleep(3.0)  # the last events' way down the chain (a miss is reported)
        for task in watchers:
            task.cancel()
        await asyncio.gather(*watchers, return_exceptions=True)
    for name in SERVERS:
        lags = sorted(
            (seen[name][rv] - at) * 1000 for rv, at in written.items() if rv in seen[name]
        )
        report.lags.append(
            ServerLag(
                server=name,
                seen=len(lags),
                missed=len(written) - len(lags),
                repeated=counts[name].get("repeated", 0),
                p50_ms=percentile(lags, 0.5),
                p99_ms=percentile(lags, 0.99, total=len(written)),
                max_ms=lags[-1] if lags else math.nan,
            )
        )
    for above, tier in itertools.pairwise(SERVERS):
        added = sorted(
            (seen[tier][rv] - seen[above][rv]) * 1000
            for rv in written
            if rv in seen[tier] and rv in seen[above]
        )
        report.tiers.append(TierCost(tier, above, percentile(added, 0.5), percentile(added, 0.99)))
    return report


def _markdown(report: Report) -> str:
    lines = [
        "# Watch delivery through tiers",
        "",
        f"`{report.command}`",
        "",
        f"A real kube-apiserver, then three cacheproxies in a chain (top → middle → "
        f"bottom), each its own process; {report.writes} ConfigMap writes at "
        f"{report.rate:g}/s, one watcher per server.",
        "",
        "| server | events seen | missed | repeated | lag p50 (ms) | p99 | max |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {s.server} | {s.seen} | {s.missed} | {s.repeated} | {s.p50_ms:.2f} | {s.p99_ms:.2f} "
        f"| {s.max_ms:.2f} |"
        for s in report.lags
    ]
    lines += [
        "",
        "Lag: from the write's answer to the event's arrival at the watcher.",
        "",
        "| tier | adds to | p50 (ms) | p99 (ms) |",
        "|---|---|---:|---:|",
    ]
    lines += [f"| {t.tier} | {t.above} | {t.p50_ms:.2f} | {t.p99_ms:.2f} |" for t in report.tiers]
    lines += [
        "",
        "Each tier's cost: the per-event difference between its watcher's receive time and the "
        "receive time at the server above it.",
        "",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtest tiers", description=__doc__)
    parser.add_argument("--writes", type=int, default=400)
    parser.add_argument("--rate", type=float, default=20.0)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--skip-without-assets",
        action="store_true",
        help="exit 0 with a note when no kube-apiserver is at hand (as make bench runs it)",
    )
    add_kube_option(parser)
    args = parser.parse_args(argv)
    args.command = " ".join(["python -m loadtest tiers", *(argv or sys.argv[1:])])
    try:
        assets = required_assets(args, "python -m loadtest tiers")
    except NoServer as none:
        return none.code
    workdir = Path(tempfile.mkdtemp(prefix="loadtest-tiers-"))
    services: list[Service] = []
    with Cluster(assets, workdir=workdir / "cluster") as cluster:
        cluster.create_namespace(NAMESPACE)
        try:
            urls: dict[str, str] = {}
            kubeconfig = cluster.users["admin"].kubeconfig
            for name in SERVERS[1:]:
                _progress(f"starting the {name} daemon")
                service = start_daemon(workdir, _config(workdir, name, kubeconfig), name=name)
                services.append(service)
                service.wait_ready(60)
                urls[name] = service.url
                kubeconfig = write_kubeconfig(workdir, name, service.url)
            report = asyncio.run(_run(cluster, urls, args))
        finally:
            for service in reversed(services):
                service.stop()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "tiers.json").write_text(json.dumps(asdict(report), indent=2))
    (args.out / "tiers.md").write_text(_markdown(report))
    _progress(f"report written to {args.out / 'tiers.md'}")
    print(_markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
