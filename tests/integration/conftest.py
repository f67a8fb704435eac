"""Fixtures the daemon's integration tests share: the daemon in its default configuration in
front of the demo simulator (and the read-only one: pass-through off), a client of it, and each
pinned kubectl (oldest and newest). A module that needs another daemon defines its own
``daemon``."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from cacheproxy.daemon.runtime import Daemon
from cacheproxy.sim import SimServer
from tests.integration.clients import KUBECTL_VERSIONS, kubectl_binary
from tests.integration.daemon_support import daemon_for


@pytest.fixture
async def daemon(demo_server: SimServer) -> AsyncIterator[Daemon]:
    async with daemon_for(demo_server.url) as d:
        yield d


@pytest.fixture
async def read_only_daemon(demo_server: SimServer) -> AsyncIterator[Daemon]:
    """The daemon with pass-through off: what the cache does not answer is refused."""
    async with daemon_for(demo_server.url, passthrough=False) as d:
        yield d


@pytest.fixture
async def proxy(daemon: Daemon) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=daemon.url, timeout=10) as c:
        yield c


@pytest.fixture
async def both(
    daemon: Daemon, demo_server: SimServer
) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient]]:
    """A client of the daemon and one of the simulator behind it."""
    async with (
        httpx.AsyncClient(base_url=daemon.url, timeout=10) as proxy,
        httpx.AsyncClient(base_url=demo_server.url, timeout=10) as upstream,
    ):
        yield proxy, upstream


@pytest.fixture(params=KUBECTL_VERSIONS)
def kubectl(request: pytest.FixtureRequest) -> str:
    return kubectl_binary(request.param)
