"""What access control costs: request latency with and without it, caches warm, in one run.

``python -m loadtest authbench [--pods 1000] [--requests 3000] [--out loadtest/out]``

A simulator with an RBAC policy and N pods, and three daemons in front of it, identical but for
``server.auth.mode``: ``none``, ``token`` (a static token file) and ``delegated`` (TokenReview).
Both auth modes authorize every request with a SubjectAccessReview upstream, cached. Each daemon
gets the same warm-up (every user and request shape once, which fills the caches) and then the same
sequence of requests from one client at concurrency 1 — a GET of one pod, a label-selected list
and a namespace list, by four users in turn — and the report gives p50/p99 latency per mode, the
latency added over ``none``, and the caches' hit ratio over the measured requests (upstream
reviews made during them). Everything runs in one process (simulator, daemons, client), so the
absolute numbers include the client's own cost; the differences are what access control adds.
Nothing is asserted; the report is printed and written to ``OUT/auth.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from cacheproxy.daemon.config import (
    AuthMode,
    AuthSettings,
    DaemonConfig,
    ResourceConfig,
    ServerSettings,
)
from cacheproxy.daemon.runtime import Daemon
from cacheproxy.kube.resources import builtin
from cacheproxy.server.access import AccessControl
from cacheproxy.sim import SimConfig, SimServer, Simulator
from cacheproxy.sim.policy import Policy
from cacheproxy.sim.workload import DemoSpec, demo_objects
from cacheproxy.upstream import TokenSource, UpstreamConfig

USERS = ("reader", "dev-1", "dev-2", "auditor")
POLICY = {
    "users": [
        {"name": "cacheproxy", "token": "daemon-token", "groups": ["system:masters"]},
        *({"name": u, "token": f"{u}-token"} for u in USERS),
    ],
    "rules": [
        {
            "subjects": [{"kind": "User", "name": u} for u in USERS],
            "verbs": ["get", "list", "watch"],
            "apiGroups": [""],
            "resources": ["pods"],
        }
    ],
}


@dataclass
class ModeResult:
    mode: str
    p50_ms: float
    p99_ms: float
    mean_ms: float
    token_hits: int = 0
    token_misses: int = 0
    access_hits: int = 0
    access_misses: int = 0
    reviews_upstream: int = 0


def cache_counts(access: AccessControl | None) -> tuple[int, int, int, int]:
    """Token hits, token misses, decision hits, decision misses so far."""
    if access is None:
        return (0, 0, 0, 0)
    tokens, decisions = access.token_cache, access.decision_cache
    return (tokens.hits, tokens.misses, decisions.hits, decisions.misses)


def request_shapes(pod: str, namespace: str) -> list[str]:
    return [
        f"/api/v1/namespaces/{namespace}/pods/{pod}",
        "/api/v1/pods?labelSelector=app%3Dapp-1",
        f"/api/v1/namespaces/{namespace}/pods?limit=50",
    ]


async def measure(
    sim: Simulator, server: SimServer, mode: AuthMode, token_file: Path, n: int
) -> ModeResult:
    auth = AuthSettings(mode=mode, token_file=token_file if mode is AuthMode.TOKEN else None)
    config = DaemonConfig(
        # from memory, as before consistent reads: what access control adds is the question
        resources=(ResourceConfig(rtype=builtin("pods"), consistent_reads="cache"),),
        server=ServerSettings(port=0, auth=auth),
    )
    upstream = UpstreamConfig(server=server.url, token_source=TokenSource.static("daemon-token"))
    daemon = Daemon(config, upstream, manage_gc=False)
    async with daemon:
        assert await daemon.wait_ready(60)
        pods = sim.store.names(sim.resource("pods"))
        namespace, pod = pods[0]
        shapes = request_shapes(pod, namespace)
        async with httpx.AsyncClient(base_url=daemon.url, timeout=30) as client:
            headers = {u: {"Authorization": f"Bearer {u}-token"} for u in USERS}
            for user in USERS:  # warm-up: every cache entry the run will need
                for path in shapes:
                    response = await client.get(path, headers=headers[user])
                    response.raise_for_status()
            access = daemon.server.access if daemon.server else None
            before = cache_counts(access)
            reviews_before = (
                sim.requests["create tokenreviews"] + sim.requests["create subjectaccessreviews"]
            )
            latencies: list[float] = []
            for i in range(n):
                user = USERS[i % len(USERS)]
                path = shapes[i % len(shapes)]
                began = time.perf_counter()
                response = await client.get(path, headers=headers[user])
                latencies.append(time.perf_counter() - began)
                response.raise_for_status()
        after = cache_counts(access)
        reviews = (
            sim.requests["create tokenreviews"]
            + sim.requests["create subjectaccessreviews"]
            - reviews_before
        )
    latencies.sort()
    counts = [a - b for a, b in zip(after, before, strict=True)]
    return ModeResult(
        mode=mode.value,
        p50_ms=statistics.median(latencies) * 1000,
        p99_ms=latencies[int(len(latencies) * 0.99) - 1] * 1000,
        mean_ms=statistics.fmean(latencies) * 1000,
        token_hits=counts[0],
        token_misses=counts[1],
        access_hits=counts[2],
        access_misses=counts[3],
        reviews_upstream=reviews,
    )


def ratio(hits: int, misses: int) -> str:
    total = hits + misses
    return f"{hits / total:.1%} ({hits}/{total})" if total else "—"


def render(results: list[ModeResult], *, pods: int, requests: int, command: str) -> str:
    base = results[0]
    lines = [
        "# Access control: added latency with warm caches",
        "",
        f"`{command}` — {pods} pods, {requests} requests per mode at concurrency 1 (GET one "
        "pod, a label-selected list, a 50-item namespace page; four users in turn).",
        "",
        "| mode | p50 ms | p99 ms | mean ms | added p50 ms | added mean ms | token cache hits "
        "| access cache hits | reviews upstream |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r.mode} | {r.p50_ms:.3f} | {r.p99_ms:.3f} | {r.mean_ms:.3f} | "
            f"{r.p50_ms - base.p50_ms:+.3f} | {r.mean_ms - base.mean_ms:+.3f} | "
            f"{ratio(r.token_hits, r.token_misses) if r.mode == 'delegated' else '—'} | "
            f"{ratio(r.access_hits, r.access_misses) if r.mode != 'none' else '—'} | "
            f"{r.reviews_upstream} |"
        )
    return "\n".join(lines) + "\n"


async def run(pods: int, requests: int, out: Path, command: str) -> str:
    sim = Simulator(config=SimConfig(policy=Policy.from_mapping(POLICY)))
    sim.load(demo_objects(DemoSpec(pods=pods)))
    token_file = out / "authbench-tokens.csv"
    results = []
    async with SimServer(sim) as server:
        for mode in (AuthMode.NONE, AuthMode.TOKEN, AuthMode.DELEGATED):
            results.append(await measure(sim, server, mode, token_file, requests))
    return render(results, pods=pods, requests=requests, command=command)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtest authbench", description=__doc__)
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--out", type=Path, default=Path("loadtest/out"))
    args = parser.parse_args(argv)
    command = (
        f"python -m loadtest authbench --pods {args.pods} --requests {args.requests} "
        f"--out {args.out}"
    )
    args.out.mkdir(parents=True, exist_ok=True)
    tokens = "".join(f"{u}-token,{u},{i}\n" for i, u in enumerate(USERS))
    with tempfile.TemporaryDirectory(prefix="cacheproxy-authbench-") as tmp:
        (Path(tmp) / "authbench-tokens.csv").write_text(tokens)
        report = asyncio.run(run(args.pods, args.requests, Path(tmp), command))
    (args.out / "auth.md").write_text(report)
    print(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
