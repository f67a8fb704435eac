"""Consistent reads against the simulator: lists and gets with resourceVersion unset see every
write made before them; when upstream's watch is silent or its probe fails, the read is answered
as ``consistentReadFallback`` says; ``consistentReads: cache`` does not ask upstream."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx

from cacheproxy.daemon.config import ResourceConfig, ServerLimits
from cacheproxy.daemon.config.model import UpstreamSettings
from cacheproxy.daemon.runtime import Daemon
from cacheproxy.kube.resources import builtin
from cacheproxy.sim import SimConfig, SimServer, Simulator
from cacheproxy.sim.policy import Policy
from cacheproxy.upstream import TokenSource, UpstreamConfig
from tests.integration.daemon_support import daemon_for
from tests.integration.test_daemon_passthrough import POLICY

CONFIGMAPS = builtin("configmaps")
CONSISTENT = (ResourceConfig(rtype=CONFIGMAPS, consistent_reads="consistent"),)
PATH = "/api/v1/namespaces/default/configmaps"


def configmap(name: str, value: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default"}, "data": {"v": value}}


def probes(daemon: Any) -> float:
    return (
        daemon.metrics.registry.get_sample_value(
            "cacheproxy_consistent_probes_total", {"resource": "configmaps"}
        )
        or 0.0
    )


async def test_every_read_after_a_write_sees_it(sim_server: SimServer, sim: Simulator) -> None:
    limits = ServerLimits(consistent_probes_per_second=1000)
    async with (
        daemon_for(sim_server.url, resources=CONSISTENT, limits=limits) as daemon,
        httpx.AsyncClient(base_url=daemon.url, timeout=10) as c,
    ):
        sim.store.create(CONFIGMAPS, configmap("ryw", "-1"))
        for i in range(200):
            current = sim.store.get(CONFIGMAPS, "default", "ryw")
            assert current is not None
            sim.store.update(CONFIGMAPS, {**current, "data": {"v": str(i)}})
            listed = (await c.get(PATH)).json()["items"]
            got = (await c.get(f"{PATH}/ryw")).json()
            assert [item["data"]["v"] for item in listed] == [str(i)]
            assert got["data"]["v"] == str(i)
        assert probes(daemon) == 400


async def test_a_silent_watch_makes_reads_fall_back_to_the_cache_with_a_warning(
    sim_server: SimServer, sim: Simulator
) -> None:
    limits = ServerLimits(consistent_read_timeout_seconds=0.3)
    async with (
        daemon_for(sim_server.url, resources=CONSISTENT, limits=limits) as daemon,
        httpx.AsyncClient(base_url=daemon.url, timeout=10) as c,
    ):
        await asyncio.sleep(1.1)  # a watch that ends within a second is a relist: not that
        sim.faults.next_watch_stream("silent")
        sim.end_watches()
        await asyncio.sleep(0.2)
        sim.store.create(CONFIGMAPS, configmap("unseen", "x"))
        response = await c.get(PATH)
        assert response.status_code == 200
        assert "served from the cache as it is" in response.headers["warning"]
        assert response.json()["items"] == []
        assert (await c.get(PATH, params={"resourceVersion": "0"})).headers.get("warning") is None
        text = (await c.get("/metrics")).text
        assert (
            'cacheproxy_consistent_fallbacks_total{reason="cache_behind",resource="configmaps"} 1.0'
            in text
        )


async def test_a_failing_probe_is_a_504_when_so_configured(
    sim_server: SimServer, sim: Simulator
) -> None:
    limits = ServerLimits(consistent_read_fallback="error")
    async with (
        daemon_for(sim_server.url, resources=CONSISTENT, limits=limits) as daemon,
        httpx.AsyncClient(base_url=daemon.url, timeout=10) as c,
    ):
        sim.faults.fail_next("list", 500)
        response = await c.get(f"{PATH}/anything")
        assert response.status_code == 504
        assert response.headers["retry-after"] == "1"
        assert "upstream could not be asked" in response.json()["message"]
        # The next read probes again, and upstream answers.
        assert (await c.get(f"{PATH}/anything")).status_code == 404
        assert probes(daemon) == 2


async def test_the_cache_policy_reads_without_asking_upstream(
    sim_server: SimServer, sim: Simulator
) -> None:
    resources = (ResourceConfig(rtype=CONFIGMAPS, consistent_reads="cache"),)
    async with (
        daemon_for(sim_server.url, resources=resources) as daemon,
        httpx.AsyncClient(base_url=daemon.url, timeout=10) as c,
    ):
        for _ in range(20):
            assert (await c.get(PATH)).status_code == 200
        assert probes(daemon) == 0
        assert "cacheproxy_consistent_reads_total{" not in (await c.get("/metrics")).text


async def test_a_quiet_resource_is_confirmed_while_another_one_changes(
    sim_server: SimServer, sim: Simulator
) -> None:
    # Upstream's RV moves with every write, a resource's cache only with its own events and
    # bookmarks: a quiet resource never gets there by itself, and a listing confirms it.
    resources = (
        *CONSISTENT,
        ResourceConfig(rtype=builtin("secrets"), consistent_reads="consistent"),
    )
    async with (
        daemon_for(sim_server.url, resources=resources) as daemon,
        httpx.AsyncClient(base_url=daemon.url, timeout=10) as c,
    ):
        secrets = "/api/v1/namespaces/default/secrets"
        sim.store.create(builtin("secrets"), {"metadata": {"name": "s", "namespace": "default"}})
        for i in range(5):
            sim.store.create(CONFIGMAPS, configmap(f"busy-{i}", "1"))
            assert "warning" not in (await c.get(PATH)).headers
            for response in (await c.get(secrets), await c.get(f"{secrets}/s")):
                assert response.status_code == 200
                assert "warning" not in response.headers
        text = (await c.get("/metrics")).text
        assert 'cacheproxy_consistent_confirmed_total{resource="secrets"} 10.0' in text
        assert 'cacheproxy_consistent_confirmed_total{resource="configmaps"} 0.0' in text
        # The questions are upstream requests of the resource, beside its list and watch: a
        # probe, then (found quiet) a listing per list and the object per get.
        requests = 'cacheproxy_upstream_requests_total{resource="secrets",verb="%s"} %s'
        assert requests % ("probe", "1.0") in text
        assert requests % ("confirm", "5.0") in text
        assert requests % ("confirm-get", "5.0") in text


async def test_a_write_to_a_quiet_resource_is_seen_by_the_next_read(
    sim_server: SimServer, sim: Simulator
) -> None:
    async with (
        daemon_for(sim_server.url, resources=CONSISTENT) as daemon,
        httpx.AsyncClient(base_url=daemon.url, timeout=10) as c,
    ):
        for i in range(20):
            sim.store.create(builtin("secrets"), {"metadata": {"name": f"s{i}"}})  # elsewhere
            assert "warning" not in (await c.get(PATH)).headers  # confirmed: quiet
            sim.store.create(CONFIGMAPS, configmap(f"new-{i}", "1"))
            names = [item["metadata"]["name"] for item in (await c.get(PATH)).json()["items"]]
            assert f"new-{i}" in names


def sample(daemon: Any, name: str, **labels: str) -> float:
    value = daemon.metrics.registry.get_sample_value(name, {"resource": "configmaps", **labels})
    return value or 0.0


async def test_a_default_read_is_served_from_the_live_cache_without_asking_upstream(
    sim_server: SimServer, sim: Simulator
) -> None:
    async with (
        daemon_for(sim_server.url, resources=(ResourceConfig(rtype=CONFIGMAPS),)) as daemon,
        httpx.AsyncClient(base_url=daemon.url, timeout=10) as c,
    ):
        assert sample(daemon, "cacheproxy_watch_live") == 1.0
        for i in range(20):
            sim.store.create(CONFIGMAPS, configmap(f"elsewhere-{i}", "1"))  # not through it
            for _ in range(500):  # the watch's delivery lag: milliseconds
                names = [item["metadata"]["name"] for item in (await c.get(PATH)).json()["items"]]
                if f"elsewhere-{i}" in names:
                    break
                await asyncio.sleep(0.01)
            else:
                raise AssertionError(f"elsewhere-{i} never showed")
            got = await c.get(f"{PATH}/elsewhere-{i}")
            assert got.status_code == 200 and "warning" not in got.headers
        assert probes(daemon) == 0
        assert sample(daemon, "cacheproxy_consistent_live_total") >= 40


async def test_a_default_read_whose_watch_went_silent_is_proven_not_served_as_is(
    sim_server: SimServer, sim: Simulator
) -> None:
    async with (
        daemon_for(
            sim_server.url,
            resources=(ResourceConfig(rtype=CONFIGMAPS),),
            watching=UpstreamSettings(watch_live_silence_seconds=1),
            limits=ServerLimits(consistent_read_timeout_seconds=0.5),
        ) as daemon,
        httpx.AsyncClient(base_url=daemon.url, timeout=10) as c,
    ):
        await asyncio.sleep(1.1)  # a watch that ends within a second is a relist: not that
        sim.faults.next_watch_stream("silent")
        sim.end_watches()
        sim.store.create(CONFIGMAPS, configmap("unseen", "x"))
        await asyncio.sleep(1.5)  # the new watch silent for over a second: no longer live
        assert sample(daemon, "cacheproxy_watch_live") == 0.0
        response = await c.get(PATH)
        # No credentials to forward: the listing shows what the cache lacks, and the read
        # falls back to the cache with a Warning rather than passing for fresh.
        assert response.status_code == 200
        assert "served from the cache as it is" in response.headers["warning"]
        assert probes(daemon) == 1


@contextlib.asynccontextmanager
async def audited(
    resource: ResourceConfig,
) -> AsyncIterator[tuple[Simulator, Daemon, httpx.AsyncClient]]:
    """A simulator that authenticates (its request log says who asked), a daemon caching
    ``resource`` in front of it with its own token, and a client of the daemon."""
    policy = Simulator(config=SimConfig(policy=Policy.from_mapping(POLICY)))
    async with (
        SimServer(policy) as server,
        daemon_for(
            server.url,
            resources=(resource,),
            upstream=UpstreamConfig(
                server=server.url, token_source=TokenSource.static("daemon-token")
            ),
        ) as daemon,
        httpx.AsyncClient(base_url=daemon.url, timeout=10) as c,
    ):
        yield policy, daemon, c


async def test_a_strict_read_is_forwarded_as_its_caller_when_that_is_cheaper() -> None:
    strict = ResourceConfig(rtype=CONFIGMAPS, consistent_reads="strict")
    async with audited(strict) as (policy, daemon, c):
        policy.store.create(CONFIGMAPS, configmap("a", "1"))
        policy.store.create(builtin("secrets"), {"metadata": {"name": "s"}})  # upstream moves on
        admin = {"Authorization": "Bearer admin-token"}
        logged = len(policy.request_log)
        got = await c.get(f"{PATH}/a", headers=admin)
        assert got.status_code == 200 and got.json()["data"] == {"v": "1"}
        listed = [await c.get(PATH, headers=admin) for _ in range(3)]
        assert all(r.status_code == 200 for r in listed)
        assert [i["metadata"]["name"] for i in listed[-1].json()["items"]] == ["a"]
        seen = [(r.verb, r.user) for r in list(policy.request_log)[logged:]]
        # The get is the caller's own; the first list probes and, the cache being behind
        # (quiet), goes upstream as the caller; the lists after it skip the probe.
        assert seen.count(("get", "admin")) == 1
        assert seen.count(("list", "admin")) == 3
        assert seen.count(("list", "cacheproxy")) == 1  # the one probe
        assert sample(daemon, "cacheproxy_consistent_forwarded_total") == 4
        # A caller with no credentials is not forwarded (upstream would refuse it): proven.
        anonymous = await c.get(f"{PATH}/a")
        assert anonymous.status_code == 200
        assert sample(daemon, "cacheproxy_consistent_forwarded_total") == 4


async def test_a_read_at_an_rv_the_cache_has_not_reached_goes_upstream_as_asked() -> None:
    async with audited(ResourceConfig(rtype=CONFIGMAPS)) as (policy, daemon, c):
        policy.store.create(CONFIGMAPS, configmap("a", "1"))
        secret = policy.store.create(builtin("secrets"), {"metadata": {"name": "s"}})
        ahead = secret["metadata"]["resourceVersion"]  # an RV the configmaps never reach
        admin = {"Authorization": "Bearer admin-token"}
        logged = len(policy.request_log)
        listed = await c.get(
            PATH, params={"resourceVersion": ahead, "labelSelector": ""}, headers=admin
        )
        assert listed.status_code == 200
        assert [i["metadata"]["name"] for i in listed.json()["items"]] == ["a"]
        assert int(listed.json()["metadata"]["resourceVersion"]) >= int(ahead)
        [asked] = [r for r in list(policy.request_log)[logged:] if r.user == "admin"]
        # Asked as the caller, with every parameter as sent: upstream applies its own RV rule.
        assert asked.verb == "list" and asked.params.get("resourceVersion") == ahead
        assert asked.params.get("labelSelector") == ""
        assert sample(daemon, "cacheproxy_consistent_forwarded_total") == 0  # not an RV-unset read
