"""The coalescing queue (client-go's classic DeltaFIFO): per-key delta lists in FIFO order of keys,
deletes deduplicated but never lost, relist tombstones, has_synced, resync of idle keys, bounded
by pending keys; and the property that a consumer of the popped deltas ends with the same state
as one applying every raw event."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cacheproxy.informer import (
    Bookmark,
    CoalescedDelta,
    CoalescingQueue,
    DeletedFinalStateUnknown,
    Delta,
    Deltas,
    QueueItem,
    Replaced,
    coalescing,
)

Obj = dict[str, Any]


def obj(name: str, version: int = 1, *, namespace: str = "ns") -> Obj:
    return {"metadata": {"namespace": namespace, "name": name}, "data": {"v": version}}


def summary(item: Deltas | Bookmark | None) -> tuple[str, list[tuple[str, Any]]]:
    """``(key, [(type, version or ("tombstone", version)), ...])`` for short assertions."""
    assert isinstance(item, Deltas), item

    def version(o: Obj | DeletedFinalStateUnknown | None) -> Any:
        if isinstance(o, DeletedFinalStateUnknown):
            return ("tombstone", version(o.object))
        return None if o is None else o["data"]["v"]

    return item.key, [(d.type, version(d.object)) for d in item.deltas]


async def never_returns_within(awaitable: Any, seconds: float = 0.05) -> bool:
    try:
        async with asyncio.timeout(seconds):
            await awaitable
    except TimeoutError:
        return True
    return False


def test_the_public_surface_is_the_queue_its_items_its_informer_and_the_store_protocol() -> None:
    assert set(coalescing.__all__) == {
        "CoalescedDelta",
        "CoalescingInformer",
        "CoalescingQueue",
        "DeletedFinalStateUnknown",
        "DeltaType",
        "Deltas",
        "KnownObjects",
    }


async def test_deltas_of_one_key_come_together_in_fifo_order_of_their_first_delta() -> None:
    q = CoalescingQueue({})
    await q.put(Delta("ADDED", obj("a", 1), 1))
    await q.put(Delta("ADDED", obj("b", 1), 2))
    await q.put(Delta("MODIFIED", obj("a", 2), 3))
    await q.put(Delta("ADDED", obj("c", 1), 4))
    await q.put(Delta("DELETED", obj("b", 1), 5))
    assert q.qsize() == 3
    a = await q.get()
    assert a == Deltas(
        "ns/a",
        (CoalescedDelta("Added", obj("a", 1), 1), CoalescedDelta("Updated", obj("a", 2), 3)),
    )
    assert summary(await q.get()) == ("ns/b", [("Added", 1), ("Deleted", 1)])
    assert summary(await q.get()) == ("ns/c", [("Added", 1)])
    assert q.qsize() == 0


async def test_a_cluster_scoped_object_is_keyed_by_its_name_alone() -> None:
    q = CoalescingQueue({})
    await q.put(Delta("ADDED", {"metadata": {"name": "node-1"}, "data": {"v": 1}}, 1))
    assert summary(q.get_nowait()) == ("node-1", [("Added", 1)])


async def test_a_key_popped_then_changed_again_goes_to_the_back() -> None:
    q = CoalescingQueue({})
    await q.put(Delta("ADDED", obj("a"), 1))
    await q.put(Delta("ADDED", obj("b"), 2))
    assert summary(await q.get()) == ("ns/a", [("Added", 1)])
    await q.put(Delta("MODIFIED", obj("a", 2), 3))
    assert [summary(q.get_nowait())[0] for _ in range(2)] == ["ns/b", "ns/a"]


async def test_get_waits_until_something_is_put() -> None:
    q = CoalescingQueue({})
    getter = asyncio.create_task(q.get(), name="getter")
    try:
        await asyncio.sleep(0)
        assert not getter.done()
        await q.put(Delta("ADDED", obj("a"), 1))
        assert summary(await asyncio.wait_for(getter, 1)) == ("ns/a", [("Added", 1)])
    finally:
        getter.cancel()


async def test_two_consecutive_real_deletes_collapse_into_the_older_one() -> None:
    q = CoalescingQueue({"ns/a": obj("a", 1)})
    await q.put(Delta("DELETED", obj("a", 1), 2))
    await q.put(Delta("DELETED", obj("a", 2), 3))
    assert summary(q.get_nowait()) == ("ns/a", [("Deleted", 1)])


async def test_a_relist_tombstone_then_the_real_delete_collapse_into_the_real_delete() -> None:
    store = {"ns/a": obj("a", 1)}
    q = CoalescingQueue(store)
    await q.put(Replaced([], 5))  # `a` vanished: tombstone
    await q.put(Delta("DELETED", obj("a", 2), 6))  # the watch then reports the real final state
    item = q.get_nowait()
    assert summary(item) == ("ns/a", [("Deleted", 2)])
    assert isinstance(item, Deltas) and item.newest.rv == 6


async def test_a_real_delete_then_a_relist_tombstone_keep_the_real_delete() -> None:
    q = CoalescingQueue({"ns/a": obj("a", 1)})
    await q.put(Delta("DELETED", obj("a", 2), 6))
    await q.put(Replaced([], 7))
    assert summary(q.get_nowait()) == ("ns/a", [("Deleted", 2)])


async def test_deletes_separated_by_another_delta_are_both_kept() -> None:
    q = CoalescingQueue({"ns/a": obj("a", 1)})
    await q.put(Delta("DELETED", obj("a", 1), 2))
    await q.put(Delta("ADDED", obj("a", 2), 3))
    await q.put(Delta("DELETED", obj("a", 2), 4))
    assert summary(q.get_nowait()) == ("ns/a", [("Deleted", 1), ("Added", 2), ("Deleted", 2)])


async def test_a_delete_of_a_key_neither_pending_nor_stored_is_ignored_as_already_reported() -> (
    None
):
    store: dict[str, Obj] = {"ns/a": obj("a", 1)}
    q = CoalescingQueue(store)
    await q.put(Replaced([], 5))
    tombstone = q.get_nowait()
    assert summary(tombstone) == ("ns/a", [("Deleted", ("tombstone", 1))])
    del store["ns/a"]  # the consumer applied the tombstone
    await q.put(Delta("DELETED", obj("a", 2), 6))  # the same deletion, seen late by the watch
    assert q.qsize() == 0
    assert q.get_nowait() is None
    assert q.resource_version == 6


async def test_replace_queues_tombstones_carrying_the_last_known_object_of_vanished_keys() -> None:
    store = {"ns/gone": obj("gone", 3), "ns/kept": obj("kept", 1)}
    q = CoalescingQueue(store)
    await q.put(Delta("ADDED", obj("pending", 7), 10))  # queued, never stored, vanished too
    await q.put(Replaced([obj("kept", 2), obj("new", 1)], 20))
    popped = {}
    while (item := q.get_nowait()) is not None:
        assert isinstance(item, Deltas)
        popped[item.key] = item
    assert {k: summary(v)[1] for k, v in popped.items()} == {
        "ns/pending": [("Added", 7), ("Deleted", ("tombstone", 7))],
        "ns/kept": [("Replaced", 2)],
        "ns/new": [("Replaced", 1)],
        "ns/gone": [("Deleted", ("tombstone", 3))],
    }
    gone = popped["ns/gone"].newest
    assert gone == CoalescedDelta(
        "Deleted", DeletedFinalStateUnknown("ns/gone", obj("gone", 3)), 20
    )


async def test_a_second_relist_does_not_nest_tombstones() -> None:
    q = CoalescingQueue({})
    await q.put(Delta("ADDED", obj("a", 4), 1))
    await q.put(Replaced([], 2))
    await q.put(Replaced([], 3))
    item = q.get_nowait()
    assert summary(item) == ("ns/a", [("Added", 4), ("Deleted", ("tombstone", 4))])
    assert isinstance(item, Deltas) and item.newest.rv == 3


async def test_has_synced_once_the_keys_of_the_first_replace_are_all_popped() -> None:
    q = CoalescingQueue({"ns/old": obj("old")})
    synced_before_any_list = q.has_synced
    await q.put(Replaced([obj("a"), obj("b")], 5))  # a, b and the tombstone of old
    assert not synced_before_any_list
    seen = []  # (has_synced before the pop, the popped item's in_initial_list)
    for _ in range(3):
        synced = q.has_synced
        item = q.get_nowait()
        assert isinstance(item, Deltas)
        seen.append((synced, item.in_initial_list))
    assert seen == [(False, True)] * 3
    assert q.has_synced
    await q.put(Replaced([obj("a", 2)], 6))  # later relists do not unsync it
    assert q.has_synced
    item = q.get_nowait()
    assert isinstance(item, Deltas) and not item.in_initial_list


async def test_has_synced_at_once_when_a_watch_event_comes_before_any_list() -> None:
    # client-go's DeltaFIFO: any Add/Update/Delete marks the queue populated with nothing initial.
    q = CoalescingQueue({})
    await q.put(Delta("ADDED", obj("a"), 1))
    await q.put(Replaced([obj("b")], 2))
    assert q.has_synced


async def test_resync_queues_a_sync_only_for_stored_keys_with_nothing_pending() -> None:
    store = {"ns/busy": obj("busy", 1), "ns/idle": obj("idle", 1)}
    q = CoalescingQueue(store)
    await q.put(Delta("MODIFIED", obj("busy", 2), 9))
    q.resync()
    assert summary(q.get_nowait()) == ("ns/busy", [("Updated", 2)])
    idle = q.get_nowait()
    assert summary(idle) == ("ns/idle", [("Sync", 1)])
    assert isinstance(idle, Deltas) and idle.newest.rv == 9
    assert q.get_nowait() is None


async def test_a_put_of_a_new_key_waits_while_full_and_resumes_after_a_get() -> None:
    q = CoalescingQueue({}, maxsize=1)
    await q.put(Delta("ADDED", obj("a"), 1))
    putter = asyncio.create_task(q.put(Delta("ADDED", obj("b"), 2)), name="putter")
    try:
        await asyncio.sleep(0.01)
        assert not putter.done()
        assert q.resource_version == 1  # not taken in while waiting
        assert summary(await q.get()) == ("ns/a", [("Added", 1)])
        await asyncio.wait_for(putter, 1)
        assert summary(await q.get()) == ("ns/b", [("Added", 1)])
    finally:
        putter.cancel()


async def test_a_put_for_a_pending_key_never_waits_even_when_full() -> None:
    q = CoalescingQueue({}, maxsize=1)
    await q.put(Delta("ADDED", obj("a"), 1))
    async with asyncio.timeout(1):
        await q.put(Delta("MODIFIED", obj("a", 2), 2))
        await q.put(Bookmark(3))
    assert await never_returns_within(q.put(Delta("ADDED", obj("b"), 4)))
    assert summary(q.get_nowait()) == ("ns/a", [("Added", 1), ("Updated", 2)])


async def test_a_cancelled_waiting_put_leaves_nothing_behind() -> None:
    q = CoalescingQueue({}, maxsize=1)
    await q.put(Delta("ADDED", obj("a"), 1))
    assert await never_returns_within(q.put(Delta("ADDED", obj("b"), 2)))
    assert summary(q.get_nowait()) == ("ns/a", [("Added", 1)])
    assert q.get_nowait() is None


async def test_a_replace_waits_for_room_then_is_taken_whole() -> None:
    q = CoalescingQueue({}, maxsize=1)
    await q.put(Delta("ADDED", obj("a"), 1))
    assert await never_returns_within(q.put(Replaced([obj("b"), obj("c")], 2)))
    q.get_nowait()
    async with asyncio.timeout(1):
        await q.put(Replaced([obj("b"), obj("c")], 2))
    assert q.qsize() == 2  # past maxsize: the list was already in memory
    assert await never_returns_within(q.put(Delta("ADDED", obj("d"), 3)))


async def test_a_bookmark_comes_only_after_the_pending_keys_and_at_the_latest_rv() -> None:
    q = CoalescingQueue({})
    await q.put(Bookmark(4))
    await q.put(Delta("ADDED", obj("a"), 5))
    await q.put(Bookmark(6))
    await q.put(Delta("MODIFIED", obj("a", 2), 7))
    assert q.resource_version == 7
    assert q.qsize() == 2
    assert summary(await q.get()) == ("ns/a", [("Added", 1), ("Updated", 2)])
    assert await q.get() == Bookmark(7)  # the two bookmarks folded into one
    assert q.qsize() == 0
    assert await never_returns_within(q.get())


async def test_a_bookmark_alone_is_delivered_at_its_rv() -> None:
    q = CoalescingQueue({})
    await q.put(Bookmark(42))
    assert q.resource_version == 42
    assert await q.get() == Bookmark(42)


# Property: coalescing never loses the latest state ------------------------------------------

NAMES = ("a", "b", "c")
step = st.one_of(
    # A write on the server; its watch event is delivered, or missed (a disconnect).
    st.tuples(st.just("write"), st.sampled_from(NAMES), st.booleans()),
    st.tuples(st.just("delete"), st.sampled_from(NAMES), st.booleans()),
    st.tuples(st.just("relist"), st.just(""), st.just(True)),
    st.tuples(st.just("bookmark"), st.just(""), st.just(True)),
    st.tuples(st.just("resync"), st.just(""), st.just(True)),
    st.tuples(st.just("pop"), st.just(""), st.just(True)),
)


def apply_deltas(store: dict[str, Obj], item: Deltas | Bookmark | None) -> None:
    if isinstance(item, Deltas):
        for d in item.deltas:
            if d.type == "Deleted":
                store.pop(item.key, None)
            else:
                assert isinstance(d.object, dict)
                store[item.key] = d.object


@settings(max_examples=300, deadline=None)
@given(st.lists(step, max_size=60))
async def test_applying_the_popped_deltas_ends_in_the_state_the_raw_events_give(
    steps: list[tuple[str, str, bool]],
) -> None:
    server: dict[str, Obj] = {}
    raw: dict[str, Obj] = {}  # every event applied as it comes
    consumer: dict[str, Obj] = {}  # popped deltas applied, synchronously after each get
    q = CoalescingQueue(consumer, maxsize=0)
    rv = 0
    for op, name, delivered in steps:
        rv += 1
        key = f"ns/{name}"
        if op == "write":
            event: Delta = Delta("MODIFIED" if key in server else "ADDED", obj(name, rv), rv)
            server[key] = event.object
        elif op == "delete":
            if key not in server:
                continue
            event = Delta("DELETED", server.pop(key), rv)
        elif op == "relist":
            relist = Replaced(list(server.values()), rv)
            raw = dict(server)
            await q.put(relist)
            continue
        elif op == "bookmark":
            await q.put(Bookmark(rv))
            continue
        elif op == "resync":
            q.resync()
            continue
        else:
            apply_deltas(consumer, q.get_nowait())
            continue
        if delivered:
            if event.type == "DELETED":
                raw.pop(key, None)
            else:
                raw[key] = event.object
            await q.put(event)
    while (item := q.get_nowait()) is not None:
        apply_deltas(consumer, item)
    assert consumer == raw


@pytest.mark.parametrize("maxsize", [1, 2])
async def test_a_bounded_queue_keeps_the_latest_state_with_a_concurrent_consumer(
    maxsize: int,
) -> None:
    consumer: dict[str, Obj] = {}
    q = CoalescingQueue(consumer, maxsize=maxsize)
    events: list[QueueItem] = [Delta("ADDED", obj(n, 0), 0) for n in NAMES]
    events += [Delta("MODIFIED", obj(n, v), v) for v in range(1, 20) for n in NAMES]
    events += [Delta("DELETED", obj("b", 19), 20), Bookmark(21)]

    async def consume() -> None:
        while (item := await q.get()) != Bookmark(21):
            apply_deltas(consumer, item)
            await asyncio.sleep(0)

    async with asyncio.timeout(5), asyncio.TaskGroup() as tg:
        tg.create_task(consume(), name="consumer")
        for event in events:
            await q.put(event)
            assert q.qsize() <= maxsize + 1  # pending keys, plus the bookmark
    assert consumer == {"ns/a": obj("a", 19), "ns/c": obj("c", 19)}
