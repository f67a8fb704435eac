"""Controller: a reconcile loop on the work queue, fed by informers over fake ListerWatchers."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter, defaultdict
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cacheproxy.controller import Controller, Requeue, owner_keys
from cacheproxy.informer import (
    Collection,
    FakeListerWatcher,
    ItemExponentialFailureRateLimiter,
    SharedInformer,
    SharedInformerFactory,
)
from cacheproxy.kube import status
from cacheproxy.kube.resources import builtin
from tests.support import until

Reconciled = list[tuple[str, dict[str, Any] | None]]


def cm(name: str, value: str = "0", ns: str = "default", **meta: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns, **meta}, "data": {"v": value}}


class World:
    """Fake upstreams by resource, and a factory over them."""

    def __init__(self) -> None:
        self.upstreams: dict[str, FakeListerWatcher] = {}
        self.factory = SharedInformerFactory(self._lw)

    def _lw(self, collection: Collection) -> FakeListerWatcher:
        return self.upstreams.setdefault(
            collection.rtype.resource, FakeListerWatcher(kind=collection.rtype.kind)
        )

    def informer(self, resource: str) -> tuple[SharedInformer, FakeListerWatcher]:
        informer = self.factory.informer(Collection(builtin(resource)))
        return informer, self.upstreams[builtin(resource).resource]


@contextlib.asynccontextmanager
async def running(controller: Controller, factory: SharedInformerFactory) -> AsyncIterator[None]:
    async with factory:
        task = asyncio.create_task(controller.run())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def test_every_object_is_reconciled_once_synced_then_each_change_with_its_latest_state() -> (
    None
):
    world = World()
    cms, upstream = world.informer("configmaps")
    upstream.emit("ADDED", cm("a"))
    upstream.emit("ADDED", cm("b"))
    calls: Reconciled = []

    async def reconcile(key: str, obj: dict[str, Any] | None) -> None:
        calls.append((key, obj))

    controller = Controller(cms, reconcile)
    async with running(controller, world.factory):
        await until(lambda: len(calls) == 2)
        assert sorted(k for k, _ in calls) == ["default/a", "default/b"]
        upstream.emit("MODIFIED", cm("a", "1"))
        await until(lambda: len(calls) == 3)
        assert calls[2][0] == "default/a"
        assert calls[2][1] is not None and calls[2][1]["data"] == {"v": "1"}
        upstream.emit("DELETED", cm("b"))
        await until(lambda: len(calls) == 4)
        assert calls[3] == ("default/b", None)
    assert controller.reconciled == 4 and controller.failed == 0


async def test_the_object_reconcile_gets_is_parsed_once_and_shared_with_the_store() -> None:
    world = World()
    cms, upstream = world.informer("configmaps")
    upstream.emit("ADDED", cm("a"))
    got: list[dict[str, Any] | None] = []

    async def reconcile(key: str, obj: dict[str, Any] | None) -> None:
        got.append(obj)

    async with running(Controller(cms, reconcile), world.factory):
        await until(lambda: len(got) == 1)
        entry = cms.store.get("default/a")
        assert entry is not None
        assert got[0] is entry.parsed  # no second parse
        assert entry.object() == entry.parsed and entry.object() is not entry.parsed


async def test_changes_that_arrive_while_a_key_is_reconciled_make_one_more_call_with_the_latest() -> (
    None
):
    world = World()
    cms, upstream = world.informer("configmaps")
    upstream.emit("ADDED", cm("a"))
    release = asyncio.Event()
    calls: Reconciled = []

    async def reconcile(key: str, obj: dict[str, Any] | None) -> None:
        calls.append((key, obj))
        if len(calls) == 1:
            await release.wait()

    async with running(Controller(cms, reconcile, workers=4), world.factory):
        await until(lambda: len(calls) == 1)
        for value in "12345":
            upstream.emit("MODIFIED", cm("a", value))
        await until(lambda: cms.store.resource_version == upstream.rv)
        release.set()
        await until(lambda: len(calls) == 2)
        await asyncio.sleep(0.05)  # time for a wrong third call to show
    assert len(calls) == 2
    assert calls[1][1] is not None and calls[1][1]["data"] == {"v": "5"}


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    changes=st.lists(
        st.tuples(st.sampled_from("abc"), st.sampled_from(["ADDED", "MODIFIED", "DELETED"])),
        min_size=1,
        max_size=30,
    ),
    workers=st.integers(min_value=1, max_value=4),
)
def test_no_key_is_reconciled_by_two_workers_at_once_and_the_last_call_sees_the_final_state(
    changes: list[tuple[str, str]], workers: int
) -> None:
    async def scenario() -> None:
        world = World()
        cms, upstream = world.informer("configmaps")
        busy: Counter[str] = Counter()
        overlaps: list[str] = []
        last: dict[str, dict[str, Any] | None] = {}

        async def reconcile(key: str, obj: dict[str, Any] | None) -> None:
            busy[key] += 1
            if busy[key] > 1:
                overlaps.append(key)
            await asyncio.sleep(0.001)
            last[key] = obj
            busy[key] -= 1

        controller = Controller(cms, reconcile, workers=workers)
        async with running(controller, world.factory):
            await cms.wait_for_sync()
            for n, (name, kind) in enumerate(changes):
                upstream.emit(kind, cm(name, str(n)))
                await asyncio.sleep(0)
            await until(lambda: cms.store.resource_version == upstream.rv)
            settled = lambda: (  # noqa: E731
                len(controller.queue) == 0 and controller.queue.waiting() == 0 and not busy.total()
            )
            await until(settled)
        assert overlaps == []
        for key, obj in last.items():
            entry = cms.store.get(key)
            assert obj == (None if entry is None else entry.parsed), key

    asyncio.run(scenario())


async def test_a_failing_reconcile_is_retried_with_backoff_until_it_succeeds() -> None:
    world = World()
    cms, upstream = world.informer("configmaps")
    upstream.emit("ADDED", cm("a"))
    tries: Counter[str] = Counter()

    async def reconcile(key: str, obj: dict[str, Any] | None) -> None:
        tries[key] += 1
        if tries[key] < 4:
            raise RuntimeError(f"not yet ({tries[key]})")

    limiter = ItemExponentialFailureRateLimiter(base=0.001, max=0.01)
    controller = Controller(cms, reconcile, rate_limiter=limiter)
    async with running(controller, world.factory):
        await until(lambda: controller.reconciled == 1)
        assert controller.queue.num_requeues("default/a") == 0  # forgotten once it succeeded
    assert tries["default/a"] == 4 and controller.failed == 3


async def test_a_reconcile_that_asks_to_be_requeued_is_called_again_without_a_change() -> None:
    world = World()
    cms, upstream = world.informer("configmaps")
    upstream.emit("ADDED", cm("a"))
    calls: list[str] = []

    async def reconcile(key: str, obj: dict[str, Any] | None) -> Requeue | None:
        calls.append(key)
        return Requeue(after=0.01) if len(calls) < 3 else None

    async with running(Controller(cms, reconcile), world.factory):
        await until(lambda: len(calls) == 3)
        await asyncio.sleep(0.05)
    assert calls == ["default/a"] * 3


async def test_owned_objects_reconcile_their_controller_and_watched_ones_whatever_they_map_to() -> (
    None
):
    world = World()
    deployments, deploys_up = world.informer("deployments")
    replicasets, sets_up = world.informer("replicasets")
    pods, pods_up = world.informer("pods")
    deploys_up.emit("ADDED", cm("web"))
    calls: list[str] = []

    async def reconcile(key: str, obj: dict[str, Any] | None) -> None:
        calls.append(key)

    ref = {"kind": "Deployment", "name": "web", "controller": True, "apiVersion": "apps/v1"}
    controller = (
        Controller(deployments, reconcile)
        .owns(replicasets)
        .watches(pods, lambda entry: [f"default/{entry.label_map().get('deploy', '')}"])
    )
    async with running(controller, world.factory):
        await until(lambda: calls == ["default/web"])
        sets_up.emit("ADDED", cm("web-1", ownerReferences=[ref]))
        await until(lambda: len(calls) == 2)
        sets_up.emit("ADDED", cm("stray", ownerReferences=[{**ref, "controller": False}]))
        pods_up.emit("ADDED", cm("p", labels={"deploy": "web"}))
        await until(lambda: len(calls) == 3)
        await asyncio.sleep(0.05)
    assert calls == ["default/web"] * 3


def test_owner_keys_name_the_controlling_owner_of_the_kind_only() -> None:
    from cacheproxy.informer import Store

    store = Store(kind="ReplicaSet", api_version="apps/v1")
    refs = [
        {"kind": "Deployment", "name": "web", "controller": True},
        {"kind": "Deployment", "name": "other"},
        {"kind": "Job", "name": "j", "controller": True},
    ]
    entry = store.make_entry(cm("rs", ns="shop", ownerReferences=refs))
    assert list(owner_keys("Deployment")(entry)) == ["shop/web"]
    assert list(owner_keys("StatefulSet")(entry)) == []


async def test_a_relist_reconciles_what_it_changed_and_what_vanished() -> None:
    world = World()
    cms, upstream = world.informer("configmaps")
    for name in "abc":
        upstream.emit("ADDED", cm(name))
    calls: list[str] = []

    async def reconcile(key: str, obj: dict[str, Any] | None) -> None:
        calls.append(key)

    async with running(Controller(cms, reconcile), world.factory):
        await until(lambda: len(calls) == 3)
        upstream.emit("MODIFIED", cm("a", "changed"), missed=True)
        upstream.emit("DELETED", cm("b"), missed=True)
        upstream.break_watches(status.gone("too old resource version"))
        await until(lambda: len(calls) == 5)
        await asyncio.sleep(0.05)
    assert sorted(calls[3:]) == ["default/a", "default/b"]  # c is unchanged


async def test_the_controller_waits_for_every_informer_it_reads_to_sync() -> None:
    world = World()
    cms, upstream = world.informer("configmaps")
    secrets, secrets_up = world.informer("secrets")
    secrets_up.supports_watch_list = False
    secrets_up.fail_next_list(status.internal_error("not yet"))
    upstream.emit("ADDED", cm("a"))
    calls: list[str] = []

    async def reconcile(key: str, obj: dict[str, Any] | None) -> None:
        calls.append(key)

    controller = Controller(cms, reconcile).watches(secrets, lambda e: [e.key])
    async with running(controller, world.factory):
        await cms.wait_for_sync()
        assert calls == [] and not secrets.has_synced
        await until(lambda: calls == ["default/a"], within=30)
        assert secrets.has_synced


def test_a_controller_needs_a_worker() -> None:
    world = World()
    cms, _ = world.informer("configmaps")

    async def reconcile(key: str, obj: dict[str, Any] | None) -> None:
        return None

    with pytest.raises(ValueError, match="at least one worker"):
        Controller(cms, reconcile, workers=0)


async def test_workers_share_the_keys() -> None:
    world = World()
    cms, upstream = world.informer("configmaps")
    for n in range(8):
        upstream.emit("ADDED", cm(f"c{n}"))
    running_now = 0
    most = 0
    gate = asyncio.Event()
    done: defaultdict[str, int] = defaultdict(int)

    async def reconcile(key: str, obj: dict[str, Any] | None) -> None:
        nonlocal running_now, most
        running_now += 1
        most = max(most, running_now)
        if most == 4:
            gate.set()
        await gate.wait()
        running_now -= 1
        done[key] += 1

    async with running(Controller(cms, reconcile, workers=4), world.factory):
        await until(lambda: len(done) == 8)
    assert most == 4
