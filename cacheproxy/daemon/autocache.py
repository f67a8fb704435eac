"""``passthrough.autoCache``: resources read through pass-through often enough get an informer of
their own, and are dropped again once nobody reads them.

Every ``interval`` seconds :meth:`AutoCache.step` looks at pass-through's tally of forwarded reads
(:class:`~cacheproxy.server.forwarded.ReadTally`):

- a resource read at least ``reads_per_minute`` times in the last minute, not served, not
  given up before, and not a Secret, is asked about in upstream's discovery (kind, scope, and
  whether it may be listed and watched); if it may, it is served as a resource configured with
  the default settings would be (up to ``max_resources`` at once). Until its first sync its
  reads still pass through, and it does not count for readiness;
- one that has not synced ``sync_within`` seconds after it was started (the daemon's own RBAC
  does not allow it, say) is given up: dropped, and not tried again;
- one nobody read for ``idle`` seconds is dropped: its reads pass through again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

import httpx

from cacheproxy.daemon.config import ResourceConfig
from cacheproxy.errors import CacheProxyError
from cacheproxy.kube.resources import GroupVersion, ResourceType
from cacheproxy.server.app import CacheServer
from cacheproxy.server.forwarded import AutoCacheOptions, ReadTally, UpstreamRead
from cacheproxy.tasks import cancel_and_wait
from cacheproxy.upstream.resourcediscovery import resource_types

__all__ = ["NEVER", "AutoCache"]

log = logging.getLogger("cacheproxy.daemon")

NEVER = frozenset({("", "secrets")})
"""(group, resource) never cached unasked: Secrets (once cached, the daemon answers reads of them
itself; configure them knowingly)."""


class Serving(Protocol):
    """What the daemon does for :class:`AutoCache`."""

    def start_serving(self, spec: ResourceConfig) -> object: ...

    def stop_serving(self, spec: ResourceConfig) -> Awaitable[None]: ...


@dataclass(slots=True)
class _Cached:
    spec: ResourceConfig
    read: UpstreamRead
    since: float


class AutoCache:
    """See the module. ``client``: the daemon's own upstream client (for discovery)."""

    def __init__(
        self,
        daemon: Serving,
        server: CacheServer,
        tally: ReadTally,
        client: httpx.AsyncClient,
        options: AutoCacheOptions,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._daemon = daemon
        self._server = server
        self._tally = tally
        self._client = client
        self.options = options
        self._clock = clock
        self.cached: dict[ResourceType, _Cached] = {}
        self.given_up: dict[UpstreamRead, str] = {}
        """Resources not cached, and why (not listable, never synced): not tried again."""
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="auto-cache")

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.options.interval)
            try:
                await self.step()
            except CacheProxyError as exc:
                log.warning("passthrough.autoCache: %s", exc)

    def release(self, rtype: ResourceType) -> bool:
        """Forget ``rtype`` without stopping it (a configuration now serves it). Whether it was
        one of ours."""
        entry = self.cached.pop(rtype, None)
        self._server.auto_cached.discard(rtype.config_name)
        return entry is not None

    async def step(self) -> None:
        """Drop what is idle or never synced, then cache what is read often."""
        now = self._clock()
        for rtype, entry in list(self.cached.items()):
            res = self._server.resources.get(rtype)
            name = rtype.config_name
            if res is None:
                self.release(rtype)
            elif not res.synced and now - entry.since > self.options.sync_within:
                why = f"did not sync within {self.options.sync_within:g}s ({res.informer.reflector.phase.value})"
                log.warning("passthrough.autoCache: giving up %s: %s", name, why)
                self.given_up[entry.read] = why
                await self._drop(rtype, entry)
            elif res.synced and now - max(res.last_read, entry.since) > self.options.idle:
                log.info(
                    "passthrough.autoCache: dropping %s: not read for %gs",
                    name,
                    self.options.idle,
                )
                await self._drop(rtype, entry)
        served = {(t.group, t.version, t.resource) for t in self._server.resources}
        for read in self._tally.hot(self.options.reads_per_minute):
            if len(self.cached) >= self.options.max_resources:
                break
            if (
                (read.group, read.version, read.resource) in served
                or (read.group, read.resource) in NEVER
                or read in self.given_up
            ):
                continue
            found = await self._describe(read)
            if found is None:
                continue
            reads = self._tally.recent(read)
            spec = ResourceConfig(rtype=found)
            self._server.auto_cached.add(found.config_name)
            self._daemon.start_serving(spec)
            self.cached[found] = _Cached(spec, read, since=now)
            self._tally.forget(read)
            log.info(
                "passthrough.autoCache: caching %s (read %d times in the last minute through "
                "pass-through; dropped again after %gs without a read)",
                found.config_name,
                reads,
                self.options.idle,
            )

    async def _describe(self, read: UpstreamRead) -> ResourceType | None:
        """``read``'s type as upstream's discovery describes it, if it may be listed and watched
        (else None, and it is given up)."""
        try:
            types = await resource_types(
                self._client, GroupVersion(read.group, read.version), verbs=("list", "watch")
            )
        except CacheProxyError as exc:
            log.debug("passthrough.autoCache: discovery of %s: %s", read.config_name, exc)
            return None  # asked again next time
        found = next((t for t in types if t.resource == read.resource), None)
        if found is None:
            self.given_up[read] = "upstream's discovery does not let it be listed and watched"
            log.info(
                "passthrough.autoCache: not caching %s: %s", read.config_name, self.given_up[read]
            )
        return found

    async def _drop(self, rtype: ResourceType, entry: _Cached) -> None:
        self.release(rtype)
        try:
            await self._daemon.stop_serving(entry.spec)
        except Exception:  # the informer is stopping anyway; keep the loop going
            log.exception("passthrough.autoCache: stopping %s", rtype.config_name)
