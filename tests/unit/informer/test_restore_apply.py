"""When a restored state is applied: not before the resumed watch answered (or the gate the
daemon gives, every restored watch answered), so the loop is free while the watches open; at once
when it is served stale."""

from __future__ import annotations

import asyncio
from typing import Any

from cacheproxy.informer import FakeListerWatcher, SharedInformer, Store
from cacheproxy.informer.informer import CacheState
from tests.support import running_informer, settle


def cm(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default"}, "data": {}}


async def no_sleep(_: float) -> None:
    await asyncio.sleep(0)


def restored(lw: FakeListerWatcher, **kwargs: Any) -> SharedInformer:
    informer = SharedInformer(
        lw, name="cms", store=Store(kind="ConfigMap", api_version="v1"), sleep=no_sleep
    )
    entries = [informer.store.make_entry(dict(o)) for o in lw.objects.values()]
    informer.restore(entries, lw.rv, **kwargs)
    return informer


def upstream() -> FakeListerWatcher:
    lw = FakeListerWatcher()
    for name in ("a", "b"):
        lw.emit("ADDED", cm(name))
    return lw


async def test_the_state_waits_for_the_gate_then_is_applied_and_confirmed() -> None:
    gate = asyncio.Event()
    lw = upstream()
    informer = restored(lw, apply_after=gate.wait)
    async with running_informer(informer, synced=False):
        await settle(lambda: informer.reflector.watch_answered.is_set())
        for _ in range(50):
            await asyncio.sleep(0)
        assert informer.state.value == "syncing" and len(informer.store) == 0
        gate.set()
        await asyncio.wait_for(informer.wait_for_sync(), 5)
        assert informer.state is CacheState.CONFIRMED
        assert sorted(informer.store.keys()) == ["default/a", "default/b"]


async def test_without_a_gate_the_state_is_applied_once_the_watch_answered() -> None:
    lw = upstream()
    informer = restored(lw)
    async with running_informer(informer, synced=False):
        await asyncio.wait_for(informer.wait_for_sync(), 5)
        assert informer.reflector.watch_answered.is_set()
        assert len(informer.store) == 2


async def test_a_state_served_stale_is_applied_at_once_whatever_the_gate() -> None:
    never = asyncio.Event()
    lw = upstream()
    informer = restored(lw, serve_stale=True, apply_after=never.wait)
    async with running_informer(informer, synced=False):
        await asyncio.wait_for(informer.wait_for_sync(), 5)
        assert informer.state is CacheState.RESTORED and len(informer.store) == 2
