"""The informer's one-way flow: the reflector's objects become entries the store keeps, the store
moves its own RV with what it applies, and a relist's difference goes out as one record, with no
RV made up for what vanished."""

from __future__ import annotations

import asyncio
from typing import Any

from cacheproxy.informer import (
    Changed,
    Delta,
    Entry,
    FakeListerWatcher,
    Relisted,
    SharedInformer,
    Store,
    Synced,
)
from cacheproxy.kube import status
from tests.support import running_informer, settle


def cm(name: str, **data: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default"}, "data": data}


async def _no_wait(_: float) -> None:
    await asyncio.sleep(0)


def make(lw: FakeListerWatcher) -> SharedInformer:
    return SharedInformer(
        lw, name="cms", store=Store(kind="ConfigMap", api_version="v1"), sleep=_no_wait
    )


async def test_the_store_is_at_the_rv_of_what_it_applied_last() -> None:
    lw = FakeListerWatcher()
    lw.emit("ADDED", cm("a"))
    informer = make(lw)
    async with running_informer(informer):
        store = informer.store
        assert store.resource_version == 2  # the sync's
        lw.emit("MODIFIED", cm("a", v="1"))
        await settle(lambda: store.resource_version == 3)
        lw.emit("DELETED", cm("a"))
        await settle(lambda: store.resource_version == 4 and "default/a" not in store)
        lw.rv = 9  # upstream moved on elsewhere: a bookmark says so
        lw.bookmark()
        await settle(lambda: store.resource_version == 9)


def test_the_store_moves_its_rv_with_each_change_and_never_back_on_a_bookmark() -> None:
    store = Store(kind="ConfigMap", api_version="v1")
    store.put(store.make_entry(cm("a")), rv=5)
    assert store.resource_version == 5
    store.delete("default/a", rv=6)
    assert store.resource_version == 6
    store.advance(4)
    assert store.resource_version == 6
    store.advance(9)
    assert store.resource_version == 9
    store.replace([], 7)  # a relist may go back (an upstream restored from a backup)
    assert store.resource_version == 7


async def test_objects_queued_as_parsed_are_made_entries_by_the_informer() -> None:
    informer = make(FakeListerWatcher())
    async with running_informer(informer):
        await informer.queue.put(Delta("ADDED", cm("raw"), 10))
        await settle(lambda: "default/raw" in informer.store)
        entry = informer.store.get("default/raw")
        assert isinstance(entry, Entry) and informer.store.resource_version == 10


async def test_a_relist_tells_subscribers_its_difference_in_order() -> None:
    lw = FakeListerWatcher()
    for name in ("a", "b", "c"):
        lw.emit("ADDED", cm(name))
    informer = make(lw)
    heard: list[Any] = []
    informer.subscribe(heard.append)
    async with running_informer(informer):
        first, synced = heard
        assert isinstance(first, Relisted) and first.first and first.rv == 4
        assert len(first.changed) == 3 and not first.gone
        assert synced == Synced(4)
        before = informer.store.resource_version
        lw.emit("DELETED", cm("a"), missed=True)
        lw.emit("MODIFIED", cm("b", v="2"), missed=True)
        lw.emit("ADDED", cm("d"), missed=True)
        lw.break_watches(status.too_old_resource_version(before, before + 3))
        await settle(lambda: any(isinstance(e, Relisted) for e in heard[2:]))
    [difference] = [e for e in heard[2:] if isinstance(e, Relisted)]
    assert not difference.first and not difference.restored
    assert difference.rv == informer.store.resource_version
    assert difference.before == before
    assert sorted((new.key, prev is None) for new, prev in difference.changed) == [
        ("default/b", False),
        ("default/d", True),
    ]
    assert list(difference.gone) == ["default/a"]
    assert difference.gone["default/a"].rv == 2  # its last known state, as it was stored


async def test_subscribers_get_the_changes_the_event_log_records_and_no_more() -> None:
    lw = FakeListerWatcher()
    lw.emit("ADDED", cm("a"))
    informer = make(lw)
    seen: list[tuple[str, str]] = []
    informer.subscribe(
        lambda event: (
            seen.append((event.type, event.entry.key)) if isinstance(event, Changed) else None
        )
    )
    async with running_informer(informer):
        lw.emit("ADDED", cm("b"), missed=True)
        lw.break_watches(status.too_old_resource_version(1, 2))
        await settle(lambda: informer.relists == 2)
        lw.emit("ADDED", cm("c"))
        await settle(lambda: len(seen) == 1)
        log = informer.event_log
        assert [(e.type, e.entry.key) for e in log.since(log.oldest_resumable)] == seen
    assert seen == [("ADDED", "default/c")]  # the relist's "b" went to difference listeners
