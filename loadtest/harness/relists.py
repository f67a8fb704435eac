"""Memory across relists: a daemon in front of a real API server, under churn, made to relist
again and again, its RSS read after each.

:func:`measure_relists` keeps pods changing (merge patches of an annotation at ``rate``/s) and
restarts kube-apiserver ``count`` times, etcd's revision moving on while it is down. A restarted
API server's watch cache starts at etcd's current revision, so the daemon's resumed pod watch is
410 "too old resource version" and the daemon relists — the whole collection in one response, as at its first sync, while its old
state is still held. After each relist has completed (the daemon's ``/status``: relists counted
one more, the reflector watching again) and settled, the daemon's RSS and peak RSS are read.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import httpx
import orjson

from cacheproxy.envtest import Cluster
from loadtest.clients.httpclient import fetch
from loadtest.harness.processes import rss_bytes

__all__ = ["RelistPoint", "measure_relists"]

_MERGE = {"Content-Type": "application/merge-patch+json"}


@dataclass(frozen=True, slots=True)
class RelistPoint:
    """The daemon after its ``relists``-th relist: how long the relist took to be done after
    the API server was ready again, its RSS and peak RSS (bytes)."""

    relists: int
    recovery_s: float
    rss: int
    hwm: int


async def measure_relists(
    cluster: Cluster,
    daemon_url: str,
    daemon_pid: int,
    *,
    pods: Sequence[tuple[str, str]],
    count: int,
    rate: float = 20.0,
    deadline: float = 180.0,
    settle: float = 2.0,
    progress: Callable[[str], None] = lambda _: None,
) -> list[RelistPoint]:
    points: list[RelistPoint] = []
    churn = asyncio.create_task(_churn(cluster, pods, rate), name="relist-churn")
    try:
        for i in range(count):
            before = await _pods_status(daemon_url)
            progress(f"relists: restarting kube-apiserver ({i + 1} of {count})")
            await asyncio.to_thread(cluster.restart_apiserver, bump_revision=True)
            ready_at = time.monotonic()
            status = await _until_relisted(daemon_url, int(str(before["relists"])), deadline)
            recovery = time.monotonic() - ready_at
            await asyncio.sleep(settle)
            points.append(
                RelistPoint(
                    relists=int(str(status["relists"])),
                    recovery_s=recovery,
                    rss=rss_bytes(daemon_pid),
                    hwm=rss_bytes(daemon_pid, "VmHWM"),
                )
            )
    finally:
        churn.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await churn
    return points


async def _pods_status(daemon_url: str) -> dict[str, object]:
    code, body = await fetch(daemon_url, "/status")
    if code != 200:
        raise RuntimeError(f"GET {daemon_url}/status: {code}")
    resources = orjson.loads(body)["resources"]
    pods: dict[str, object] = resources["pods"]
    return pods


async def _until_relisted(daemon_url: str, relists: int, deadline: float) -> dict[str, object]:
    """The pods' status once they relisted (more than ``relists``) and watch again."""
    give_up = time.monotonic() + deadline
    while time.monotonic() < give_up:
        status = await _pods_status(daemon_url)
        if int(str(status["relists"])) > relists and status["phase"] == "watching":
            return status
        await asyncio.sleep(0.2)
    raise RuntimeError(f"the daemon did not relist its pods within {deadline:g} s")


async def _churn(cluster: Cluster, pods: Sequence[tuple[str, str]], rate: float) -> None:
    """Merge patches of random pods' annotation at ``rate``/s; failures while the API server
    restarts are expected and skipped."""
    rng = random.Random(7)
    async with cluster.async_client(timeout=10) as client:
        n = 0
        while True:
            ns, name = rng.choice(pods)
            n += 1
            with contextlib.suppress(httpx.HTTPError):
                await client.patch(
                    f"/api/v1/namespaces/{ns}/pods/{name}",
                    content=orjson.dumps({"metadata": {"annotations": {"relist-churn": str(n)}}}),
                    headers=_MERGE,
                )
            await asyncio.sleep(1 / rate)
