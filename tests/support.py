"""Test support shared by the suites: a simulator served on 127.0.0.1 (port 0) with a client, and
a poll for conditions on state that announces nothing."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

import httpx

from cacheproxy.sim import SimServer, Simulator


@contextlib.asynccontextmanager
async def serving(sim: Simulator) -> AsyncIterator[tuple[SimServer, httpx.AsyncClient]]:
    """``sim`` served on a free loopback port, and an HTTP client for it; both closed after."""
    async with SimServer(sim) as server, httpx.AsyncClient(base_url=server.url, timeout=10) as c:
        yield server, c


async def until(
    predicate: Callable[[], bool], what: str = "the condition holds", *, within: float = 10.0
) -> None:
    """Poll ``predicate`` until it holds; fail after ``within`` seconds (a guard, not a timing)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        await asyncio.sleep(0.005)
