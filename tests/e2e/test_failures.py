"""Why a resource is not synced, against the real API server: a kubeconfig whose user may not list
what is configured (pods cluster-wide: the reader may read one namespace), and a custom resource whose CRD is not installed, are each a WARNING naming
the fix, and ``/status`` and ``/readyz?verbose`` say why; ``check-config --live`` checks each
resource and exits non-zero naming each problem."""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path

import httpx
import pytest

from cacheproxy.daemon.config import load_config, resolve_upstream
from cacheproxy.daemon.runtime import Daemon
from cacheproxy.envtest import Cluster
from tests.e2e.support import write_config
from tests.support import until

pytestmark = pytest.mark.every_server

RESOURCES = [
    "pods",
    # In the namespace the reader may read everything of: the API server's 404, not its 403.
    {
        "resource": "nothing.cacheproxy.test/v1/nothings",
        "kind": "Nothing",
        "namespaced": True,
        "namespace": "team-a",
    },
]


async def test_a_forbidden_list_and_a_missing_crd_say_why_and_what_to_do(
    cluster: Cluster, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="cacheproxy.upstream")
    path = write_config(tmp_path, cluster, resources=RESOURCES, user="reader")
    config = load_config(path, env={})
    async with Daemon(config, resolve_upstream(config.upstream), manage_gc=False) as daemon:
        assert daemon.server is not None
        failures = daemon.server.metrics.failures
        await until(
            lambda: (
                None
                not in (failures.of("pods"), failures.of("nothing.cacheproxy.test/v1/nothings"))
            ),
            "both lists fail",
            within=60,
        )
        async with httpx.AsyncClient(base_url=daemon.url, timeout=10) as client:
            resources = (await client.get("/status")).json()["resources"]
            verbose = await client.get("/readyz?verbose")
    pods, nothings = (
        resources["pods"]["lastError"],
        resources["nothing.cacheproxy.test/v1/nothings"]["lastError"],
    )
    assert (pods["verb"], pods["code"]) == ("list", 403)
    assert 'User "reader" cannot list resource "pods"' in pods["message"]
    assert "cacheproxy rbac" in pods["fix"]
    assert nothings["code"] == 404 and "CustomResourceDefinition installed" in nothings["fix"]
    assert verbose.status_code == 503
    lines = verbose.text.splitlines()
    assert any(line.startswith("[-]cache:pods not synced: list failed: 403 ") for line in lines)
    assert any(
        line.startswith(
            "[-]cache:nothing.cacheproxy.test/v1/nothings not synced: list failed: 404 "
        )
        for line in lines
    )
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(m.startswith("pods: the API server answered its list with 403") for m in warned)
    assert any("CustomResourceDefinition installed" in m for m in warned)


async def test_check_config_live_checks_every_resource_and_names_each_problem(
    cluster: Cluster, tmp_path: Path
) -> None:
    resources = [*RESOURCES, {"resource": "configmaps", "namespace": "team-a"}]
    outcomes = {}
    for user in ("reader", "admin"):
        (tmp_path / user).mkdir()
        path = write_config(tmp_path / user, cluster, resources=resources, user=user)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "cacheproxy", "check-config", "--config", str(path), "--live",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(), 120)
        outcomes[user] = (proc.returncode, (out + err).decode().splitlines())
    code, lines = outcomes["reader"]
    assert code == 1, lines
    assert any(
        line.startswith("FAIL pods: list: 403 ") and "cacheproxy rbac" in line for line in lines
    )
    assert any(
        line.startswith(
            "FAIL nothing.cacheproxy.test/v1/nothings: upstream serves no API group version"
        )
        for line in lines
    )
    assert any(
        line.startswith("ok   configmaps: ConfigMap, namespaced, listed (") for line in lines
    )
    assert "2 of 3 checks against upstream failed" in lines
    code, lines = outcomes["admin"]
    assert code == 1  # the CRD is not installed for anyone
    assert any(line.startswith("ok   pods: Pod, namespaced, listed (") for line in lines), lines
    assert "1 of 3 checks against upstream failed" in lines
