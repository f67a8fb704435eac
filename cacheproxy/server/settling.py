"""Holding a write's answer until the cache holds the write, so that its writer sees it through
the daemon as soon as it would straight from the API server.

A client-go controller writes, then reads its informer's cache, fed by a watch; straight from
the API server the write's watch event comes within a millisecond or two of its answer.
Through the daemon the event takes one more hop (upstream → the daemon's informer → the
client's watch), so a controller whose next sync runs at once finds its informer behind its own
write ("informer cache is out of date"), backs off, or writes from a stale object and gets a
409. So a write to a cached resource is answered once the cache holds it — its event has been
applied and offered to every watcher — for at most :attr:`.ServedResource.write_settle` seconds,
then answered anyway. What "holds it" means depends on the answer:

- an object (a create, update or patch, a delete that returns the object, a ``status`` or
  ``scale`` write): the cache reached the answer's resourceVersion;
- a ``Status`` (a delete of an object gone at once), a ``binding`` or an ``eviction``, which say
  no resourceVersion: the cache's entry at that key changed (gone, or at a newer resourceVersion)
  from what it held when the request came;
- a ``deletecollection``: every entry the request selected when it came changed or went (its
  list answer may be protobuf, and its own resourceVersion is not one the resource's cache is
  bound to reach).

Nothing is held while the resource's upstream watch is down, for a dry run, or where the cache
does not see every object of the collection written to (a resource cached with selectors).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping

from cacheproxy.informer.events import Changed, InformerEvent, Relisted
from cacheproxy.informer.store import Store

__all__ = ["ABSENT", "SETTLED_SUBRESOURCES", "KeyChanges"]

ABSENT = -1
"""The version of an entry the cache does not hold."""

SETTLED_SUBRESOURCES = frozenset({"", "status", "scale", "binding", "eviction"})
"""Writes whose answer is held for the cache (``""``: the object itself): those that change
the object the cache holds. Others (``serviceaccounts/token``, ``pods/log``) change nothing
cached."""


class KeyChanges:
    """Writes waiting for entries of one store to change: each waits for its entries (key → the
    resourceVersion each had before the write, :data:`ABSENT` for none) to be gone or newer.
    :meth:`observe` is the store's subscriber; :meth:`wait` returns once all changed, or when
    ``within`` seconds passed (False then)."""

    __slots__ = ("_store", "_waiting")

    def __init__(self, store: Store) -> None:
        self._store = store
        self._waiting: dict[str, list[tuple[int, asyncio.Future[None]]]] = {}

    def __bool__(self) -> bool:
        return bool(self._waiting)

    def changed(self, key: str, before: int) -> bool:
        """Whether the cache's entry at ``key`` is gone or newer than ``before``."""
        entry = self._store.get(key)
        return entry is None or entry.rv > before

    async def wait(self, versions: Mapping[str, int], *, within: float) -> bool:
        """Until every entry of ``versions`` changed (True), or ``within`` seconds (False)."""
        pending = {
            key: rv for key, rv in versions.items() if rv != ABSENT and not self.changed(key, rv)
        }
        if not pending:
            return True
        loop = asyncio.get_running_loop()
        futures = {key: loop.create_future() for key in pending}
        for key, future in futures.items():
            self._waiting.setdefault(key, []).append((pending[key], future))
        try:
            done, _ = await asyncio.wait(futures.values(), timeout=within)
            return len(done) == len(futures)
        finally:
            for key, future in futures.items():
                future.cancel()
                self._forget(key, future)

    def observe(self, event: InformerEvent) -> None:
        """Wake the writes whose entries this event changed."""
        if not self._waiting:
            return
        match event:
            case Changed():
                self._wake(event.entry.key)
            case Relisted():
                self._wake_all(list(self._waiting))

    def _wake(self, key: str) -> None:
        waiting = self._waiting.get(key)
        if not waiting:
            return
        for before, future in waiting:
            if not future.done() and self.changed(key, before):
                future.set_result(None)

    def _wake_all(self, keys: Iterable[str]) -> None:
        for key in keys:
            self._wake(key)

    def _forget(self, key: str, future: asyncio.Future[None]) -> None:
        waiting = self._waiting.get(key)
        if waiting is None:
            return
        waiting[:] = [(rv, f) for rv, f in waiting if f is not future]
        if not waiting:
            del self._waiting[key]
