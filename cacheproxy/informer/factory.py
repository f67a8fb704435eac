"""SharedInformerFactory: one SharedInformer per collection, shared by everyone who asks for it.

A collection is resource + namespace + label selector + field selector (client-go's
``SharedInformerFactory`` keyed by type, with tweaks). The factory does not know how to reach an
API server: it is given a function that makes a ListerWatcher for a collection (the daemon passes
``cacheproxy.upstream``'s; tests pass a fake).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from cacheproxy.informer.eventlog import EventLog
from cacheproxy.informer.indexes import IndexFunc
from cacheproxy.informer.informer import SharedInformer
from cacheproxy.informer.instruments import InformerMetrics
from cacheproxy.informer.listwatch import ListerWatcher
from cacheproxy.informer.packing import Storage
from cacheproxy.informer.reflector import ReflectorOptions
from cacheproxy.informer.store import Store, Transform
from cacheproxy.kube.resources import ResourceType
from cacheproxy.tasks import cancel_and_wait

__all__ = ["Collection", "ListerWatcherFactory", "SharedInformerFactory"]


@dataclass(frozen=True, slots=True)
class Collection:
    """What one informer lists and watches: a resource, optionally one namespace, and the
    selectors applied upstream. The factory's key: one informer per collection."""

    rtype: ResourceType
    namespace: str | None = None
    label_selector: str = ""
    field_selector: str = ""

    @property
    def name(self) -> str:
        parts = [self.rtype.config_name]
        if self.namespace:
            parts.append(f"ns={self.namespace}")
        if self.label_selector:
            parts.append(f"labels={self.label_selector}")
        if self.field_selector:
            parts.append(f"fields={self.field_selector}")
        return " ".join(parts)


ListerWatcherFactory = Callable[[Collection], ListerWatcher]


class SharedInformerFactory:
    """Makes, starts and stops shared informers. Use ``async with factory:`` or start()/stop()."""

    def __init__(
        self,
        lw_factory: ListerWatcherFactory,
        *,
        reflector_options: ReflectorOptions | None = None,
        metrics: InformerMetrics | None = None,
    ) -> None:
        self._lw_factory = lw_factory
        self._reflector_options = reflector_options
        self._metrics = metrics
        self._informers: dict[Collection, SharedInformer] = {}
        self._tasks: dict[Collection, asyncio.Task[None]] = {}
        self._started = False

    def informer(
        self,
        collection: Collection,
        *,
        field_indexes: Sequence[str] = (),
        indexers: Mapping[str, IndexFunc] | None = None,
        transform: Transform | None = None,
        storage: Storage | None = None,
        history: int = 100_000,
        resync_period: float | None = None,
    ) -> SharedInformer:
        """The informer of ``collection``, made on first request (later options are ignored:
        the first asker configures it, as with client-go's factory)."""
        existing = self._informers.get(collection)
        if existing is not None:
            return existing
        rtype = collection.rtype
        informer = SharedInformer(
            self._lw_factory(collection),
            name=collection.name,
            store=Store(
                kind=rtype.kind,
                api_version=rtype.api_version,
                field_indexes=field_indexes,
                indexers=indexers,
                transform=transform,
                storage=storage,
            ),
            event_log=EventLog(max_events=history),
            reflector_options=self._reflector_options,
            resync_period=resync_period,
            metrics=self._metrics,
        )
        self._informers[collection] = informer
        if self._started:
            self._start(collection, informer)
        return informer

    def __iter__(self) -> Iterator[SharedInformer]:
        return iter(self._informers.values())

    def start(self) -> None:
        """Start every informer made so far (and those made later)."""
        self._started = True
        for collection, informer in self._informers.items():
            self._start(collection, informer)

    def _start(self, collection: Collection, informer: SharedInformer) -> None:
        if collection not in self._tasks:
            task = asyncio.get_running_loop().create_task(
                informer.run(), name=f"informer {collection.name}"
            )
            task.add_done_callback(self._log_exit)
            self._tasks[collection] = task

    @staticmethod
    def _log_exit(task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            import logging

            logging.getLogger(__name__).error(
                "informer task %s crashed", task.get_name(), exc_info=task.exception()
            )

    async def remove(self, collection: Collection) -> None:
        """Stop and forget the informer of ``collection`` (a resource no longer wanted)."""
        self._informers.pop(collection, None)
        await cancel_and_wait(self._tasks.pop(collection, None))

    async def wait_for_cache_sync(self, within: float | None = None) -> bool:
        """True once every informer has synced; False if ``within`` seconds passed first."""
        waits = [informer.wait_for_sync() for informer in self._informers.values()]
        try:
            async with asyncio.timeout(within):
                await asyncio.gather(*waits)
        except TimeoutError:
            return False
        return True

    async def stop(self) -> None:
        self._started = False
        tasks = list(self._tasks.values())
        self._tasks.clear()
        await cancel_and_wait(*tasks)

    async def __aenter__(self) -> SharedInformerFactory:
        self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
