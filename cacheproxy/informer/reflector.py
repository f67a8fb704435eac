"""The Reflector: keeps an EventQueue fed with the state and changes of one collection.

client-go's ``Reflector.ListAndWatch``, as an explicit state machine (:class:`Phase`); each phase
says what an error does:

- **SYNCING** — first by a watch-list (``sendInitialEvents=true``: the initial events become one
  ``Replaced`` batch at the ``k8s.io/initial-events-end`` bookmark, then the same stream goes on as
  the watch); if that fails, by a paged list (limit 500, following ``continue``; an expired
  continue token → one full list at the same RV, as client-go's pager). The list RV is "0" at
  first, the last synced RV after that, and "" only once a list at that RV came back 410 Expired
  or "too large resource version" (``relistResourceVersion``). A failed sync backs off and
  retries.
- **WATCHING** — from the last synced RV, ``allowWatchBookmarks=true``, a timeout drawn from
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
watch-list's initial events), :mod:`.classifiers` says what an error is, :mod:`.backoff` computes
the delays and :class:`ReflectorOptions` holds what its owner may set.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

from cacheproxy.errors import ApiError, CacheProxyError, TransportError
from cacheproxy.informer.backoff import Backoff
from cacheproxy.informer.classifiers import (
    is_connection_refused,
    is_expired,
    is_too_large_resource_version,
    is_too_many_requests,
)
from cacheproxy.informer.gcpause import gc_paused
from cacheproxy.informer.listwatch import Decode, ListerWatcher, WatchEvent, WatchRequest, as_parsed
from cacheproxy.informer.metrics import InformerMetrics, NoMetrics
from cacheproxy.informer.queue import Bookmark, Delta, EventQueue, Replaced
from cacheproxy.informer.syncing import ContinuedStream, SyncReader, WatchListHung

__all__ = ["Confirmed", "Phase", "Reflector", "ReflectorOptions", "Restored"]

log = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[None]]

RESUME_CONFIRMATION = 0.2
"""Seconds a watch resumed from a restored state's RV stays open without an error to confirm it
(an event or a bookmark confirms it at once; see the module)."""


class Phase(enum.Enum):
    """Where a Reflector is in its state machine (see the module for what each does on error)."""

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


class _Relist(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _WatchAgain(Exception):
    def __init__(self, delay: float) -> None:
        super().__init__(delay)
        self.delay = delay


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
    """Pause the cyclic GC while a (re)sync decodes its list (:mod:`.gcpause`): much faster
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
        self.phase = Phase.SYNCING
        self.last_sync_resource_version = ""
        self._rv_unavailable = False
        self._paginated_result = False
        """The first list came back in pages: the server pages (watch cache off): keep paging."""
        self._watch_list = self.options.watch_list
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
        self._restored: Restored | None = None
        self._confirming = False
        """A restored state waits for upstream's word (see the module)."""
        self.watch_answered = asyncio.Event()
        """Set once the first watch got its answer (its stream or an error), or the reflector
        stopped: the informer applies a restored state then (:meth:`SharedInformer.restore`)."""

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
        self._restored = restored
        self.last_sync_resource_version = str(restored.rv)

    # ------------------------------------------------------------------ the loop

    async def run(self) -> None:
        try:
            while True:
                if self._restored is not None:
                    restored, self._restored = self._restored, None
                    await self.queue.put(restored)
                    self._confirming = True
                    synced, continued = True, None
                else:
                    synced, continued = await self._sync()
                if not synced:
                    continue
                self._succeeded()
                try:
                    await self._watch_loop(continued)
                except _Relist as relist:
                    self.metrics.relist(self.name, relist.reason)
                    log.info("%s: relisting (%s)", self.name, relist.reason)
                    await self._back_off(None)
        finally:
            self.phase = Phase.STOPPED
            self.watch_answered.set()

    async def _sync(self) -> tuple[bool, ContinuedStream | None]:
        """One (re)sync: (whether it succeeded, the stream to keep watching after a
        watch-list — None means "start a watch")."""
        self.phase = Phase.SYNCING
        self._confirming = False  # a restored state that needs a sync was not confirmed
        if self._watch_list:
            try:
                with self._decoding():
                    return True, await self._sync_by_watch_list()
            except asyncio.CancelledError:
                raise
            except WatchListHung:
                self._watch_list = False
                log.warning(
                    "%s: the watch-list sent no initial-events-end bookmark %.0f s after its "
                    "initial events; syncing by paged lists from now on",
                    self.name,
                    self.options.watch_list_timeout,
                )
            except CacheProxyError as err:
                if is_too_many_requests(err) or is_connection_refused(err):
                    # Retried as a watch-list after a backoff (client-go's watchList loop).
                    await self._back_off(err)
                    return False, None
                if is_expired(err) or is_too_large_resource_version(err):
                    # The RV is gone (or not reached): a consistent watch-list at RV "" at once.
                    self._rv_unavailable = True
                    return False, None
                if (
                    isinstance(err, ApiError)
                    and 400 <= err.code < 500
                    and err.code not in (410, 429)
                ):
                    self._watch_list = False  # the server does not do watch-lists: stop asking
                    _watch_list_refused(self.name, err)
                else:
                    log.info("%s: watch-list failed (%s); syncing by a paged list", self.name, err)
        try:
            with self._decoding():
                await self._sync_by_list()
        except asyncio.CancelledError:
            raise
        except CacheProxyError as err:
            if is_expired(err) or is_too_large_resource_version(err):
                self._rv_unavailable = True
            log.info("%s: list failed: %s", self.name, err)
            await self._back_off(err)
            return False, None
        return True, None

    async def _sync_by_list(self) -> None:
        rv = self._relist_resource_version()
        # client-go's choice of page size: paged, unless listing at a specific RV from a server
        # that did not page the first list (then the whole list comes from its watch cache,
        # avoiding a thundering herd on etcd; "not older than RV" keeps it correct).
        limit = self.options.page_size
        if rv not in ("", "0") and not self._paginated_result:
            limit = 0
        try:
            items, list_rv, paged = await self._reader.read_list(rv, limit)
        except ApiError as err:
            if not (is_expired(err) or is_too_large_resource_version(err)):
                raise
            # The RV is unavailable: at once, a consistent list at RV "" (same page size).
            self._rv_unavailable = True
            rv = ""
            items, list_rv, paged = await self._reader.read_list(rv, limit)
        if rv == "0" and paged:
            self._paginated_result = True
        await self.queue.put(Replaced(items, _rv_int(list_rv)))
        self._rv_unavailable = False
        self.last_sync_resource_version = list_rv
        self.synced.set()

    async def _sync_by_watch_list(self) -> ContinuedStream:
        request = WatchRequest(
            resource_version="" if self._rv_unavailable else self.last_sync_resource_version,
            timeout_seconds=self._watch_timeout(),
            allow_watch_bookmarks=True,
            send_initial_events=True,
        )
        self.metrics.request(self.name, "watch-list")
        async with contextlib.AsyncExitStack() as stack:
            stream = await stack.enter_async_context(self.lw.watch(request))
            items, end_rv = await self._reader.read_initial_events(
                stream, quiet=self.options.watch_list_timeout
            )
            await self.queue.put(Replaced(items, _rv_int(end_rv)))
            self._rv_unavailable = False
            self.last_sync_resource_version = end_rv
            self.synced.set()
            # The stream goes on as the watch: its closing goes with it.
            return ContinuedStream(stack.pop_all(), stream, request.timeout_seconds)

    # ------------------------------------------------------------------ watching

    async def _watch_loop(self, continued: ContinuedStream | None) -> None:
        """Watch until a relist is needed (raises ``_Relist``)."""
        current = continued
        while True:
            self.phase = Phase.WATCHING
            try:
                if current is None:
                    await self._watch_once()
                else:
                    stream, current = current, None
                    async with stream.exit:
                        await self._consume(stream.events, stream.timeout, started=self._clock())
            except _WatchAgain as again:
                if again.delay:
                    self.phase = Phase.BACKING_OFF
                    await self._sleep(again.delay)

    async def _watch_once(self) -> None:
        timeout = self._watch_timeout()
        request = WatchRequest(
            resource_version=self.last_sync_resource_version,
            timeout_seconds=timeout,
            allow_watch_bookmarks=True,
        )
        self.metrics.request(self.name, "watch")
        started = self._clock()
        async with contextlib.AsyncExitStack() as stack:
            try:
                stream = await stack.enter_async_context(self.lw.watch(request))
            except ApiError as err:
                raise self._on_watch_error(err, events=0, started=started) from None
            except TransportError as err:
                raise self._on_watch_error(err, events=0, started=started) from None
            finally:
                self.watch_answered.set()
            await self._consume(stream, timeout, started=started)

    async def _consume(
        self,
        stream: AsyncIterator[WatchEvent],
        watch_seconds: int,
        *,
        started: float,
    ) -> None:
        events = 0
        stall = watch_seconds + self.options.stall_margin
        # One deadline for the whole stream, pushed forward as events arrive (at most every
        # quarter of the threshold: a timer per event would cost more than the event).
        step = min(1.0, stall / 4)
        loop = asyncio.get_running_loop()
        error: BaseException | None = None
        stalled = False
        confirming = None
        if self._confirming:
            confirming = asyncio.create_task(self._confirm_after(), name=f"{self.name}-confirm")
        self._heard_at = self._clock()
        try:
            async with asyncio.timeout(stall) as deadline:
                pushed = loop.time()
                async for event in stream:
                    if not events and self._confirming:
                        await self._confirm()
                    events += 1
                    self._heard_at = self._clock()
                    await self._handle(event)
                    now = loop.time()
                    if now - pushed >= step:
                        deadline.reschedule(now + stall)
                        pushed = now
        except (ApiError, TransportError) as err:
            error = err
        except TimeoutError:
            stalled = True
            self.metrics.watch_error(self.name, "stalled")
            log.info("%s: watch stalled (nothing for %.0f s); watching again", self.name, stall)
            raise _WatchAgain(0) from None
        finally:
            # Live for ``live_grace`` more while the next watch opens, after a normal end only.
            self._ended_at = self._clock() if error is None and not stalled else float("-inf")
            self._heard_at = None
            if confirming is not None:
                confirming.cancel()
            self.last_event_at = self._clock()
            if events:
                self._succeeded()  # however the watch ended, upstream answered
        self.metrics.events(self.name, events)
        if error is not None:
            raise self._on_watch_error(error, events=events, started=started)
        if events == 0 and self._clock() - started < self.options.very_short_watch:
            log.info("%s: very short watch (no event, under a second): relisting", self.name)
            raise _Relist("very-short-watch")
        raise _WatchAgain(0)

    async def _handle(self, event: WatchEvent) -> None:
        rv = event.resource_version
        if event.type == "BOOKMARK":
            await self.queue.put(Bookmark(_rv_int(rv)))
        else:
            await self.queue.put(Delta(event.type, self._decode(event.object), _rv_int(rv)))
        if rv:
            self.last_sync_resource_version = rv

    async def _confirm_after(self) -> None:
        await self._sleep(RESUME_CONFIRMATION)
        await self._confirm()

    async def _confirm(self) -> None:
        if self._confirming:
            self._confirming = False
            await self.queue.put(Confirmed(_rv_int(self.last_sync_resource_version)))
            self.synced.set()

    def _on_watch_error(self, err: BaseException, *, events: int, started: float) -> Exception:
        if is_expired(err):
            self.metrics.watch_error(self.name, "expired")
            log.info(
                "%s: watch: %s; relisting at %s", self.name, err, self.last_sync_resource_version
            )
            return _Relist("expired")
        if is_too_many_requests(err):
            self.metrics.watch_error(self.name, "throttled")
            assert isinstance(err, ApiError)
            delay = max(float(err.retry_after or 0), self._backoff.next_delay())
            return _WatchAgain(delay)
        if is_connection_refused(err):
            self.metrics.watch_error(self.name, "refused")
            return _WatchAgain(self._backoff.next_delay())
        if isinstance(err, ApiError) and err.code == 500:
            self.metrics.watch_error(self.name, "internal")
            return _WatchAgain(self._backoff.next_delay())
        if isinstance(err, TransportError):
            self.metrics.watch_error(self.name, "transport")
            log.info("%s: watch broke: %s", self.name, err)
            return _WatchAgain(self._backoff.next_delay())
        self.metrics.watch_error(self.name, "other")
        log.warning("%s: watch ended with: %s; relisting", self.name, err)
        return _Relist("watch-error")

    # ------------------------------------------------------------------ helpers

    def _decoding(self) -> contextlib.AbstractContextManager[None]:
        """Around reading a sync's objects (never around a back-off)."""
        return gc_paused() if self.options.pause_gc_during_sync else contextlib.nullcontext()

    def _relist_resource_version(self) -> str:
        if self._rv_unavailable:
            return ""
        return self.last_sync_resource_version or "0"

    def _watch_timeout(self) -> int:
        base = self.options.min_watch_timeout
        return int(base * (1.0 + self._rng.random()))

    def _succeeded(self) -> None:
        """Upstream answered (a sync completed, or a watch delivered an event or bookmark): the
        next failure backs off from the start (see the module)."""
        self._backoff.reset()

    async def _back_off(self, err: BaseException | None) -> None:
        self.phase = Phase.BACKING_OFF
        delay = self._backoff.next_delay()
        if isinstance(err, ApiError) and err.retry_after:
            delay = max(delay, float(err.retry_after))
        await self._sleep(delay)


def _rv_int(rv: str) -> int:
    return int(rv) if rv.isdigit() else 0
