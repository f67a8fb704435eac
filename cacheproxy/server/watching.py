"""Serving one watch request: where it starts, what it sends first, then its live events.

As the API server's watch cache (docs/design.md §4):

- RV unset or "0" (and ``sendInitialEvents=true``): the current state as ADDED events; a watch-list
  that asked for bookmarks then gets the bookmark annotated ``k8s.io/initial-events-end``;
- RV=N: the EventLog's events after N, as the watcher's query sees them; N older than the log →
  one in-stream 410 ``ERROR`` event, then the end;
- then live events from the resource's :class:`~.watchhub.WatchHub` until the deadline
  (``timeoutSeconds``, else ``[min, 2·min)``), bookmarks when asked — only newer than where the
  watch started, never behind an event it was sent.

Everything from choosing the start to registering with the hub is synchronous: nothing can be
applied in between, so the watcher gets exactly the events after its starting point. The stream
itself — batches, bookmarks, deadline, the eviction of a client that takes nothing — is
:mod:`cacheproxy.serving.watchstream`'s.
"""

from __future__ import annotations

import random
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass

from cacheproxy.informer.eventlog import TooOld
from cacheproxy.informer.store import Entry, bodies
from cacheproxy.kube import status
from cacheproxy.kube.listoptions import ListOptions
from cacheproxy.kube.partial import Reform
from cacheproxy.kube.resources import ResourceType
from cacheproxy.kube.table import WatchTables
from cacheproxy.kube.versions import KubeVersion
from cacheproxy.kube.watchevents import EVENT_HEADS, EVENT_TAIL, bookmark_line, event_line
from cacheproxy.server.admission import ServedRequest
from cacheproxy.server.options import ServerOptions
from cacheproxy.server.query import Query
from cacheproxy.server.reads import negotiate
from cacheproxy.server.resource import ServedResource
from cacheproxy.server.watchfilter import replay_lines
from cacheproxy.server.watchhub import ServedWatch, WatchHub
from cacheproxy.serving import (
    BodyPart,
    Send,
    WatchWriter,
    closed_on_disconnect,
    error_line,
    watch_batches,
)

__all__ = ["INITIAL_BATCH_BYTES", "WatchPlan", "serve_watch", "watch_lines"]

INITIAL_BATCH_BYTES = 128 << 10
_ADDED_HEAD = EVENT_HEADS["ADDED"]
_jitter = random.Random()
"""Watch-length jitter; its own generator, so serving never disturbs the global ``random``."""


@dataclass(slots=True)
class WatchPlan:
    """What one watch sends before its live events, and for how long it lasts."""

    initial: Sequence[Entry]
    """The state it starts from, as ADDED events (key order)."""
    replay: Sequence[bytes]
    """History after its RV, as its query sees it."""
    end_bookmark_rv: int | None
    """A watch-list's initial-events-end bookmark, at this RV."""
    kube: KubeVersion
    """The upstream version whose bookmarks it sends (blueprint, zero times)."""
    allow_bookmarks: bool
    timeout: float
    bookmark_interval: float
    reform: Reform | None = None
    """Every object re-encoded (a metadata-only watch: as ``PartialObjectMetadata``, bookmarks
    too; managedFields dropped)."""

    @property
    def metadata(self) -> str | None:
        return self.reform.metadata if self.reform is not None else None


_BODIES_AT_ONCE = 256
"""Initial objects whose bodies are read together (packed ones: one decompression call)."""


def _with_bodies(entries: Sequence[Entry]) -> Iterator[tuple[Entry, BodyPart]]:
    for start in range(0, len(entries), _BODIES_AT_ONCE):
        group = entries[start : start + _BODIES_AT_ONCE]
        yield from zip(group, bodies(group), strict=True)


def _initial_batches(
    entries: Sequence[Entry], reform: Reform | None = None
) -> Iterator[list[BodyPart]]:
    """The initial state as ADDED lines, like a list: the stored bytes between the line's two
    halves, in batches of ~128 KiB (a thousand watchers starting at once hold a batch each, not
    the cache each: the next one is made once the client took the last). With ``reform``,
    each object re-encoded (a metadata-only watch's ``PartialObjectMetadata``)."""
    batch: list[BodyPart] = []
    size = 0
    for entry, body in _with_bodies(entries):
        if reform is None:
            batch += (_ADDED_HEAD, entry.prefix, body, EVENT_TAIL)
        else:
            batch.append(event_line("ADDED", reform.encode(entry.raw)))
        size += len(body)
        if size >= INITIAL_BATCH_BYTES:
            yield batch
            batch = []
            size = 0
    yield batch


def watch_lines(
    watcher: ServedWatch,
    plan: WatchPlan,
    rtype: ResourceType,
    *,
    current_rv: Callable[[], int],
    clock: Callable[[], float] = time.monotonic,
) -> AsyncIterator[Sequence[BodyPart]]:
    """One watch response until its deadline or until the watcher is closed, in batches of whole
    lines (written one after the other, never joined here). ``current_rv`` is the cache's RV."""

    def first() -> Iterator[list[BodyPart]]:
        batches = _initial_batches(plan.initial, plan.reform)
        last = next(batches)  # the initial state's last batch goes out with what follows
        for batch in batches:
            yield last
            last = batch
        last.extend(plan.replay)
        if plan.end_bookmark_rv is not None:
            last.append(
                bookmark_line(
                    rtype,
                    plan.end_bookmark_rv,
                    initial_events_end=True,
                    blueprint=plan.kube.sends_list_blueprint,
                    metadata=plan.metadata,
                    zero_time=plan.kube.writes_zero_times,
                )
            )
        yield last

    def bookmark() -> bytes | None:
        # As the API server's watch cache: only a bookmark newer than where the watch started
        # (on a quiet resource, none at all), never one behind an event it was sent.
        rv = max(current_rv(), watcher.last_rv)
        if rv <= watcher.min_rv:
            return None
        return bookmark_line(
            rtype, rv, metadata=plan.metadata, zero_time=plan.kube.writes_zero_times
        )

    return watch_batches(
        watcher,
        first=first(),
        seconds=plan.timeout,
        bookmark=bookmark if plan.allow_bookmarks else None,
        bookmark_interval=plan.bookmark_interval,
        clock=clock,
    )


async def serve_watch(
    req: ServedRequest,
    send: Send,
    *,
    res: ServedResource,
    hub: WatchHub,
    query: Query,
    opts: ListOptions,
    tables: WatchTables | None,
    options: ServerOptions,
    refusing: Callable[[], bool],
) -> None:
    """Answer a watch of ``res`` (its admission already counted). ``refusing`` tells whether the
    server stopped taking watches; it is asked before and after the response starts."""
    # A metadata-only watch (``as=PartialObjectMetadata``), managedFields dropped: only Accepts
    # with ``as=`` or ``drop=`` look.
    reform = (
        negotiate(req, verb="watch", keeps_managed_fields=res.keeps_managed_fields).reform
        if tables is None
        else None
    )
    kube = res.kube_version()
    if kube.watch_list_by_default and opts.allow_watch_bookmarks:
        opts = opts.as_watch_list()  # as upstream defaults it: the end bookmark is sent
    requested = opts.rv  # reached, or a plain watch from a newer RV (:mod:`.readplan`)
    if refusing():
        raise status.service_unavailable("the server is shutting down", retry_after=1)
    out = WatchWriter(
        send,
        writer=req.writer,
        flow=req.flow,
        stall=options.watch_stall,
        convert=tables.convert if tables is not None else None,
    )
    await out.start(req)
    # Synchronous from here to hub.add: nothing can be applied in between.
    initial: list[Entry] = []
    replay: list[bytes] = []
    end_bookmark: int | None = None
    send_initial = opts.send_initial_events or (
        opts.send_initial_events is None and opts.resource_version in ("", "0")
    )
    if send_initial:
        store = res.store
        initial = [e for e in map(store.get, res.current_keys(query)) if e is not None]
        if opts.send_initial_events and opts.allow_watch_bookmarks:
            end_bookmark = res.resource_version
    elif opts.resource_version not in ("", "0") and requested <= res.resource_version:
        try:
            events = res.informer.event_log.since(requested)
        except TooOld as too_old:
            gone = status.too_old_resource_version(too_old.requested, too_old.oldest)
            await out.finish(error_line(gone))
            return
        replay = replay_lines(events, query, res.rtype, res.store, reform=reform)
    if refusing():  # shutting down since the response began: end it now
        await out.finish()
        return
    watcher = ServedWatch(
        query,
        buffer=options.watch_buffer,
        max_bytes=options.watch_buffer_bytes,
        min_rv=max(res.resource_version, requested),
        bookmarks=opts.allow_watch_bookmarks,
        reform=reform,
    )
    hub.add(watcher)
    timeout = (
        float(opts.timeout_seconds)
        if opts.timeout_seconds
        else options.min_watch_timeout * (1 + _jitter.random())
    )
    plan = WatchPlan(
        initial=initial,
        replay=replay,
        end_bookmark_rv=end_bookmark,
        kube=kube,
        allow_bookmarks=opts.allow_watch_bookmarks,
        timeout=timeout,
        bookmark_interval=options.bookmark_interval,
        reform=reform,
    )
    async with closed_on_disconnect(req, watcher, "client went away"):
        try:
            async for lines in watch_lines(
                watcher, plan, res.rtype, current_rv=lambda: res.resource_version
            ):
                if not await out.write(lines):
                    hub.evict(watcher, "stall", f"took nothing for {options.watch_stall:g} s")
                    return
        finally:
            hub.remove(watcher)
    if watcher.too_slow and req.flow is not None:
        # Evicted: the end of its response is the end of its connection (one that is too slow
        # does not hold its buffers for another request).
        req.flow.close_after()
    # Evicted (buffer full) and still taking nothing: no clean end either.
    await out.finish()
