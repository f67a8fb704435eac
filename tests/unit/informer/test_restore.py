"""A warm restart: an informer restored from a snapshot resumes the watch from its RV (no list),
counts as synced once upstream confirms it (or at once with ``serve_stale``), and relists on a
410 — delivering the difference, as after any relist."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from cacheproxy.errors import TransportError
from cacheproxy.informer import (
    CoalescingInformer,
    FakeListerWatcher,
    ListRequest,
    ReflectorOptions,
    Relisted,
    SharedInformer,
    Store,
    WatchRequest,
)
from cacheproxy.informer.informer import CacheState
from cacheproxy.kube import status
from tests.support import running_informer, settle


def cm(name: str, **data: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default"}, "data": data}


async def no_sleep(_: float) -> None:
    await asyncio.sleep(0)


def upstream() -> FakeListerWatcher:
    lw = FakeListerWatcher()
    for name in ("a", "b", "c"):
        lw.emit("ADDED", cm(name))
    return lw


def restored_from(
    lw: FakeListerWatcher, *, serve_stale: bool = False, **options: Any
) -> SharedInformer:
    """An informer restored from what ``lw`` holds now (as a snapshot written at this RV)."""
    informer = SharedInformer(
        lw,
        name="cms",
        store=Store(kind="ConfigMap", api_version="v1"),
        reflector_options=ReflectorOptions(**options),
        sleep=no_sleep,
    )
    entries = [informer.store.make_entry(dict(o)) for o in lw.objects.values()]
    informer.restore(entries, lw.rv, serve_stale=serve_stale)
    return informer


async def test_a_restored_informer_resumes_the_watch_from_the_snapshots_rv_without_a_list() -> None:
    lw = upstream()
    informer = restored_from(lw)
    async with running_informer(informer, synced=False):
        await settle(lambda: informer.state is CacheState.RESTORED)
        assert sorted(informer.store.keys()) == ["default/a", "default/b", "default/c"]
        assert not informer.has_synced  # not served before upstream confirmed it
        lw.emit("ADDED", cm("d"))
        await asyncio.wait_for(informer.wait_for_sync(), 5)
        await settle(lambda: "default/d" in informer.store)
        assert informer.state is CacheState.CONFIRMED
    assert not [r for r in lw.requests if isinstance(r, ListRequest)]
    [watch] = [r for r in lw.requests if isinstance(r, WatchRequest)]
    assert watch.resource_version == "4" and not watch.send_initial_events
    assert informer.store.resource_version == 5
    assert informer.event_log.oldest_resumable == 4


async def test_a_quiet_resumed_watch_confirms_after_a_moment_without_an_error() -> None:
    lw = upstream()
    informer = restored_from(lw)
    async with running_informer(informer, synced=False):
        await asyncio.wait_for(informer.wait_for_sync(), 5)  # no_sleep: the moment is now
        assert informer.state is CacheState.CONFIRMED
        assert informer.reflector.synced.is_set()


async def test_serve_stale_counts_a_restored_state_as_synced_at_once() -> None:
    lw = upstream()
    for _ in range(100):  # upstream does not answer yet
        lw.fail_next_watch(TransportError("connection refused"))
    informer = restored_from(lw, serve_stale=True)
    async with running_informer(informer, synced=False):
        await asyncio.wait_for(informer.wait_for_sync(), 5)
        assert informer.state is CacheState.RESTORED
        assert len(informer.store) == 3


async def test_an_expired_rv_relists_once_and_delivers_the_difference() -> None:
    lw = upstream()
    informer = restored_from(lw, serve_stale=True, watch_list=False)
    differences: list[Relisted] = []
    informer.subscribe(lambda e: differences.append(e) if isinstance(e, Relisted) else None)
    lw.emit("DELETED", cm("a"))
    lw.emit("MODIFIED", cm("b", x="1"))
    lw.emit("ADDED", cm("e"), missed=True)  # the snapshot's RV fell out of upstream's history
    async with running_informer(informer, synced=False):
        await settle(lambda: informer.state is CacheState.SYNCED)
        assert sorted(informer.store.keys()) == ["default/b", "default/c", "default/e"]
    lists = [r for r in lw.requests if isinstance(r, ListRequest)]
    assert [r.resource_version for r in lists] == ["4"]  # one relist, at the snapshot's RV
    restored, difference = differences
    assert restored.first and restored.restored and not difference.first
    assert difference.before == 4 and difference.rv == 7
    assert sorted(new.key for new, _ in difference.changed) == ["default/b", "default/e"]
    assert list(difference.gone) == ["default/a"]
    assert informer.relists == 2  # the restored state counts as the first sync


async def test_an_expired_rv_without_serve_stale_syncs_from_the_relist() -> None:
    lw = upstream()
    informer = restored_from(lw, watch_list=False)
    lw.emit("ADDED", cm("e"), missed=True)
    async with running_informer(informer, synced=False):
        await asyncio.wait_for(informer.wait_for_sync(), 5)
        await settle(lambda: informer.state is CacheState.SYNCED)
        assert "default/e" in informer.store


def test_only_an_informer_that_has_not_started_can_be_restored() -> None:
    informer = CoalescingInformer(
        FakeListerWatcher(),
        name="x",
        store=Store(kind="ConfigMap", api_version="v1"),
    )
    with pytest.raises(TypeError, match="coalescing"):
        informer.restore([], 1)


async def test_a_410_on_the_resumed_watchs_start_relists_too() -> None:
    lw = upstream()
    lw.fail_next_watch(status.expired("too old resource version: 4 (9)"))
    informer = restored_from(lw, watch_list=False)
    async with running_informer(informer, synced=False):
        await asyncio.wait_for(informer.wait_for_sync(), 5)
        await settle(lambda: informer.state is CacheState.SYNCED)
    assert [r.resource_version for r in lw.requests if isinstance(r, ListRequest)] == ["4"]


async def test_a_broken_resumed_watch_is_resumed_again_from_the_snapshot_not_relisted() -> None:
    lw = upstream()
    lw.fail_next_watch(TransportError("connection reset"))
    informer = restored_from(lw)
    async with running_informer(informer, synced=False):
        await asyncio.wait_for(informer.wait_for_sync(), 5)
        assert informer.state is CacheState.CONFIRMED
    watches = [r for r in lw.requests if isinstance(r, WatchRequest)]
    assert [w.resource_version for w in watches] == ["4", "4"]
    assert not [r for r in lw.requests if isinstance(r, ListRequest)]
