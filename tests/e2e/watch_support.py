"""Reading watch streams in the end-to-end tests: a background reader per stream that collects
events as they come, and waits that end on arrival (with a generous guard, never a timing)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import httpx
import orjson

GUARD = 20.0
"""How long an expected event may take before the test fails (liveness, not speed)."""

Event = dict[str, Any]


class Watch:
    """One open watch: ``events`` fills as they arrive; ``ended`` once the server ended it."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.status = 0
        self.ended = asyncio.Event()
        self._changed = asyncio.Event()

    async def wait_for(self, predicate: Callable[[list[Event]], bool], what: str) -> None:
        """Until ``predicate(events)`` holds (fails after :data:`GUARD` seconds)."""
        try:
            async with asyncio.timeout(GUARD):
                while not predicate(self.events):
                    if self.ended.is_set():
                        raise AssertionError(f"the watch ended before {what}: {self.summary()}")
                    self._changed.clear()
                    await self._changed.wait()
        except TimeoutError:
            raise AssertionError(f"no {what} within {GUARD:g} s: {self.summary()}") from None

    async def wait_named(self, name: str, event_type: str = "") -> Event:
        def seen(events: list[Event]) -> bool:
            return any(_is(e, name, event_type) for e in events)

        await self.wait_for(seen, f"{event_type or 'event'} for {name}")
        return next(e for e in self.events if _is(e, name, event_type))

    def changes(self) -> list[tuple[str, str, str]]:
        """(type, name, resourceVersion) of every event but bookmarks."""
        return [
            (e["type"], e["object"]["metadata"]["name"], e["object"]["metadata"]["resourceVersion"])
            for e in self.events
            if e["type"] != "BOOKMARK"
        ]

    def summary(self) -> list[tuple[str, str]]:
        return [
            (e["type"], e["object"].get("metadata", {}).get("name", "")) for e in self.events[-20:]
        ]

    def _add(self, event: Event) -> None:
        self.events.append(event)
        self._changed.set()

    def _end(self) -> None:
        self.ended.set()
        self._changed.set()


def _is(event: Event, name: str, event_type: str) -> bool:
    return event["object"].get("metadata", {}).get("name") == name and (
        not event_type or event["type"] == event_type
    )


@contextlib.asynccontextmanager
async def watching(
    client: httpx.AsyncClient,
    path: str,
    params: Mapping[str, str],
    *,
    headers: Mapping[str, str] | None = None,
) -> AsyncIterator[Watch]:
    """A watch on ``path`` read in the background for as long as the block runs."""
    watch = Watch()
    started = asyncio.Event()

    async def read() -> None:
        try:
            async with client.stream(
                "GET", path, params={"watch": "1", **params}, headers=headers, timeout=None
            ) as response:
                watch.status = response.status_code
                started.set()
                async for line in response.aiter_lines():
                    if line:
                        watch._add(orjson.loads(line))
        finally:
            started.set()
            watch._end()

    task = asyncio.create_task(read(), name=f"watch {path}")
    try:
        await asyncio.wait_for(started.wait(), GUARD)
        yield watch
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, httpx.HTTPError):
            await task
