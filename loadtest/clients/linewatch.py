"""A ListerWatcher that replays pre-encoded watch lines, parsing each one as the real one does.

:class:`LineListerWatcher` stands in for ``cacheproxy.upstream.ApiListerWatcher`` without the
network: its watch yields a :class:`WatchEvent` per line, from ``orjson.loads`` of the line done
inside the iterator (and timed, in ``parse_seconds``), so a benchmark through the informer pays
for the parse as it would in production.

The first watch-list (``sendInitialEvents=true``) gets the initial ``ADDED`` lines and the
initial-events-end bookmark; the same stream then waits for :meth:`release_updates` and goes on
with the update lines; after them, and on every other watch, it stays open and quiet until
cancelled (a healthy watch with nothing to say). Every ``chunk_events`` lines the iterator yields
to the event loop once, as a real stream does between two reads of the socket (~64 KB of pod
events). ``list`` serves the initial objects in pages, for informers configured without
watch-lists.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import orjson

from cacheproxy.informer import Decode, ListPage, ListRequest, WatchEvent, WatchRequest, as_parsed

__all__ = ["LineListerWatcher"]


class LineListerWatcher:
    """Replays ``initial`` + ``initial_end`` on the first watch-list, then ``updates`` on release."""

    def __init__(
        self,
        *,
        initial: Sequence[bytes],
        initial_end: bytes,
        updates: Sequence[bytes] = (),
        chunk_events: int = 8,
    ) -> None:
        self.initial = initial
        self.initial_end = initial_end
        self.updates = updates
        self.chunk_events = max(1, chunk_events)
        self.parse_seconds = 0.0
        """Time spent in ``orjson.loads`` of watch lines (part of the caller's wall time)."""
        self.lines_parsed = 0
        self.watches = 0
        self.lists = 0
        self._release = asyncio.Event()
        self._initial_sent = False
        self.updates_sent = asyncio.Event()
        """Set once the last update line was handed to the watcher."""

    def release_updates(self) -> None:
        self._release.set()

    def reset_counters(self) -> None:
        self.parse_seconds = 0.0
        self.lines_parsed = 0

    # ------------------------------------------------------------------ ListerWatcher

    async def list(self, request: ListRequest, *, decode: Decode = as_parsed) -> ListPage:
        self.lists += 1
        start = int(request.continue_token or 0)
        stop = len(self.initial) if request.limit <= 0 else start + request.limit
        items = [decode(self._parse(line).object) for line in self.initial[start:stop]]
        more = str(stop) if stop < len(self.initial) else ""
        rv = self._parse(self.initial_end).resource_version
        return ListPage(items=items, resource_version=rv, continue_token=more)

    @asynccontextmanager
    async def watch(self, request: WatchRequest) -> AsyncIterator[AsyncIterator[WatchEvent]]:
        self.watches += 1
        events = self._events(request)
        try:
            yield events
        finally:
            await events.aclose()

    # ------------------------------------------------------------------ internals

    async def _events(self, request: WatchRequest) -> AsyncGenerator[WatchEvent, None]:
        if request.send_initial_events and not self._initial_sent:
            self._initial_sent = True
            async for event in self._replay(self.initial):
                yield event
            yield self._parse(self.initial_end)
            await self._release.wait()
            async for event in self._replay(self.updates):
                yield event
            self.updates_sent.set()
        await asyncio.Event().wait()  # open and quiet until cancelled

    async def _replay(self, lines: Sequence[bytes]) -> AsyncGenerator[WatchEvent, None]:
        chunk = self.chunk_events
        for i, line in enumerate(lines, 1):
            yield self._parse(line)
            if i % chunk == 0:
                await asyncio.sleep(0)

    def _parse(self, line: bytes) -> WatchEvent:
        started = time.perf_counter()
        event: dict[str, Any] = orjson.loads(line)
        self.parse_seconds += time.perf_counter() - started
        self.lines_parsed += 1
        return WatchEvent(event["type"], event["object"])
