"""A paged list at an older resourceVersion, in process: what a ``limit`` walk costs against one
full list at the same RV.

``python -m loadtest pagewalk [--pods 50000] [--events 5000] [--limit 500] [--repeat 5]``

No HTTP: :meth:`ServedResource.list <cacheproxy.server.resource.ServedResource.list>` is called
directly, and each page's body is assembled as the server writes it (``ServedList.parts``). The
store holds ``--pods`` synthetic pods (50 namespaces, 10 apps each; bodies of ~700 bytes: the
object's size does not change what is measured, only how long the setup takes). The walk's RV is
taken, then ``--events`` changes (60 % modifications, 20 % deletions, 20 % additions) move the
cache past it, so every page of the walk is served from the state at that RV — the case of a
walk whose continue tokens outlive the cache's RV, the normal one under churn.

Measured, each the best of ``--repeat`` runs (the machine may be busy), each run on a resource
that has served nothing yet, with the cache frozen out of the garbage collector's way (as the
daemon does after its first sync): one full list at the RV (``resourceVersionMatch=Exact``, no
``limit``) and the whole walk (``limit`` with the RV, then the continue tokens), for all pods
and for a label-selected list (``app=app-3``: a tenth of them). Nothing is asserted; the figures
are printed, with the walk's cost as a multiple of the full list's.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cacheproxy.informer import EventLog, FakeListerWatcher, SharedInformer, Store
from cacheproxy.kube.labels import parse_label_selector
from cacheproxy.kube.listoptions import EXACT, ListOptions
from cacheproxy.kube.resources import builtin
from cacheproxy.server.query import Query
from cacheproxy.server.resource import ServedResource

__all__ = ["Figures", "Setup", "build", "main", "measure"]

PODS = builtin("pods")
NAMESPACES = 50
APPS = 10


@dataclass(slots=True)
class Setup:
    informer: SharedInformer
    rv: int
    """The walk's RV: ``events`` changes older than the cache's."""


def _pod(rng: random.Random, i: int, rv: int) -> dict[str, Any]:
    namespace = f"ns-{rng.randrange(NAMESPACES)}"
    app = f"app-{rng.randrange(APPS)}"
    return {
        "metadata": {
            "name": f"{app}-{i:06d}-{rng.getrandbits(24):06x}",
            "namespace": namespace,
            "uid": f"{rng.getrandbits(128):032x}",
            "resourceVersion": str(rv),
            "labels": {"app": app, "tier": rng.choice(["web", "db", "cache"])},
        },
        "spec": {
            "nodeName": f"node-{rng.randrange(200)}",
            "containers": [
                {"name": "main", "image": f"registry.example/{app}:1.{i % 7}", "args": ["serve"]}
            ],
        },
        "status": {"phase": "Running", "podIP": f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}"},
    }


def build(*, pods: int, events: int, seed: int = 1) -> Setup:
    """A store of ``pods`` pods at RV ``pods``, then ``events`` changes logged after it, applied
    as the informer applies a watch event (store, EventLog, store RV)."""
    rng = random.Random(seed)
    store = Store(kind="Pod", api_version="v1", field_indexes=("spec.nodeName",))
    log = EventLog(max_events=max(events, 1), min_events=max(events, 1), clock=lambda: 0.0)
    informer = SharedInformer(
        FakeListerWatcher(kind="Pod"), name="pods", store=store, event_log=log
    )
    for i in range(pods):
        store.put(store.make_entry(_pod(rng, i, i + 1)))
    rv = store.resource_version = pods
    log.reset(rv)
    keys = list(store.keys())
    for n in range(events):
        rv += 1
        roll = rng.random()
        if roll < 0.2 and keys:
            prev = store.delete(keys.pop(rng.randrange(len(keys))))
            if prev is not None:
                log.append("DELETED", prev, prev, rv)
        else:
            if roll < 0.4:
                obj = _pod(rng, pods + n, rv)
            else:
                entry = store.get(keys[rng.randrange(len(keys))])
                assert entry is not None
                obj = entry.object()
                obj["metadata"]["resourceVersion"] = str(rv)
                obj["status"]["phase"] = rng.choice(["Running", "Pending", "Succeeded"])
            new = store.make_entry(obj)
            prev = store.put(new)
            if prev is None:
                keys.append(new.key)
            log.append("ADDED" if prev is None else "MODIFIED", new, prev, rv)
        store.resource_version = rv
    return Setup(informer, pods)


async def full_list(res: ServedResource, query: Query, rv: int) -> int:
    page = await res.read_list(
        query, ListOptions(resource_version=str(rv), resource_version_match=EXACT)
    )
    page.parts()
    return len(page.items)


async def walk(res: ServedResource, query: Query, rv: int, limit: int) -> int:
    opts = ListOptions(resource_version=str(rv), limit=limit)
    items = pages = 0
    while True:
        page = await res.read_list(query, opts)
        page.parts()
        items += len(page.items)
        pages += 1
        if not page.continue_token:
            return pages
        opts = ListOptions(limit=limit, continue_token=page.continue_token)


@dataclass(frozen=True, slots=True)
class Figures:
    query: str
    items: int
    pages: int
    full_s: float
    walk_s: float

    @property
    def ratio(self) -> float:
        return self.walk_s / self.full_s


async def _best(repeat: int, run: Callable[[], Any]) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        result = await run()
        best = min(best, time.perf_counter() - started)
    return best, result


async def measure(setup: Setup, *, limit: int, repeat: int) -> list[Figures]:
    """The full list and the walk of each query, each on a resource that served nothing yet."""

    def fresh() -> ServedResource:
        return ServedResource(PODS, setup.informer, index_paths={"spec.nodeName"})

    out = []
    for name, query in (
        ("all pods", Query()),
        ("app=app-3", Query(labels=parse_label_selector("app=app-3"))),
    ):
        full_s, items = await _best(repeat, lambda q=query: full_list(fresh(), q, setup.rv))
        walk_s, pages = await _best(repeat, lambda q=query: walk(fresh(), q, setup.rv, limit))
        out.append(Figures(name, items, pages, full_s, walk_s))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m loadtest pagewalk", description=__doc__)
    parser.add_argument("--pods", type=int, default=50_000)
    parser.add_argument("--events", type=int, default=5_000)
    parser.add_argument("--limit", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    setup = build(pods=args.pods, events=args.events)
    # As the daemon after its first sync: the cache's objects out of the collector's way.
    gc.collect()
    gc.freeze()
    store = setup.informer.store
    print(
        f"{len(store)} pods at RV {store.resource_version}; walk at RV {setup.rv} "
        f"({args.events} events older); built in {time.perf_counter() - started:.1f} s"
    )
    for f in asyncio.run(measure(setup, limit=args.limit, repeat=args.repeat)):
        print(
            f"{f.query:>10}: {f.items} items; full list {f.full_s * 1e3:8.1f} ms; "
            f"limit={args.limit} walk {f.walk_s * 1e3:8.1f} ms in {f.pages} pages "
            f"({f.walk_s / f.pages * 1e3:.2f} ms a page) = {f.ratio:.2f}x the full list"
        )


if __name__ == "__main__":
    main()
