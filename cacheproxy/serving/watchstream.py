"""A watch response from its first line to its end: what both servers' watches are made of.

- :class:`Mailbox`: a watcher's bounded buffer, in items and (when given sizes) in bytes.
  ``put`` never waits (the writer of events never waits for a client); a full mailbox closes
  itself and says which bound it hit (docs/design.md §7: a watcher that falls behind is dropped,
  as the API server drops watchers that do not keep up).
- :func:`live_lines`: the live part, in batches of whatever is pending, with bookmarks when the
  client asked (about every interval while nothing else is sent, and one shortly before the
  deadline, ``cacheWatcher.nextBookmarkTime``); it ends at the deadline or once the mailbox is
  closed and drained.
- :func:`watch_batches`: what goes before (the initial state, replayed history, a watch-list's
  end bookmark), then the live part.
- :class:`WatchWriter`: writes batches as chunks of the response — the lines as they are
  (scatter/gather, no join) when the server offers a body writer — and drops a client that takes
  nothing for ``stall`` seconds while lines wait for it: its buffer is bounded, and so is the time
  it may hold up its events.
- :func:`closed_on_disconnect`: a client that goes away closes its watcher.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import Final, Generic, Protocol, TypeVar

from cacheproxy.serving.asgi import BodyPart, BodyWriter, Request, ResponseFlow, Send
from cacheproxy.serving.responses import JSON, NO_CACHE
from cacheproxy.tasks import cancel_and_wait

__all__ = [
    "DEADLINE_BOOKMARK_MARGIN",
    "TOO_SLOW",
    "LiveWatch",
    "Mailbox",
    "WatchWriter",
    "closed_on_disconnect",
    "live_lines",
    "watch_batches",
]

DEADLINE_BOOKMARK_MARGIN = 2.0
"""The API server sends a bookmark this long before a watch's deadline, so the client can resume
close to "now" (``cacheWatcher.nextBookmarkTime``)."""

ItemT = TypeVar("ItemT")


TOO_SLOW: Final = "too slow"
"""How the reason a reader that did not keep up was closed for begins."""


class Mailbox(Generic[ItemT]):
    """A watch's bounded buffer: ``put`` never waits; a full mailbox closes itself (the watcher
    is too slow, docs/design.md §7), and ``wait`` returns when something arrives or it was closed.

    Bounded in items (``capacity``) and, when ``max_bytes`` is given, in the bytes queued: each
    ``put`` says its item's size and ``queued_bytes`` is their sum until the items are drained
    or discarded. A shared ``bytes`` object queued in many mailboxes counts in each: it is what
    each one pins while its client does not read."""

    def __init__(self, capacity: int, *, max_bytes: int | None = None) -> None:
        self.capacity = capacity
        self.max_bytes = max_bytes
        """The bytes it may hold (None: unbounded in bytes)."""
        self._items: deque[ItemT] = deque()
        self.queued_bytes = 0
        """The sizes of the items queued now."""
        self._waiter: asyncio.Future[None] | None = None
        self.closed = False
        self.close_reason = ""
        self.overflow: str | None = None
        """Which bound closed it: ``"events"`` (``capacity`` items) or ``"bytes"``
        (``max_bytes``); None while it has not overflowed."""

    def __len__(self) -> int:
        return len(self._items)

    def put(self, item: ItemT, size: int = 0) -> bool:
        """Queue ``item`` of ``size`` bytes; False (and closed) when it was closed or is full."""
        if self.closed:
            return False
        if len(self._items) >= self.capacity:
            self.overflow = "events"
            self.close(f"{TOO_SLOW}: buffer full")
            return False
        queued = self.queued_bytes + size
        if self.max_bytes is not None and queued > self.max_bytes:
            self.overflow = "bytes"
            self.close(f"{TOO_SLOW}: more than {self.max_bytes} bytes queued")
            return False
        self._items.append(item)
        self.queued_bytes = queued
        self._wake()
        return True

    @property
    def too_slow(self) -> bool:
        """Closed because its reader did not keep up (an eviction), not by the watch's end."""
        return self.close_reason.startswith(TOO_SLOW)

    def close(self, reason: str = "closed") -> None:
        """No more items; the first reason given is kept. What is queued can still be drained."""
        if not self.closed:
            self.closed = True
            self.close_reason = reason
        self._wake()

    def drain(self) -> list[ItemT]:
        """Everything queued, in order; the mailbox is empty after."""
        items = list(self._items)
        self._items.clear()
        self.queued_bytes = 0
        return items

    def discard(self) -> list[ItemT]:
        """Drop what is queued (its reader will not get it); what was dropped."""
        items = self.drain()
        self._wake()
        return items

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self, seconds: float) -> None:
        """Until something is queued, the mailbox closes, or ``seconds`` pass.

        One future and one timer per wait, no task: with a thousand watchers woken for every
        event, ``asyncio.wait_for`` (a task per call) cost more than writing the event."""
        if self._items or self.closed:
            return
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        timer = loop.call_later(max(seconds, 0.0), _resolve, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            self._waiter = None


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class LiveWatch(Protocol):
    """A watch being served: pending lines, a way to wait for more, and whether it ended."""

    closed: bool

    async def wait(self, seconds: float) -> None: ...

    def take(self) -> list[bytes]: ...


async def live_lines(
    watch: LiveWatch,
    *,
    deadline: float,
    bookmark: Callable[[], bytes | None] | None,
    bookmark_interval: float,
    clock: Callable[[], float],
) -> AsyncIterator[Sequence[BodyPart]]:
    """A watch's live part: its pending lines as they come (each batch as the list of lines, to
    be written without joining) and, when ``bookmark`` is given (the client asked), a bookmark
    about every ``bookmark_interval`` while nothing else is sent and one shortly before
    ``deadline`` — when ``bookmark()`` has one to give (None: nothing new to tell). Ends at the
    deadline, or once the watch is closed and drained."""
    next_bookmark = clock() + bookmark_interval
    deadline_bookmark_sent = False
    while True:
        now = clock()
        if now >= deadline:
            return
        wake_at = deadline
        if bookmark is not None:
            if not deadline_bookmark_sent:
                wake_at = min(wake_at, deadline - DEADLINE_BOOKMARK_MARGIN)
            wake_at = min(wake_at, next_bookmark)
        await watch.wait(wake_at - now)
        lines = watch.take()
        if lines:
            yield lines
        if watch.closed:
            return
        now = clock()
        if bookmark is not None and not lines:
            due_deadline = not deadline_bookmark_sent and now >= deadline - DEADLINE_BOOKMARK_MARGIN
            if now >= next_bookmark or due_deadline:
                line = bookmark()
                if line is not None:
                    yield [line]
                next_bookmark = now + bookmark_interval
                deadline_bookmark_sent = deadline_bookmark_sent or due_deadline


async def watch_batches(
    watch: LiveWatch,
    *,
    first: Iterable[Sequence[BodyPart]],
    seconds: float,
    bookmark: Callable[[], bytes | None] | None,
    bookmark_interval: float,
    clock: Callable[[], float],
) -> AsyncIterator[Sequence[BodyPart]]:
    """A whole watch response in batches of whole lines: ``first`` (what precedes the live
    events; empty batches are skipped), then :func:`live_lines` until ``seconds`` from now (the
    watch's deadline) or until the watch is closed."""
    deadline = clock() + seconds
    for batch in first:
        if batch:
            yield batch
    async for lines in live_lines(
        watch,
        deadline=deadline,
        bookmark=bookmark,
        bookmark_interval=bookmark_interval,
        clock=clock,
    ):
        yield lines


class WatchWriter:
    """Writes one watch response: the start, batches of lines as chunks, the end.

    With a body writer (and no ``convert``) the lines go to the transport as they are; otherwise
    each batch is joined into one message, through ``convert`` when given (a Table per event; a
    batch it turns into nothing is not sent). With a response flow, a client that takes nothing
    for ``stall`` seconds while a batch waits for it is dropped: :meth:`write` aborts the
    connection and returns False."""

    __slots__ = ("_convert", "_flow", "_send", "_writer", "stall")

    def __init__(
        self,
        send: Send,
        *,
        writer: BodyWriter | None = None,
        flow: ResponseFlow | None = None,
        stall: float = 0.0,
        convert: Callable[[bytes], bytes] | None = None,
    ) -> None:
        self._send = send
        self._writer = writer if convert is None else None
        self._flow = flow
        self._convert = convert
        self.stall = stall

    async def start(self, req: Request) -> None:
        """The 200 and its headers (chunked: no ``Content-Length``)."""
        headers = [(b"content-type", JSON), (b"cache-control", NO_CACHE)]
        await self._send({"type": "http.response.start", "status": 200, "headers": headers})
        req.started = True

    async def write(self, lines: Sequence[BodyPart]) -> bool:
        """One batch of whole lines; False if the client stalled and was dropped."""
        flow = self._flow
        if flow is not None and not await flow.writable(self.stall):
            flow.abort()
            return False
        if self._writer is not None:  # the lines as they are: no join, no re-framing copy
            await self._writer.write_chunk(lines)
            return True
        chunk = b"".join(lines)
        if self._convert is not None:
            chunk = self._convert(chunk)
            if not chunk:
                return True
        await self._send({"type": "http.response.body", "body": chunk, "more_body": True})
        return True

    async def finish(self, last: bytes = b"") -> None:
        """End the response (after ``last``, when given) — unless the client is still taking
        nothing: then it is dropped, with no clean end either."""
        flow = self._flow
        if flow is not None and not await flow.writable(self.stall):
            flow.abort()
            return
        if last and self._convert is not None:
            last = self._convert(last)
        await self._send({"type": "http.response.body", "body": last, "more_body": False})


@contextlib.asynccontextmanager
async def closed_on_disconnect(
    req: Request, mailbox: Mailbox[ItemT], reason: str
) -> AsyncIterator[None]:
    """While inside: the client going away closes ``mailbox`` (with ``reason``)."""
    disconnect = asyncio.create_task(req.wait_disconnect(), name="watch-disconnect")
    disconnect.add_done_callback(lambda _: mailbox.close(reason))
    try:
        yield
    finally:
        await cancel_and_wait(disconnect)
