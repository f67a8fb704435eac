"""Read-your-writes against the real API server: a client writes upstream, then lists and gets
through the daemon with ``resourceVersion`` unset, and must see its write (the API server's
"Most Recent" contract for RV unset).

The daemon reaches the API server through a relay that delays every byte (upstream's watch
events arrive late); the client writes to the API server directly. With
``consistentReads: strict`` (``consistent``, its former name, here) every read contains the
write before it; with ``consistentReads: cache`` the same reads miss writes (the test could
fail). A resource nobody writes is read consistently without waiting out the timeout. (The
default, ``live``, is not linearizable: a write made elsewhere shows after the watch's lag.)
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from cacheproxy.daemon.runtime import Daemon
from cacheproxy.envtest import Cluster
from loadtest.harness.relay import Relay
from tests.e2e.support import create, daemon_over, fresh_namespace, merge_patch, rv_of

pytestmark = pytest.mark.every_server

ITERATIONS = 250
DELAY = 0.01
"""Seconds the relay holds each chunk, each way (upstream's events reach the daemon late)."""


FAST_PROBES = {"server.limits.consistentProbesPerSecond": 1000}
"""For one client reading after each write: each read needs a probe of its own, and the
default rate (10/s) would make each wait up to 0.1 s for it."""


@dataclass
class Outcome:
    violations: list[str]
    warnings: int


@contextlib.asynccontextmanager
async def delayed_daemon(
    cluster: Cluster, tmp_path: Path, policy: str, extra: Mapping[str, Any] | None = None
) -> AsyncIterator[tuple[Daemon, Relay]]:
    """A daemon caching configmaps with ``policy``, reaching ``cluster`` through a slow relay."""
    port = int(cluster.url.rsplit(":", 1)[1])
    async with Relay("127.0.0.1", port) as relay:
        doc = yaml.safe_load(cluster.users["admin"].kubeconfig.read_text())
        doc["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{relay.port}"
        kubeconfig = tmp_path / "relayed.kubeconfig"
        kubeconfig.write_text(yaml.safe_dump(doc))
        resources = [{"resource": "configmaps", "consistentReads": policy}]
        async with daemon_over(
            cluster,
            tmp_path,
            resources=resources,
            extra={"upstream.kubeconfig": str(kubeconfig), **(extra or {})},
        ) as daemon:
            relay.latency = DELAY
            yield daemon, relay


async def write_then_read(
    upstream: httpx.AsyncClient, proxy: httpx.AsyncClient, ns: str, iterations: int
) -> Outcome:
    path = f"/api/v1/namespaces/{ns}/configmaps"
    name = "read-your-writes"
    labels = {"test": "read-your-writes"}
    await create(upstream, path, {"metadata": {"name": name, "labels": labels}})
    violations: list[str] = []
    warnings = 0
    for i in range(iterations):
        written = await merge_patch(upstream, f"{path}/{name}", {"data": {"i": str(i)}})
        wrote = rv_of(written)
        listed = await proxy.get(path, params={"labelSelector": "test=read-your-writes"})
        got = await proxy.get(f"{path}/{name}")
        for what, response in (("list", listed), ("get", got)):
            warnings += "warning" in response.headers
            if response.status_code == 404:  # not even created, as far as the cache knows
                violations.append(f"{i}: the {what} found nothing, the write was at {wrote}")
                continue
            assert response.status_code == 200, response.text
            body = response.json()
            items = body["items"] if what == "list" else [body]
            if [item.get("data", {}).get("i") for item in items] != [str(i)]:
                seen = [rv_of(item) for item in items]
                violations.append(f"{i}: the {what} answered RVs {seen}, the write was {wrote}")
    return Outcome(violations, warnings)


def probes(daemon: Daemon) -> float:
    assert daemon.metrics is not None
    return (
        daemon.metrics.registry.get_sample_value(
            "cacheproxy_consistent_probes_total", {"resource": "configmaps"}
        )
        or 0.0
    )


def counted(daemon: Daemon, name: str, **labels: str) -> float:
    assert daemon.metrics is not None
    value = daemon.metrics.registry.get_sample_value(name, {"resource": "configmaps", **labels})
    return value or 0.0


async def test_every_read_with_rv_unset_contains_the_write_before_it(
    cluster: Cluster, upstream: httpx.AsyncClient, tmp_path: Path
) -> None:
    ns = await fresh_namespace(upstream, "ryw")
    async with (
        delayed_daemon(cluster, tmp_path, "consistent", FAST_PROBES) as (daemon, _),
        httpx.AsyncClient(base_url=daemon.url, timeout=30) as proxy,
    ):
        outcome = await write_then_read(upstream, proxy, ns, ITERATIONS)
        asked = probes(daemon) + sum(
            counted(daemon, f"cacheproxy_consistent_{name}_total")
            for name in ("listings", "object_checks")
        )
    assert outcome.violations == []
    # Each read asked upstream at least once (a probe, or the confirmation of a cache that had
    # not moved: a listing, or a get's object), at most twice (a probe, then a confirmation).
    assert 2 * ITERATIONS <= asked <= 4 * ITERATIONS
    # None fell back: a read finds the cache behind upstream's RV whenever another resource was
    # written meanwhile (the API server's leases), and a listing or the object confirms it.
    assert outcome.warnings == 0


async def test_a_resource_nobody_writes_is_read_consistently_without_waiting_out_the_timeout(
    cluster: Cluster, upstream: httpx.AsyncClient, tmp_path: Path
) -> None:
    # kube-apiserver 1.28 moves etcd's revision with its own leases and sends no progress on a
    # quiet collection's watch: its cache never reaches the probed RV by itself.
    ns = await fresh_namespace(upstream, "quiet")
    path = f"/api/v1/namespaces/{ns}/configmaps"
    await create(upstream, path, {"metadata": {"name": "still"}})
    async with (
        daemon_over(
            cluster,
            tmp_path,
            resources=[{"resource": "configmaps", "namespace": ns, "consistentReads": "strict"}],
        ) as daemon,
        httpx.AsyncClient(base_url=daemon.url, timeout=30) as proxy,
    ):
        await create(upstream, "/api/v1/namespaces/default/secrets", {"metadata": {"name": ns}})
        for _ in range(30):
            listed = await proxy.get(path)
            got = await proxy.get(f"{path}/still")
            for response in (listed, got):
                assert response.status_code == 200
                assert "warning" not in response.headers, response.headers["warning"]
        assert [i["metadata"]["name"] for i in listed.json()["items"]] == ["still"]
        confirmed = counted(daemon, "cacheproxy_consistent_confirmed_total")
        fallbacks = sum(
            counted(daemon, "cacheproxy_consistent_fallbacks_total", reason=reason)
            for reason in ("probe_failed", "probe_timeout", "cache_behind")
        )
        listings = counted(daemon, "cacheproxy_consistent_listings_total")
        requests = counted(daemon, "cacheproxy_upstream_requests_total", verb="confirm")
        gets = counted(daemon, "cacheproxy_upstream_requests_total", verb="confirm-get")
        checks = counted(daemon, "cacheproxy_consistent_object_checks_total")
    assert fallbacks == 0
    assert requests == listings  # the lists' confirmations: listings of the collection
    assert gets == checks  # the gets': their object
    if cluster.assets.minor < (1, 32):
        # 1.28 sends no progress on a quiet watch: only a confirmation proves the cache. (1.32's
        # watch cache asks etcd for progress and may bookmark the watch within the wait.)
        assert confirmed > 0 and listings > 0 and checks > 0


async def test_reads_from_the_cache_as_it_is_miss_writes_when_upstream_is_slow(
    cluster: Cluster, upstream: httpx.AsyncClient, tmp_path: Path
) -> None:
    ns = await fresh_namespace(upstream, "ryw")
    async with (
        delayed_daemon(cluster, tmp_path, "cache", FAST_PROBES) as (daemon, _),
        httpx.AsyncClient(base_url=daemon.url, timeout=30) as proxy,
    ):
        outcome = await write_then_read(upstream, proxy, ns, ITERATIONS)
        asked = probes(daemon)
    assert len(outcome.violations) > ITERATIONS // 2, outcome.violations[:5]
    assert asked == 0
    assert outcome.warnings == 0


async def test_concurrent_consistent_reads_share_probes_within_the_rate(
    cluster: Cluster, upstream: httpx.AsyncClient, tmp_path: Path
) -> None:
    ns = await fresh_namespace(upstream, "ryw")
    path = f"/api/v1/namespaces/{ns}/configmaps"
    await create(upstream, path, {"metadata": {"name": "one"}})
    async with (
        delayed_daemon(cluster, tmp_path, "consistent") as (daemon, _),
        httpx.AsyncClient(base_url=daemon.url, timeout=30) as proxy,
    ):
        before = probes(daemon)
        loop = asyncio.get_running_loop()
        start = loop.time()
        reads = 0

        async def client() -> None:
            nonlocal reads
            while loop.time() - start < 2.0:
                response = await proxy.get(path)
                assert response.status_code == 200
                reads += 1

        await asyncio.gather(*(client() for _ in range(16)))
        seconds = loop.time() - start
        asked = probes(daemon) - before
        rate = daemon.config.server.limits.consistent_probes_per_second
    # At most the configured rate (one at a time: past a 10 ms relay, fewer), each probe shared
    # by the reads that waited for it.
    assert asked <= rate * seconds + 1, (asked, seconds)
    assert reads >= 4 * asked, (reads, asked)
