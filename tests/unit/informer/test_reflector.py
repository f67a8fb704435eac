"""The Reflector's rules, driven through FakeListerWatcher in virtual time (no real sleeping).

Each test asserts the requests the Reflector made, in order — the sequence client-go makes.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from cacheproxy.errors import ApiError, TransportError
from cacheproxy.informer import (
    Bookmark,
    Delta,
    FakeListerWatcher,
    InOrderQueue,
    ListRequest,
    Phase,
    QueueItem,
    Reflector,
    ReflectorOptions,
    Replaced,
    WatchRequest,
)
from cacheproxy.informer import reflector as reflector_module
from cacheproxy.informer.reflector import (
    BackingOff,
    Listing,
    Relisting,
    Server,
    State,
    Stopped,
    Watching,
    WatchListing,
)
from cacheproxy.kube import status


class VirtualTime:
    """A clock that only moves when the code under test sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)


def cm(name: str, **data: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default"}, "data": data}


@pytest.fixture
def time() -> VirtualTime:
    return VirtualTime()


@pytest.fixture
def fake() -> FakeListerWatcher:
    lw = FakeListerWatcher()
    for i in range(3):
        lw.emit("ADDED", cm(f"c{i}"))
    return lw


class Harness:
    def __init__(self, fake: FakeListerWatcher, time: VirtualTime, **options: Any) -> None:
        self.fake = fake
        self.time = time
        self.queue = InOrderQueue(maxsize=10_000)
        self.items: list[QueueItem] = []
        opts = ReflectorOptions(**options)
        self.reflector = Reflector(
            fake, self.queue, name="test", options=opts, clock=time.clock, sleep=time.sleep
        )
        self.task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Harness:
        self.task = asyncio.create_task(self.reflector.run(), name="reflector-under-test")
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.task is not None
        self.task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await self.task

    async def until(self, predicate: Any, *, steps: int = 2000) -> None:
        for _ in range(steps):
            while (item := self.queue.get_nowait()) is not None:
                self.items.append(item)
            if predicate():
                return
            await asyncio.sleep(0)
        raise AssertionError(f"condition never held; requests: {self.fake.requests}")

    def watches(self) -> list[WatchRequest]:
        return [r for r in self.fake.requests if isinstance(r, WatchRequest)]

    def lists(self) -> list[ListRequest]:
        return [r for r in self.fake.requests if isinstance(r, ListRequest)]


async def test_first_sync_is_a_watch_list_that_goes_on_as_the_watch(
    fake: FakeListerWatcher, time: VirtualTime
) -> None:
    async with Harness(fake, time) as h:
        await h.until(lambda: h.reflector.synced.is_set())
        fake.emit("ADDED", cm("c9"))
        await h.until(lambda: any(isinstance(i, Delta) for i in h.items))
    assert h.lists() == []
    [first] = h.watches()
    assert (
        first.send_initial_events and first.resource_version == "" and first.allow_watch_bookmarks
    )
    replaced = h.items[0]
    assert isinstance(replaced, Replaced)
    assert [o["metadata"]["name"] for o in replaced.objects] == ["c0", "c1", "c2"]
    assert replaced.rv == 4
    delta = h.items[1]
    assert isinstance(delta, Delta) and delta.type == "ADDED" and delta.rv == 5
    assert h.reflector.last_sync_resource_version == "5"


async def test_without_watch_list_support_it_lists_in_pages_at_rv_0_then_watches(
    fake: FakeListerWatcher, time: VirtualTime
) -> None:
    fake.supports_watch_list = False
    async with Harness(fake, time, page_size=2) as h:
        await h.until(lambda: fake.open_watches == 1)
        # The server said it does not do watch-lists: the Reflector stops asking; and it pages.
        assert h.reflector.state == Watching(Server(watch_list=False, pages=True))
        assert h.reflector.phase is Phase.WATCHING
    assert h.lists() == [
        ListRequest(resource_version="0", limit=2),
        ListRequest(limit=2, continue_token="2"),
    ]
    watches = h.watches()
    assert [w.send_initial_events for w in watches] == [True, False]
    assert watches[1].resource_version == "4" and watches[1].allow_watch_bookmarks
    assert 300 <= watches[1].timeout_seconds < 600
    assert isinstance(h.items[0], Replaced) and len(h.items[0].objects) == 3
    assert h.reflector.phase is Phase.STOPPED


async def test_a_normal_end_of_the_watch_watches_again_from_the_last_rv_without_a_list(
    fake: FakeListerWatcher, time: VirtualTime
) -> None:
    async with Harness(fake, time) as h:
        await h.until(lambda: fake.open_watches == 1 and h.reflector.synced.is_set())
        fake.emit("MODIFIED", cm("c0", a="1"))
        await h.until(lambda: len(h.items) == 2)
        time.now += 5  # the watch lasted a while
        fake.end_watches()
        await h.until(lambda: len(h.watches()) == 2 and fake.open_watches == 1)
    assert h.lists() == []
    assert h.watches()[1].resource_version == "5"
    assert not h.watches()[1].send_initial_events


async def test_a_410_on_the_watch_relists_at_the_last_rv_after_a_backoff(
    fake: FakeListerWatcher, time: VirtualTime
) -> None:
    fake.supports_watch_list = False
    async with Harness(fake, time) as h:
        await h.until(lambda: fake.open_watches == 1)
        fake.emit("ADDED", cm("c5"))
        await h.until(lambda: any(isinstance(i, Delta) for i in h.items))
        fake.break_watches(status.too_old_resource_version(5, 9))
        await h.until(lambda: len(h.lists()) == 2 and fake.open_watches == 1)
    # Not paged: the first list was not paged, so the relist reads the whole list at once.
    assert h.lists()[1] == ListRequest(resource_version="5")
    assert time.sleeps and 0.8 <= time.sleeps[0] <= 1.6
    assert sum(isinstance(i, Replaced) for i in h.items) == 2


async def test_the_states_a_410_on_the_watch_goes_through(
    fake: FakeListerWatcher, time: VirtualTime
) -> None:
    fake.supports_watch_list = False
    h = Harness(fake, time)
    states: list[State] = []
    step = h.reflector._step

    async def recorded(state: State) -> State:
        states.append(state)
        return await step(state)

    h.reflector._step = recorded  # type: ignore[method-assign]
    async with h:
        await h.until(lambda: fake.open_watches == 1)
        fake.break_watches(status.too_old_resource_version(4, 9))
        await h.until(lambda: len(h.lists()) == 2 and fake.open_watches == 1)
    server = Server(watch_list=True)
    no_watch_list = Server(watch_list=False)
    assert states[:4] == [
        WatchListing(server),  # refused: the server does not serve watch-lists
        Listing(no_watch_list),
        Watching(no_watch_list),
        Relisting(no_watch_list, "expired"),
    ]
    backing_off, relist, watching = states[4:]
    assert backing_off == BackingOff(backing_off.delay, Listing(no_watch_list))
    assert (relist, watching) == (Listing(no_watch_list), Watching(no_watch_list))
    assert h.reflector.state == Stopped() and h.reflector.phase is Phase.STOPPED


async def test_a_410_on_the_list_drops_to_a_consistent_list_at_rv_empty(
    fake: FakeListerWatcher, time: VirtualTime
) -> None:
    fake.supports_watch_list = False
    fake.fail_next_list(status.expired("The resourceVersion for the provided list is too old."))
    async with Harness(fake, time) as h:
        await h.until(lambda: fake.open_watches == 1)
    assert [r.resource_version for r in h.lists()] == ["0", ""]


async def test_too_large_resource_version_on_the_list_also_drops_to_rv_empty(
    fake: FakeListerWatcher, time: VirtualTime
) -> None:
    fake.supports_watch_list = False
    fake.fail_next_list(status.too_large_resource_version(9, 4))
    async with Harness(fake, time) as h:
        await h.until(lambda: fake.open_watches == 1)
    assert [r.resource_version for r in h.lists()] == ["0", ""]


async def test_an_expired_continue_token_means_one_full_list_at_the_same_rv(
    fake: FakeListerWatcher, time: VirtualTime
) -> None:
    fake.supports_watch_list = False
    async with Harness(fake, time, page_size=2) as h:
        # Fail the second page only.
        original = fake.list

        async def list_with_expiry(request: ListRequest, **options: Any) -> Any:
            if request.continue_token:
                fake.requests.append(request)
                raise status.expired(status.CONTINUE_EXPIRED_MESSAGE)
            return await original(request, **options)

        fake.list = list_with_expiry  # type: ignore[method-assign]
        await h.until(lambda: fake.open_watches == 1)
    assert h.lists() == [
        ListRequest(resource_version="0", limit=2),
        ListRequest(limit=2, continue_token="2"),
        ListRequest(resource_version="0"),
    ]
    replaced = h.items[0]
    assert isinstance(replaced, Replaced) and len(replaced.objects) == 3


async def test_429_on_watch_honours_retry_after_and_watches_again_without_a_list(
    fake: FakeListerWatcher, time: VirtualTime
) -> None:
    async with Harness(fake, time) as h:
        await h.until(lambda: fake.open_watches == 1)
        fake.fail_next_watch(status.too_many_requests("slow down", retry_after=7))
        time.now += 5
        fake.end_watches()
        await h.until(lambda: len(h.watches()) == 3 and fake.open_watches == 1)
    assert h.lists() == []
    assert time.sleeps[-1] >= 7
    assert h.watches()[2].resource_version == "4"


async def test_connection_refused_backs_off_and_watches_again(
    fake: FakeListerWatcher, time: VirtualTime
) -> None:
    async with Harness(fake, time) as h:
        await h.until(lambda: fake.open_watches == 1)
        for _ in range(3):
            fake.fail_next_watch(TransportError("connection refused", connection_refused=True))
        time.now += 5
        fake.end_watches()
        await h.until(lambda: len(h.watches()) == 5 and fake.open_watches == 1)
    assert h.lists() == []
    # Exponential: each delay's base doubles (jitter adds up to 100 %).
    first, second, third = time.sleeps[-3:]
    assert 0.8 <= first <= 1.6 and 1.6 <= second <= 3.2 and 3.2 <= third <= 6.4


async def test_a_500_or_a_broken_stream_watches_again_from_the_last_rv(
    fake: FakeListerWatcher, time: VirtualTime
) -> None:
    async with Harness(fake, time) as h:
        await h.until(lambda: fake.open_watches == 1)
        fake.emit("ADDED", cm("c7"))
        await h.until(lambda: any(isinstance(i, Delta) for i in h.items))
        fake.break_watches(TransportError("truncated line"))
        await h.until(lambda: len(h.watches()) == 2 and fake.open_watches == 1)
        fake.break_watches(status.internal_error("boom"))
        await h.until(lambda: len(h.watches()) == 3 and fake.open_watches == 1)
    assert h.lists() == []
    assert [w.resource_version for w in h.watches()[1:]] == ["5", "5"]


async def test_a_very_short_empty_watch_relists(fake: FakeListerWatcher, time: VirtualTime) -> None:
    fake.supports_watch_list = False
    async with Harness(fake, time) as h:
        await h.until(lambda: fake.open_watches == 1)
        fake.end_watches()  # ended at once, with no event: "very short watch"
        await h.until(lambda: fake.open_watches == 1 and len(h.lists()) == 2)
    assert h.lists()[1].resource_version == "4"
    assert len(time.sleeps) == 1  # the relist waited for a backoff


async def test_bookmarks_advance_the_rv_without_changes(
    fake: FakeListerWatcher, time: VirtualTime
) -> None:
    async with Harness(fake, time) as h:
        await h.until(lambda: fake.open_watches == 1)
        fake.rv = 40
        fake.bookmark()
        await h.until(lambda: any(isinstance(i, Bookmark) for i in h.items))
    assert h.reflector.last_sync_resource_version == "40"


async def test_a_stalled_watch_is_dropped_and_watched_again(
    fake: FakeListerWatcher, time: VirtualTime
) -> None:
    # timeoutSeconds 1 plus a negative margin: stalled after 0.05 s of silence (real time).
    async with Harness(fake, time, min_watch_timeout=0.5, stall_margin=-0.95) as h:
        await h.until(lambda: fake.open_watches == 1)
        for _ in range(200):
            if len(h.watches()) >= 2:
                break
            await asyncio.sleep(0.01)
    assert len(h.watches()) >= 2
    assert h.lists() == []


async def test_non_retryable_watch_errors_relist(
    fake: FakeListerWatcher, time: VirtualTime
) -> None:
    async with Harness(fake, time) as h:
        await h.until(lambda: fake.open_watches == 1)
        time.now += 5
        fake.break_watches(
            ApiError(status.forbidden(user="u", verb="watch", resource="configmaps").status)
        )
        await h.until(lambda: len(h.watches()) == 2 and fake.open_watches == 1)
    # The relist is a watch-list again (as client-go's ListAndWatch with watch-lists on), at the
    # last RV.
    relist = h.watches()[1]
    assert relist.send_initial_events and relist.resource_version == "4"
    assert h.lists() == []
    assert sum(isinstance(i, Replaced) for i in h.items) == 2


async def test_a_relist_keeps_paging_when_the_first_list_came_in_pages(
    fake: FakeListerWatcher, time: VirtualTime
) -> None:
    fake.supports_watch_list = False
    async with Harness(fake, time, page_size=2) as h:
        await h.until(lambda: fake.open_watches == 1)
        fake.break_watches(status.too_old_resource_version(4, 9))
        await h.until(lambda: len(h.lists()) == 4 and fake.open_watches == 1)
    assert h.lists()[2:] == [
        ListRequest(resource_version="4", limit=2),
        ListRequest(limit=2, continue_token="2"),
    ]


async def test_a_throttled_watch_list_is_retried_as_a_watch_list(
    fake: FakeListerWatcher, time: VirtualTime
) -> None:
    fake.fail_next_watch(status.too_many_requests("slow down", retry_after=3))
    async with Harness(fake, time) as h:
        await h.until(lambda: fake.open_watches == 1)
    assert h.lists() == []
    assert [w.send_initial_events for w in h.watches()] == [True, True]
    assert time.sleeps[0] >= 3


async def test_a_watch_list_without_its_end_bookmark_falls_back_to_lists_for_good(
    fake: FakeListerWatcher, time: VirtualTime
) -> None:
    # kube-apiserver 1.27-1.30 on a quiet resource: the initial events come, the bookmark not.
    fake.late_initial_events_end = True
    async with Harness(fake, time, watch_list_timeout=0.05) as h:
        await h.until(lambda: h.reflector.synced.is_set(), steps=100_000)
        await h.until(lambda: fake.open_watches == 1)
        replaced = h.items[0]
        assert isinstance(replaced, Replaced) and len(replaced.objects) == 3
        assert h.reflector.state == Watching(Server(watch_list=False))
        # A relist later is a list too: the resource is remembered as one without watch-lists.
        fake.break_watches(status.gone("too old"))
        await h.until(lambda: len(h.lists()) >= 2)
    watches = h.watches()
    assert [w.send_initial_events for w in watches][:2] == [True, False]
    assert not any(w.send_initial_events for w in watches[1:])
    assert h.lists()[0] == ListRequest(resource_version="0", limit=500)


async def test_a_watch_list_whose_end_bookmark_comes_late_but_in_time_is_kept(
    fake: FakeListerWatcher, time: VirtualTime
) -> None:
    fake.late_initial_events_end = True
    async with Harness(fake, time, watch_list_timeout=30) as h:
        await h.until(lambda: fake.open_watches == 1)
        fake.emit("ADDED", cm("c9"))  # the next write brings the bookmark
        await h.until(lambda: h.reflector.synced.is_set())
        await h.until(lambda: isinstance(h.reflector.state, Watching))
        state = h.reflector.state
        assert isinstance(state, Watching) and state.server == Server(watch_list=True)
        assert state.stream is not None  # the watch-list's stream goes on as the watch
    assert h.lists() == []


# ---------------------------------------------------------------------- backoff
# The base of each delay doubles; the jitter adds up to as much again.


def base_of(delay: float, *bases: float) -> bool:
    return any(b <= delay <= 2 * b for b in bases)


async def test_consecutive_failures_escalate_the_backoff_up_to_its_cap(
    fake: FakeListerWatcher, time: VirtualTime
) -> None:
    fake.supports_watch_list = False
    for _ in range(7):
        fake.fail_next_list(status.internal_error("boom"))
    async with Harness(fake, time) as h:
        await h.until(lambda: fake.open_watches == 1)
    bases = [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0]
    assert len(time.sleeps) == len(bases)
    assert all(base_of(s, b) for s, b in zip(time.sleeps, bases, strict=True)), time.sleeps


async def test_a_synced_list_resets_the_backoff(fake: FakeListerWatcher, time: VirtualTime) -> None:
    fake.supports_watch_list = False
    for _ in range(3):
        fake.fail_next_list(status.internal_error("boom"))
    async with Harness(fake, time) as h:
        await h.until(lambda: fake.open_watches == 1)  # the fourth list synced
        fake.end_watches()  # a very short watch: relist after a backoff
        await h.until(lambda: len(h.lists()) == 5 and fake.open_watches == 1)
    first, second, third, after_sync = time.sleeps
    assert base_of(first, 0.8) and base_of(second, 1.6) and base_of(third, 3.2)
    assert base_of(after_sync, 0.8), time.sleeps


async def escalate_by_refused_watches(h: Harness, fake: FakeListerWatcher) -> None:
    """Three watches refused in a row (0.8, 1.6, 3.2 s), then one established."""
    await h.until(lambda: fake.open_watches == 1 and h.reflector.synced.is_set())
    for _ in range(3):
        fake.fail_next_watch(TransportError("connection refused", connection_refused=True))
    h.time.now += 5
    fake.end_watches()
    await h.until(lambda: len(h.watches()) == 5 and fake.open_watches == 1)
    assert [base_of(s, b) for s, b in zip(h.time.sleeps, [0.8, 1.6, 3.2], strict=True)] == [
        True
    ] * 3


@pytest.mark.parametrize("delivered", ["event", "bookmark"])
async def test_a_watch_that_delivered_something_resets_the_backoff(
    fake: FakeListerWatcher, time: VirtualTime, delivered: str
) -> None:
    async with Harness(fake, time) as h:
        await escalate_by_refused_watches(h, fake)
        if delivered == "event":
            fake.emit("ADDED", cm("c9"))
            await h.until(lambda: any(isinstance(i, Delta) for i in h.items))
        else:
            fake.bookmark()
            await h.until(lambda: any(isinstance(i, Bookmark) for i in h.items))
        fake.break_watches(TransportError("truncated line"))
        await h.until(lambda: len(h.watches()) == 6 and fake.open_watches == 1)
    assert len(time.sleeps) == 4
    assert base_of(time.sleeps[-1], 0.8), time.sleeps


@pytest.mark.parametrize("ended", ["after-a-while", "at-once"])
async def test_a_watch_that_ended_delivering_nothing_does_not_reset_the_backoff(
    fake: FakeListerWatcher, time: VirtualTime, ended: str
) -> None:
    async with Harness(fake, time) as h:
        await escalate_by_refused_watches(h, fake)
        if ended == "after-a-while":
            # A normal end: watched again at once, refused, and backed off further.
            fake.fail_next_watch(TransportError("connection refused", connection_refused=True))
            time.now += 5
        # else a very short watch: relisted (by a watch-list) after a backoff.
        fake.end_watches()
        await h.until(lambda: len(time.sleeps) == 4 and fake.open_watches == 1)
    then = [w.send_initial_events for w in h.watches()[5:]]
    assert then == ([False, False] if ended == "after-a-while" else [True])
    assert base_of(time.sleeps[-1], 6.4), time.sleeps


async def test_the_watch_is_live_while_open_and_heard_from_and_not_while_it_backs_off(
    fake: FakeListerWatcher, time: VirtualTime
) -> None:
    async with Harness(fake, time, live_silence=60.0) as h:
        assert not h.reflector.watch_live  # syncing
        await h.until(lambda: h.reflector.synced.is_set() and fake.open_watches == 1)
        assert h.reflector.watch_live
        time.now += 61  # nothing heard for longer than live_silence: a dead connection?
        assert not h.reflector.watch_live
        fake.emit("ADDED", cm("c9"))
        await h.until(lambda: any(isinstance(i, Delta) for i in h.items))
        assert h.reflector.watch_live  # heard from again
        fake.fail_next_watch(TransportError("connection reset"))
        fake.end_watches()  # ends normally; the next watch fails: backing off
        await h.until(lambda: h.reflector.phase is Phase.BACKING_OFF)
        assert not h.reflector.watch_live


async def test_a_server_without_watch_lists_is_said_once_at_info_each_resource_at_debug(
    time: VirtualTime, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reflector_module, "_REFUSALS_SAID", set())
    caplog.set_level(logging.DEBUG, logger=reflector_module.__name__)
    for _ in range(2):
        fake = FakeListerWatcher(kind="Pod")
        fake.supports_watch_list = False
        async with Harness(fake, time) as h:
            await h.until(lambda f=fake: f.open_watches == 1)
    lines = [r for r in caplog.records if "watch-list" in r.getMessage()]
    assert [r.levelno for r in lines] == [logging.INFO, logging.DEBUG]
    assert "does not serve watch-lists here" in lines[0].getMessage()
    assert "said once" in lines[0].getMessage()
