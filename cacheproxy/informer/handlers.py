"""An informer's handlers: what they implement, and how each gets its notifications.

A handler (client-go's ``ResourceEventHandler``: ``on_add(entry, in_initial_list)``,
``on_update(old, new)``, ``on_delete(entry or tombstone)``, sync or async) runs in its own task
with its own bounded buffer (:class:`HandlerRegistration`), so a slow handler delays only itself —
unless its :class:`Overflow` policy is ``BLOCK``, which makes the informer wait for it (nothing is
lost). With ``DROP`` a handler whose buffer is full is unregistered and told so; adding it again
replays the current state. A handler added once the informer has synced first gets the current
state as adds (``in_initial_list=True``); its ``has_synced`` turns true once it has processed
them.

:class:`Handlers` is an informer's set of them: registration, their tasks, and the dispatch of each
notification under each one's policy. What is notified, and when, is the informer's
(:mod:`.informer`).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import inspect
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from cacheproxy.informer.events import Changed, InformerEvent, Progressed, Relisted, Synced
from cacheproxy.informer.queue import DeletedFinalStateUnknown
from cacheproxy.informer.store import Entry

__all__ = [
    "FuncHandler",
    "HandlerRegistration",
    "Handlers",
    "Notification",
    "Overflow",
    "ResourceEventHandler",
]

# The informer's log: a handler's failures are its informer's lines.
log = logging.getLogger("cacheproxy.informer.informer")


class ResourceEventHandler(Protocol):
    """What a handler of an informer's notifications implements (client-go's
    ``ResourceEventHandler``); methods may be sync or async (see the module for the order)."""

    def on_add(self, entry: Entry, in_initial_list: bool) -> Awaitable[None] | None: ...

    def on_update(self, old: Entry, new: Entry) -> Awaitable[None] | None: ...

    def on_delete(
        self, entry: Entry | DeletedFinalStateUnknown[Entry]
    ) -> Awaitable[None] | None: ...


@dataclass
class FuncHandler:
    """A handler from plain functions (sync or async); missing ones do nothing."""

    add: Callable[[Entry, bool], Awaitable[None] | None] | None = None
    update: Callable[[Entry, Entry], Awaitable[None] | None] | None = None
    delete: Callable[[Entry | DeletedFinalStateUnknown[Entry]], Awaitable[None] | None] | None = (
        None
    )

    def on_add(self, entry: Entry, in_initial_list: bool) -> Awaitable[None] | None:
        return self.add(entry, in_initial_list) if self.add else None

    def on_update(self, old: Entry, new: Entry) -> Awaitable[None] | None:
        return self.update(old, new) if self.update else None

    def on_delete(self, entry: Entry | DeletedFinalStateUnknown[Entry]) -> Awaitable[None] | None:
        return self.delete(entry) if self.delete else None


class Overflow(enum.Enum):
    """What happens when a handler's buffer is full."""

    BLOCK = "block"
    """The informer waits for the handler: nothing is lost, a slow handler slows everyone."""
    DROP = "drop"
    """The handler is unregistered (``on_overflow`` is called); re-adding it replays the state."""


_SYNCED = object()  # marker: the handler reached the end of its initial list
Notification = tuple[str, Any, Any]
"""``("add", entry, in_initial_list)``, ``("update", old, new)`` or ``("delete", entry, None)``."""


class HandlerRegistration:
    """One handler's buffer, task and sync state."""

    def __init__(
        self,
        handler: ResourceEventHandler,
        *,
        buffer: int,
        overflow: Overflow,
        on_overflow: Callable[[], None] | None,
        name: str,
    ) -> None:
        self.handler = handler
        self.buffer = buffer
        self.overflow = overflow
        self.on_overflow = on_overflow
        self.name = name
        self._pending: deque[Notification | object] = deque()
        self._wakeup = asyncio.Event()
        self._space = asyncio.Event()
        self._space.set()
        self.has_synced = False
        self.removed = False
        self.task: asyncio.Task[None] | None = None
        self.errors = 0

    def push_unbounded(self, item: Notification | object) -> None:
        self._pending.append(item)
        self._wakeup.set()

    def full(self) -> bool:
        return len(self._pending) >= self.buffer

    async def wait_for_space(self) -> None:
        while self.full() and not self.removed:
            self._space.clear()
            await self._space.wait()

    async def run(self) -> None:
        while not self.removed:
            if not self._pending:
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            item = self._pending.popleft()
            if len(self._pending) < self.buffer:
                self._space.set()
            if item is _SYNCED:
                self.has_synced = True
                continue
            assert isinstance(item, tuple)
            kind: str = item[0]
            a: Any = item[1]
            b: Any = item[2]
            try:
                if kind == "add":
                    result = self.handler.on_add(a, b)
                elif kind == "update":
                    result = self.handler.on_update(a, b)
                else:
                    result = self.handler.on_delete(a)
                if result is not None and inspect.isawaitable(result):
                    await result
            except asyncio.CancelledError:
                raise
            except Exception:
                self.errors += 1
                log.exception("informer handler %s failed on %s", self.name, kind)


class Handlers:
    """The handlers of the informer ``name``: registered, started, stopped and notified in
    registration order (see the module)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._registrations: list[HandlerRegistration] = []

    def add(
        self,
        handler: ResourceEventHandler,
        *,
        buffer: int,
        overflow: Overflow,
        on_overflow: Callable[[], None] | None,
        current: Iterable[Entry] | None,
    ) -> HandlerRegistration:
        """Register ``handler``; ``current``: the state it first gets as its initial list (None
        while the informer has not synced: it then gets the first sync's)."""
        reg = HandlerRegistration(
            handler,
            buffer=buffer,
            overflow=overflow,
            on_overflow=on_overflow,
            name=f"{self.name}-handler-{len(self._registrations)}",
        )
        self._registrations.append(reg)
        if current is not None:
            # Added late: the current state first, as adds of the initial list.
            for entry in current:
                reg.push_unbounded(("add", entry, True))
            reg.push_unbounded(_SYNCED)
        return reg

    def remove(self, reg: HandlerRegistration) -> None:
        reg.removed = True
        reg._wakeup.set()
        reg._space.set()
        if reg in self._registrations:
            self._registrations.remove(reg)
        if reg.task is not None:
            reg.task.cancel()

    def start(self, reg: HandlerRegistration) -> None:
        """Start ``reg``'s task (unless it runs)."""
        if reg.task is None or reg.task.done():
            reg.task = asyncio.get_running_loop().create_task(reg.run(), name=reg.name)

    def start_all(self) -> None:
        for reg in self._registrations:
            self.start(reg)

    async def stop_all(self) -> None:
        """Cancel every handler's task and wait for it to end (they stay registered)."""
        for reg in list(self._registrations):
            if reg.task is not None:
                reg.task.cancel()
        tasks = [r.task for r in self._registrations if r.task is not None]
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        for reg in self._registrations:
            reg.task = None

    def mark_synced(self) -> None:
        """The first sync's notifications are all queued: each handler is synced after them."""
        for reg in self._registrations:
            reg.push_unbounded(_SYNCED)

    async def publish(self, event: InformerEvent) -> None:
        """Tell every handler what ``event`` says, as client-go's handlers hear it: a change as
        an add, update or delete; a list as an add (``in_initial_list`` for the first) or
        update for each new or changed object and a delete with a
        :class:`~.queue.DeletedFinalStateUnknown` for each vanished one; the sync as the end of
        the initial list."""
        match event:
            case Changed(type="DELETED"):
                await self.notify(("delete", event.entry, None))
            case Changed(prev=None):
                await self.notify(("add", event.entry, False))
            case Changed():
                await self.notify(("update", event.prev, event.entry))
            case Relisted():
                for entry, prev in event.changed:
                    if prev is None:
                        await self.notify(("add", entry, event.first))
                    else:
                        await self.notify(("update", prev, entry))
                for key, gone in event.gone.items():
                    await self.notify(("delete", DeletedFinalStateUnknown(key, gone), None))
            case Synced():
                self.mark_synced()
            case Progressed():
                pass

    async def notify(self, notification: Notification) -> None:
        """Queue ``notification`` for every handler, each under its overflow policy."""
        for reg in list(self._registrations):
            if reg.full():
                if reg.overflow is Overflow.DROP:
                    log.warning("informer %s: handler %s fell behind; removed", self.name, reg.name)
                    self.remove(reg)
                    if reg.on_overflow is not None:
                        reg.on_overflow()
                    continue
                await reg.wait_for_space()
            reg.push_unbounded(notification)
