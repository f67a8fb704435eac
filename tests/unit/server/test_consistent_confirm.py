"""Consistent reads of a resource nobody writes: its cache never reaches upstream's RV by its own
events, so a listing of the collection confirms it (the cache holds exactly the listed keys, no
listed object newer than the cache), or for a get its object's resourceVersion upstream, on a
fake clock. A listing or an object that shows what the cache has not seen yet makes the read wait
for it; a resource once found quiet is confirmed at once while it does not move."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest

from cacheproxy.errors import TransportError
from cacheproxy.kube import status
from cacheproxy.kube.keys import KeyDigest, key_digest
from cacheproxy.server.consistent import ConsistencyOptions, ConsistentReads, ObjectKey
from tests.unit.server.test_consistent import Cache, FakeTime, Upstream, settle, warning_of


@dataclass(frozen=True)
class Listed:
    resource_version: int
    digest: KeyDigest
    newest: int


class Lister:
    """A listing whose answers the test gives, one per listing, in order."""

    def __init__(self, time: FakeTime) -> None:
        self.time = time
        self.started: list[float] = []
        self.answers: list[asyncio.Future[Listed]] = []

    async def __call__(self) -> Listed:
        self.started.append(self.time.now)
        answer = asyncio.get_running_loop().create_future()
        self.answers.append(answer)
        return await answer

    def answer(self, rv: int, keys: set[str], newest: int) -> None:
        pending = [a for a in self.answers if not a.done()]
        pending[0].set_result(Listed(rv, key_digest(keys), newest))

    def fail(self, error: BaseException) -> None:
        next(a for a in self.answers if not a.done()).set_exception(error)


@pytest.fixture
def time() -> FakeTime:
    return FakeTime()


class Objects:
    """Upstream's objects' resourceVersions, as the test sets them (missing: a 404)."""

    def __init__(self) -> None:
        self.versions: dict[str, int] = {}
        self.asked: list[tuple[str | None, str]] = []

    async def __call__(self, namespace: str | None, name: str) -> int:
        self.asked.append((namespace, name))
        await asyncio.sleep(0)
        key = f"{namespace}/{name}"
        if key not in self.versions:
            raise status.not_found(resource="pods", name=name)
        return self.versions[key]


def consistent(time: FakeTime, **options: object) -> tuple[ConsistentReads, Upstream, Lister]:
    upstream, lister = Upstream(time), Lister(time)
    reads = ConsistentReads(
        upstream,
        ConsistencyOptions(**options),  # type: ignore[arg-type]
        list_keys=lister,
        object_version=OBJECTS,
        clock=time.clock,
        sleep=time.sleep,
    )
    return reads, upstream, lister


async def confirm_quiet(time: FakeTime, upstream: Upstream, lister: Lister, keys: set[str]) -> None:
    """The probe says 50 (other resources were written), the cache (at 10) does not get there
    within the grace, and the listing at 51 shows ``keys``, none newer than 10."""
    await settle()
    upstream.answer(50)
    await time.advance(0.2)
    lister.answer(51, keys, newest=10)
    await settle()


OBJECTS = Objects()
A = ObjectKey("ns", "a", "ns/a")


async def test_a_quiet_cache_is_confirmed_by_a_listing_after_the_grace(time: FakeTime) -> None:
    reads, upstream, lister = consistent(time, confirm_after=0.1, timeout=3.0)
    cache = Cache(time, rv=10, keys={"ns/a", "ns/b"})
    tasks = [asyncio.create_task(warning_of(reads, cache)) for _ in range(20)]
    await settle()
    upstream.answer(50)  # other resources' writes moved upstream's RV
    await time.advance(0.09)
    assert not lister.started  # the cache may still get there by its events
    await time.advance(0.02)
    assert len(lister.started) == 1  # one listing for every read waiting
    lister.answer(51, {"ns/a", "ns/b"}, newest=9)
    await settle()
    assert [t.result() for t in tasks] == [None] * 20
    assert (reads.stats.listings, reads.stats.confirmed, reads.stats.probes) == (1, 20, 1)
    assert reads.stats.fallbacks == {"probe_failed": 0, "probe_timeout": 0, "cache_behind": 0}


async def test_a_confirmed_cache_that_did_not_move_is_confirmed_without_a_probe(
    time: FakeTime,
) -> None:
    reads, upstream, lister = consistent(time, confirm_after=0.1)
    cache = Cache(time, rv=10, keys={"ns/a"})
    first = asyncio.create_task(warning_of(reads, cache))
    await confirm_quiet(time, upstream, lister, {"ns/a"})
    assert first.result() is None
    second = asyncio.create_task(warning_of(reads, cache))
    await time.advance(0.1)  # the listing's rate: 10/s
    assert len(upstream.started) == 1 and len(lister.started) == 2
    lister.answer(60, {"ns/a"}, newest=10)
    await settle()
    assert second.result() is None
    # Once the cache moved, the next read probes again: it may reach the RV by its events.
    cache.move(61, add="ns/b")
    third = asyncio.create_task(warning_of(reads, cache))
    await time.advance(0.1)
    assert len(upstream.started) == 2
    upstream.answer(61)
    await settle()
    assert third.result() is None
    assert len(lister.started) == 2


@pytest.mark.parametrize(
    ("listed", "newest", "change"),
    [
        ({"ns/a", "ns/new"}, 40, {"add": "ns/new"}),  # a creation on its way
        ({"ns/a"}, 40, {}),  # an update on its way
        (set(), 9, {"delete": "ns/a"}),  # a deletion on its way: one key fewer
    ],
)
async def test_a_listing_with_changes_the_cache_has_not_seen_waits_for_them(
    time: FakeTime, listed: set[str], newest: int, change: dict[str, str]
) -> None:
    reads, upstream, lister = consistent(time, confirm_after=0.1, timeout=3.0)
    cache = Cache(time, rv=10, keys={"ns/a"})
    task = asyncio.create_task(warning_of(reads, cache))
    await settle()
    upstream.answer(50)
    await time.advance(0.2)
    lister.answer(51, listed, newest=newest)
    await time.advance(1.0)
    assert not task.done()
    cache.move(40, **change)
    await settle()
    assert task.result() is None
    assert reads.stats.confirmed == 1


async def test_changes_that_never_come_fall_back_at_the_timeout(time: FakeTime) -> None:
    reads, upstream, lister = consistent(time, confirm_after=0.1, timeout=3.0)
    cache = Cache(time, rv=10, keys={"ns/a"})
    task = asyncio.create_task(warning_of(reads, cache))
    await settle()
    upstream.answer(50)
    await time.advance(0.2)
    lister.answer(51, {"ns/a", "ns/b"}, newest=30)
    await time.advance(2.7)
    assert not task.done()
    await time.advance(0.2)
    assert b"the cache is at resourceVersion 10, upstream at 51" in (task.result() or b"")
    assert reads.stats.fallbacks["cache_behind"] == 1


async def test_a_failed_listing_falls_back(time: FakeTime) -> None:
    reads, upstream, lister = consistent(time, confirm_after=0.1)
    task = asyncio.create_task(warning_of(reads, Cache(time, rv=10)))
    await settle()
    upstream.answer(50)
    await time.advance(0.2)
    lister.fail(TransportError("connection reset"))
    await settle()
    assert b"upstream could not be asked (connection reset)" in (task.result() or b"")
    assert reads.stats.probe_errors == 1


async def test_without_a_listing_a_quiet_cache_waits_out_the_timeout(time: FakeTime) -> None:
    upstream = Upstream(time)
    reads = ConsistentReads(
        upstream, ConsistencyOptions(timeout=1.0), clock=time.clock, sleep=time.sleep
    )
    task = asyncio.create_task(warning_of(reads, Cache(time, rv=10)))
    await settle()
    upstream.answer(50)
    await time.advance(0.9)
    assert not task.done()
    await time.advance(0.2)
    assert task.result() is not None
    assert reads.stats.listings == 0


@pytest.fixture(autouse=True)
def objects() -> Objects:
    OBJECTS.versions.clear()
    OBJECTS.asked.clear()
    return OBJECTS


@pytest.mark.parametrize(("mine", "theirs"), [(9, 9), (12, 9), (None, None)])
async def test_a_get_is_confirmed_by_its_object_not_by_a_listing(
    time: FakeTime, objects: Objects, mine: int | None, theirs: int | None
) -> None:
    reads, upstream, lister = consistent(time, confirm_after=0.1)
    cache = Cache(time, rv=12, keys={"ns/a"} if mine else ())
    if mine is not None:
        cache.objects["ns/a"] = mine
    if theirs is not None:
        objects.versions["ns/a"] = theirs
    task = asyncio.create_task(warning_of(reads, cache, get=A))
    await settle()
    upstream.answer(50)
    await time.advance(0.2)
    assert task.result() is None
    assert objects.asked == [("ns", "a")] and not lister.started
    assert (reads.stats.object_checks, reads.stats.confirmed) == (1, 1)
    # Found quiet: the next get asks for its object at once, without a probe.
    again = asyncio.create_task(warning_of(reads, cache, get=A))
    await settle()
    assert again.result() is None
    assert len(upstream.started) == 1 and len(objects.asked) == 2


@pytest.mark.parametrize(
    ("theirs", "change"),
    [
        (40, {"add": "ns/a"}),  # upstream has a newer version: its event is on its way
        (None, {"delete": "ns/a"}),  # upstream deleted it: the deletion is on its way
    ],
)
async def test_a_get_whose_object_changed_upstream_waits_for_the_change(
    time: FakeTime, objects: Objects, theirs: int | None, change: dict[str, str]
) -> None:
    reads, upstream, _ = consistent(time, confirm_after=0.1, timeout=3.0)
    cache = Cache(time, rv=12, keys={"ns/a"})
    cache.objects["ns/a"] = 9
    if theirs is not None:
        objects.versions["ns/a"] = theirs
    task = asyncio.create_task(warning_of(reads, cache, get=A))
    await settle()
    upstream.answer(50)
    await time.advance(0.2)
    cache.move(20, add="ns/b")  # another object's event: not the one the get waits for
    await time.advance(1.0)
    assert not task.done()
    cache.move(40, **change)
    await settle()
    assert task.result() is None


async def test_a_get_whose_object_never_comes_falls_back_naming_it(
    time: FakeTime, objects: Objects
) -> None:
    reads, upstream, _ = consistent(time, confirm_after=0.1, timeout=1.0)
    objects.versions["ns/a"] = 40
    task = asyncio.create_task(warning_of(reads, Cache(time, rv=12), get=A))
    await settle()
    upstream.answer(50)
    await time.advance(1.1)
    assert b"the cache has ns/a at resourceVersion None, upstream at 40" in (task.result() or b"")
