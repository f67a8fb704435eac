"""What is read but not cached: forwarded reads are tallied on ``/status`` and the home page, and
with ``passthrough.autoCache`` a resource read often gets an informer of its own — served from
the cache once synced, never a Secret, given up when the daemon's identity cannot list it,
dropped again when nobody reads it."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator

import httpx
import pytest

from cacheproxy.daemon.config import ResourceConfig
from cacheproxy.daemon.config.model import DaemonConfig, PassthroughSettings, ServerSettings
from cacheproxy.daemon.runtime import Daemon
from cacheproxy.kube.resources import builtin
from cacheproxy.sim import SimConfig, SimServer, Simulator
from cacheproxy.sim.policy import Policy
from cacheproxy.upstream import TokenSource, UpstreamConfig
from tests.support import until

POLICY = {
    "users": [
        {"name": "cacheproxy", "token": "daemon-token", "groups": ["daemons"]},
        {"name": "admin", "token": "admin-token", "groups": ["system:masters"]},
    ],
    "rules": [
        {
            "name": "the-daemon",
            "subjects": [{"kind": "Group", "name": "daemons"}],
            "verbs": ["get", "list", "watch"],
            "apiGroups": [""],
            # Not serviceaccounts: the daemon may not cache those.
            "resources": ["pods", "configmaps", "secrets"],
        }
    ],
}
ADMIN = {"Authorization": "Bearer admin-token"}


@pytest.fixture
def sim() -> Simulator:
    sim = Simulator(config=SimConfig(policy=Policy.from_mapping(POLICY)))
    for kind, extra in (("configmaps", {"data": {"a": "1"}}), ("serviceaccounts", {})):
        for i in range(3):
            sim.store.create(
                sim.resource(kind),
                {"metadata": {"name": f"x-{i}", "namespace": "default"}, **extra},
            )
    return sim


@pytest.fixture
async def daemon(sim: Simulator) -> AsyncIterator[Daemon]:
    async with SimServer(sim) as server:
        config = DaemonConfig(
            resources=(ResourceConfig(rtype=builtin("pods")),),
            server=ServerSettings(port=0),
            passthrough=PassthroughSettings(auto_cache=True, auto_cache_reads_per_minute=5),
        )
        upstream = UpstreamConfig(
            server=server.url, token_source=TokenSource.static("daemon-token")
        )
        async with Daemon(config, upstream, manage_gc=False) as daemon:
            assert await daemon.wait_ready(10)
            yield daemon


def _callers_lists(sim: Simulator, resource: str) -> int:
    return sum(1 for r in sim.request_log if r.resource == resource and r.user == "admin")


async def test_a_resource_read_often_is_cached_and_then_answered_from_the_cache(
    daemon: Daemon, sim: Simulator
) -> None:
    assert daemon.autocache is not None and daemon.server is not None
    async with httpx.AsyncClient(base_url=daemon.url, headers=ADMIN, timeout=10) as proxy:
        for _ in range(6):
            for path in ("/api/v1/namespaces/default/configmaps", "/api/v1/secrets"):
                assert (await proxy.get(path)).status_code == 200
        await proxy.get("/api/v1/namespaces/default/serviceaccounts/x-0")
        status = (await proxy.get("/status")).json()
        assert status["readUpstream"][:2] == [
            {"resource": "configmaps", "reads": 6, "lastMinute": 6},
            {"resource": "secrets", "reads": 6, "lastMinute": 6},
        ]
        assert {"resource": "serviceaccounts", "reads": 1, "lastMinute": 1} in status[
            "readUpstream"
        ]
        page = (await proxy.get("/", headers={"Accept": "text/html"})).text
        assert "Read upstream, not cached" in page and "<td>configmaps</td><td>6</td>" in page

        await daemon.autocache.step()
        # Cached (never Secrets); syncing it does not make the daemon unready.
        assert daemon.server.auto_cached == {"configmaps"}
        assert daemon.server.ready
        configmaps = builtin("configmaps")
        await until(lambda: daemon.server.resources[configmaps].synced, "configmaps sync")
        forwarded = _callers_lists(sim, "configmaps")
        listed = await proxy.get("/api/v1/namespaces/default/configmaps")
        assert [i["metadata"]["name"] for i in listed.json()["items"]] == ["x-0", "x-1", "x-2"]
        assert _callers_lists(sim, "configmaps") == forwarded  # answered from the cache
        assert (await proxy.get("/status")).json()["autoCached"] == ["configmaps"]

        # Nobody reads it any more: dropped, and its reads pass through again.
        daemon.autocache.options = dataclasses.replace(daemon.autocache.options, idle=0)
        await daemon.autocache.step()
        assert configmaps not in daemon.server.resources
        assert daemon.server.auto_cached == set()
        await proxy.get("/api/v1/namespaces/default/configmaps")
        assert _callers_lists(sim, "configmaps") == forwarded + 1


async def test_a_resource_the_daemon_may_not_list_is_given_up_and_read_upstream(
    daemon: Daemon, sim: Simulator
) -> None:
    assert daemon.autocache is not None and daemon.server is not None
    async with httpx.AsyncClient(base_url=daemon.url, headers=ADMIN, timeout=10) as proxy:
        for _ in range(5):
            assert (await proxy.get("/api/v1/serviceaccounts")).status_code == 200
        await daemon.autocache.step()
        accounts = builtin("serviceaccounts")
        assert daemon.server.auto_cached == {"serviceaccounts"}
        assert daemon.server.ready
        # Until it syncs (it never will: 403), its reads still pass through.
        before = _callers_lists(sim, "serviceaccounts")
        assert (await proxy.get("/api/v1/serviceaccounts")).status_code == 200
        assert _callers_lists(sim, "serviceaccounts") == before + 1
        daemon.autocache.options = dataclasses.replace(daemon.autocache.options, sync_within=0)
        await daemon.autocache.step()
        assert accounts not in daemon.server.resources
        assert any("did not sync" in why for why in daemon.autocache.given_up.values())
        for _ in range(5):
            await proxy.get("/api/v1/serviceaccounts")
        await daemon.autocache.step()
        assert accounts not in daemon.server.resources  # not tried again
