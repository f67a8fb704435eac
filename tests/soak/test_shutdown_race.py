"""Regression tests for a race the soak found: a watch that starts while a server stops.

``Daemon.stop`` and ``SimServer.stop`` stop listening, close the open watches, then ask uvicorn to
exit; uvicorn keeps serving kept-alive connections until its shutdown reaches them (it polls every
0.1 s). A client that re-watched at once (every informer does) used to open a watch nobody closed:
the stop then waited the whole graceful timeout and uvicorn cancelled the request with ERROR logs.
Both servers now refuse a watch once they are stopping (503 with Retry-After before the stream
starts; a stream that started meanwhile ends at once).

The reproductions make the race certain: the late watch asks for an RV one past the server's, so
it waits (before registering) until a write made right after the stop began.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

import httpx

from cacheproxy.daemon.config import DaemonConfig, ResourceConfig, ServerSettings
from cacheproxy.daemon.runtime import Daemon
from cacheproxy.kube.resources import builtin
from cacheproxy.sim import SimServer, Simulator
from cacheproxy.upstream import UpstreamConfig

CONFIGMAPS = builtin("configmaps")


class _Errors(logging.Handler):
    """ERROR records of uvicorn's loggers (they do not propagate to the root logger)."""

    def __init__(self) -> None:
        super().__init__(level=logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextlib.asynccontextmanager
async def _uvicorn_errors() -> AsyncIterator[_Errors]:
    handler = _Errors()
    logger = logging.getLogger("uvicorn")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


async def _watch_until_closed(http: httpx.AsyncClient, url: str) -> None:
    with contextlib.suppress(httpx.TransportError):
        async with http.stream("GET", url) as resp:
            async for _ in resp.aiter_bytes():
                pass


def _configmap(name: str) -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": "default"}, "data": {"k": "v"}}


async def _stop_with_a_late_watch(stop: asyncio.Task[None], watch: asyncio.Task[None]) -> float:
    loop = asyncio.get_running_loop()
    began = loop.time()
    await stop
    took = loop.time() - began
    await asyncio.wait_for(watch, 10)
    return took


async def test_daemon_stop_ends_a_watch_that_started_while_it_was_stopping() -> None:
    sim = Simulator()
    async with SimServer(sim) as server, httpx.AsyncClient(timeout=10) as http:
        config = DaemonConfig(
            resources=(ResourceConfig(rtype=CONFIGMAPS),), server=ServerSettings(port=0)
        )
        daemon = Daemon(config, UpstreamConfig(server=server.url), manage_gc=False)
        await daemon.start()
        try:
            assert await daemon.wait_ready(10)
            async with _uvicorn_errors() as errors:
                late = f"{daemon.url}/api/v1/configmaps?watch=1&resourceVersion={sim.store.rv + 1}"
                watch = asyncio.create_task(_watch_until_closed(http, late))
                await asyncio.sleep(0.2)  # the watch waits for the cache to reach its RV
                stop = asyncio.create_task(daemon.stop())
                await asyncio.sleep(0)  # draining, not listening, open watches closed
                sim.store.create(CONFIGMAPS, _configmap("late"))  # the late watch starts now
                took = await _stop_with_a_late_watch(stop, watch)
            assert errors.messages == []
            assert took < 2.0, f"the daemon took {took:.1f} s to stop"
        finally:
            await daemon.stop()


async def test_simulator_stop_ends_a_watch_that_started_while_it_was_stopping() -> None:
    sim = Simulator()
    server = SimServer(sim)
    await server.start()
    try:
        async with httpx.AsyncClient(timeout=10) as http, _uvicorn_errors() as errors:
            late = f"{server.url}/api/v1/configmaps?watch=1&resourceVersion={sim.store.rv + 1}"
            watch = asyncio.create_task(_watch_until_closed(http, late))
            await asyncio.sleep(0.2)  # the watch waits for the store to reach its RV
            stop = asyncio.create_task(server.stop())
            await asyncio.sleep(0)  # not listening, open watches ended
            sim.store.create(CONFIGMAPS, _configmap("late"))  # the late watch starts now
            took = await _stop_with_a_late_watch(stop, watch)
        assert errors.messages == []
        assert took < 0.5, f"the simulator took {took:.1f} s to stop"
    finally:
        await server.stop()
