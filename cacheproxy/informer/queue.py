"""The EventQueue between the Reflector and the informer's processing loop.

In-order delivery (client-go's current ``RealFIFO`` semantics): every event the Reflector
receives reaches the store, in the order received, with its RV — nothing is merged, so the
EventLog and watchers downstream see every change. A relist arrives as one atomic
:class:`Replaced` batch. The queue is bounded: when the consumer falls behind, ``put`` waits, the
Reflector stops reading its watch stream and TCP pushes back on the upstream — no event is
dropped and memory stays bounded.

For library users who only want the latest state there is the coalescing informer
(:mod:`cacheproxy.informer.coalescing`); the proxy never uses it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Generic, Literal, Protocol, TypeVar

__all__ = [
    "Bookmark",
    "DeletedFinalStateUnknown",
    "Delta",
    "EventQueue",
    "InOrderQueue",
    "QueueItem",
    "Replaced",
]


@dataclass(frozen=True, slots=True)
class Delta:
    """One watch event: the object as parsed, or as the Reflector's ``decode`` made it (the
    informer's in-order mode carries store entries). The consumer owns it."""

    type: Literal["ADDED", "MODIFIED", "DELETED"]
    object: Any
    rv: int


@dataclass(frozen=True, slots=True)
class Replaced:
    """A complete state (a list or a watch-list) at ``rv``: replaces the store atomically."""

    objects: list[Any]
    rv: int


@dataclass(frozen=True, slots=True)
class Bookmark:
    """Progress without a change: the collection is at ``rv``."""

    rv: int


QueueItem = Delta | Replaced | Bookmark

ObjT = TypeVar("ObjT")


@dataclass(frozen=True, slots=True)
class DeletedFinalStateUnknown(Generic[ObjT]):
    """A tombstone (client-go's): ``key`` was deleted while we were not watching — a relist found
    it gone — so its final state is unknown.

    ``object`` is the last known state, possibly stale. What it is depends on whose store knew it:
    a :class:`SharedInformer <cacheproxy.informer.informer.SharedInformer>`'s handlers get the
    store's :class:`~cacheproxy.informer.store.Entry`; the coalescing queue's deltas carry the
    object as put, or ``None`` when the consumer's store listed the key but no longer had its
    object.
    """

    key: str
    object: ObjT


OutT_co = TypeVar("OutT_co", covariant=True)


class EventQueue(Protocol[OutT_co]):
    """What the Reflector writes to (its items) and the informer reads from (``OutT_co``: the
    same items in order, or per-key coalesced deltas)."""

    async def put(self, item: QueueItem) -> None: ...

    async def get(self) -> OutT_co: ...

    def get_nowait(self) -> OutT_co | None: ...

    def qsize(self) -> int: ...


class InOrderQueue:
    """Bounded FIFO of every event, in order."""

    def __init__(self, maxsize: int = 10_000) -> None:
        self._queue: asyncio.Queue[QueueItem] = asyncio.Queue(maxsize)

    async def put(self, item: QueueItem) -> None:
        await self._queue.put(item)

    async def get(self) -> QueueItem:
        return await self._queue.get()

    def get_nowait(self) -> QueueItem | None:
        try:
            return self._queue.get_nowait()
        except asyncio.QueueEmpty:
            return None

    def qsize(self) -> int:
        return self._queue.qsize()
