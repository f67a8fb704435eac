"""Watch fan-out by index against the scan, in process: ``--watchers`` watchers each with
``fieldSelector=spec.nodeName=node-i``, events at ``--rate`` per second.

``python -m loadtest fanoutindex [--watchers 5000] [--pods 10000] [--rate 100] [--seconds 10]``

In process, not over HTTP (five thousand HTTP watchers do not fit a 2-core machine shared with
others): the events go the informer path — a scripted upstream (``FakeListerWatcher``), the
``SharedInformer`` applying them to a store indexed by ``spec.nodeName``, the ``WatchHub`` as its
subscriber — to ``ServedWatch`` mailboxes registered on the hub as the server registers them,
each drained by its own task as a watch response drains it (without the socket write). Each
event modifies a random pod; one in ten moves it to another node (two watchers see it: DELETED
on the old node's, ADDED on the new one's).

Both fan-outs run in the same process, one after the other, on the same store and watchers:
``indexed`` (the hub's default) and ``scan`` (``WatchHub.indexed = False``: every event offered
to every watcher). Measured for each: the CPU time of the hub's fan-out per event (thread time
around ``WatchHub.observe``), the process's CPU per event (informer, fan-out and the draining
tasks), and the delivery delay from the upstream emitting an event to a watcher taking its line
(p50, p99, max). Nothing is asserted; the figures are printed, and written as JSON with
``--json``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from cacheproxy.informer import FakeListerWatcher, InformerEvent, SharedInformer, Store
from cacheproxy.kube.fields import parse_field_selector
from cacheproxy.kube.resources import builtin
from cacheproxy.server.query import Query
from cacheproxy.server.watchhub import ServedWatch, WatchHub

__all__ = ["Figures", "main", "run"]

PODS = builtin("pods")


@dataclass(frozen=True, slots=True)
class Figures:
    mode: str
    events: int
    deliveries: int
    fanout_cpu_us_per_event: float
    process_cpu_us_per_event: float
    delay_p50_ms: float
    delay_p99_ms: float
    delay_max_ms: float
    evicted: int


def _pod(i: int, node: int) -> dict[str, Any]:
    return {
        "metadata": {"name": f"pod-{i:06d}", "namespace": f"ns-{i % 20}", "labels": {"n": "0"}},
        "spec": {"nodeName": f"node-{node}", "containers": [{"name": "c", "image": "i"}]},
        "status": {"phase": "Running"},
    }


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def run(
    *, watchers: int, pods: int, rate: float, seconds: float, seed: int = 1
) -> list[Figures]:
    rng = random.Random(seed)
    lw = FakeListerWatcher(kind="Pod")
    nodes = {i: rng.randrange(watchers) for i in range(pods)}
    for i, node in nodes.items():
        lw.emit("ADDED", _pod(i, node))
    store = Store(kind="Pod", api_version="v1", field_indexes=["spec.nodeName"])
    informer = SharedInformer(lw, name="pods", store=store)
    hub = WatchHub(PODS, store)
    fanout_cpu = [0.0]

    def observe(event: InformerEvent) -> None:
        began = time.thread_time()
        hub.observe(event)
        fanout_cpu[0] += time.thread_time() - began

    informer.subscribe(observe)
    informing = asyncio.create_task(informer.run(), name="informer")
    await informer.wait_for_sync()
    emitted: dict[int, float] = {}
    delays: list[float] = []

    async def drain(watcher: ServedWatch) -> None:
        while not watcher.closed:
            await watcher.wait(3600)
            lines = watcher.take()
            now = time.perf_counter()
            for line in lines:
                rv = int(json.loads(line)["object"]["metadata"]["resourceVersion"])
                delays.append(now - emitted[rv])

    served = []
    for node in range(watchers):
        query = Query(fields=parse_field_selector(f"spec.nodeName=node-{node}"))
        watcher = ServedWatch(query, buffer=1000, min_rv=store.resource_version)
        hub.add(watcher)
        served.append(watcher)
    draining = [asyncio.create_task(drain(w), name="drain") for w in served]
    results = []
    try:
        for mode in ("indexed", "scan"):
            hub.indexed = mode == "indexed"
            await asyncio.sleep(0.2)
            delays.clear()
            fanout_cpu[0] = 0.0
            delivered = hub.delivered
            events = int(rate * seconds)
            cpu_began = time.process_time()
            began = time.perf_counter()
            for n in range(events):
                due = began + n / rate
                wait = due - time.perf_counter()
                if wait > 0:
                    await asyncio.sleep(wait)
                i = rng.randrange(pods)
                if rng.random() < 0.1:
                    nodes[i] = rng.randrange(watchers)
                obj = _pod(i, nodes[i])
                obj["metadata"]["labels"]["n"] = str(n)
                emitted[lw.rv + 1] = time.perf_counter()
                lw.emit("MODIFIED", obj)
            await _settled(lambda: store.resource_version >= lw.rv and all(not w for w in served))
            cpu = time.process_time() - cpu_began
            results.append(
                Figures(
                    mode=mode,
                    events=events,
                    deliveries=hub.delivered - delivered,
                    fanout_cpu_us_per_event=fanout_cpu[0] / events * 1e6,
                    process_cpu_us_per_event=cpu / events * 1e6,
                    delay_p50_ms=_quantile(delays, 0.5) * 1e3,
                    delay_p99_ms=_quantile(delays, 0.99) * 1e3,
                    delay_max_ms=max(delays, default=float("nan")) * 1e3,
                    evicted=hub.evicted,
                )
            )
    finally:
        hub.close_all("done")
        for task in (*draining, informing):
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*draining, informing, return_exceptions=True)
    return results


async def _settled(done: Callable[[], bool], within: float = 60.0) -> None:
    """Until ``done()`` (polled), at most ``within`` seconds."""
    for _ in range(int(within / 0.01)):
        if done():
            return
        await asyncio.sleep(0.01)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtest fanoutindex", description=__doc__)
    parser.add_argument("--watchers", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--rate", type=float, default=100.0, help="events per second")
    parser.add_argument("--seconds", type=float, default=10.0, help="per fan-out")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args(argv)
    figures = asyncio.run(
        run(watchers=args.watchers, pods=args.pods, rate=args.rate, seconds=args.seconds)
    )
    for f in figures:
        print(
            f"{f.mode:>8}: {f.events} events, {f.deliveries} deliveries, fan-out "
            f"{f.fanout_cpu_us_per_event:.1f} µs CPU/event, process "
            f"{f.process_cpu_us_per_event:.1f} µs CPU/event, delay p50 {f.delay_p50_ms:.2f} ms "
            f"p99 {f.delay_p99_ms:.2f} ms max {f.delay_max_ms:.2f} ms, evicted {f.evicted}"
        )
    indexed, scan = figures
    print(
        f"scan/indexed: fan-out CPU x{scan.fanout_cpu_us_per_event / indexed.fanout_cpu_us_per_event:.1f}, "
        f"process CPU x{scan.process_cpu_us_per_event / indexed.process_cpu_us_per_event:.1f}"
    )
    if args.json:
        with open(args.json, "w") as out:
            json.dump([asdict(f) for f in figures], out, indent=2)
    return 0
