"""Warm restarts: the daemon keeps each cached resource's state on disk and starts from it.

The file format and its checks are the informer library's (:mod:`cacheproxy.informer.persistence`);
this is the policy around them (``persistence.*`` settings, docs/operations.md "Warm restarts"):

- **at start**, before any informer runs, each resource's snapshot is read; a whole, valid one of
  the same *identity* (the upstream server, the resource, its namespace, selectors and transform:
  :func:`identity_of`) restores the informer, which resumes its watch from the snapshot's RV
  instead of listing. Anything else is one log line and a normal first sync: a snapshot is
  never served unless it is whole and this configuration's. Resources added later by a reload
  sync from upstream.
- **every** ``interval`` **and at shutdown** (after the informers stopped), each resource whose
  RV moved since its last snapshot is written: its entries are gathered on the event loop at one
  RV (references to immutable bytes, no copy) and written in a thread, atomically, so serving
  never waits for the disk. A write that fails is logged and tried again next time; a write
  under way when the daemon stops is finished, not abandoned (a thread cannot be cancelled).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cacheproxy.informer import Collection, SharedInformer, Transform
from cacheproxy.informer.informer import CacheState
from cacheproxy.informer.persistence import (
    SnapshotFile,
    SnapshotRejected,
    SnapshotView,
    read_snapshot,
    remove_temporaries,
    snapshot_path,
    write_snapshot,
)
from cacheproxy.informer.reflector import RESUME_CONFIRMATION

__all__ = ["CachePersister", "PersistenceOptions", "identity_of", "prefetch_snapshots"]

log = logging.getLogger("cacheproxy.daemon.warmrestart")


@dataclass(frozen=True, slots=True)
class PersistenceOptions:
    """Where and how often the daemon keeps its resources' snapshots."""

    directory: Path | None = None
    """None: no snapshots (a cold start every time)."""
    interval: float = 60.0
    """Seconds between two rounds of writes."""
    serve_stale: bool = False
    """Serve a restored state before upstream confirmed it."""


def identity_of(server: str, collection: Collection, transform: Transform) -> dict[str, Any]:
    """What makes a snapshot this configuration's: another value anywhere is a foreign one."""
    rtype = collection.rtype
    return {
        "server": server,
        "resource": f"{rtype.group}/{rtype.version}/{rtype.resource}",
        "namespace": collection.namespace,
        "labelSelector": collection.label_selector,
        "fieldSelector": collection.field_selector,
        "transform": {
            "dropFields": list(transform.drop_fields),
            "metadataOnly": transform.metadata_only,
        },
    }


_prefetched: dict[Path, Future[SnapshotFile]] = {}


def prefetch_snapshots(options: PersistenceOptions, names: Iterable[str]) -> None:
    """Start reading the snapshots of resources ``names`` in ``options.directory`` (and hashing
    them) in a thread, for the restores to come: ``cacheproxy serve`` calls it before it loads the upstream's credentials, so
    the reading — 41 MB and its SHA-256 for 10 000 pods, ~50 ms without the GIL — runs beside that
    (the ``kubernetes`` package's import, ~0.1 s) instead of after it. A restore uses what was
    read only if the file is still the one read; anything else is read again, as without it."""
    directory = options.directory
    if directory is None:
        return
    paths = sorted((snapshot_path(directory, n) for n in names), key=_size, reverse=True)
    paths = [p for p in paths if _size(p)]
    if not paths:
        return
    reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="snapshot-prefetch")
    for path in paths:
        _prefetched[path] = reader.submit(SnapshotFile.read, path)
    reader.shutdown(wait=False)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _take_prefetched(path: Path) -> SnapshotFile | None:
    """What :func:`prefetch_snapshots` read of ``path``, if it is still that file (else None)."""
    future = _prefetched.pop(path, None)
    if future is None:
        return None
    try:
        read = future.result()
    except OSError:
        return None  # read again, and reported as any other failure
    return read if read.current(path) else None


@dataclass(slots=True)
class _Persisted:
    informer: SharedInformer
    path: Path
    identity: dict[str, Any]
    saved_rv: int | None


class CachePersister:
    """Restores tracked informers from their snapshots, and keeps the snapshots up to date
    (see the module). ``track`` each informer before :meth:`start`; :meth:`stop` writes the last
    snapshots."""

    def __init__(self, options: PersistenceOptions, *, server: str) -> None:
        assert options.directory is not None
        self.options = options
        self.directory = options.directory
        self.server = server
        self._kept: dict[str, _Persisted] = {}
        self._restored: list[SharedInformer] = []
        self._task: asyncio.Task[None] | None = None
        self._writing = asyncio.Lock()
        self._stopping = asyncio.Event()

    def track(
        self, name: str, informer: SharedInformer, *, collection: Collection, transform: Transform
    ) -> None:
        """Keep the snapshot of ``informer`` (of ``collection``, kept as ``transform`` says);
        before :meth:`start`, restore it from the one on disk."""
        identity = identity_of(self.server, collection, transform)
        path = snapshot_path(self.directory, name)
        saved = self._restore(name, informer, path, identity) if self._task is None else None
        self._kept[name] = _Persisted(informer, path, identity, saved)

    def forget(self, name: str) -> None:
        kept = self._kept.pop(name, None)
        if kept is not None and kept.informer in self._restored:
            self._restored.remove(kept.informer)

    def _restore(
        self, name: str, informer: SharedInformer, path: Path, identity: dict[str, Any]
    ) -> int | None:
        started = time.perf_counter()
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            remove_temporaries(path)
            entries, rv = read_snapshot(
                path, identity=identity, store=informer.store, read=_take_prefetched(path)
            )
        except FileNotFoundError:
            log.info("%s: no snapshot at %s; syncing from upstream", name, path)
            return None
        except SnapshotRejected as err:
            log.warning("%s: ignoring the snapshot %s: %s; syncing from upstream", name, path, err)
            return None
        except OSError as err:
            log.warning(
                "%s: cannot read the snapshot %s (%s); syncing from upstream", name, path, err
            )
            return None
        informer.restore(
            entries, rv, serve_stale=self.options.serve_stale, apply_after=self._watches_answered
        )
        self._restored.append(informer)
        log.info(
            "%s: restored %d objects at resourceVersion %d from %s in %.0f ms; resuming the watch",
            name,
            len(entries),
            rv,
            path,
            (time.perf_counter() - started) * 1000,
        )
        return rv

    async def _watches_answered(self) -> None:
        """Until every restored informer's resumed watch answered (at most the confirmation's
        moment): a restored state is applied then, not while other watches are still being
        opened (:meth:`SharedInformer.restore`)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(RESUME_CONFIRMATION):
                for informer in self._restored:
                    await informer.reflector.watch_answered.wait()

    def start(self) -> None:
        """Write the snapshots every interval from now on (the restores are done: what was
        prefetched and not used is dropped)."""
        _prefetched.clear()
        self._task = asyncio.create_task(self._every_interval(), name="persistence")

    async def _every_interval(self) -> None:
        while not self._stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self.options.interval)
            await self.save()

    async def save(self) -> int:
        """Write the snapshot of every resource whose RV moved since its last one; returns how
        many were written."""
        written = 0
        async with self._writing:
            for name, kept in list(self._kept.items()):
                store = kept.informer.store
                if kept.informer.state is CacheState.SYNCING:
                    continue  # nothing to keep yet
                if store.resource_version == kept.saved_rv:
                    continue
                view = SnapshotView.of(store, kept.identity)  # one RV: no await while gathering
                started = time.perf_counter()
                try:
                    size = await asyncio.to_thread(write_snapshot, kept.path, view)
                except Exception as err:  # a full disk, a bug: logged, tried again next time
                    log.warning("%s: could not write its snapshot %s: %s", name, kept.path, err)
                    continue
                kept.saved_rv = view.rv
                written += 1
                log.debug(
                    "%s: wrote %d objects at resourceVersion %d (%d bytes) in %.0f ms",
                    name,
                    len(view.entries),
                    view.rv,
                    size,
                    (time.perf_counter() - started) * 1000,
                )
        return written

    async def stop(self) -> None:
        """Stop the periodic writes and write the last snapshots (call once the informers have
        stopped: their final state)."""
        self._stopping.set()
        if self._task is not None:
            await self._task  # a write under way finishes (a thread cannot be cancelled)
        else:
            await self.save()
