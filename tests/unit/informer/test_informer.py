"""SharedInformer: store, event log, listeners and handlers over a FakeListerWatcher."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from cacheproxy.informer import (
    Changed,
    CoalescingInformer,
    DeletedFinalStateUnknown,
    Delta,
    Entry,
    FakeListerWatcher,
    FuncHandler,
    Overflow,
    Relisted,
    SharedInformer,
    Store,
    Synced,
    TooOld,
)
from cacheproxy.kube import status
from tests.support import running_informer, settle


def cm(name: str, **data: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default"}, "data": data}


class Recorder:
    """A handler that records notifications and replays them on a map."""

    def __init__(self) -> None:
        self.log: list[tuple[str, str, bool | None]] = []
        self.state: dict[str, bytes] = {}
        self.tombstones: list[DeletedFinalStateUnknown[Entry]] = []

    def on_add(self, entry: Entry, initial: bool) -> None:
        self.log.append(("add", entry.key, initial))
        self.state[entry.key] = entry.raw

    def on_update(self, old: Entry, new: Entry) -> None:
        assert old.key == new.key
        self.log.append(("update", new.key, None))
        self.state[new.key] = new.raw

    def on_delete(self, entry: Entry | DeletedFinalStateUnknown[Entry]) -> None:
        key = entry.key
        if isinstance(entry, DeletedFinalStateUnknown):
            self.tombstones.append(entry)
        self.log.append(("delete", key, isinstance(entry, DeletedFinalStateUnknown)))
        self.state.pop(key, None)


@pytest.fixture
def fake() -> FakeListerWatcher:
    lw = FakeListerWatcher()
    lw.emit("ADDED", cm("a"))
    lw.emit("ADDED", cm("b"))
    return lw


async def no_wait(seconds: float) -> None:
    """Backoffs pass at once: these tests are about what happens, not when."""
    await asyncio.sleep(0)


def make(fake: FakeListerWatcher) -> SharedInformer:
    return SharedInformer(
        fake, name="cms", store=Store(kind="ConfigMap", api_version="v1"), sleep=no_wait
    )


def store_state(informer: SharedInformer) -> dict[str, bytes]:
    return {e.key: e.raw for e in informer.store.entries()}


async def test_handlers_see_the_initial_list_then_every_change_in_order(
    fake: FakeListerWatcher,
) -> None:
    informer = make(fake)
    rec = Recorder()
    reg = informer.add_handler(rec)
    async with running_informer(informer):
        await settle(lambda: reg.has_synced)
        fake.emit("MODIFIED", cm("a", x="1"))
        fake.emit("ADDED", cm("c"))
        fake.emit("DELETED", cm("b"))
        await settle(lambda: len(rec.log) == 5)
        assert rec.state == store_state(informer)
    assert rec.log == [
        ("add", "default/a", True),
        ("add", "default/b", True),
        ("update", "default/a", None),
        ("add", "default/c", False),
        ("delete", "default/b", False),
    ]


async def test_a_handler_added_late_gets_the_current_state_first(fake: FakeListerWatcher) -> None:
    informer = make(fake)
    async with running_informer(informer):
        fake.emit("ADDED", cm("c"))
        await settle(lambda: len(informer.store) == 3)
        rec = Recorder()
        reg = informer.add_handler(rec)
        await settle(lambda: reg.has_synced)
        fake.emit("DELETED", cm("a"))
        await settle(lambda: len(rec.log) == 4)
    assert rec.log[:3] == [("add", k, True) for k in ("default/a", "default/b", "default/c")]
    assert rec.log[3] == ("delete", "default/a", False)


async def test_a_relist_tells_handlers_the_difference_with_tombstones(
    fake: FakeListerWatcher,
) -> None:
    informer = make(fake)
    rec = Recorder()
    reg = informer.add_handler(rec)
    relists: list[int] = []
    informer.subscribe(lambda e: relists.append(e.rv) if isinstance(e, Relisted) else None)
    async with running_informer(informer):
        await settle(lambda: reg.has_synced)
        # Changes the informer misses, then a 410 forces a relist.
        fake.emit("DELETED", cm("a"), missed=True)
        fake.emit("MODIFIED", cm("b", y="2"), missed=True)
        fake.emit("ADDED", cm("d"), missed=True)
        fake.break_watches(status.too_old_resource_version(4, 6))
        await settle(lambda: len(relists) == 2 and len(rec.log) == 5)
        assert rec.state == store_state(informer)
    assert sorted(rec.log[2:]) == [
        ("add", "default/d", False),
        ("delete", "default/a", True),
        ("update", "default/b", None),
    ]
    [tombstone] = rec.tombstones  # carries the last known state, as the store kept it
    assert isinstance(tombstone.object, Entry) and tombstone.object.key == tombstone.key


async def test_every_change_reaches_the_event_log_and_subscribers_with_its_previous_state(
    fake: FakeListerWatcher,
) -> None:
    informer = make(fake)
    seen: list[Changed] = []
    informer.subscribe(lambda e: seen.append(e) if isinstance(e, Changed) else None)
    async with running_informer(informer):
        start = informer.store.resource_version
        fake.emit("MODIFIED", cm("a", v="1"))
        fake.emit("DELETED", cm("b"))
        await settle(lambda: len(seen) == 2)
        events = informer.event_log.since(start)
    assert [(e.type, e.entry.key, e.rv) for e in events] == [
        ("MODIFIED", "default/a", start + 1),
        ("DELETED", "default/b", start + 2),
    ]
    assert seen == events
    assert events[0].prev is not None and events[0].prev.rv == 2
    assert events[1].prev is not None and events[1].entry.rv == start + 2
    with pytest.raises(TooOld):
        informer.event_log.since(start - 1)


async def test_a_dropping_handler_that_falls_behind_is_removed_and_told(
    fake: FakeListerWatcher,
) -> None:
    informer = make(fake)
    gate = asyncio.Event()
    overflowed: list[bool] = []

    async def slow_add(entry: Entry, initial: bool) -> None:
        await gate.wait()

    reg = informer.add_handler(
        FuncHandler(add=slow_add),
        buffer=2,
        overflow=Overflow.DROP,
        on_overflow=lambda: overflowed.append(True),
    )
    fast = Recorder()
    informer.add_handler(fast)
    async with running_informer(informer):
        for i in range(5):
            fake.emit("ADDED", cm(f"n{i}"))
        await settle(lambda: len(fast.log) == 7)
        gate.set()
    assert overflowed == [True]
    assert reg.removed


async def test_a_blocking_handler_makes_the_informer_wait_and_loses_nothing(
    fake: FakeListerWatcher,
) -> None:
    informer = make(fake)
    gate = asyncio.Event()
    got: list[str] = []

    async def slow_add(entry: Entry, initial: bool) -> None:
        await gate.wait()
        got.append(entry.key)

    informer.add_handler(FuncHandler(add=slow_add), buffer=1)
    async with running_informer(informer):
        for i in range(5):
            fake.emit("ADDED", cm(f"n{i}"))
        await asyncio.sleep(0.05)
        assert len(informer.store) < 7  # the informer is held back by the handler
        gate.set()
        await settle(lambda: len(got) == 7)
    assert len(informer.store) == 7


async def test_a_failing_handler_is_logged_and_keeps_receiving(fake: FakeListerWatcher) -> None:
    informer = make(fake)
    calls: list[str] = []

    def explode(entry: Entry, initial: bool) -> None:
        calls.append(entry.key)
        raise RuntimeError("handler bug")

    reg = informer.add_handler(FuncHandler(add=explode))
    async with running_informer(informer):
        fake.emit("ADDED", cm("z"))
        await settle(lambda: len(calls) == 3)
    assert reg.errors == 3


async def test_an_upstream_410_relists_and_resets_the_event_log(fake: FakeListerWatcher) -> None:
    informer = make(fake)
    resets: list[int] = []
    informer.subscribe(lambda e: resets.append(e.rv) if isinstance(e, Relisted) else None)
    async with running_informer(informer):
        fake.break_watches(status.too_old_resource_version(1, 5))
        await settle(lambda: len(resets) == 2)
        assert informer.event_log.oldest_resumable == resets[-1]
    assert informer.relists == 2


async def test_coalescing_mode_keeps_the_latest_state_and_tells_handlers(
    fake: FakeListerWatcher,
) -> None:
    informer = CoalescingInformer(
        fake,
        name="cms",
        store=Store(kind="ConfigMap", api_version="v1"),
        sleep=no_wait,
    )
    rec = Recorder()
    reg = informer.add_handler(rec)
    async with running_informer(informer):
        await settle(lambda: reg.has_synced)
        for i in range(5):
            fake.emit("MODIFIED", cm("a", n=str(i)))
        fake.emit("DELETED", cm("b"))
        fake.emit("ADDED", cm("c"))
        await settle(lambda: "default/c" in rec.state and "default/b" not in rec.state)
        await settle(lambda: rec.state == store_state(informer))
    assert informer.store.get("default/a") is not None
    assert informer.store.get("default/a").object()["data"] == {"n": "4"}  # type: ignore[union-attr]
    assert set(informer.store.keys()) == {"default/a", "default/c"}


async def test_a_coalescing_informers_subscribers_hear_each_change_applied(
    fake: FakeListerWatcher,
) -> None:
    informer = CoalescingInformer(
        fake, name="cms", store=Store(kind="ConfigMap", api_version="v1"), sleep=no_wait
    )
    heard: list[Any] = []
    informer.subscribe(heard.append)
    async with running_informer(informer):
        fake.emit("MODIFIED", cm("a", n="1"))
        fake.emit("DELETED", cm("b"))
        await settle(lambda: "default/b" not in informer.store)
    changes = [(e.type, e.entry.key) for e in heard if isinstance(e, Changed)]
    assert changes[:2] == [("ADDED", "default/a"), ("ADDED", "default/b")]  # the first list
    assert changes[2:] == [("MODIFIED", "default/a"), ("DELETED", "default/b")]
    assert not any(isinstance(e, Relisted) for e in heard)
    assert sum(isinstance(e, Synced) for e in heard) == 1
    assert len(informer.event_log) == 0  # no EventLog: nothing resumes from merged changes


async def test_coalescing_mode_syncs_on_an_empty_list() -> None:
    informer = CoalescingInformer(
        FakeListerWatcher(),
        name="empty",
        store=Store(kind="ConfigMap", api_version="v1"),
    )
    async with running_informer(informer):
        assert informer.has_synced
        assert len(informer.store) == 0


async def test_a_backlog_longer_than_one_drain_batch_loses_nothing(fake: FakeListerWatcher) -> None:
    informer = make(fake)
    async with running_informer(informer):
        # Queue far more items than one processing batch takes, without yielding in between.
        for i in range(3000):
            await informer.queue.put(Delta("ADDED", cm(f"bulk-{i}"), 10 + i))
        await settle(lambda: informer.events_processed == 3000)
        await asyncio.sleep(0.01)
    assert len(informer.store) == 3002
