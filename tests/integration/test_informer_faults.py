"""A SharedInformer against the simulator on a loopback port, driven through every Reflector rule
by the simulator's faults.

Each test asserts two things:

1. the list/watch requests the simulator saw (``sim.request_log``), with the parameters that
   decide their meaning, are exactly the ones client-go's Reflector makes for the same fault
   (``tools/cache/reflector.go``; see ``shared/research/apiserver-semantics.md`` §1.1);
2. after recovery the informer's Store holds what the simulator holds (keys and resource
   versions), and writes made after the fault still arrive.

Backoff is fast (10-50 ms) so that only the tests that must honour ``Retry-After`` or wait for a
watch to live past a second take that long.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from cacheproxy.informer import Backoff, Changed, ReflectorOptions, SharedInformer, Store
from cacheproxy.kube.resources import builtin
from cacheproxy.sim import SimConfig, SimServer, Simulator
from cacheproxy.upstream import ApiListerWatcher, UpstreamConfig, build_client

CONFIGMAPS = builtin("configmaps")
PAGE = "500"  # client-go's pager default
WAIT = 5.0  # seconds any single expected step may take before the test fails


# ---------------------------------------------------------------------------- requests


@dataclass(frozen=True)
class Call:
    """One list or watch request as the simulator saw it: the parameters that decide what it
    means ("" = absent)."""

    verb: str
    rv: str = ""
    rvm: str = ""
    limit: str = ""
    continued: bool = False
    initial_events: str = ""
    bookmarks: str = ""

    def __repr__(self) -> str:
        shown = [f"rv={self.rv!r}"] if not self.continued else ["continue"]
        for name in ("rvm", "limit", "initial_events", "bookmarks"):
            if value := getattr(self, name):
                shown.append(f"{name}={value}")
        return f"{self.verb}({', '.join(shown)})"


def listing(rv: str, *, limit: str = "") -> Call:
    """A first (or only) list page."""
    return Call("list", rv=rv, limit=limit)


def next_page() -> Call:
    """A continuation page: limit and continue only (RV + continue is a 400)."""
    return Call("list", limit=PAGE, continued=True)


def watching(rv: str) -> Call:
    return Call("watch", rv=rv, bookmarks="true")


def watch_list(rv: str = "") -> Call:
    """KEP-3157 streaming list: initial events, then the ``initial-events-end`` bookmark."""
    return Call("watch", rv=rv, rvm="NotOlderThan", initial_events="true", bookmarks="true")


def calls(sim: Simulator) -> list[Call]:
    out = []
    for record in sim.request_log:
        if record.resource != CONFIGMAPS.qualified or record.verb not in ("list", "watch"):
            continue
        p = record.params
        out.append(
            Call(
                record.verb,
                rv=p.get("resourceVersion", ""),
                rvm=p.get("resourceVersionMatch", ""),
                limit=p.get("limit", ""),
                continued="continue" in p,
                initial_events=p.get("sendInitialEvents", ""),
                bookmarks=p.get("allowWatchBookmarks", ""),
            )
        )
    return out


def expect(seen: list[Call], expected: list[Call]) -> None:
    """Assert the exact sequence, printing both in full when they differ."""
    assert seen == expected, (
        "the simulator saw:\n  "
        + "\n  ".join(map(repr, seen))
        + "\nclient-go sends:\n  "
        + "\n  ".join(map(repr, expected))
    )


# ---------------------------------------------------------------------------- fakes


@dataclass
class RecordingMetrics:
    """InformerMetrics that remembers what happened and when (monotonic seconds)."""

    log: list[tuple[float, str, str]] = field(default_factory=list)

    def request(self, informer: str, verb: str) -> None:
        self.log.append((time.monotonic(), "request", verb))

    def relist(self, informer: str, reason: str) -> None:
        self.log.append((time.monotonic(), "relist", reason))

    def watch_error(self, informer: str, reason: str) -> None:
        self.log.append((time.monotonic(), "watch_error", reason))

    def events(self, informer: str, count: int) -> None:
        pass

    def watch_errors(self) -> list[str]:
        return [reason for _, kind, reason in self.log if kind == "watch_error"]

    def relists(self) -> list[str]:
        return [reason for _, kind, reason in self.log if kind == "relist"]


@dataclass
class RecordingBackoff(Backoff):
    """The fast test backoff, remembering every delay it handed out."""

    delays: list[float] = field(default_factory=list)

    def next_delay(self) -> float:
        delay = super().next_delay()
        self.delays.append(delay)
        return delay


# ---------------------------------------------------------------------------- the rig


class Rig:
    """A simulator on 127.0.0.1:0 and a SharedInformer on its configmaps (all namespaces)."""

    def __init__(
        self,
        sim: Simulator,
        server: SimServer,
        informer: SharedInformer,
        *,
        metrics: RecordingMetrics,
        backoff: RecordingBackoff,
    ) -> None:
        self.sim = sim
        self.server = server
        self.informer = informer
        self.metrics = metrics
        self.backoff = backoff
        self.cms = sim.resource("configmaps")

    def calls(self) -> list[Call]:
        return calls(self.sim)

    # -- the simulator's state, written directly (no request shows up in the log)

    def create(self, name: str, namespace: str = "default", **data: str) -> int:
        obj = {"metadata": {"name": name, "namespace": namespace}, "data": data}
        self.sim.store.create(self.cms, obj)
        return self.sim.store.rv

    def update(self, name: str, namespace: str = "default", **data: str) -> int:
        obj = {"metadata": {"name": name, "namespace": namespace}, "data": data}
        self.sim.store.update(self.cms, obj)
        return self.sim.store.rv

    def delete(self, name: str, namespace: str = "default") -> int:
        self.sim.store.delete(self.cms, namespace, name)
        return self.sim.store.rv

    def write_elsewhere(self) -> int:
        """A write to another resource: the global RV moves, the configmaps do not change."""
        n = self.sim.store.writes
        self.sim.store.create(
            self.sim.resource("secrets"), {"metadata": {"name": f"s{n}", "namespace": "default"}}
        )
        return self.sim.store.rv

    def sim_state(self) -> dict[str, int]:
        return {o.key: o.rv for o in self.sim.store.iter_range(self.cms, None)}

    def store_state(self) -> dict[str, int]:
        return {e.key: e.rv for e in self.informer.store.entries()}

    def open_watches(self) -> int:
        return sum(1 for w in self.sim.store.watchers() if w.rtype == self.cms)

    # -- waiting

    async def until(self, predicate: Callable[[], bool], what: str) -> None:
        """Poll (every 5 ms, for at most ``WAIT`` s): the conditions are on the simulator's and
        the informer's state, which announce nothing."""
        deadline = asyncio.get_running_loop().time() + WAIT
        while not predicate():
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"timed out waiting for {what}; requests: {self.calls()}")
            await asyncio.sleep(0.005)

    async def synced(self) -> None:
        await self.until(lambda: self.informer.has_synced, "the first sync")

    async def watching(self, count: int = 1) -> None:
        """Until ``count`` requests were made and the last one is an open watch."""
        await self.until(
            lambda: len(self.calls()) >= count and self.open_watches() == 1,
            f"an open watch after {count} requests",
        )

    async def converged(self) -> None:
        """Until the informer's store equals the simulator's configmaps, then assert it."""
        await self.until(lambda: self.store_state() == self.sim_state(), "the store to converge")
        assert self.store_state() == self.sim_state()

    async def writes_arrive(self) -> None:
        """Writes made now (create, update, delete) reach the store."""
        self.create("after-1", marker="x")
        self.create("after-2")
        self.update("after-1", marker="y")
        self.delete("after-2")
        await self.converged()
        assert "default/after-1" in self.store_state()
        assert "default/after-2" not in self.store_state()


def options(*, watch_list: bool = True, **kwargs: Any) -> ReflectorOptions:
    """Fast backoff (10 to 50 ms); the factory hands out one instance, for the rig to inspect."""
    backoff = RecordingBackoff(initial=0.01, cap=0.05)
    return ReflectorOptions(watch_list=watch_list, backoff=lambda: backoff, **kwargs)


@asynccontextmanager
async def rig(
    reflector: ReflectorOptions,
    *,
    sim: Simulator | None = None,
    setup: Callable[[Simulator], None] | None = None,
) -> AsyncIterator[Rig]:
    """Serve ``sim``, call ``setup`` (preload, queue faults), then run the informer."""
    sim = sim or Simulator()
    async with SimServer(sim) as server:
        client = build_client(UpstreamConfig(server=server.url))
        try:
            backoff = reflector.backoff()
            assert isinstance(backoff, RecordingBackoff)
            metrics = RecordingMetrics()
            informer = SharedInformer(
                ApiListerWatcher(client, CONFIGMAPS),
                name="configmaps",
                store=Store(kind="ConfigMap", api_version="v1"),
                reflector_options=reflector,
                metrics=metrics,
            )
            r = Rig(sim, server, informer, metrics=metrics, backoff=backoff)
            if setup is not None:
                setup(sim)
            task = asyncio.create_task(informer.run(), name="informer-under-test")
            try:
                yield r
            finally:
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
        finally:
            await client.aclose()


def preload(count: int = 3, namespace: str = "default") -> Callable[[Simulator], None]:
    def load(sim: Simulator) -> None:
        if namespace != "default":
            sim.load([("namespaces", {"metadata": {"name": namespace}})])
        sim.load(
            (
                "configmaps",
                {"metadata": {"name": f"cm-{i:05d}", "namespace": namespace}, "data": {"i": "x"}},
            )
            for i in range(count)
        )

    return load


# ---------------------------------------------------------------------------- 1. watch-list


async def test_the_first_sync_is_a_watch_list_whose_stream_goes_on_as_the_watch() -> None:
    async with rig(options(), setup=preload(3)) as r:
        await r.synced()
        await r.converged()
        assert r.informer.store.resource_version == r.sim.store.rv
        await r.writes_arrive()
        # One request: the initial events, the initial-events-end bookmark, then live events.
        expect(r.calls(), [watch_list("")])
        assert r.informer.relists == 1

        # Only when something ends that stream does a second request go out: a plain watch
        # from the last RV (no initial events, no relist).
        last = str(r.sim.store.rv)
        r.sim.end_watches()
        await r.watching(2)
        r.create("after-end")
        await r.converged()
        expect(r.calls(), [watch_list(""), watching(last)])
        assert r.informer.relists == 1


# ---------------------------------------------------------------------------- 2. fallback


async def test_a_failed_watch_list_falls_back_to_a_paged_list_at_rv_0_then_watches() -> None:
    def setup(sim: Simulator) -> None:
        preload(3)(sim)
        sim.faults.fail_next("watch", 500)

    async with rig(options(), setup=setup) as r:
        await r.synced()
        listed = str(r.sim.store.rv)
        await r.watching(3)
        await r.converged()
        await r.writes_arrive()
        expect(r.calls(), [watch_list(""), listing("0", limit=PAGE), watching(listed)])


async def test_a_throttled_watch_list_is_retried_after_retry_after_not_replaced_by_a_list() -> None:
    # client-go's watchList(): a 429 (or connection refused) is "retriable with side effects":
    # back off and send the watch-list again. Only other errors fall back to LIST — falling back
    # on a 429 would answer the API server's throttling with the most expensive request there is.
    def setup(sim: Simulator) -> None:
        preload(3)(sim)
        sim.faults.fail_next("watch", 429, retry_after=1)

    async with rig(options(), setup=setup) as r:
        await r.synced()
        await r.converged()
        await r.writes_arrive()
        expect(r.calls(), [watch_list(""), watch_list("")])
        starts = [t for t, kind, verb in r.metrics.log if (kind, verb) == ("request", "watch-list")]
        assert starts[1] - starts[0] >= 1.0  # Retry-After honoured (a lower bound)


async def test_an_expired_watch_list_is_retried_at_rv_empty_not_replaced_by_a_list() -> None:
    # client-go's watchList(): Expired (or too large RV) marks the last RV unavailable and sends
    # the watch-list again with RV "" (rewatchResourceVersion), still not falling back to LIST.
    async with rig(options(), setup=preload(3)) as r:
        await r.synced()
        await r.watching(1)
        last = str(r.update("cm-00000", i="seen"))
        await r.converged()
        # The watch after this stream ends, and the watch-list that relists, both get 410.
        r.sim.faults.fail_next("watch", 410, count=2)
        r.sim.end_watches()
        await r.watching(4)
        await r.converged()
        await r.writes_arrive()
        expect(
            r.calls(),
            [
                watch_list(""),
                watching(last),  # in-stream 410
                watch_list(last),  # in-stream 410
                watch_list(""),
            ],
        )


# ---------------------------------------------------------------------------- 3-4. paged lists


async def test_a_paged_list_follows_continue_tokens() -> None:
    async with rig(options(watch_list=False), setup=preload(1100, "bulk")) as r:
        await r.synced()
        listed = str(r.sim.store.rv)
        await r.watching(4)
        await r.converged()
        assert len(r.store_state()) == 1100
        await r.writes_arrive()
        expect(
            r.calls(),
            [
                listing("0", limit=PAGE),
                next_page(),
                next_page(),
                watching(listed),
            ],
        )


async def test_an_expired_continue_token_gets_one_full_list_at_the_first_pages_rv() -> None:
    def setup(sim: Simulator) -> None:
        preload(1100, "bulk")(sim)
        sim.faults.fail_next("list", 410, after=1)  # the second page: continue token expired

    async with rig(options(watch_list=False), setup=setup) as r:
        await r.synced()
        listed = str(r.sim.store.rv)
        await r.watching(4)
        await r.converged()
        assert len(r.store_state()) == 1100
        await r.writes_arrive()
        expect(
            r.calls(),
            [
                listing("0", limit=PAGE),
                next_page(),  # 410 Expired
                listing("0"),  # the pager's FullListIfExpired: no limit, the first page's RV
                watching(listed),
            ],
        )


# ---------------------------------------------------------------------------- 5. 410 on watch


async def _watch_expires(r: Rig, *, relist_fails: bool = False) -> tuple[str, str]:
    """Sync, see one event, then make the next watch 410: end the watch, write what the informer
    does not see, compact. Returns (the informer's last RV, the RV of its first watch)."""
    await r.synced()
    listed = str(r.sim.store.rv)
    await r.watching(2)
    if relist_fails:
        r.sim.faults.fail_next("list", 410)  # the relist at the last RV comes back 410 too
    last = str(r.update("cm-00000", i="seen"))
    await r.converged()
    # One synchronous step, in this order: a write offered to an open watch is still sent before
    # its stream ends (the informer would then watch from the compacted RV itself, no 410).
    r.sim.end_watches()
    r.update("cm-00001", i="missed")
    r.create("missed")
    r.sim.compact()
    return last, listed


async def test_a_410_on_the_watch_relists_at_the_last_rv() -> None:
    async with rig(options(watch_list=False), setup=preload(3)) as r:
        last, listed = await _watch_expires(r)
        await r.converged()
        relisted = str(r.sim.store.rv)
        await r.watching(5)
        await r.writes_arrive()
        # client-go relists at the last RV ("not older than", served by the watch cache), and
        # without a limit: a limit with a specific RV would mean an exact, uncached read that
        # 410s once compacted (reflector.go list(): PageSize = 0 unless the RV="0" list paged).
        expect(
            r.calls(),
            [
                listing("0", limit=PAGE),
                watching(listed),
                watching(last),  # in-stream ERROR 410 Expired
                listing(last),
                watching(relisted),
            ],
        )
        assert r.metrics.relists() == ["expired"]


async def test_a_410_on_the_relist_lists_again_at_rv_empty() -> None:
    async with rig(options(watch_list=False), setup=preload(3)) as r:
        last, listed = await _watch_expires(r, relist_fails=True)
        await r.converged()
        relisted = str(r.sim.store.rv)
        await r.watching(6)
        await r.writes_arrive()
        expect(
            r.calls(),
            [
                listing("0", limit=PAGE),
                watching(listed),
                watching(last),  # 410 Expired
                listing(last),  # 410 Expired
                listing(""),  # a consistent read; same pager (PageSize 0), so no limit
                watching(relisted),
            ],
        )
        assert r.metrics.relists() == ["expired"]


# ---------------------------------------------------------------------------- 6-7. 429, 500


async def test_a_429_on_the_watch_waits_retry_after_and_watches_again_without_listing() -> None:
    def setup(sim: Simulator) -> None:
        preload(3)(sim)
        sim.faults.fail_next("watch", 429, retry_after=1)

    async with rig(options(watch_list=False), setup=setup) as r:
        await r.synced()
        listed = str(r.sim.store.rv)
        await r.watching(3)
        await r.writes_arrive()
        expect(r.calls(), [listing("0", limit=PAGE), watching(listed), watching(listed)])
        log = r.metrics.log
        throttled = next(i for i, e in enumerate(log) if e[1:] == ("watch_error", "throttled"))
        rewatch = next(e for e in log[throttled:] if e[1:] == ("request", "watch"))
        assert rewatch[0] - log[throttled][0] >= 1.0  # Retry-After honoured (a lower bound)


async def test_a_500_on_the_watch_watches_again_without_listing() -> None:
    # The Reflector's rule is client-go's with MaxInternalErrorRetryDuration set (re-watch on
    # InternalError while retry.ShouldRetry()); with client-go's default of 0 it would relist.
    def setup(sim: Simulator) -> None:
        preload(3)(sim)
        sim.faults.fail_next("watch", 500)

    async with rig(options(watch_list=False), setup=setup) as r:
        await r.synced()
        listed = str(r.sim.store.rv)
        await r.watching(3)
        await r.writes_arrive()
        expect(r.calls(), [listing("0", limit=PAGE), watching(listed), watching(listed)])
        assert r.informer.relists == 1


# ---------------------------------------------------------------------------- 8. watch ends


async def test_a_normal_end_of_a_watch_watches_again_from_the_last_rv() -> None:
    async with rig(options(watch_list=False), setup=preload(3)) as r:
        await r.synced()
        listed = str(r.sim.store.rv)
        await r.watching(2)
        await asyncio.sleep(1.1)  # a watch that lived past the "very short" second
        assert r.sim.end_watches() == 1
        await r.watching(3)
        await r.writes_arrive()
        expect(r.calls(), [listing("0", limit=PAGE), watching(listed), watching(listed)])
        assert r.informer.relists == 1


async def test_a_very_short_watch_relists() -> None:
    async with rig(options(), setup=preload(3)) as r:
        await r.synced()
        await r.watching(1)
        last = str(r.update("cm-00000", i="seen"))
        await r.converged()
        r.sim.end_watches()  # the watch-list's stream had an event: a normal end
        await r.watching(2)
        r.sim.end_watches()  # ends at once without an event: "very short watch"
        await r.watching(3)
        await r.converged()
        await r.writes_arrive()
        expect(r.calls(), [watch_list(""), watching(last), watch_list(last)])
        assert r.metrics.relists() == ["very-short-watch"]


# ---------------------------------------------------------------------------- 9. broken streams


async def test_garbage_and_truncated_streams_are_watched_again_from_the_last_rv() -> None:
    def setup(sim: Simulator) -> None:
        preload(3)(sim)
        sim.faults.next_watch_stream("garbage")  # first watch: a line that is not JSON
        sim.faults.next_watch_stream("truncate")  # second: a line cut in the middle, then EOF

    added: list[str] = []
    async with rig(options(watch_list=False), setup=setup) as r:
        r.informer.subscribe(lambda e: added.append(e.type) if isinstance(e, Changed) else None)
        await r.synced()
        listed = str(r.sim.store.rv)
        await r.watching(2)
        r.create("through-the-faults")  # arrives with the garbage, then cut, then whole
        await r.watching(4)
        await r.converged()
        await r.writes_arrive()
        expect(
            r.calls(),
            [
                listing("0", limit=PAGE),
                watching(listed),  # garbage
                watching(listed),  # truncated
                watching(listed),
            ],
        )
        assert r.informer.relists == 1
        assert r.metrics.watch_errors() == ["transport", "transport"]
        # Every event once, none lost or doubled: the fault's create, then writes_arrive's.
        assert added == ["ADDED", "ADDED", "ADDED", "MODIFIED", "DELETED"]


# ---------------------------------------------------------------------------- 10. stalls


async def test_a_silent_watch_is_detected_as_stalled_and_watched_again() -> None:
    # Stall threshold = timeoutSeconds + margin: min_watch_timeout 0.5 s gives timeoutSeconds 0
    # (not sent: the server picks its own, 30 to 60 minutes), so the threshold is 0.5 s.
    # Healthy watches get a bookmark every 0.1 s and never look stalled.
    def setup(sim: Simulator) -> None:
        preload(3)(sim)
        sim.faults.next_watch_stream("silent")

    sim = Simulator(config=SimConfig(bookmark_interval=0.1))
    stalls = options(watch_list=False, min_watch_timeout=0.5, stall_margin=0.5)
    async with rig(stalls, sim=sim, setup=setup) as r:
        await r.synced()
        listed = str(r.sim.store.rv)
        await r.watching(3)
        await r.writes_arrive()
        expect(r.calls(), [listing("0", limit=PAGE), watching(listed), watching(listed)])
        assert r.metrics.watch_errors() == ["stalled"]
        assert r.informer.relists == 1


# ---------------------------------------------------------------------------- 11-12. restarts


async def test_the_informer_recovers_from_a_simulator_restart() -> None:
    async with rig(options(), setup=preload(3)) as r:
        await r.synced()
        await r.watching(1)
        last = str(r.update("cm-00000", i="seen"))
        await r.converged()
        r.write_elsewhere()  # the RV moves on: after the restart, `last` is older than history
        await r.server.restart()
        await r.until(lambda: r.informer.relists == 2, "the relist after the restart")
        await r.converged()
        await r.writes_arrive()
        seen = r.calls()
        # Watches from `last` until one reaches the restarted server and gets 410 (a re-watch
        # sent within uvicorn's 0.1 s shutdown poll still reaches the old server), then the
        # relist: a watch-list from the last RV.
        retries = len(seen) - 2
        assert retries in (1, 2), seen
        expect(seen, [watch_list(""), *[watching(last)] * retries, watch_list(last)])
        assert r.metrics.watch_errors()[-1] == "expired"
        assert r.metrics.relists() == ["expired"]


async def test_connection_refused_is_retried_with_backoff_until_the_server_is_back() -> None:
    async with rig(options(watch_list=False), setup=preload(3)) as r:
        await r.synced()
        listed = str(r.sim.store.rv)
        await r.watching(2)
        last = str(r.update("cm-00000", i="seen"))
        await r.converged()
        before = len(r.metrics.watch_errors())
        await r.server.stop()
        # Writes while the server is down; the history keeps them.
        r.update("cm-00001", i="while-down")
        r.delete("cm-00002")
        r.create("while-down")
        await r.until(
            lambda: len(r.metrics.watch_errors()) >= before + 3, "retries against a stopped server"
        )
        await r.server.start()
        await r.converged()
        await r.writes_arrive()
        seen = r.calls()
        retries = len(seen) - 2
        assert retries in (1, 2), seen  # see the restart test: a re-watch may beat the shutdown
        expect(seen, [listing("0", limit=PAGE), watching(listed), *[watching(last)] * retries])
        assert r.informer.relists == 1
        # The stopped server refused the re-watches (the watch the old server was still serving
        # broke off mid-stream); each failed attempt was followed by a backoff delay.
        down = r.metrics.watch_errors()[before:]
        assert "refused" in down, down
        assert set(down) <= {"refused", "transport"}, down
        assert len(r.backoff.delays) >= len(r.metrics.watch_errors())


# ---------------------------------------------------------------------------- 13. bookmarks


async def test_bookmarks_advance_the_store_rv_without_changes() -> None:
    sim = Simulator(config=SimConfig(bookmark_interval=0.1))
    async with rig(options(watch_list=False), sim=sim, setup=preload(3)) as r:
        await r.synced()
        listed = str(r.sim.store.rv)
        await r.watching(2)
        await r.converged()
        before = r.store_state()
        moved = r.write_elsewhere()
        await r.until(
            lambda: r.informer.store.resource_version == moved, "a bookmark at the new RV"
        )
        assert r.store_state() == before == r.sim_state()
        assert r.informer.events_processed == 0
        await r.writes_arrive()
        expect(r.calls(), [listing("0", limit=PAGE), watching(listed)])
