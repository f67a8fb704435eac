"""Reloading the configuration while serving: on SIGHUP, and when the config file changes.

Each trigger reads the file again (with the same environment and flag overrides) and hands the
result to :meth:`Daemon.reload`, which applies resource changes and logs what would need a
restart. A file that does not load is logged as an error and changes nothing. Changes are
noticed by polling the file's modification time (a ConfigMap update replaces the mounted file
atomically, which any watch mechanism would see the same way) — every ``interval`` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

from cacheproxy.daemon.config import DaemonConfig
from cacheproxy.errors import ConfigError
from cacheproxy.serving import file_stamp
from cacheproxy.tasks import cancel_and_wait

__all__ = ["ConfigReloader"]

log = logging.getLogger("cacheproxy.daemon")


class ConfigReloader:
    """Runs ``apply(load())`` when asked (:meth:`request`) or when ``path`` changes."""

    def __init__(
        self,
        path: Path | None,
        load: Callable[[], DaemonConfig],
        apply: Callable[[DaemonConfig], Awaitable[object]],
        *,
        interval: float = 2.0,
    ) -> None:
        self.path = path
        self._load = load
        self._apply = apply
        self.interval = interval
        self.reloads = 0
        self._wake = asyncio.Event()
        self._seen = self._stamp()
        self._task: asyncio.Task[None] | None = None

    def _stamp(self) -> tuple[float, ...] | None:
        return file_stamp(self.path) if self.path is not None else None

    def request(self) -> None:
        """Reload now (the SIGHUP handler)."""
        self._wake.set()

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="config-reloader")

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.interval)
            asked = self._wake.is_set()
            self._wake.clear()
            stamp = self._stamp()
            if not asked and (stamp is None or stamp == self._seen):
                continue
            self._seen = stamp
            await self.reload("SIGHUP" if asked else f"{self.path} changed")

    async def reload(self, why: str) -> None:
        log.info("reloading the configuration (%s)", why)
        try:
            await self._apply(self._load())
        except ConfigError as err:
            log.error("config reload failed; keeping the current configuration: %s", err)
            return
        self.reloads += 1

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None
