"""Shared fixtures: a simulator served on 127.0.0.1 with port 0, and an HTTP client for it."""

from __future__ import annotations

import asyncio
import gc
import os
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from cacheproxy.envtest import ASSETS_ENV, ASSETS_HINT, Assets, find_all_assets
from cacheproxy.sim import SimServer, Simulator
from cacheproxy.sim.workload import DemoSpec, demo_objects
from tests.support import serving

SAMPLES = Path(__file__).resolve().parents[2] / "shared" / "k8s-samples"
ENVTEST_ROOT = Path(__file__).resolve().parents[2] / "shared" / "envtest"
"""Where the real API servers are when ``$KUBEBUILDER_ASSETS`` is not set: ``../shared/envtest``
(1.28) and the folders in it (``1.32/``, ``1.36/``)."""
VERSIONS_ENV = "CACHEPROXY_ENVTEST_VERSIONS"
"""Picks the servers to test against by version (``1.36``, ``1.28,1.32``; ``all``: every one
found), each for every test; unset: every server ``$KUBEBUILDER_ASSETS`` names, else those of
:data:`SUITE_VERSIONS` found in ``../shared/envtest`` (and :data:`PARTIAL_VERSIONS` for their
tests)."""
SUITE_VERSIONS = ("1.28", "1.36")
"""The servers the suite runs on unless told otherwise: the oldest supported and the newest.
``.ci/run`` requires exactly these (a unit test keeps the two equal); a server found beside them
(a newer one being brought up) runs only on request (``make e2e KUBE=1.37``)."""
PARTIAL_VERSIONS = ("1.32",)
"""Servers between those that the suite runs only the tests marked ``also_on(version)`` on:
where that version behaves unlike both its neighbours (1.32: the watch-list's list blueprint,
only a first page's continue key rooted, its Table columns, the simulator's 1.32 preset).
Required wherever the suite's servers are (CI)."""
REQUIRE_ENV = "CACHEPROXY_REQUIRE_ENVTEST"
"""Set (CI): a missing server fails the run instead of leaving its tests out. ``1`` requires one
server; a list of versions (``1.28,1.32``) requires each of them."""


def _asked() -> str:
    return os.environ.get(VERSIONS_ENV, "").strip()


def _chosen_servers() -> list[Assets]:
    found = find_all_assets(ENVTEST_ROOT)
    asked = _asked()
    if asked == "all" or (not asked and ASSETS_ENV in os.environ):
        return found
    wanted = [v.strip() for v in asked.split(",") if v.strip()] or list(SUITE_VERSIONS)
    return [a for a in found if a.version in wanted]


def _partial_servers() -> list[Assets]:
    """The servers of :data:`PARTIAL_VERSIONS` for their tests, when the servers are not picked
    by hand (nor by ``$KUBEBUILDER_ASSETS``)."""
    if _asked() or ASSETS_ENV in os.environ:
        return []
    chosen = {a.version for a in ENVTEST_SERVERS}
    return [
        a
        for a in find_all_assets(ENVTEST_ROOT)
        if a.version in PARTIAL_VERSIONS and a.version not in chosen
    ]


def required_versions() -> list[str]:
    """The server versions CI requires (``$CACHEPROXY_REQUIRE_ENVTEST``, and with the suite's
    servers those of :data:`PARTIAL_VERSIONS`) that were not found; ``[""]`` when any server is
    required and none was found."""
    required = os.environ.get(REQUIRE_ENV, "").strip()
    if not required:
        return []
    have = {a.version for a in [*ENVTEST_SERVERS, *ENVTEST_PARTIAL]}
    listed = [v.strip() for v in required.split(",") if "." in v]
    if not listed:
        return [] if have else [""]
    if set(SUITE_VERSIONS) <= set(listed) and not _asked() and ASSETS_ENV not in os.environ:
        listed += [v for v in PARTIAL_VERSIONS if v not in listed]
    return [v for v in listed if v not in have]


ENVTEST_SERVERS: list[Assets] = _chosen_servers()
"""The real kube-apiservers of tests/e2e, oldest first (``$KUBEBUILDER_ASSETS``, else
``../shared/envtest`` and its folders; ``$CACHEPROXY_ENVTEST_VERSIONS`` picks among them)."""
ENVTEST_ASSETS: Assets | None = ENVTEST_SERVERS[0] if ENVTEST_SERVERS else None
"""The oldest of them: the server of the tests that run against one."""
ENVTEST_PARTIAL: list[Assets] = _partial_servers()
"""The servers of :data:`PARTIAL_VERSIONS` found, for the tests marked ``also_on`` them."""


@pytest.fixture
def samples_dir() -> Path:
    """The real API server's responses (``../shared/k8s-samples`` beside the repository)."""
    if not SAMPLES.is_dir():
        pytest.fail(f"the API server samples are missing: {SAMPLES}")
    return SAMPLES


@pytest.fixture
def sim() -> Simulator:
    return Simulator()


@pytest.fixture
def demo_sim() -> Simulator:
    """A simulator holding the demo data: 3 namespaces, 5 nodes, 4 apps, 60 pods."""
    sim = Simulator()
    sim.load(demo_objects(DemoSpec()))
    return sim


@pytest.fixture
async def _sim_serving(sim: Simulator) -> AsyncIterator[tuple[SimServer, httpx.AsyncClient]]:
    async with serving(sim) as both:
        yield both


@pytest.fixture
async def _demo_serving(demo_sim: Simulator) -> AsyncIterator[tuple[SimServer, httpx.AsyncClient]]:
    async with serving(demo_sim) as both:
        yield both


@pytest.fixture
def sim_server(_sim_serving: tuple[SimServer, httpx.AsyncClient]) -> SimServer:
    return _sim_serving[0]


@pytest.fixture
def client(_sim_serving: tuple[SimServer, httpx.AsyncClient]) -> httpx.AsyncClient:
    return _sim_serving[1]


@pytest.fixture
def demo_server(_demo_serving: tuple[SimServer, httpx.AsyncClient]) -> SimServer:
    return _demo_serving[0]


@pytest.fixture
def demo_client(_demo_serving: tuple[SimServer, httpx.AsyncClient]) -> httpx.AsyncClient:
    return _demo_serving[1]


@pytest.fixture(autouse=True)
async def _no_leaked_tasks() -> AsyncIterator[None]:
    """Fail a test that leaves asyncio tasks running behind it (each long-lived task has an
    owner that must stop it)."""
    before = asyncio.all_tasks()
    yield
    await asyncio.sleep(0)
    leaked = [
        t for t in asyncio.all_tasks() - before if not t.done() and t is not asyncio.current_task()
    ]
    if leaked:
        for t in leaked:
            t.cancel()
        pytest.fail(f"test leaked asyncio tasks: {[t.get_name() for t in leaked]}")


@pytest.fixture(autouse=True, scope="module")
def _no_leaked_sockets() -> Iterator[None]:
    """Collect the garbage a module's tests left, while the module is still the one running: a
    socket or transport a test dropped unclosed is reported (ResourceWarning, an error here)
    against the module that leaked it, not against whichever later test the collector happened
    to run in."""
    yield
    gc.collect()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One line saying how many tests ran against each real kube-apiserver (or why none did)."""
    counts: dict[str, dict[str, int]] = {}
    for outcome in ("passed", "failed", "error", "skipped"):
        for report in terminalreporter.stats.get(outcome, []):
            if "envtest" not in getattr(report, "keywords", {}):
                continue
            if report.when != "call" and outcome == "passed":
                continue
            server = _server_of(report.nodeid)
            by_outcome = counts.setdefault(server, {})
            by_outcome[outcome] = by_outcome.get(outcome, 0) + 1
    if counts:
        summary = "; ".join(
            f"{server}: " + ", ".join(f"{n} {outcome}" for outcome, n in by_outcome.items())
            for server, by_outcome in sorted(counts.items())
        )
        terminalreporter.write_line(f"real kube-apiserver tests: {summary}", bold=True)
    elif ENVTEST_ASSETS is None:
        terminalreporter.write_line(
            f"real kube-apiserver tests: none ran: {ASSETS_HINT}", bold=True, yellow=True
        )


def _server_of(nodeid: str) -> str:
    """The server version a test ran against, from its id (``[kube1.32]``, ``[…-kube1.32]``);
    a test of one server without the parameter ran against the oldest."""
    found = re.search(r"kube(\d+\.\d+)", nodeid.rpartition("[")[2])
    if found:
        return found[1]
    return ENVTEST_ASSETS.version if ENVTEST_ASSETS is not None else "?"
