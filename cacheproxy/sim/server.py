"""Serving the simulator: uvicorn on a socket we bind ourselves (port 0 in tests), optional TLS
with client certificates, and a restart that drops every connection but keeps the state.

``SimServer`` is the one helper tests and the CLI use to start and stop a simulator::

    async with SimServer(Simulator()) as server:
        ... server.url ...
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from types import TracebackType
from typing import Any

import uvicorn

from cacheproxy.serving import ServingProtocol, UvicornRunner
from cacheproxy.sim.simulator import Simulator
from cacheproxy.sim.testpki import TestPKI
from cacheproxy.tasks import cancel_and_wait

__all__ = ["SimServer"]

log = logging.getLogger(__name__)


class SimServer:
    """Runs a :class:`Simulator` on ``host:port`` (port 0 picks a free one) in the running loop."""

    def __init__(
        self,
        sim: Simulator,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        pki: TestPKI | None = None,
        require_client_cert: bool = False,
    ) -> None:
        self.sim = sim
        self.host = host
        self.port = port
        self.pki = pki
        self.require_client_cert = require_client_cert
        self._runner: UvicornRunner | None = None
        self._restarting: asyncio.Task[None] | None = None
        self._maintenance: asyncio.Task[None] | None = None
        self.restarts = 0
        sim.on_restart = self.request_restart

    @property
    def scheme(self) -> str:
        return "https" if self.pki else "http"

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    def _config(self) -> uvicorn.Config:
        kwargs: dict[str, Any] = {}
        if self.pki is not None:
            kwargs.update(
                ssl_certfile=str(self.pki.server_cert),
                ssl_keyfile=str(self.pki.server_key),
                ssl_ca_certs=str(self.pki.ca_cert),
                ssl_cert_reqs=ssl.CERT_REQUIRED if self.require_client_cert else ssl.CERT_OPTIONAL,
            )
        return uvicorn.Config(
            self.sim,
            http=ServingProtocol,
            lifespan="off",
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=1,
            timeout_keep_alive=30,
            **kwargs,
        )

    async def start(self) -> None:
        self.sim.stopping = False
        runner = UvicornRunner(self._config(), host=self.host, port=self.port, name="sim-server")
        self._runner = runner
        await runner.start()
        self.port = runner.port
        self.sim.server_address = f"{self.host}:{self.port}"
        self._maintenance = asyncio.get_running_loop().create_task(
            self.sim.maintain(), name="sim-maintenance"
        )

    @property
    def started(self) -> bool:
        return self._runner is not None and self._runner.running

    async def stop(self) -> None:
        """Stop listening, close every watch and drop every connection (in that order, so a
        client that re-watches at once finds the port closed, not a server going away)."""
        if self._runner is not None:
            self._runner.stop_listening()
        self.sim.stopping = True  # no new watch from here on
        self.sim.end_watches()
        if self._runner is not None:
            await self._runner.stop()
        self._runner = None
        if self._maintenance is not None:
            await cancel_and_wait(self._maintenance)
            self._maintenance = None

    async def restart(self) -> None:
        """Like an API server restart: all connections dropped, the watch caches' history lost
        (watches from old RVs → 410), objects, RVs and the storage's history kept; listening
        again on the same port."""
        await self.stop()
        self.sim.reset_watch_caches()
        self.restarts += 1
        await self.start()

    def request_restart(self) -> None:
        """Schedule :meth:`restart` (used by the ``/_sim/restart`` control path)."""
        self._restarting = asyncio.get_running_loop().create_task(
            self.restart(), name="sim-restart"
        )

    async def __aenter__(self) -> SimServer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()
