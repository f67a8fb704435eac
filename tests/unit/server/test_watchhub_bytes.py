"""The bytes queued for watchers: each watcher's own bound (its queue counted in full) and the
daemon's total (:class:`QueuedBytes`), where a line shared by many queues counts once, from the
first queue that takes it until the last one lets it go — sent, or dropped on eviction or at the
end of its watch. A property test checks the total against the lines the queues hold under
random events, takes, evictions, closes and relists."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cacheproxy.informer import Changed, Relisted, Store
from cacheproxy.kube.resources import builtin
from cacheproxy.server.query import Query
from cacheproxy.server.watchfilter import SharedLine
from cacheproxy.server.watchhub import EVICTION_REASONS, QueuedBytes, ServedWatch, WatchHub

CONFIGMAPS = builtin("configmaps")


def _hub(budget: QueuedBytes | None = None) -> WatchHub:
    return WatchHub(CONFIGMAPS, Store(kind="ConfigMap", api_version="v1"), budget=budget)


@pytest.fixture
def hub() -> WatchHub:
    return _hub()


class Writes:
    """Changes to one hub's store, as the informer applies them, each object carrying about
    ``size`` bytes of data."""

    def __init__(self, hub: WatchHub, size: int = 1000) -> None:
        self.hub = hub
        self.store = hub.store
        self.size = size
        self.rv = 0

    def put(self, name: str, size: int | None = None) -> Changed:
        self.rv += 1
        meta = {"name": name, "namespace": "default", "resourceVersion": str(self.rv)}
        data = {"b": "x" * (self.size if size is None else size)}
        entry = self.store.make_entry({"metadata": meta, "data": data})
        prev = self.store.put(entry, rv=self.rv)
        event = Changed(self.rv, "MODIFIED" if prev else "ADDED", entry, prev, 0)
        self.hub.on_event(event)
        return event

    def relist(self) -> None:
        """An upstream relist that changed nothing: a bookmark for the watchers that asked."""
        self.rv += 1
        self.hub.on_relist(Relisted(rv=self.rv, before=self.rv - 1, changed=[], gone={}))


def _watchers(hub: WatchHub, n: int, **kwargs: Any) -> list[ServedWatch]:
    watchers = [ServedWatch(Query(), buffer=kwargs.pop("buffer", 1000), **kwargs) for _ in range(n)]
    for watcher in watchers:
        hub.add(watcher)
    return watchers


# ---------------------------------------------------------------------------- counted once


def test_a_line_queued_for_many_watchers_counts_once_in_the_total(hub: WatchHub) -> None:
    watchers = _watchers(hub, 5)
    Writes(hub).put("a")
    [line] = watchers[0].take()
    assert hub.budget.total == len(line)
    # Each watcher's own bound still counts its queue in full.
    assert all(w.queued_bytes == len(line) for w in watchers[1:])


def test_a_shared_line_counts_until_the_last_watcher_takes_it(hub: WatchHub) -> None:
    watchers = _watchers(hub, 3)
    writes = Writes(hub)
    writes.put("a")
    size = watchers[0].queued_bytes
    for watcher in watchers[:-1]:
        watcher.take()
        assert hub.budget.total == size
    writes.put("b")  # queued for all three; "a" is still held by the last one
    assert hub.budget.total == size + watchers[0].queued_bytes
    watchers[-1].take()
    assert hub.budget.total == watchers[0].queued_bytes
    for watcher in watchers[:-1]:
        watcher.take()
    assert hub.budget.total == 0


def _taken(hub: WatchHub, watcher: ServedWatch) -> None:
    watcher.take()


def _evicted_for_bytes(hub: WatchHub, watcher: ServedWatch) -> None:
    hub.evict(watcher, "bytes")


def _evicted_for_the_total(hub: WatchHub, watcher: ServedWatch) -> None:
    hub.evict(watcher, "total_bytes")


def _stalled_then_ended(hub: WatchHub, watcher: ServedWatch) -> None:
    hub.evict(watcher, "stall", "took nothing for 10 s")  # its queue stays until its watch ends
    assert hub.budget.total > 0
    hub.remove(watcher)


def _overflowed_then_drained(hub: WatchHub, watcher: ServedWatch) -> None:
    Writes(hub).put("b")  # its one place is taken: evicted, its queue kept to be sent
    assert watcher.closed and watcher.overflow == "events"
    watcher.take()


def _client_went_away(hub: WatchHub, watcher: ServedWatch) -> None:
    watcher.close("client went away")
    assert hub.budget.total > 0
    hub.remove(watcher)


def _all_closed_then_drained(hub: WatchHub, watcher: ServedWatch) -> None:
    hub.close_all("server shutting down")
    assert hub.budget.total > 0
    watcher.take()


LETTING_GO = [
    _taken,
    _evicted_for_bytes,
    _evicted_for_the_total,
    _stalled_then_ended,
    _overflowed_then_drained,
    _client_went_away,
    _all_closed_then_drained,
]
"""Every way a line leaves a watcher's queue."""


@pytest.mark.parametrize("let_go", LETTING_GO, ids=lambda f: f.__name__.strip("_"))
def test_a_shared_line_is_released_whichever_way_its_last_holder_lets_it_go(
    let_go: Callable[[WatchHub, ServedWatch], None],
) -> None:
    hub = _hub()
    [reader] = _watchers(hub, 1)
    [holder] = _watchers(hub, 1, buffer=1)
    Writes(hub).put("a")
    size = holder.queued_bytes
    reader.take()
    assert hub.budget.total == size
    let_go(hub, holder)
    reader.take()  # what the last event may have queued for it
    assert hub.budget.total == 0
    assert holder.queued_bytes == 0


# ---------------------------------------------------------------------------- the bounds


def test_watchers_holding_the_same_lines_are_within_a_total_their_counts_pass() -> None:
    budget = QueuedBytes(10_000)
    hub = _hub(budget)
    lagging = _watchers(hub, 3, max_bytes=1 << 20)
    writes = Writes(hub, 1000)
    for i in range(8):
        writes.put(f"c{i}")
    # ~8 KB counted for each of the three, ~8 KB of lines in all: nobody is over.
    assert sum(w.queued_bytes for w in lagging) > 20_000
    assert budget.total == lagging[0].queued_bytes < 10_000
    assert hub.evicted == 0


def test_evicting_the_largest_frees_only_the_lines_no_other_queue_holds() -> None:
    budget = QueuedBytes(10_000)
    hub = _hub(budget)
    [early] = _watchers(hub, 1, max_bytes=1 << 20)
    writes = Writes(hub, 1000)
    for i in range(6):
        writes.put(f"c{i}")
    [late] = _watchers(hub, 1, max_bytes=1 << 20, min_rv=writes.rv)
    while not early.closed:
        writes.put(f"c{writes.rv}")
    # Its six lines of its own went; the ones it shared with the late watcher are still held.
    assert early.close_reason == "too slow: total_bytes" and early.take() == []
    assert not late.closed and budget.total == late.queued_bytes <= 10_000
    assert hub.evictions["total_bytes"] == 1


def test_over_the_total_watchers_are_evicted_largest_first_until_it_is_within() -> None:
    budget = QueuedBytes(10_000)
    pods, cms = _hub(budget), _hub(budget)
    first, second = _watchers(pods, 2, max_bytes=1 << 20)  # the same lines: one is not enough
    [reader] = _watchers(cms, 1, max_bytes=1 << 20)
    for_pods = Writes(pods, 1000)
    for i in range(8):
        for_pods.put(f"p{i}")
    assert budget.total == first.queued_bytes == second.queued_bytes < 10_000
    Writes(cms).put("c", 2000)  # one event, one offer: the total passes the limit
    assert first.close_reason == second.close_reason == "too slow: total_bytes"
    assert pods.evictions["total_bytes"] == 2 and cms.evicted == 0
    assert not reader.closed and budget.total == reader.queued_bytes


def test_a_watcher_over_its_bytes_is_evicted_its_queue_dropped_and_the_others_go_on(
    hub: WatchHub,
) -> None:
    slow, fast = _watchers(hub, 2, max_bytes=5_000)
    writes = Writes(hub, 1000)
    for i in range(10):
        writes.put(f"c{i}")
        fast.take()
    assert slow.closed and slow.overflow == "bytes" and slow not in hub.watchers
    assert slow.close_reason == "too slow: more than 5000 bytes queued"
    assert hub.evictions == {"events": 0, "bytes": 1, "total_bytes": 0, "stall": 0}
    # What was queued for it is gone at once (it is what the bound is for) and not counted.
    assert slow.take() == [] and hub.budget.total == 0
    assert not fast.closed and fast in hub.watchers


def test_over_the_total_the_watcher_with_the_most_queued_is_evicted() -> None:
    budget = QueuedBytes(10_000)
    pods, cms = _hub(budget), _hub(budget)
    # Roomy buffers: only the total can act.
    [lagging] = _watchers(pods, 1, max_bytes=1 << 20)
    behind, reader = _watchers(cms, 2, max_bytes=1 << 20)
    for_pods, for_cms = Writes(pods, 1000), Writes(cms, 1000)
    for i in range(6):  # the pods watcher is ahead in bytes: it goes first, from the other hub
        for_pods.put(f"p{i}")
    assert budget.total == lagging.queued_bytes > 6_000
    for i in range(20):
        for_cms.put(f"c{i}")
        reader.take()
        if lagging.closed:
            break
    assert lagging.closed and lagging.close_reason == "too slow: total_bytes"
    assert behind.queued_bytes < 6_000
    assert pods.evictions["total_bytes"] == 1 and cms.evicted == 0
    assert lagging not in pods.watchers and lagging.take() == []
    assert not behind.closed and budget.total == behind.queued_bytes <= 10_000
    for i in range(20, 40):
        for_cms.put(f"c{i}")
        reader.take()
    # Then the next largest, in the hub that holds it; the one that reads is never chosen.
    assert behind.closed and cms.evictions == {
        "events": 0,
        "bytes": 0,
        "total_bytes": 1,
        "stall": 0,
    }
    assert not reader.closed and budget.total <= 10_000
    assert not budget.hubs.keys() - {reader}


def test_a_finished_watch_gives_back_what_was_queued_for_it(hub: WatchHub) -> None:
    [watcher] = _watchers(hub, 1)
    Writes(hub).put("a")
    assert hub.budget.total > 0
    watcher.close("client went away")
    hub.remove(watcher)
    assert hub.budget.total == 0 and not hub.budget.hubs
    assert hub.evicted == 0


# ---------------------------------------------------------------------------- the invariant


class Mirrored(ServedWatch):
    """A watcher that keeps, beside its queue, the lines it was given and not yet let go, as
    seen through its own methods: what its queue holds, told apart from how it is counted."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(Query(), **kwargs)
        self.held: list[SharedLine] = []

    def offer(self, line: SharedLine, rv: int) -> bool:
        queued = super().offer(line, rv)
        if queued:
            self.held.append(line)
        return queued

    def take(self) -> list[bytes]:
        lines = super().take()
        assert lines == [line.data for line in self.held]
        self.held.clear()
        return lines

    def discard(self) -> list[SharedLine]:
        lines = super().discard()
        assert lines == self.held
        self.held.clear()
        return lines


watch = st.tuples(
    st.integers(0, 1),  # the hub
    st.sampled_from((2, 5, 100)),  # buffer
    st.sampled_from((None, 2_000, 6_000)),  # max_bytes
    st.booleans(),  # bookmarks
)
put = st.tuples(st.just("put"), st.integers(0, 1), st.integers(0, 3), st.integers(100, 1500))
steps = st.lists(
    st.one_of(
        put,
        put,
        put,
        put,
        st.tuples(st.just("relist"), st.integers(0, 1)),
        st.tuples(st.just("watch"), watch),
        st.tuples(st.just("watch"), watch),
        st.tuples(st.just("take"), st.integers(0, 7)),
        st.tuples(st.just("evict"), st.integers(0, 7), st.sampled_from(EVICTION_REASONS)),
        st.tuples(st.just("close"), st.integers(0, 7)),
        st.tuples(st.just("end"), st.integers(0, 7)),
        st.tuples(st.just("close_all"), st.integers(0, 1)),
    ),
    min_size=20,
    max_size=80,
)


@settings(max_examples=300, deadline=None)
@given(
    first=st.lists(watch, min_size=1, max_size=6),
    steps=steps,
    limit=st.sampled_from((None, 2_500, 6_000)),
)
def test_the_total_is_always_the_sizes_of_the_distinct_lines_the_queues_hold(
    first: list[tuple[int, int, int | None, bool]],
    steps: list[tuple[Any, ...]],
    limit: int | None,
) -> None:
    budget = QueuedBytes(limit)
    hubs = [_hub(budget), _hub(budget)]
    writes = [Writes(hub) for hub in hubs]
    watchers: list[tuple[Mirrored, WatchHub]] = []

    def add(h: int, buffer: int, max_bytes: int | None, bookmarks: bool) -> None:
        watcher = Mirrored(buffer=buffer, max_bytes=max_bytes, bookmarks=bookmarks)
        hubs[h].add(watcher)
        watchers.append((watcher, hubs[h]))

    for spec in first:
        add(*spec)
    for step in steps:
        match step:
            case ("put", h, name, size):
                writes[h].put(f"c{name}", size)
            case ("relist", h):
                writes[h].relist()
            case ("watch", spec):
                add(*spec)
            case ("take", i):
                watchers[i % len(watchers)][0].take()
            case ("evict", i, reason):
                watcher, hub = watchers[i % len(watchers)]
                hub.evict(watcher, reason)
            case ("close", i):
                watchers[i % len(watchers)][0].close("client went away")
            case ("end", i):
                watcher, hub = watchers[i % len(watchers)]
                hub.remove(watcher)
            case ("close_all", h):
                hubs[h].close_all("server shutting down")
        held = [line for watcher, _ in watchers for line in watcher.held]
        distinct = {id(line): line for line in held}
        assert budget.total == sum(line.size for line in distinct.values())
        assert all(line.holders == held.count(line) for line in distinct.values())
        for watcher, _ in watchers:
            assert watcher.queued_bytes == sum(line.size for line in watcher.held)
        # Over the limit only with nothing left to evict: what is left is queued for watchers
        # already gone.
        if budget.limit is not None and budget.total > budget.limit:
            assert not any(w.queued_bytes for w in budget.hubs)
    for watcher, hub in watchers:
        hub.remove(watcher)
    assert budget.total == 0
