"""Carrying out the read planner's steps (:mod:`.readplan`) for one read: the one executor.

:func:`carry_out` asks :func:`~.readplan.plan` for the next step, does it — waits on the cache,
asks upstream through :class:`~.consistent.ConsistentReads` (a shared probe, a listing, a get's
object) — records what it learnt in a :class:`~.readplan.ReadProgress`, and asks again, until the
planner says to serve, forward or refuse. The whole read is bounded: by the consistent reads'
``timeout`` for a read with RV unset, by ``rv_wait`` for one at an RV; a step never outlasts it.
:func:`decide` calls it with a served resource's state (the read path's planner hop, between the
route and the answer); tests call it with a fake cache and a fake clock.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from typing import Final, Protocol

from cacheproxy.errors import ApiError
from cacheproxy.kube.listoptions import ListOptions
from cacheproxy.server.consistent import ConsistentReads, FreshCache, ObjectKey, Unproven
from cacheproxy.server.readplan import (
    Confirm,
    ForwardRead,
    Probe,
    ReadProgress,
    ReadRequest,
    ReadState,
    Refuse,
    Serve,
    Step,
    WaitFor,
    plan,
)

__all__ = ["ReadCache", "ServedCache", "carry_out", "decide"]

Answer = Serve | ForwardRead | Refuse
"""What a read is answered with once its steps are done."""


class ReadCache(FreshCache, Protocol):
    """The cache a read is answered from, as the executor sees it."""

    def state(self, *, can_forward: bool = False, get: bool = False) -> ReadState:
        """What the planner sees of it now (for a ``get`` or not)."""
        ...

    def quiet(self) -> None:
        """A read found the cache behind upstream after waiting for its events (or confirmed
        it by a listing): remember its RV (:attr:`.ReadState.quiet` while it stays there)."""
        ...


class ServedCache(ReadCache, Protocol):
    """A served resource, as :func:`decide` sees it: its read state and settings, and how it
    words a refusal."""

    consistency: ConsistentReads | None
    rv_wait: float

    def refusal(self, refuse: Refuse, opts: ListOptions | None) -> ApiError:
        """The API server's error for the planner's ``refuse``."""
        ...


async def decide(
    cache: ServedCache,
    read: ReadRequest,
    *,
    get: ObjectKey | None = None,
    can_forward: bool = False,
    opts: ListOptions | None = None,
) -> Serve | ForwardRead:
    """What ``read`` (a ``get`` of that object, or a list or watch with ``opts``) is answered
    from, once the planner's steps are done: the cache (``Serve``: its current state or ``at`` an
    older RV, maybe with a warning) or upstream (``ForwardRead``). Raises the planner's refusals
    as the API server's errors."""
    reads = cache.consistency
    answer = await carry_out(
        read,
        cache,
        reads,
        clock=reads.clock if reads is not None else asyncio.get_running_loop().time,
        rv_wait=cache.rv_wait,
        get=get,
        can_forward=can_forward,
    )
    if isinstance(answer, Refuse):
        raise cache.refusal(answer, opts)
    return answer


async def carry_out(
    read: ReadRequest,
    cache: ReadCache,
    reads: ConsistentReads | None,
    *,
    clock: Callable[[], float],
    rv_wait: float,
    get: ObjectKey | None = None,
    can_forward: bool = False,
) -> Answer:
    """The planner's answer for ``read`` once its steps are done: serve (from the current state
    or ``at`` an older one, maybe with a warning), forward, or refuse."""
    proving = read.most_recent and reads is not None
    stats = reads.stats if proving and reads is not None else None
    step = plan(read, cache.state(can_forward=can_forward, get=get is not None), _NOTHING_YET)
    if not isinstance(step, WaitFor | Probe | Confirm):
        # Most reads: answered at once, the clock never asked (a GET's path is this short).
        if stats is not None:
            stats.reads += 1
            stats.waited(0.0)
            if isinstance(step, ForwardRead):
                stats.forwarded += 1
            elif isinstance(step, Serve) and step.warning is None:
                stats.live += 1
        return step
    return await _steps(
        read, cache, reads, step, clock=clock, rv_wait=rv_wait, get=get, can_forward=can_forward
    )


_NOTHING_YET: Final = ReadProgress()


async def _steps(
    read: ReadRequest,
    cache: ReadCache,
    reads: ConsistentReads | None,
    step: Step,
    *,
    clock: Callable[[], float],
    rv_wait: float,
    get: ObjectKey | None,
    can_forward: bool,
) -> Answer:
    """:func:`carry_out` from ``step``, the planner's first, on: the read's waits and questions,
    bounded by its deadline."""
    start = clock()
    proving = read.most_recent and reads is not None
    limit = reads.options.timeout if proving and reads is not None else rv_wait
    deadline = start + limit
    done = _NOTHING_YET
    label = ""
    after_write = False
    stats = reads.stats if proving and reads is not None else None
    if stats is not None:
        stats.reads += 1
    try:
        while True:
            if isinstance(step, WaitFor):
                within = max(0.0, deadline - clock())
                if step.within is not None:
                    within = min(step.within, within)
                if stats is not None and not step.write:
                    stats.waits += 1
                try:
                    await cache.wait_for(step.rv, within=within)
                    reached = True
                except ApiError:
                    reached = False
                if step.write:
                    after_write = reached
                    done = dataclasses.replace(done, waited_for_write=not reached)
                elif not reached:
                    if done.probed is not None:
                        cache.quiet()
                    done = dataclasses.replace(done, waited=True)
                step = plan(read, cache.state(can_forward=can_forward, get=get is not None), done)
                continue
            if isinstance(step, Probe | Confirm):
                assert reads is not None  # only a resource with upstream questions plans them
                try:
                    if isinstance(step, Probe):
                        done = dataclasses.replace(done, probed=await reads.probed(deadline))
                    else:
                        if get is not None:
                            await reads.confirm_object(cache, get, deadline)
                        else:
                            await reads.confirm_list(
                                cache, since=start, deadline=deadline, target=step.target
                            )
                            cache.quiet()
                        done = dataclasses.replace(done, confirmed=True)
                except Unproven as unproven:
                    label = unproven.label
                    done = dataclasses.replace(done, failed=unproven.why)
                step = plan(read, cache.state(can_forward=can_forward, get=get is not None), done)
                continue
            if stats is not None:
                if isinstance(step, ForwardRead):
                    stats.forwarded += 1
                elif (isinstance(step, Refuse) and step.reason == "timeout") or (
                    isinstance(step, Serve) and step.warning is not None
                ):
                    stats.fallbacks[label or "cache_behind"] += 1
                elif after_write:
                    stats.after_write += 1
                elif done.probed is None and done.confirmed is None:
                    stats.live += 1
            return step
    finally:
        if stats is not None:
            stats.waited(clock() - start)
