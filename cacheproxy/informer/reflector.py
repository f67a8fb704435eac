"""The Reflector: keeps an EventQueue fed with the state and changes of one collection.

client-go's ``Reflector.ListAndWatch`` as a state machine: a closed set of states, frozen
dataclasses each holding what its step needs, and one step (``Reflector._step``) that does a
state's work and returns the next state; ``run()`` is the loop over it. An upstream error is
caught where it arises and becomes the next state:

============  ====================================  ==============================================
state         its step                              next
============  ====================================  ==============================================
Restoring     the restored state onto the queue     Watching, confirming it
WatchListing  a watch-list: its initial events      Watching its stream; Listing (refused, hung,
              onto the queue as one ``Replaced``    failed); WatchListing at RV "" (expired);
                                                    BackingOff → WatchListing (429, refused)
Listing       a paged list: one ``Replaced``        Watching; BackingOff → a sync (failed)
Watching      one watch: its events onto the queue  Watching (normal end, stalled); BackingOff →
                                                    Watching (429, refused, 500, broken stream);
                                                    Relisting (410, very short, other errors)
Relisting     counts the relist, says why           BackingOff → a sync
BackingOff    sleeps ``delay``                      ``then``
============  ====================================  ==============================================

A sync is a WatchListing while the server may serve watch-lists, else a Listing; what the server
was found to do (:class:`Server`) goes from state to state. :attr:`Reflector.phase` (what the
daemon shows) is the state's; :class:`Stopped` once ``run()`` ended. What each does on error:

- **Syncing** — first by a watch-list (``sendInitialEvents=true``: the initial events become one
  ``Replaced`` batch at the ``k8s.io/initial-events-end`` bookmark, then the same stream goes on as
  the watch); if that fails, by a paged list (limit 500, following ``continue``; an expired
  continue token → one full list at the same RV, as client-go's pager). The list RV is "0" at
  first, the last synced RV after that, and "" only once a list at that RV came back 410 Expired
  or "too large resource version" (``relistResourceVersion``; a state's ``rv_unavailable``). A
  failed sync backs off and retries.
- **Watching** — from the last synced RV, ``allowWatchBookmarks=true``, a timeout drawn from
  ``[min, 2·min)`` (5 to 10 min). A normal end → watch again (no relist), unless the watch ended
  within a second without an event ("very short watch": relist after backoff). 410 (in-stream
  ERROR or on start) → relist at the last RV after backoff. 429 → back off (honouring
  ``Retry-After``) and watch again. Connection refused → back off and watch again. A 500 →
  watch again after backoff (client-go's ``MaxInternalErrorRetryDuration`` behaviour; its default
  relists). A garbage or truncated stream → watch again after backoff. No event or bookmark for
  longer than the watch timeout + margin → the watch is stalled: drop it and watch again.
  Anything else → relist after backoff.

**A restored state** (:meth:`Reflector.resume`: a snapshot read from disk, :mod:`.persistence`)
takes the first sync's place: it goes on the queue as a :class:`Restored` batch and the watch
resumes from its RV, no list. Upstream confirms it (a :class:`Confirmed` on the queue) once the
resumed watch delivers an event or bookmark, or has stayed open ``RESUME_CONFIRMATION`` seconds
without an error: kube-apiserver answers a watch from an RV it no longer holds with an ERROR 410
right after the response's headers (its cacher's error watcher), and one it holds with the events
since, or with nothing until the next change. A 410 instead relists as above.

Backoff (:class:`~cacheproxy.informer.backoff.Backoff`): 0.8 s, doubling with each failure up to
30 s, plus up to 100 % jitter; started over by a success — a sync that put its state on the queue,
or a watch that delivered at least one event or bookmark — so the first failure after one waits
0.8-1.6 s again. A watch that fails at once, or ends without delivering anything, is no success: a
server failing every request sees growing delays. (client-go's starts over only after 2 min
without an error, so faults half a minute apart kept it at its cap with upstream healthy again.)
Clock, sleep and randomness are injectable, so tests drive it in virtual time.

What it yields goes one way, onto its queue: ``Replaced`` per (re)sync, ``Delta`` per watch event,
``Bookmark`` per bookmark, each object as its ``decode`` made it while it was read (the
ListerWatcher's per-item hook: a large list is then never held as parsed objects). It knows
nothing of stores; what an object becomes is its owner's choice.

The rules above are all here; around them, :mod:`.syncing` reads a whole state (the pager, a
watch-list's initial events), :mod:`cacheproxy.errors`' ``is_*`` say what an error is, :mod:`.backoff` computes
the delays and :class:`ReflectorOptions` holds what its owner may set.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import enum
import logging
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from cacheproxy.errors import (
    ApiError,
    CacheProxyError,
    TransportError,
    is_connection_refused,
    is_expired,
    is_too_large_resource_version,
    is_too_many_requests,
)
from cacheproxy.informer.backoff import Backoff
from cacheproxy.informer.instruments import InformerMetrics, NoMetrics
from cacheproxy.informer.listwatch import Decode, ListerWatcher, WatchEvent, WatchRequest, as_parsed
from cacheproxy.informer.queue import Bookmark, Delta, EventQueue, Replaced
from cacheproxy.informer.syncing import ContinuedStream, SyncReader, WatchListHung, gc_paused

__all__ = [
    "BackingOff",
    "Confirmed",
    "Listing",
    "Phase",
    "Reflector",
    "ReflectorOptions",
    "RelistReason",
    "Relisting",
    "Restored",
    "Restoring",
    "Server",
    "State",
    "Stopped",
    "WatchListing",
    "Watching",
]

log = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[None]]

RESUME_CONFIRMATION = 0.2
"""Seconds a watch resumed from a restored state's RV stays open without an error to confirm it
(an event or a bookmark confirms it at once; see the module)."""

RelistReason = Literal["expired", "watch-error", "very-short-watch"]
"""Why a watch needs a new sync (the ``reason`` label of the relist metric)."""


class Phase(enum.Enum):
    """What the daemon shows of a Reflector's state (see the module for what each does)."""

    SYNCING = "syncing"
    WATCHING = "watching"
    BACKING_OFF = "backing-off"
    STOPPED = "stopped"


@dataclass(frozen=True, slots=True)
class Restored(Replaced):
    """A state read from disk in place of a first sync (:meth:`Reflector.resume`): the store takes
    it as a first sync's, and it is not confirmed by upstream yet."""


@dataclass(frozen=True, slots=True)
class Confirmed(Bookmark):
    """Upstream accepted the watch resumed from a :class:`Restored` state's RV: the state was
    current there (no progress of its own: ``rv`` is the last one put on the queue)."""


@dataclass
class ReflectorOptions:
    """How a :class:`~cacheproxy.informer.reflector.Reflector` lists and watches (the defaults
    are client-go's)."""

    page_size: int = 500
    """Items per list page (client-go's pager default, ``tools/pager``); also
    :func:`cacheproxy.upstream.list_all`'s default."""
    watch_list: bool = True
    """Try a streaming watch-list for the first sync (falls back to a paged list)."""
    pause_gc_during_sync: bool = False
    """Pause the cyclic GC while a (re)sync decodes its list (:func:`.syncing.gc_paused`): much faster
    for large lists, but process-wide — for the process's owner (the daemon) to turn on."""
    watch_list_timeout: float = 10.0
    """Give a watch-list up for a paged list (for good) when its initial events stopped this long
    ago and its initial-events-end bookmark has not come (kube-apiserver 1.27-1.30 sends it only
    once the resource sees a newer write: on a quiet resource, not for minutes)."""
    min_watch_timeout: float = 300.0
    """Each watch asks for a timeout drawn from ``[min, 2·min)`` seconds."""
    stall_margin: float = 30.0
    """A watch that sent nothing for its timeout plus this long is stalled: dropped, watched
    again."""
    live_silence: float = 0.0
    """A watch counts as live (:attr:`Reflector.watch_live`) while its stream is open and, when
    this is set, it delivered something within this many seconds (0: open is enough). A quiet
    collection's watch may say nothing for its whole timeout: kube-apiserver 1.28 sent no
    bookmark in 150 s to a watch of 10 000 quiet pods; one that dies silently is dropped as
    stalled after its timeout plus ``stall_margin``."""
    live_grace: float = 1.0
    """After a normal end, the watch still counts as live this long while the next one (from
    the last RV: nothing is missed) opens."""
    very_short_watch: float = 1.0
    """A watch that ended within this many seconds without an event was "very short": relist."""
    backoff: Callable[[], Backoff] = field(default=Backoff)
    """Makes the Reflector's :class:`~cacheproxy.informer.backoff.Backoff` (its clock and
    randomness become the Reflector's)."""


_REFUSALS_SAID: set[int] = set()
"""The HTTP codes of watch-list refusals already logged at INFO in this process."""


def _watch_list_refused(name: str, err: ApiError) -> None:
    """A server that does not serve watch-lists says so for every resource: said once (per
    code) at INFO, each resource's own at DEBUG."""
    if err.code in _REFUSALS_SAID:
        log.debug("%s: watch-list refused (%s); syncing by paged lists", name, err)
        return
    _REFUSALS_SAID.add(err.code)
    log.info(
        "the API server does not serve watch-lists here (%s: %s); every resource syncs by "
        "paged lists instead (the same result; said once)",
        name,
        err,
    )


# ---------------------------------------------------------------------- the states


@dataclass(frozen=True, slots=True)
class Server:
    """What the server was found to do, carried from state to state."""

    watch_list: bool
    """A sync tries a watch-list first: until the server refused one, or one hung."""
    pages: bool = False
    """The server pages lists (the first list, at RV "0", came in pages: no watch cache), so a
    relist at an RV pages too (client-go's ``paginatedResult``)."""

    def without_watch_lists(self) -> Server:
        """It refused a watch-list, or did not end one's initial events: syncs list from now on."""
        return dataclasses.replace(self, watch_list=False)


@dataclass(frozen=True, slots=True)
class Restoring:
    """A restored state goes on the queue in place of a first sync."""

    phase: ClassVar[Phase] = Phase.SYNCING
    restored: Restored


@dataclass(frozen=True, slots=True)
class WatchListing:
    """A (re)sync by watch-list, at the last synced RV."""

    phase: ClassVar[Phase] = Phase.SYNCING
    server: Server
    rv_unavailable: bool = False
    """The last synced RV is expired or not reached: read at RV "" instead (a consistent read;
    client-go's ``isLastSyncResourceVersionUnavailable``)."""


@dataclass(frozen=True, slots=True)
class Listing:
    """A (re)sync by paged list: at RV "0" the first time, at the last synced RV after that."""

    phase: ClassVar[Phase] = Phase.SYNCING
    server: Server
    rv_unavailable: bool = False
    """As :attr:`WatchListing.rv_unavailable`."""


@dataclass(frozen=True, slots=True)
class Watching:
    """One watch from the last synced RV."""

    phase: ClassVar[Phase] = Phase.WATCHING
    server: Server
    confirming: bool = False
    """A restored state waits for upstream's word on this watch (see the module)."""
    stream: ContinuedStream | None = None
    """A watch-list's stream to go on reading, rather than a new watch (the step that follows
    the watch-list's enters its ``exit`` at once: no await between)."""


@dataclass(frozen=True, slots=True)
class Relisting:
    """A watch needs a new sync."""

    phase: ClassVar[Phase] = Phase.SYNCING
    server: Server
    reason: RelistReason


@dataclass(frozen=True, slots=True)
class BackingOff:
    """``delay`` seconds, then ``then``."""

    phase: ClassVar[Phase] = Phase.BACKING_OFF
    delay: float
    then: State


@dataclass(frozen=True, slots=True)
class Stopped:
    """``run()`` ended."""

    phase: ClassVar[Phase] = Phase.STOPPED


State = Restoring | WatchListing | Listing | Watching | Relisting | BackingOff
"""Where a running Reflector is: each has a step that leads to another."""


def _sync(server: Server, rv_unavailable: bool = False) -> WatchListing | Listing:
    """A (re)sync: by watch-list while the server may serve one, else by list."""
    return (WatchListing if server.watch_list else Listing)(server, rv_unavailable)


def _unavailable(err: BaseException) -> bool:
    """The RV asked for is expired, or not reached yet."""
    return is_expired(err) or is_too_large_resource_version(err)


class Reflector:
    """Feeds ``queue`` with one ``Replaced`` per (re)sync and every watch event, in order.

    ``last_sync_resource_version`` is the RV of the newest state put on the queue. ``run()``
    loops until cancelled; it never raises on upstream errors (it logs, backs off, retries).
    """

    def __init__(
        self,
        lw: ListerWatcher,
        queue: EventQueue[object],
        *,
        name: str,
        options: ReflectorOptions | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Sleep = asyncio.sleep,
        rng: random.Random | None = None,
        metrics: InformerMetrics | None = None,
        decode: Decode | None = None,
    ) -> None:
        self.lw = lw
        self._decode = decode or as_parsed
        """What each received object becomes on the queue, as soon as it is read (default: as
        parsed; the informer's entries, so parsed dicts die young)."""
        self.queue = queue
        self.name = name
        self.options = options or ReflectorOptions()
        self._clock = clock
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._backoff = self.options.backoff()
        self._backoff.clock = clock
        self._backoff.rng = self._rng
        self.metrics = metrics or NoMetrics()
        self._state: State | Stopped = self._first_sync()
        self.last_sync_resource_version = ""
        self._reader = SyncReader(
            lw, name=name, decode=self._decode, metrics=self.metrics, clock=clock
        )
        self.synced = asyncio.Event()
        """Set once the first complete state was put on the queue."""
        self.last_event_at: float | None = None
        self._heard_at: float | None = None
        """While a watch stream is open: when it last delivered an event or bookmark (or
        opened); None while none is open."""
        self._ended_at = float("-inf")
        """When the last watch stream ended normally (see :attr:`watch_live`)."""
        self.watch_answered = asyncio.Event()
        """Set once the first watch got its answer (its stream or an error), or the reflector
        stopped: the informer applies a restored state then (:meth:`SharedInformer.restore`)."""

    @property
    def state(self) -> State | Stopped:
        """Where the Reflector is (see the module)."""
        return self._state

    @property
    def phase(self) -> Phase:
        """Its state's phase."""
        return self._state.phase

    @property
    def watch_live(self) -> bool:
        """Whether upstream's changes reach the queue now: a watch stream is open (and, with
        ``live_silence`` set, was heard from within that many seconds), or one ended normally
        under ``live_grace`` s ago and the next, from the last RV, is opening. A cache fed by a
        live watch is behind upstream by the watch's delivery lag at most."""
        now = self._clock()
        heard, silence = self._heard_at, self.options.live_silence
        if heard is not None:
            return not silence or now - heard < silence
        return self.phase is Phase.WATCHING and now - self._ended_at < self.options.live_grace

    def resume(self, restored: Restored) -> None:
        """Start from ``restored`` (before :meth:`run`): it is put on the queue in place of a
        first sync, and the watch resumes from its RV."""
        self._state = Restoring(restored)
        self.last_sync_resource_version = str(restored.rv)

    # ------------------------------------------------------------------ the loop

    async def run(self) -> None:
        """Steps from state to state until cancelled (a run after a stop starts over)."""
        state = self._first_sync() if isinstance(self._state, Stopped) else self._state
        try:
            while True:
                self._state = state
                state = await self._step(state)
        finally:
            self._state = Stopped()
            self.watch_answered.set()

    async def _step(self, state: State) -> State:
        """Does ``state``'s work; returns the next state (see the module's table)."""
        match state:
            case Restoring():
                return await self._restore(state)
            case WatchListing():
                return await self._watch_list(state)
            case Listing():
                return await self._list(state)
            case Watching():
                return await self._watch(state)
            case Relisting():
                return self._relist(state)
            case BackingOff():
                await self._sleep(state.delay)
                return state.then

    def _first_sync(self) -> WatchListing | Listing:
        """With what the options say of the server: nothing is known of it yet."""
        return _sync(Server(watch_list=self.options.watch_list))

    # ------------------------------------------------------------------ syncing

    async def _restore(self, state: Restoring) -> State:
        """The restored state in place of a first sync; the watch resumed from its RV is to
        confirm it."""
        await self.queue.put(state.restored)
        self._succeeded()
        return Watching(Server(watch_list=self.options.watch_list), confirming=True)

    async def _watch_list(self, state: WatchListing) -> State:
        """A (re)sync by watch-list: its stream, open, goes on as the watch."""
        try:
            with self._decoding():
                stream = await self._read_watch_list(state.rv_unavailable)
        except WatchListHung:
            log.warning(
                "%s: the watch-list sent no initial-events-end bookmark %.0f s after its "
                "initial events; syncing by paged lists from now on",
                self.name,
                self.options.watch_list_timeout,
            )
            return Listing(state.server.without_watch_lists(), state.rv_unavailable)
        except CacheProxyError as err:
            return self._watch_list_failed(state, err)
        return Watching(state.server, stream=stream)

    def _watch_list_failed(self, state: WatchListing, err: CacheProxyError) -> State:
        """A watch-list that failed is retried, at RV "" if its RV is unavailable, or a list
        syncs instead (client-go's fallback)."""
        if is_too_many_requests(err) or is_connection_refused(err):
            return self._back_off(state, err)  # retried as a watch-list (client-go's watchList)
        if _unavailable(err):
            return WatchListing(state.server, rv_unavailable=True)  # at once, at RV ""
        if isinstance(err, ApiError) and 400 <= err.code < 500 and err.code not in (410, 429):
            _watch_list_refused(self.name, err)  # the server does not do watch-lists: stop asking
            return Listing(state.server.without_watch_lists(), state.rv_unavailable)
        log.info("%s: watch-list failed (%s); syncing by a paged list", self.name, err)
        return Listing(state.server, state.rv_unavailable)

    async def _read_watch_list(self, rv_unavailable: bool) -> ContinuedStream:
        request = WatchRequest(
            resource_version="" if rv_unavailable else self.last_sync_resource_version,
            timeout_seconds=self._watch_timeout(),
            allow_watch_bookmarks=True,
            send_initial_events=True,
        )
        self.metrics.request(self.name, "watch-list")
        async with contextlib.AsyncExitStack() as stack:
            events = await stack.enter_async_context(self.lw.watch(request))
            items, end_rv = await self._reader.read_initial_events(
                events, quiet=self.options.watch_list_timeout
            )
            await self._synced(items, end_rv)
            # The stream goes on as the watch: its closing goes with it.
            return ContinuedStream(stack.pop_all(), events, request.timeout_seconds)

    async def _list(self, state: Listing) -> State:
        """A (re)sync by paged list (client-go's ``list``); a failed one backs off and syncs
        again (a watch-list first, while the server may serve one)."""
        unavailable = state.rv_unavailable
        rv = "" if unavailable else self.last_sync_resource_version or "0"
        # client-go's choice of page size: paged, unless listing at a specific RV from a server
        # that did not page the first list (then the whole list comes from its watch cache,
        # avoiding a thundering herd on etcd; "not older than RV" keeps it correct).
        limit = self.options.page_size
        if rv not in ("", "0") and not state.server.pages:
            limit = 0
        try:
            with self._decoding():
                try:
                    items, list_rv, paged = await self._reader.read_list(rv, limit)
                except ApiError as err:
                    if not _unavailable(err):
                        raise
                    # The RV is unavailable: at once, a consistent list at RV "" (same page size).
                    unavailable, rv = True, ""
                    items, list_rv, paged = await self._reader.read_list(rv, limit)
                await self._synced(items, list_rv)
        except CacheProxyError as err:
            log.info("%s: list failed: %s", self.name, err)
            return self._back_off(_sync(state.server, unavailable or _unavailable(err)), err)
        pages = state.server.pages or (rv == "0" and paged)
        return Watching(dataclasses.replace(state.server, pages=pages))

    async def _synced(self, items: list[object], rv: str) -> None:
        """A whole state read at ``rv``: onto the queue, and the watch goes on from there."""
        await self.queue.put(Replaced(items, _rv_int(rv)))
        self.last_sync_resource_version = rv
        self.synced.set()
        self._succeeded()

    # ------------------------------------------------------------------ watching

    async def _watch(self, state: Watching) -> State:
        """One watch: the watch-list's stream read on, or a new watch from the last synced RV."""
        if (continued := state.stream) is not None:
            async with continued.exit:
                return await self._watch_events(
                    state, continued.events, continued.timeout, started=self._clock()
                )
        request = WatchRequest(
            resource_version=self.last_sync_resource_version,
            timeout_seconds=self._watch_timeout(),
            allow_watch_bookmarks=True,
        )
        self.metrics.request(self.name, "watch")
        started = self._clock()
        async with contextlib.AsyncExitStack() as stack:
            try:
                events = await stack.enter_async_context(self.lw.watch(request))
            except (ApiError, TransportError) as err:
                return self._watch_failed(state, err)
            finally:
                self.watch_answered.set()
            return await self._watch_events(state, events, request.timeout_seconds, started=started)

    async def _watch_events(
        self,
        state: Watching,
        events: AsyncIterator[WatchEvent],
        watch_seconds: int,
        *,
        started: float,
    ) -> State:
        """Puts one watch's events on the queue until it ends; then what its end means."""
        confirmation = _Confirmation(self, owed=state.confirming)
        stall = watch_seconds + self.options.stall_margin
        self._heard_at = self._clock()
        try:
            count, error = await self._read_events(events, stall, confirmation)
        finally:
            self._heard_at = None
            confirmation.cancel()
            self.last_event_at = self._clock()
        # Live for ``live_grace`` more while the next watch opens, after a normal end only.
        self._ended_at = self._clock() if error is None else float("-inf")
        if count:
            self._succeeded()  # however the watch ended, upstream answered
        again = Watching(state.server, confirming=confirmation.owed)
        if isinstance(error, TimeoutError):
            self.metrics.watch_error(self.name, "stalled")
            log.info("%s: watch stalled (nothing for %.0f s); watching again", self.name, stall)
            return again
        self.metrics.events(self.name, count)
        if error is not None:
            return self._watch_failed(again, error)
        if count == 0 and self._clock() - started < self.options.very_short_watch:
            log.info("%s: very short watch (no event, under a second): relisting", self.name)
            return Relisting(state.server, "very-short-watch")
        return again

    async def _read_events(
        self, events: AsyncIterator[WatchEvent], stall: float, confirmation: _Confirmation
    ) -> tuple[int, Exception | None]:
        """(How many events, what ended the stream: None when it ended normally, TimeoutError
        when nothing came for ``stall`` seconds, else the ApiError or TransportError.)"""
        count = 0
        # One deadline for the whole stream, pushed forward as events arrive (at most every
        # quarter of the threshold: a timer per event would cost more than the event).
        step = min(1.0, stall / 4)
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(stall) as deadline:
                pushed = loop.time()
                async for event in events:
                    if not count:
                        await confirmation.give()
                    count += 1
                    self._heard_at = self._clock()
                    await self._handle(event)
                    now = loop.time()
                    if now - pushed >= step:
                        deadline.reschedule(now + stall)
                        pushed = now
        except (ApiError, TransportError, TimeoutError) as err:
            return count, err
        return count, None

    async def _handle(self, event: WatchEvent) -> None:
        rv = event.resource_version
        if event.type == "BOOKMARK":
            await self.queue.put(Bookmark(_rv_int(rv)))
        else:
            await self.queue.put(Delta(event.type, self._decode(event.object), _rv_int(rv)))
        if rv:
            self.last_sync_resource_version = rv

    def _watch_failed(self, again: Watching, err: Exception) -> State:
        """What a watch's error leads to: ``again`` (after a backoff), or a relist."""
        if is_expired(err):
            self.metrics.watch_error(self.name, "expired")
            log.info(
                "%s: watch: %s; relisting at %s", self.name, err, self.last_sync_resource_version
            )
            return Relisting(again.server, "expired")
        if is_too_many_requests(err):
            self.metrics.watch_error(self.name, "throttled")
            return self._back_off(again, err)  # Retry-After, if longer
        if is_connection_refused(err):
            self.metrics.watch_error(self.name, "refused")
            return self._back_off(again)
        if isinstance(err, ApiError) and err.code == 500:
            self.metrics.watch_error(self.name, "internal")
            return self._back_off(again)
        if isinstance(err, TransportError):
            self.metrics.watch_error(self.name, "transport")
            log.info("%s: watch broke: %s", self.name, err)
            return self._back_off(again)
        self.metrics.watch_error(self.name, "other")
        log.warning("%s: watch ended with: %s; relisting", self.name, err)
        return Relisting(again.server, "watch-error")

    def _relist(self, state: Relisting) -> State:
        """Counted by reason, said, and backed off from: a server that fails every watch at
        once is not asked for a list in a loop."""
        self.metrics.relist(self.name, state.reason)
        log.info("%s: relisting (%s)", self.name, state.reason)
        return self._back_off(_sync(state.server))

    # ------------------------------------------------------------------ helpers

    def _decoding(self) -> contextlib.AbstractContextManager[None]:
        """Around reading a sync's objects (never around a back-off)."""
        return gc_paused() if self.options.pause_gc_during_sync else contextlib.nullcontext()

    def _watch_timeout(self) -> int:
        base = self.options.min_watch_timeout
        return int(base * (1.0 + self._rng.random()))

    def _succeeded(self) -> None:
        """Upstream answered (a sync completed, or a watch delivered an event or bookmark): the
        next failure backs off from the start (see the module)."""
        self._backoff.reset()

    def _back_off(self, then: State, err: BaseException | None = None) -> BackingOff:
        """``then`` after the backoff's next delay (or the server's ``Retry-After``, if longer)."""
        delay = self._backoff.next_delay()
        if isinstance(err, ApiError) and err.retry_after:
            delay = max(delay, float(err.retry_after))
        return BackingOff(delay, then)


class _Confirmation:
    """A restored state's :class:`Confirmed`, owed by the watch resumed from its RV: put on the
    queue once, by the watch's first event or bookmark or by a timer, whichever comes first."""

    def __init__(self, reflector: Reflector, *, owed: bool) -> None:
        self.owed = owed
        self._reflector = reflector
        self._timer: asyncio.Task[None] | None = None
        if owed:
            name = f"{reflector.name}-confirm"
            self._timer = asyncio.create_task(self._after_a_moment(), name=name)

    async def give(self) -> None:
        if self.owed:
            self.owed = False
            r = self._reflector
            await r.queue.put(Confirmed(_rv_int(r.last_sync_resource_version)))
            r.synced.set()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    async def _after_a_moment(self) -> None:
        await self._reflector._sleep(RESUME_CONFIRMATION)
        await self.give()


def _rv_int(rv: str) -> int:
    return int(rv) if rv.isdigit() else 0
