"""The ingest pipeline under test: LineListerWatcher → Reflector → EventQueue → SharedInformer.

:func:`run_pipeline` runs a real :class:`~cacheproxy.informer.informer.SharedInformer` (its
Reflector doing a watch-list, its ``InOrderQueue``, a Store with the default transform and a
``spec.nodeName`` index, its EventLog) with one no-op handler, and times two phases: the sync (N
ADDED lines and the initial-events-end bookmark, applied as one ``Replaced``) and N MODIFIED
lines on the synced store. A phase ends at the handler's notification of its last event; if
events never reach it (lost on the way), the phase ends when nothing is left in flight and the
result says how many were applied.
"""

from __future__ import annotations

import asyncio
import contextlib
import cProfile
import gc
import io
import pstats
import time
import tracemalloc
from collections.abc import Callable

from cacheproxy.informer import DeletedFinalStateUnknown, Entry, SharedInformer, Storage, Store
from loadtest.clients.linewatch import LineListerWatcher
from loadtest.harness.records import Clock, MemoryResult, PipelineRun
from loadtest.harness.sizeof import deep_sizeof
from loadtest.harness.workload import Workload

__all__ = ["FIELD_INDEXES", "CountingHandler", "new_store", "run_pipeline"]

FIELD_INDEXES = ("spec.nodeName",)
_SETTLE_POLL = 0.05
_PHASE_DEADLINE = 3_600.0


def new_store(storage: Storage | None = None) -> Store:
    """The Store every cacheproxy path uses: pods, default transform, a ``spec.nodeName`` index
    (kept as ``storage`` says: plain by default)."""
    return Store(kind="Pod", api_version="v1", field_indexes=FIELD_INDEXES, storage=storage)


class CountingHandler:
    """A no-op ResourceEventHandler that counts what it is told and when it was last told."""

    def __init__(self) -> None:
        self.adds = 0
        self.updates = 0
        self.deletes = 0
        self.seen = 0
        self.last_at = 0.0
        self.target = 0
        self.reached = asyncio.Event()

    def expect(self, total: int) -> None:
        """Set ``reached`` once ``total`` notifications (adds + updates + deletes) arrived."""
        self.target = total
        self.reached.clear()
        if self.seen >= total:
            self.reached.set()

    def _tick(self) -> None:
        self.seen += 1
        self.last_at = time.perf_counter()
        if self.seen >= self.target:
            self.reached.set()

    def on_add(self, entry: Entry, in_initial_list: bool) -> None:
        self.adds += 1
        self._tick()

    def on_update(self, old: Entry, new: Entry) -> None:
        self.updates += 1
        self._tick()

    def on_delete(self, entry: Entry | DeletedFinalStateUnknown) -> None:
        self.deletes += 1
        self._tick()


async def _settle(
    handler: CountingHandler, task: asyncio.Task[None], stuck: Callable[[], bool]
) -> None:
    """Until the handler got its target, or nothing more can arrive (events were lost)."""
    deadline = time.monotonic() + _PHASE_DEADLINE
    while not handler.reached.is_set():
        try:
            async with asyncio.timeout(_SETTLE_POLL):
                await handler.reached.wait()
        except TimeoutError:
            if task.done():
                task.result()  # the informer died: raise its error
                raise RuntimeError("the informer stopped before applying every event") from None
            if stuck():
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"no settle within {_PHASE_DEADLINE:.0f} s") from None


async def run_pipeline(
    workload: Workload,
    *,
    chunk_events: int = 8,
    trace_memory: bool = False,
    profile: bool = False,
    gc_enabled: bool = True,
    storage: Storage | None = None,
) -> PipelineRun:
    """The sync and modified phases through a real SharedInformer on the running loop.

    ``chunk_events`` ≤ 0 hands the watcher every MODIFIED line without a loop turn (a backlog).
    """
    lw = LineListerWatcher(
        initial=workload.added,
        initial_end=workload.initial_end,
        updates=workload.modified,
        chunk_events=chunk_events if chunk_events > 0 else len(workload.modified),
    )
    gc.collect()
    base = 0
    if trace_memory:
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
    store = new_store(storage)
    # As the daemon runs it: the synced cache moved out of the GC's way.
    informer = SharedInformer(lw, name="pods", store=store, freeze_gc_after_sync=True)
    handler = CountingHandler()
    informer.add_handler(handler)
    queue = informer.queue
    profiles: dict[str, str] = {}
    profiler = cProfile.Profile() if profile else None
    memory: dict[str, int] = {}

    if not gc_enabled:
        gc.disable()
    handler.expect(workload.n)
    clock = Clock()
    if profiler is not None:
        profiler.enable()
    task = asyncio.create_task(informer.run(), name="loadtest-informer")
    try:
        await _settle(handler, task, stuck=lambda: False)
        if profiler is not None:
            profiler.disable()
            profiles["sync"] = _profile_text(profiler)
        sync = clock.stop(
            events=workload.n,
            applied=len(store),
            parse_s=lw.parse_seconds,
            wall_end=handler.last_at,
        )
        if trace_memory:
            gc.collect()
            held, peak = tracemalloc.get_traced_memory()
            memory["held"], memory["peak"] = held - base, peak - base
            # The cross-check walks the synced store; its own allocations are freed before the
            # next reading.
            memory["sizeof"] = deep_sizeof(store)
        json_bytes = sum(len(e.raw) for e in store.entries())

        gc.collect()
        lw.reset_counters()
        processed_before = informer.events_processed
        handler.expect(handler.seen + workload.n)
        profiler = cProfile.Profile() if profile else None
        clock = Clock()
        if profiler is not None:
            profiler.enable()
        lw.release_updates()
        await _settle(
            handler,
            task,
            stuck=lambda: (
                lw.updates_sent.is_set()
                and queue.qsize() == 0
                and handler.seen == workload.n + informer.events_processed - processed_before
            ),
        )
        if profiler is not None:
            profiler.disable()
            profiles["modified"] = _profile_text(profiler)
        modified = clock.stop(
            events=workload.n,
            applied=handler.updates + handler.adds - workload.n,
            parse_s=lw.parse_seconds,
            wall_end=handler.last_at,
        )
        if trace_memory:
            gc.collect()
            memory["after_modified"] = tracemalloc.get_traced_memory()[0] - base
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        if trace_memory:
            tracemalloc.stop()
        gc.enable()
    result = None
    if trace_memory:
        result = MemoryResult(
            objects=workload.n,
            json_bytes=json_bytes,
            held_bytes=memory["held"],
            peak_bytes=memory["peak"],
            sizeof_bytes=memory["sizeof"],
            after_modified_bytes=memory["after_modified"],
        )
    return PipelineRun(sync=sync, modified=modified, memory=result, profiles=profiles)


def _profile_text(profiler: cProfile.Profile, top: int = 30) -> str:
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    return out.getvalue()
