"""Controller: a reconcile loop on a rate-limited work queue, fed by informers.

The shape of controller-runtime's reconcilers and kube-rs's ``Controller``: every change to an
object of the primary informer (and, through a mapping, to objects it owns or watches) puts that
object's key on a :class:`~cacheproxy.informer.RateLimitingQueue`; ``workers`` tasks take keys off
it and call ``reconcile(key, obj)`` with the object's latest state from the store (parsed once,
shared: read it, never modify it) or ``None`` once it is gone.

- **Level, not edge**: many changes to one object while it waits are one call; the call sees the
  latest state, never an event.
- **One call per key at a time**: the work queue never hands a key to a second worker while the
  first is on it; a change that arrives meanwhile is one more call afterwards.
- **Retries**: a ``reconcile`` that raises is logged and tried again after the rate limiter's
  delay (client-go's default: 5 ms doubling to 1 000 s per key, and 10/s with bursts of 100
  overall); one that returns :class:`Requeue` is called again after its delay; one that returns
  ``None`` is done with that state (its retry count resets).
- **Start**: calls begin once every informer the controller reads has synced, with one call for
  each object already there.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from cacheproxy.informer import (
    Changed,
    Entry,
    InformerEvent,
    RateLimiter,
    RateLimitingQueue,
    Relisted,
    SharedInformer,
    ShutDown,
)

__all__ = ["Controller", "Reconcile", "Requeue", "owner_keys"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Requeue:
    """What ``reconcile`` returns to be called again for the same key after ``after`` seconds
    (a state that is waiting on time, not on a change: a certificate's expiry, a timeout)."""

    after: float


Reconcile = Callable[[str, dict[str, Any] | None], Awaitable[Requeue | None]]
"""``async def reconcile(key, obj)``: make the world match ``obj`` (``None``: it is gone)."""

KeyMap = Callable[[Entry], Iterable[str]]
"""Which primary keys a change to another resource's object concerns."""


def owner_keys(kind: str) -> KeyMap:
    """The key of the ``kind`` object that controls an object (its ``ownerReferences`` entry with
    ``controller: true``): what :meth:`Controller.owns` maps owned objects with."""

    def keys(entry: Entry) -> list[str]:
        refs = entry.parsed.get("metadata", {}).get("ownerReferences") or ()
        return [
            f"{entry.namespace}/{ref['name']}" if entry.namespace else ref["name"]
            for ref in refs
            if ref.get("controller") and ref.get("kind") == kind and ref.get("name")
        ]

    return keys


class Controller:
    """Calls ``reconcile`` for each key of ``informer`` that changed (module docstring).

    ``async with factory: await Controller(pods, reconcile).run()`` runs until cancelled."""

    def __init__(
        self,
        informer: SharedInformer,
        reconcile: Reconcile,
        *,
        workers: int = 1,
        rate_limiter: RateLimiter[str] | None = None,
        name: str | None = None,
    ) -> None:
        if workers < 1:
            raise ValueError(f"a controller needs at least one worker, not {workers}")
        self.informer = informer
        self.reconcile = reconcile
        self.workers = workers
        self.name = name or informer.name
        self.queue: RateLimitingQueue[str] = RateLimitingQueue(rate_limiter, name=self.name)
        self._sources: list[tuple[SharedInformer, KeyMap | None]] = [(informer, None)]
        self.reconciled = 0
        """Calls of ``reconcile`` that returned (without raising)."""
        self.failed = 0
        """Calls of ``reconcile`` that raised (each retried later)."""

    def watches(self, informer: SharedInformer, keys: KeyMap) -> Controller:
        """Also reconcile, for each change to an object of ``informer``, the primary keys that
        ``keys(entry)`` names (for the object's state before and after the change)."""
        self._sources.append((informer, keys))
        return self

    def owns(self, informer: SharedInformer) -> Controller:
        """Also reconcile the primary object that controls each changed object of ``informer``
        (by ``ownerReferences``), as a Deployment controller watches its ReplicaSets."""
        return self.watches(informer, owner_keys(self.informer.store.kind))

    async def run(self) -> None:
        """Wait for every informer to sync, reconcile what is there, then every change, until
        cancelled (calls in progress are cancelled with it; keys waiting are dropped)."""
        unsubscribe = [informer.subscribe(self._enqueuer(keys)) for informer, keys in self._sources]
        try:
            await asyncio.gather(*(informer.wait_for_sync() for informer, _ in self._sources))
            for key in list(self.informer.store.keys()):
                self.queue.add(key)
            async with asyncio.TaskGroup() as tg:
                for i in range(self.workers):
                    tg.create_task(self._work(), name=f"{self.name} worker {i}")
        finally:
            for remove in unsubscribe:
                remove()
            self.queue.shut_down()

    def _enqueuer(self, keys: KeyMap | None) -> Callable[[InformerEvent], None]:
        """What turns one informer's events into keys on the queue."""
        add = self.queue.add

        def touched(entries: Iterable[Entry | None]) -> None:
            for entry in entries:
                if entry is not None:
                    for key in (entry.key,) if keys is None else keys(entry):
                        add(key)

        def on_event(event: InformerEvent) -> None:
            if isinstance(event, Changed):
                touched((event.entry, event.prev))
            elif isinstance(event, Relisted):
                for new, prev in event.changed:
                    touched((new, prev))
                touched(event.gone.values())

        return on_event

    async def _work(self) -> None:
        queue = self.queue
        while True:
            try:
                key = await queue.get()
            except ShutDown:
                return
            try:
                await self._reconcile(key)
            finally:
                queue.done(key)

    async def _reconcile(self, key: str) -> None:
        queue = self.queue
        entry = self.informer.store.get(key)
        try:
            outcome = await self.reconcile(key, None if entry is None else entry.parsed)
        except asyncio.CancelledError:
            raise
        except Exception:
            self.failed += 1
            log.exception(
                "%s: reconciling %s failed (try %d); retrying later",
                self.name,
                key,
                queue.num_requeues(key) + 1,
            )
            queue.add_rate_limited(key)
            return
        self.reconciled += 1
        queue.forget(key)
        if outcome is not None:
            queue.add_after(key, outcome.after)
