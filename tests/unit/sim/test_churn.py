"""The churn driver writes at its rate, in its mix, within its bounds, and survives API errors.

Time is virtual: the driver gets a fake clock and a sleep that advances it, so nothing here
really sleeps.
"""

from __future__ import annotations

import asyncio
import copy
import math
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest

from cacheproxy.kube import status
from cacheproxy.kube.resources import ResourceType, builtin
from cacheproxy.sim import Simulator
from cacheproxy.sim.churn import ChurnDriver, ChurnMix, ChurnStats, ObjectWriter, demo_churn
from cacheproxy.sim.storage import SimStore
from cacheproxy.sim.workload import DemoSpec, demo_objects

PODS = builtin("pods")
EPOCH = datetime(2026, 11, 29, 14, 0, 0, tzinfo=UTC)
CREATE_ONLY = ChurnMix(create=1, update=0, delete=0)
UPDATE_ONLY = ChurnMix(create=0, update=1, delete=0)
DELETE_ONLY = ChurnMix(create=0, update=0, delete=1)


class VirtualTime:
    """A clock and a sleep that advances it (plus an optional oversleep), recording the sleeps."""

    def __init__(self, oversleep: float = 0.0) -> None:
        self.now = 1000.0
        self.oversleep = oversleep
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, delay: float) -> None:
        assert delay >= 0
        self.sleeps.append(delay)
        self.now += delay + (self.oversleep if delay > 0 else 0.0)
        await asyncio.sleep(0)


class FakeWriter:
    """A dict store with one RV counter, answering like the API server (409, 404)."""

    def __init__(self, clock: VirtualTime | None = None) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.frozen: dict[tuple[str, str], bytes] = {}
        self.rv = 0
        self.log: list[tuple[float, str]] = []
        self._time = clock

    def _record(self, verb: str) -> None:
        self.log.append((self._time.now if self._time else 0.0, verb))

    def _save(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
        self.objects[key] = obj
        self.frozen[key] = orjson.dumps(obj)
        return obj

    def create(self, rtype: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        assert rtype == PODS
        self._record("create")
        obj = copy.deepcopy(obj)
        meta = obj["metadata"]
        if (meta["namespace"], meta["name"]) in self.objects:
            raise status.already_exists(resource="pods", name=meta["name"])
        meta["uid"] = f"uid-{self.rv + 1}"
        meta["creationTimestamp"] = self.now()
        return self._save(obj)

    def update(self, rtype: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        self._record("update")
        obj = copy.deepcopy(obj)
        meta = obj["metadata"]
        current = self.objects.get((meta["namespace"], meta["name"]))
        if current is None:
            raise status.not_found(resource="pods", name=meta["name"])
        if meta.get("resourceVersion") != current["metadata"]["resourceVersion"]:
            raise status.conflict(resource="pods", name=meta["name"])
        return self._save(obj)

    def delete(self, rtype: ResourceType, namespace: str, name: str) -> dict[str, Any]:
        self._record("delete")
        obj = self.objects.pop((namespace, name), None)
        if obj is None:
            raise status.not_found(resource="pods", name=name)
        del self.frozen[(namespace, name)]
        return obj

    def get(self, rtype: ResourceType, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objects.get((namespace, name))

    def names(self, rtype: ResourceType) -> list[tuple[str, str]]:
        return sorted(self.objects)

    def now(self) -> str:
        """The server's time: the epoch plus the virtual seconds gone by."""
        seconds = self._time.now - 1000.0 if self._time else 0.0
        return (EPOCH + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")

    @property
    def writes(self) -> int:
        return len(self.log)


class ConflictingWriter(FakeWriter):
    """Someone else always wins: every update meets a newer resourceVersion."""

    def update(self, rtype: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        self._record("update")
        raise status.conflict(resource="pods", name=obj["metadata"]["name"])


class GhostWriter(FakeWriter):
    """Lists pods that someone else has deleted since (a stale listing)."""

    def names(self, rtype: ResourceType) -> list[tuple[str, str]]:
        return sorted([*self.objects, *((f"ns-{i}", f"ghost-{i}") for i in range(5))])


def driver(writer: ObjectWriter, *, seed: int = 1, **kwargs: Any) -> ChurnDriver:
    args: dict[str, Any] = {
        "rate": 0,
        "rng": random.Random(seed),
        "namespaces": ["ns-0", "ns-1"],
        "nodes": ["node-0", "node-1", "node-2"],
        "apps": ["app-0", "app-1"],
    } | kwargs
    return ChurnDriver(writer, **args)


def populate(writer: FakeWriter, n: int) -> None:
    driver(writer, seed=99, mix=CREATE_ONLY).step(n)
    assert len(writer.objects) == n


def timed(
    vt: VirtualTime, writer: FakeWriter | None = None, **kwargs: Any
) -> tuple[ChurnDriver, FakeWriter]:
    writer = writer if writer is not None else FakeWriter(vt)
    return driver(writer, clock=vt.clock, sleep=vt.sleep, **kwargs), writer


# ---------------------------------------------------------------------------- step


def test_step_makes_exactly_n_writes_in_the_mixs_proportions() -> None:
    writer = FakeWriter()
    populate(writer, 50)
    stats = driver(writer, mix=ChurnMix(create=1, update=8, delete=1)).step(2000)
    assert stats.writes == writer.writes - 50 == 2000
    assert stats.failed == 0
    assert 1500 < stats.updated < 1700
    assert 130 < stats.created < 270
    assert 130 < stats.deleted < 270
    assert len(writer.objects) == 50 + stats.created - stats.deleted


def test_step_zero_writes_nothing() -> None:
    writer = FakeWriter()
    assert driver(writer).step(0) == ChurnStats()
    assert writer.writes == 0


def test_an_empty_store_gets_creates_whatever_the_mix() -> None:
    writer = FakeWriter()
    stats = driver(writer, mix=UPDATE_ONLY).step(5)
    assert stats == ChurnStats(created=1, updated=4)


def test_created_pods_are_spread_over_the_given_namespaces_apps_and_nodes() -> None:
    writer = FakeWriter()
    driver(writer, mix=CREATE_ONLY).step(60)
    pods = list(writer.objects.values())
    assert {p["metadata"]["namespace"] for p in pods} == {"ns-0", "ns-1"}
    assert {p["metadata"]["labels"]["app"] for p in pods} == {"app-0", "app-1"}
    assert {p["spec"]["nodeName"] for p in pods} == {"node-0", "node-1", "node-2"}


def test_updates_send_the_current_resource_version_and_never_mutate_stored_objects() -> None:
    writer = FakeWriter()
    populate(writer, 20)
    stats = driver(writer, mix=UPDATE_ONLY).step(300)
    assert stats == ChurnStats(updated=300)
    for key, obj in writer.objects.items():
        assert orjson.dumps(obj) == writer.frozen[key]
    revisions = sum(
        int(p["metadata"]["annotations"].get("sim.cacheproxy.dev/revision", "0"))
        for p in writer.objects.values()
    )
    assert revisions == 300


def test_deletes_empty_the_store_then_turn_into_creates() -> None:
    writer = FakeWriter()
    populate(writer, 10)
    stats = driver(writer, mix=DELETE_ONLY).step(11)
    assert stats == ChurnStats(deleted=10, created=1)


def test_conflicts_are_counted_as_failures_not_raised() -> None:
    writer = ConflictingWriter()
    populate(writer, 10)
    churn = driver(writer, mix=UPDATE_ONLY)
    assert churn.step(40) == ChurnStats(failed=40)
    assert churn.stats == ChurnStats(failed=40)


def test_pods_deleted_behind_the_drivers_back_are_counted_as_failures() -> None:
    writer = GhostWriter()
    populate(writer, 5)
    stats = driver(writer, mix=ChurnMix(create=0, update=1, delete=1)).step(200)
    assert stats.writes == 200
    assert 0 < stats.failed <= 5  # each ghost fails once, then is forgotten
    assert stats.updated + stats.deleted + stats.created == 200 - stats.failed


def test_name_collisions_on_create_are_counted_as_failures() -> None:
    writer = FakeWriter()
    driver(writer, seed=7, mix=CREATE_ONLY).step(3)
    again = driver(writer, seed=7, mix=CREATE_ONLY).step(3)  # same seed, same names
    assert again == ChurnStats(failed=3)


def test_errors_that_are_not_api_errors_propagate() -> None:
    class Broken(FakeWriter):
        def create(self, rtype: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
            raise RuntimeError("bug")

    with pytest.raises(RuntimeError, match="bug"):
        driver(Broken()).step(1)


def test_max_pods_bounds_the_population() -> None:
    writer = FakeWriter()
    churn = driver(writer, mix=ChurnMix(create=5, update=1, delete=1), max_pods=10)
    sizes = []
    for _ in range(300):
        churn.step(1)
        sizes.append(len(writer.objects))
    assert max(sizes) == 10
    assert sizes[-50:].count(10) > 10


def test_max_pods_brings_an_overfull_store_down_to_the_cap() -> None:
    writer = FakeWriter()
    populate(writer, 25)
    churn = driver(writer, mix=CREATE_ONLY, max_pods=10)
    for _ in range(40):
        before = len(writer.objects)
        churn.step(1)
        assert len(writer.objects) <= max(before, 10)
    assert len(writer.objects) <= 10


def test_the_same_seed_makes_the_same_writes() -> None:
    a, b = FakeWriter(), FakeWriter()
    for w in (a, b):
        driver(w, seed=5, max_pods=30).step(500)
    assert a.objects == b.objects
    assert list(a.objects) == list(b.objects)
    assert a.log == b.log


def test_stats_add_up() -> None:
    total = ChurnStats(1, 2, 3, 4) + ChurnStats(10, 20, 30, 40)
    assert total == ChurnStats(created=11, updated=22, deleted=33, failed=44)
    assert total.writes == 110


@pytest.mark.parametrize(
    ("kwargs", "complaint"),
    [
        ({"rate": -1}, "rate"),
        ({"rate": math.nan}, "rate"),
        ({"rate": math.inf}, "rate"),
        ({"namespaces": []}, "namespace"),
        ({"nodes": []}, "node"),
        ({"apps": []}, "app"),
        ({"max_pods": 0}, "max_pods"),
    ],
)
def test_a_driver_refuses_arguments_it_cannot_honour(
    kwargs: dict[str, Any], complaint: str
) -> None:
    with pytest.raises(ValueError, match=complaint):
        driver(FakeWriter(), **kwargs)


@pytest.mark.parametrize("weights", [(0, 0, 0), (-1, 1, 1), (1, math.nan, 1)])
def test_a_mix_needs_some_non_negative_weight(weights: tuple[float, float, float]) -> None:
    with pytest.raises(ValueError, match="weights"):
        ChurnMix(*weights)


async def test_run_refuses_negative_limits() -> None:
    churn = driver(FakeWriter())
    with pytest.raises(ValueError, match="cannot make -1 writes"):
        churn.step(-1)
    with pytest.raises(ValueError, match="events"):
        await churn.run(events=-1)
    with pytest.raises(ValueError, match="duration"):
        await churn.run(duration=-1)


# ---------------------------------------------------------------------------- run


async def test_run_stops_after_the_given_number_of_writes() -> None:
    vt = VirtualTime()
    churn, writer = timed(vt, rate=10)
    stats = await churn.run(events=25)
    assert stats.writes == writer.writes == 25
    assert vt.now - 1000.0 == pytest.approx(2.4)  # write k is due at k/10 s


async def test_run_keeps_the_rate_on_virtual_time() -> None:
    vt = VirtualTime()
    churn, writer = timed(vt, rate=20)
    stats = await churn.run(duration=10)
    assert stats.writes == writer.writes == 200
    assert vt.now == pytest.approx(1010.0)
    for k, (at, _) in enumerate(writer.log):
        assert at - 1000.0 == pytest.approx(k / 20)


async def test_run_does_not_drift_when_sleeps_overshoot() -> None:
    vt = VirtualTime(oversleep=0.037)
    churn, writer = timed(vt, rate=50)
    stats = await churn.run(duration=20)
    # Without catching up, each write would cost 20 ms + 37 ms: ~350 writes instead of 1000.
    assert 1000 - 0.037 * 50 - 1 <= stats.writes <= 1000
    for at, _ in writer.log:
        elapsed = at - 1000.0
        made = sum(1 for t, _ in writer.log if t <= at)
        assert made <= math.floor(elapsed * 50) + 1  # never ahead of the schedule
    batches = len({at for at, _ in writer.log})
    assert batches < stats.writes  # behind, it batched


async def test_run_catches_up_a_stall_in_one_batch() -> None:
    vt = VirtualTime()
    stalled = False

    async def sleep(delay: float) -> None:
        nonlocal stalled
        if not stalled and vt.now >= 1002.0:
            stalled = True
            vt.now += 3.0  # the loop was blocked for 3 s
        await vt.sleep(delay)

    writer = FakeWriter(vt)
    churn = driver(writer, rate=10, clock=vt.clock, sleep=sleep)
    stats = await churn.run(duration=10)
    assert stats.writes == 100
    times = [at for at, _ in writer.log]
    backlog = max(times.count(t) for t in set(times))
    assert backlog >= 30  # the 3 s of writes missed during the stall, made at once


async def test_run_does_not_spin() -> None:
    vt = VirtualTime()
    churn, _ = timed(vt, rate=5)
    stats = await churn.run(duration=100)
    assert stats.writes == 500
    assert 0 < len(vt.sleeps) <= stats.writes + 1
    assert all(d > 0 for d in vt.sleeps)


async def test_run_lists_the_pods_about_once_a_second_not_per_write() -> None:
    class Counting(FakeWriter):
        listings = 0

        def names(self, rtype: ResourceType) -> list[tuple[str, str]]:
            self.listings += 1
            return super().names(rtype)

    vt = VirtualTime()
    churn, writer = timed(vt, Counting(vt), rate=100, max_pods=20)
    stats = await churn.run(duration=10)
    assert stats.writes == 1000
    assert isinstance(writer, Counting)
    assert writer.listings <= 11
    assert len(writer.objects) <= 20


async def test_run_yields_to_the_loop_while_catching_up() -> None:
    vt = VirtualTime()
    blocked = False

    async def sleep(delay: float) -> None:
        nonlocal blocked
        if not blocked:  # the loop is blocked for half a second after the first write
            blocked = True
            vt.now += 0.5
        await vt.sleep(delay)

    writer = FakeWriter(vt)
    await driver(writer, rate=1000, clock=vt.clock, sleep=sleep).run(duration=1)
    assert writer.writes == 1000
    assert vt.sleeps.count(0) >= 500 // 16 - 1  # the backlog went in small batches


async def test_run_at_rate_zero_idles_until_its_duration() -> None:
    vt = VirtualTime()
    churn, writer = timed(vt, rate=0)
    stats = await churn.run(duration=30, events=10)
    assert stats == ChurnStats()
    assert writer.writes == 0
    assert vt.now == pytest.approx(1030.0)
    assert len(vt.sleeps) <= 2


async def test_run_survives_api_errors() -> None:
    vt = VirtualTime()
    writer = ConflictingWriter(vt)
    populate(writer, 5)
    churn, _ = timed(vt, writer, rate=100, mix=UPDATE_ONLY)
    stats = await churn.run(events=50)
    assert stats == ChurnStats(failed=50)


async def test_run_reports_the_runs_writes_and_stats_everything() -> None:
    vt = VirtualTime()
    churn, _ = timed(vt, rate=100)
    churn.step(7)
    run = await churn.run(events=13)
    assert run.writes == 13
    assert churn.stats.writes == 20


async def test_a_cancelled_run_raises_cancelled_error() -> None:
    vt = VirtualTime()
    busy = asyncio.Event()

    class Watched(FakeWriter):
        def _record(self, verb: str) -> None:
            super()._record(verb)
            if self.writes >= 50:
                busy.set()

    churn, writer = timed(vt, Watched(vt), rate=1000)
    task = asyncio.create_task(churn.run(), name="churn")
    await busy.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    made = writer.writes
    await asyncio.sleep(0)
    assert writer.writes == made


async def test_an_idle_run_without_a_duration_runs_until_cancelled() -> None:
    vt = VirtualTime()
    churn, _ = timed(vt, rate=0)
    task = asyncio.create_task(churn.run(), name="idle-churn")
    for _ in range(5):
        await asyncio.sleep(0)
    assert not task.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


# ---------------------------------------------------------------------------- the demo's churn


def loaded_store(spec: DemoSpec | None) -> SimStore:
    """A simulator's store, as ``cacheproxy sim`` and ``cacheproxy demo`` make it."""
    sim = Simulator()
    if spec is not None:
        sim.load(demo_objects(spec))
    return sim.store


def pods_of(store: SimStore) -> list[dict[str, Any]]:
    pods = (store.get(PODS, ns, name) for ns, name in store.names(PODS))
    return [p for p in pods if p is not None]


def test_the_demos_churn_writes_among_the_namespaces_nodes_and_apps_the_demo_loaded() -> None:
    spec = DemoSpec(namespaces=2, nodes=3, apps=2, pods=12, seed=4)
    store = loaded_store(spec)
    churn = demo_churn(store, rate=0, seed=spec.seed, apps=spec.apps, pods=spec.pods)
    assert churn.step(300).created
    pods = pods_of(store)
    assert {p["metadata"]["namespace"] for p in pods} <= {"ns-0", "ns-1"}
    assert {p["spec"].get("nodeName") for p in pods} - {None} <= {"node-0", "node-1", "node-2"}
    assert {p["metadata"]["labels"]["app"] for p in pods} <= {"app-0", "app-1"}
    assert len(pods) <= 2 * spec.pods


def test_the_demos_churn_over_an_empty_store_writes_pods_of_one_app_in_default_on_node_0() -> None:
    store = loaded_store(None)
    churn = demo_churn(store, rate=0, seed=1, apps=0, pods=0)
    assert churn.step(50).created
    pods = pods_of(store)
    assert {p["metadata"]["namespace"] for p in pods} == {"default"}
    assert {p["spec"].get("nodeName") for p in pods} <= {"node-0", None}
    assert {p["metadata"]["labels"]["app"] for p in pods} == {"app-0"}
    assert len(pods) <= 10
