"""An upstream that goes quiet or away: the daemon keeps serving its last state, says how stale it
is (metric, status page, optional header, optional readiness policy) and, when upstream is back
and its history still covers the gap, catches up by resuming its watch — no relist."""

from __future__ import annotations

import asyncio

import httpx

from cacheproxy.daemon.config import ResourceConfig, ServerLimits
from cacheproxy.kube.resources import builtin
from cacheproxy.sim import SimServer, Simulator
from tests.integration.daemon_support import daemon_for

PODS = builtin("pods")


def pod(name: str) -> dict[str, object]:
    return {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
    }


async def test_a_silent_upstream_makes_the_cache_stale_but_served_and_resuming_catches_up(
    demo_server: SimServer, demo_sim: Simulator
) -> None:
    pods = demo_sim.resource("pods")
    async with (
        daemon_for(
            demo_server.url,
            resources=(ResourceConfig(rtype=PODS),),
            limits=ServerLimits(ready_max_staleness_seconds=1.0),
            staleness_header=True,
        ) as daemon,
        httpx.AsyncClient(base_url=daemon.url, timeout=10) as c,
    ):
        assert daemon.server is not None
        informer = daemon.server.resources[PODS].informer
        relists = informer.relists
        assert (await c.get("/readyz")).status_code == 200
        # (A watch that ends within a second of its start is a relist, as client-go: let the
        # first one live longer.)
        await asyncio.sleep(1.2)
        # Upstream goes silent: the watch stays open, nothing arrives, not even bookmarks.
        demo_sim.faults.next_watch_stream("silent")
        demo_sim.end_watches()
        missed = demo_sim.store.create(pods, pod("missed-while-silent"))
        await asyncio.sleep(1.2)  # silent for a while (not a "very short watch")
        for _ in range(100):
            if (await c.get("/readyz")).status_code == 503:
                break
            await asyncio.sleep(0.05)
        assert (await c.get("/readyz")).status_code == 503
        listed = await c.get("/api/v1/pods")
        assert listed.status_code == 200  # still served: the last state
        assert float(listed.headers["x-cacheproxy-staleness-seconds"]) > 1.0
        names = {p["metadata"]["name"] for p in listed.json()["items"]}
        assert "missed-while-silent" not in names
        status = (await c.get("/status")).json()
        assert status["resources"]["pods"]["stalenessSeconds"] > 1.0
        metrics = (await c.get("/metrics")).text
        line = next(
            m for m in metrics.splitlines() if m.startswith("cacheproxy_cache_staleness_seconds{")
        )
        assert float(line.split()[-1]) > 1.0
        # Upstream is back: the daemon resumes its watch from its last RV and catches up.
        demo_sim.end_watches()
        rv = int(missed["metadata"]["resourceVersion"])
        for _ in range(200):
            if daemon.server.resources[PODS].resource_version >= rv:
                break
            await asyncio.sleep(0.05)
        assert daemon.server.resources[PODS].resource_version >= rv
        assert informer.relists == relists  # no relist: history covered the gap
        fresh = await c.get("/api/v1/pods")
        assert float(fresh.headers["x-cacheproxy-staleness-seconds"]) < 1.0
        assert "missed-while-silent" in {p["metadata"]["name"] for p in fresh.json()["items"]}
        assert (await c.get("/readyz")).status_code == 200


async def test_by_default_the_daemon_stays_ready_while_upstream_is_away(
    demo_server: SimServer, demo_sim: Simulator
) -> None:
    async with daemon_for(demo_server.url, resources=(ResourceConfig(rtype=PODS),)) as daemon:
        demo_sim.faults.fail_next("watch", 503, count=1000)
        demo_sim.faults.fail_next("list", 503, count=1000)
        demo_sim.end_watches()
        await asyncio.sleep(1.2)
        async with httpx.AsyncClient(base_url=daemon.url, timeout=10) as c:
            assert (await c.get("/readyz")).status_code == 200
            listed = await c.get("/api/v1/pods")
            assert listed.status_code == 200 and len(listed.json()["items"]) == 60
            assert "x-cacheproxy-staleness-seconds" not in listed.headers
        demo_sim.faults.clear()


async def test_a_daemon_started_while_upstream_is_down_serves_its_version_once_it_is_up() -> None:
    import socket

    from cacheproxy.daemon.config import DaemonConfig, ServerSettings
    from cacheproxy.daemon.runtime import Daemon
    from cacheproxy.upstream import UpstreamConfig

    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))  # a free port, for an upstream that starts later
    port = probe.getsockname()[1]
    probe.close()
    config = DaemonConfig(resources=(ResourceConfig(rtype=PODS),), server=ServerSettings(port=0))
    daemon = Daemon(config, UpstreamConfig(server=f"http://127.0.0.1:{port}"), manage_gc=False)
    async with daemon, httpx.AsyncClient(base_url=daemon.url, timeout=10) as c:
        assert (await c.get("/version")).json() == {}
        async with SimServer(Simulator(), port=port):
            assert await daemon.wait_ready(20)
            for _ in range(100):
                if (await c.get("/version")).json():
                    break
                await asyncio.sleep(0.1)
            assert (await c.get("/version")).json()["gitVersion"].startswith("v1.")
