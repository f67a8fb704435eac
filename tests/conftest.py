"""Shared fixtures: a simulator served on 127.0.0.1 with port 0, and an HTTP client for it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from cacheproxy.sim import SimServer, Simulator
from cacheproxy.sim.workload import DemoSpec, demo_objects

SAMPLES = Path(__file__).resolve().parents[2] / "shared" / "k8s-samples"


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
async def sim_server(sim: Simulator) -> AsyncIterator[SimServer]:
    async with SimServer(sim) as server:
        yield server


@pytest.fixture
async def demo_server(demo_sim: Simulator) -> AsyncIterator[SimServer]:
    async with SimServer(demo_sim) as server:
        yield server


@pytest.fixture
async def client(sim_server: SimServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=sim_server.url, timeout=10) as c:
        yield c


@pytest.fixture
async def demo_client(demo_server: SimServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=demo_server.url, timeout=10) as c:
        yield c


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
