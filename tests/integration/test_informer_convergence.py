"""Property: whatever the writes and the upstream faults, the informer converges.

Random creates, updates and deletes on the simulator, interleaved with random faults (watches
ended, history compacted, 410/500 on watch and list, garbage and truncated streams, a restart).
After quiescence: the Store equals the simulator's state; every index answers what a full scan
answers; and each handler's notifications, replayed on an empty map, give that same state.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cacheproxy.informer import (
    Backoff,
    DeletedFinalStateUnknown,
    Entry,
    ReflectorOptions,
    SharedInformer,
    Store,
)
from cacheproxy.kube.fieldpath import compile_field_path
from cacheproxy.sim import SimServer, Simulator
from cacheproxy.upstream import ApiListerWatcher, UpstreamConfig, build_client

NAMES = [f"cm-{i}" for i in range(6)]
NAMESPACES = ["default", "other"]
COLORS = ["red", "blue", "green"]
FAULTS = [
    "end-watches",
    "compact",
    "watch-410",
    "watch-500",
    "list-500",
    "garbage",
    "truncate",
    "restart",
]

write = st.tuples(
    st.sampled_from(["put", "put", "delete"]),
    st.sampled_from(NAMES),
    st.sampled_from(NAMESPACES),
    st.sampled_from(COLORS),
)
step = st.one_of(
    write.map(lambda w: ("write", w)), st.sampled_from(FAULTS).map(lambda f: ("fault", f))
)


class Replay:
    """Applies handler notifications to a map of key → raw bytes."""

    def __init__(self) -> None:
        self.state: dict[str, bytes] = {}

    def on_add(self, entry: Entry, initial: bool) -> None:
        self.state[entry.key] = entry.raw

    def on_update(self, old: Entry, new: Entry) -> None:
        self.state[new.key] = new.raw

    def on_delete(self, entry: Entry | DeletedFinalStateUnknown) -> None:
        self.state.pop(entry.key, None)


def _apply_write(sim: Simulator, op: str, name: str, ns: str, color: str) -> None:
    cms = sim.resource("configmaps")
    current = sim.store.get(cms, ns, name)
    if op == "delete":
        if current is not None:
            sim.store.delete(cms, ns, name)
        return
    obj = {
        "metadata": {"name": name, "namespace": ns, "labels": {"color": color}},
        "data": {"color": color},
    }
    if current is None:
        sim.store.create(cms, obj)
    else:
        sim.store.update(cms, obj)


async def _fault(sim: Simulator, server: SimServer, fault: str) -> None:
    if fault == "end-watches":
        sim.end_watches()
    elif fault == "compact":
        sim.compact()
        sim.end_watches()
    elif fault == "watch-410":
        sim.faults.fail_next("watch", 410)
        sim.end_watches()
    elif fault == "watch-500":
        sim.faults.fail_next("watch", 500)
        sim.end_watches()
    elif fault == "list-500":
        sim.faults.fail_next("list", 500)
        sim.compact()
        sim.end_watches()
    elif fault in ("garbage", "truncate"):
        sim.faults.next_watch_stream(fault)  # type: ignore[arg-type]
        sim.end_watches()
    else:
        await server.restart()


def _sim_state(sim: Simulator) -> dict[str, int]:
    cms = sim.resource("configmaps")
    return {stored.key: stored.rv for stored in sim.store.iter_range(cms, None)}


async def _scenario(steps: list[tuple[str, Any]], watch_list: bool) -> None:
    sim = Simulator()
    sim.store.create(sim.resource("namespaces"), {"metadata": {"name": "other"}})
    async with SimServer(sim) as server:
        client = build_client(UpstreamConfig(server=server.url))
        rtype = sim.resource("configmaps")
        informer = SharedInformer(
            ApiListerWatcher(client, rtype),
            name="cms",
            store=Store(
                kind=rtype.kind, api_version=rtype.api_version, field_indexes=("data.color",)
            ),
            reflector_options=ReflectorOptions(
                watch_list=watch_list, backoff=lambda: Backoff(initial=0.005, cap=0.02)
            ),
        )
        replay = Replay()
        informer.add_handler(replay)
        task = asyncio.create_task(informer.run(), name="informer-under-test")
        try:
            await asyncio.wait_for(informer.wait_for_sync(), timeout=10)
            for kind, arg in steps:
                if kind == "write":
                    _apply_write(sim, *arg)
                else:
                    await _fault(sim, server, arg)
                await asyncio.sleep(0.005)
            expected = _sim_state(sim)
            for _ in range(500):
                got = {e.key: e.rv for e in informer.store.entries()}
                if got == expected and replay.state.keys() == expected.keys():
                    break
                await asyncio.sleep(0.01)
            assert {e.key: e.rv for e in informer.store.entries()} == expected
            _check_indexes(informer.store)
            await asyncio.sleep(0.02)
            assert replay.state == {e.key: e.raw for e in informer.store.entries()}
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await client.aclose()


def _check_indexes(store: Store) -> None:
    entries = list(store.entries())
    for ns in NAMESPACES:
        assert store.namespace_keys(ns) == {e.key for e in entries if e.namespace == ns}
    for color in COLORS:
        scan = {e.key for e in entries if e.label_map().get("color") == color}
        assert store.label_keys("color", color) == scan
        extract = compile_field_path("data.color")
        scan_field = {e.key for e in entries if color in extract(orjson.loads(e.raw))}
        assert store.index_keys("data.color", color) == scan_field


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(steps=st.lists(step, min_size=1, max_size=25), watch_list=st.booleans())
def test_the_informer_converges_to_the_simulator_after_any_writes_and_faults(
    steps: list[tuple[str, Any]], watch_list: bool
) -> None:
    asyncio.run(_scenario(steps, watch_list))
