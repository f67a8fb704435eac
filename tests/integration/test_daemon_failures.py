"""Why a resource is not synced, where people look: a list the daemon's identity may not make is a
WARNING naming the resource, upstream's answer and the fix, repeated only when it changes or now
and then; ``/status``, ``/readyz?verbose``, the home page and the 429 of a read say it; the first
success says the streak is over."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import httpx
import pytest

from cacheproxy.daemon.config import ResourceConfig
from cacheproxy.daemon.config.model import DaemonConfig, ServerSettings
from cacheproxy.daemon.runtime import Daemon
from cacheproxy.kube.resources import builtin
from cacheproxy.sim import SimConfig, SimServer, Simulator
from cacheproxy.sim.policy import Policy
from cacheproxy.sim.requestauth import SimAccess
from cacheproxy.upstream import TokenSource, UpstreamConfig
from tests.support import until


def _policy(resources: list[str]) -> Policy:
    return Policy.from_mapping(
        {
            "users": [{"name": "cacheproxy", "token": "daemon-token", "groups": ["daemons"]}],
            "rules": [
                {
                    "subjects": [{"kind": "Group", "name": "daemons"}],
                    "verbs": ["get", "list", "watch"],
                    "apiGroups": [""],
                    "resources": resources,
                }
            ],
        }
    )


@pytest.fixture
def sim() -> Simulator:
    return Simulator(config=SimConfig(policy=_policy(["configmaps"])))  # not pods


@pytest.fixture
async def daemon(sim: Simulator) -> AsyncIterator[Daemon]:
    async with SimServer(sim) as server:
        config = DaemonConfig(
            resources=(
                ResourceConfig(rtype=builtin("pods")),
                ResourceConfig(rtype=builtin("configmaps")),
            ),
            server=ServerSettings(port=0),
        )
        upstream = UpstreamConfig(
            server=server.url, token_source=TokenSource.static("daemon-token")
        )
        async with Daemon(config, upstream, manage_gc=False) as daemon:
            yield daemon


async def test_a_forbidden_resource_says_why_and_what_to_do_everywhere(
    daemon: Daemon, sim: Simulator, caplog: pytest.LogCaptureFixture
) -> None:
    assert daemon.server is not None
    caplog.set_level(logging.INFO, logger="cacheproxy.upstream")
    failures = daemon.server.metrics.failures
    await until(lambda: failures.of("pods") is not None, "the pods list fails")
    configmaps = daemon.server.resources[builtin("configmaps")]
    await until(lambda: configmaps.synced, "configmaps sync")

    # The first list fails as the daemon starts: in the fixture's setup, or in the test.
    def records() -> list[logging.LogRecord]:
        return caplog.get_records("setup") + caplog.records

    warnings = [r for r in records() if r.levelno == logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    message = warnings[0].getMessage()
    assert message.startswith("pods: the API server answered its list with 403: ")
    assert 'cannot list resource "pods"' in message
    assert "cacheproxy rbac --config CONFIG | kubectl apply -f -" in message
    async with httpx.AsyncClient(base_url=daemon.url, timeout=10) as client:
        status = (await client.get("/status")).json()
        error = status["resources"]["pods"]["lastError"]
        assert (error["verb"], error["code"]) == ("list", 403)
        assert "cacheproxy rbac" in error["fix"]
        assert status["resources"]["configmaps"]["lastError"] is None
        ready = await client.get("/readyz?verbose")
        assert ready.status_code == 503
        lines = ready.text.splitlines()
        assert "[+]cache:configmaps ok" in lines
        assert any(line.startswith("[-]cache:pods not synced: list failed: 403 ") for line in lines)
        assert lines[-1] == "readyz check failed"
        read = await client.get("/api/v1/pods")
        assert read.status_code == 429
        assert read.json()["message"].startswith(
            "storage is (re)initializing: pods is not synced yet (list failed: 403 "
        )
        page = (await client.get("/", headers={"Accept": "text/html"})).text
        assert 'class="error">list: 403 ' in page

        # Granted: the next list syncs it, and the log says the streak is over.
        sim.access = SimAccess(_policy(["configmaps", "pods"]))
        pods = builtin("pods")
        await until(
            lambda: daemon.server is not None and daemon.server.resources[pods].synced, "pods sync"
        )
        assert failures.of("pods") is None
        assert any(
            r.getMessage().startswith("pods: the API server answers again (after ")
            for r in caplog.records
        )
        ready = await client.get("/readyz?verbose")
        assert ready.status_code == 200 and ready.text.splitlines()[-1] == "readyz check passed"
    # However long it failed: one WARNING (the next after `repeat` seconds of the same failure).
    assert len([r for r in records() if r.levelno == logging.WARNING]) == 1
