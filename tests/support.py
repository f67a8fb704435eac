"""Test support shared by the suites: a simulator served on 127.0.0.1 (port 0) with a client."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import httpx

from cacheproxy.sim import SimServer, Simulator


@contextlib.asynccontextmanager
async def serving(sim: Simulator) -> AsyncIterator[tuple[SimServer, httpx.AsyncClient]]:
    """``sim`` served on a free loopback port, and an HTTP client for it; both closed after."""
    async with SimServer(sim) as server, httpx.AsyncClient(base_url=server.url, timeout=10) as c:
        yield server, c
