"""Shared fixtures: a simulator served on 127.0.0.1 with port 0, and an HTTP client for it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from cacheproxy.envtest import ASSETS_HINT, find_assets
from cacheproxy.sim import SimServer, Simulator
from cacheproxy.sim.workload import DemoSpec, demo_objects
from tests.support import serving

SAMPLES = Path(__file__).resolve().parents[2] / "shared" / "k8s-samples"
ENVTEST_ASSETS = find_assets(Path(__file__).resolve().parents[2] / "shared" / "envtest")
"""The real kube-apiserver of tests/e2e ($KUBEBUILDER_ASSETS, else ../shared/envtest)."""


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


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One line saying how many tests ran against a real kube-apiserver (or why none did)."""
    counts: dict[str, int] = {}
    for outcome in ("passed", "failed", "error", "skipped"):
        for report in terminalreporter.stats.get(outcome, []):
            if "envtest" not in getattr(report, "keywords", {}):
                continue
            if report.when != "call" and outcome == "passed":
                continue
            counts[outcome] = counts.get(outcome, 0) + 1
    if counts:
        summary = ", ".join(f"{n} {outcome}" for outcome, n in counts.items())
        terminalreporter.write_line(f"real kube-apiserver tests: {summary}", bold=True)
    elif ENVTEST_ASSETS is None:
        terminalreporter.write_line(
            f"real kube-apiserver tests: none ran: {ASSETS_HINT}", bold=True, yellow=True
        )
