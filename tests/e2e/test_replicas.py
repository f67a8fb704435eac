"""Two replicas behind one Service against the real API server: a client that goes to either of
them must get the view one API server gives.

A writer creates, updates and deletes ConfigMaps in a namespace of its own while one client
(the API server's admin, its token sent to the replicas: what they cannot prove cheaply they pass
through as that caller) alternates between two daemons over the same API server for
:data:`READS` reads — lists with ``resourceVersion`` unset (``consistentReads: strict``: in the
default ``live`` mode a replica behind answers its own state, milliseconds older than what the
other gave) and with the last RV it saw, gets,
paged lists whose next page goes to the other replica, and now and then a page from a continue
token saved long before — and resumes a watch on the other replica from the last RV it saw;
then :data:`QUIET_READS` more once the writer has stopped (a quiet resource). The second replica reaches the API server through a relay that delays every byte, so it is
always a little behind the first: an RV learnt from the first is usually one the second has not
reached yet, and must wait for.

While it reads, the client checks what a client can: an RV never goes back (a list's, a page's,
an object's, a watch event's), and an object it saw deleted (missing from a whole list, or a
DELETED event: both at an RV it holds from then on) never reappears. A get's 404 says no RV, so
a watch from the last RV seen may still replay the object's last changes: it is checked against
the truth only. Afterwards every answer is compared with the truth, the API server's own watch
of the namespace (the writer writes one at a time, so their RVs order every change): each list
and each walk of pages holds exactly the objects of its RV, a page from an old token exactly its
part of that RV's state, each get an object as it was written, each 404 an object deleted, each
watch exactly the changes after its RV. A continue token may instead fail with the API server's 410
(an inconsistent token in the Status); an RV the replica does not reach in
``limits.rvWaitSeconds`` with its 504. Both are counted; neither is a violation.
"""

from __future__ import annotations

import asyncio
import bisect
import os
import random
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import yaml

from cacheproxy.daemon.runtime import Daemon
from cacheproxy.envtest import Cluster
from cacheproxy.kube.rv import decode_continue
from loadtest.harness.relay import Relay
from tests.e2e.support import create, daemon_over, fresh_namespace, rv_of

pytestmark = [pytest.mark.envtest, pytest.mark.slow, pytest.mark.timeout(600)]

READS = int(os.environ.get("CACHEPROXY_REPLICA_READS", "4000"))
"""Reads while the writer writes: 4 000 in the suite; more with ``CACHEPROXY_REPLICA_READS``."""
QUIET_READS = 150
"""Reads after the writer stopped."""
WATCH_EVERY = 25
"""Reads between two watch resumes."""
WATCH_EVENTS = 2
"""Events a resumed watch reads before the client moves on."""
OLD_TOKEN_EVERY = 97
"""Reads between two pages asked with the oldest continue token kept."""
PAGE = 7
LAG = 0.002
"""Seconds the relay holds each chunk, each way, between the API server and the second
replica."""
LIVE = (15, 40)
"""The writer keeps between this many ConfigMaps."""
PAUSE = 0.01
"""Seconds between two writes."""
GUARD = 30.0


@dataclass(frozen=True, slots=True)
class Write:
    rv: int
    name: str
    type: str
    """ADDED, MODIFIED or DELETED: the watch event it is."""


@dataclass
class Record:
    """What the client read, for the check against the truth at the end."""

    lists: list[tuple[str, int, list[tuple[str, int]]]] = field(default_factory=list)
    """A whole list (or a walk of pages) at an RV, in the order served."""
    pages: list[tuple[int, str, list[tuple[str, int]]]] = field(default_factory=list)
    """A page of an old token: its RV, its start key, its items."""
    gets: list[tuple[str, int]] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    """Gets answered 404."""
    watches: list[tuple[int, list[tuple[str, str, int]]]] = field(default_factory=list)
    """A resume's start RV and its events (type, name, RV)."""


@dataclass
class View:
    """What the client has seen so far, and what went wrong."""

    last_rv: int = 0
    seen: dict[str, int] = field(default_factory=dict)
    """Each object's newest RV seen."""
    present: set[str] = field(default_factory=set)
    gone: set[str] = field(default_factory=set)
    violations: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    def count(self, what: str, n: int = 1) -> None:
        self.counts[what] = self.counts.get(what, 0) + n

    def moved_to(self, rv: int, what: str) -> None:
        if rv < self.last_rv:
            self.violations.append(f"{what}: RV {rv} after {self.last_rv}")
        self.last_rv = max(self.last_rv, rv)

    def saw(self, name: str, rv: int, what: str) -> None:
        if name in self.gone:
            self.violations.append(f"{what}: {name} (RV {rv}) reappeared after its deletion")
        if rv < self.seen.get(name, 0):
            self.violations.append(f"{what}: {name} at RV {rv} after {self.seen[name]}")
        self.seen[name] = max(rv, self.seen.get(name, 0))
        self.present.add(name)
        self.last_rv = max(self.last_rv, rv)

    def deleted(self, name: str) -> None:
        self.present.discard(name)
        self.gone.add(name)

    def listed(self, rv: int, items: list[tuple[str, int]], what: str) -> None:
        """A whole list at ``rv`` (not older than anything seen): what it lacks was deleted."""
        for name, item_rv in items:
            if item_rv > rv:
                self.violations.append(f"{what}: {name} at RV {item_rv} in a list at {rv}")
            self.saw(name, item_rv, what)
        names = {name for name, _ in items}
        self.gone |= self.present - names
        self.present = names


class Writer:
    """Creates, updates and deletes ConfigMaps in ``path``, one write at a time, until stopped.
    ``made`` counts them; ``synced`` is set once the writer has made ``LIVE[0]`` objects."""

    def __init__(self, upstream: httpx.AsyncClient, path: str, rng: random.Random) -> None:
        self.upstream, self.path, self.rng = upstream, path, rng
        self.made = 0
        self.live: list[str] = []
        self.stopped = asyncio.Event()
        self.started = asyncio.Event()

    async def run(self) -> None:
        made = 0
        while not self.stopped.is_set():
            low, high = LIVE
            choice = self.rng.random()
            if len(self.live) < low or (len(self.live) < high and choice < 0.35):
                made += 1
                name = f"cm-{self.rng.getrandbits(20):05x}-{made}"
                r = await self.upstream.post(self.path, json={"metadata": {"name": name}})
                assert r.status_code == 201, r.text
                self.live.append(name)
            elif choice < 0.7:
                name = self.rng.choice(self.live)
                r = await self.upstream.patch(
                    f"{self.path}/{name}",
                    json={"data": {"at": str(time.monotonic())}},
                    headers={"Content-Type": "application/merge-patch+json"},
                )
                assert r.status_code == 200, r.text
            else:
                name = self.live.pop(self.rng.randrange(len(self.live)))
                r = await self.upstream.delete(f"{self.path}/{name}")
                assert r.status_code == 200, r.text
            self.made += 1
            if len(self.live) >= low:
                self.started.set()
            await asyncio.sleep(PAUSE)


class Truth:
    """The API server's own watch of ``path`` from ``rv``: every change, in RV order (a delete
    answers a Status without its RV; its watch event has it)."""

    def __init__(self, upstream: httpx.AsyncClient, path: str, rv: int) -> None:
        self.upstream, self.path, self.rv = upstream, path, rv
        self.writes: list[Write] = []
        self.arrived = asyncio.Event()

    async def run(self) -> None:
        params = {"watch": "1", "resourceVersion": str(self.rv), "timeoutSeconds": "600"}
        async with self.upstream.stream("GET", self.path, params=params, timeout=None) as r:
            assert r.status_code == 200, await r.aread()
            async for line in r.aiter_lines():
                if line:
                    event = orjson.loads(line)
                    assert event["type"] in ("ADDED", "MODIFIED", "DELETED"), event
                    obj = event["object"]
                    self.writes.append(Write(rv_of(obj), obj["metadata"]["name"], event["type"]))
                    self.arrived.set()

    async def wait_for(self, count: int) -> None:
        async with asyncio.timeout(GUARD):
            while len(self.writes) < count:
                self.arrived.clear()
                await self.arrived.wait()


def items_of(body: Mapping[str, Any]) -> list[tuple[str, int]]:
    return [(i["metadata"]["name"], rv_of(i)) for i in body["items"]]


def expired_continue(response: httpx.Response, token: str) -> str | None:
    """None when ``response`` is the API server's 410 for an expired continue token (the Status
    carries an inconsistent token: RV -1, the same start key); else what is wrong with it.

    The start key handed back is the token's without a leading ``/``: the API server decodes the
    token to a full etcd key and encodes the new one from it (``storage.EncodeContinue`` trims the
    key prefix), so a first page's rooted key (``/cm-1\x00``, 1.32 on) comes back unrooted."""
    body = response.json()
    if (body.get("reason"), body.get("code")) != ("Expired", 410):
        return f"not a 410 Expired: {body}"
    handed = decode_continue(body["metadata"].get("continue", ""))
    if (handed.resource_version, handed.start_key) != (-1, decode_continue(token).key):
        return f"the 410 hands back {handed}"
    return None


class Client:
    """The client: alternates between the replicas, checks as it goes, records for the end."""

    def __init__(self, replicas: list[httpx.AsyncClient], path: str, rng: random.Random) -> None:
        self.replicas, self.path, self.rng = replicas, path, rng
        self.turn = 0
        self.view = View()
        self.record = Record()
        self.tokens: list[str] = []
        """Continue tokens of earlier walks, oldest first (for pages asked much later)."""

    def next_replica(self) -> httpx.AsyncClient:
        self.turn += 1
        return self.replicas[self.turn % 2]

    async def read(self, params: Mapping[str, str], name: str = "") -> httpx.Response | None:
        """One read on the next replica; None (counted) for a 504."""
        replica = self.next_replica()
        response = await replica.get(f"{self.path}/{name}" if name else self.path, params=params)
        self.view.count("reads")
        self.view.count("warnings", "warning" in response.headers)
        if response.status_code == 504:
            self.view.count("504")
            return None
        return response

    async def list(self, params: Mapping[str, str], what: str) -> None:
        response = await self.read(params)
        if response is None:
            return
        assert response.status_code == 200, response.text
        body = response.json()
        rv, items = int(body["metadata"]["resourceVersion"]), items_of(body)
        self.view.moved_to(rv, what)
        self.view.listed(rv, items, what)
        self.record.lists.append((what, rv, items))

    async def get(self) -> None:
        if not self.view.present:
            return
        name = self.rng.choice(sorted(self.view.present))
        params = {"resourceVersion": str(self.view.last_rv)} if self.rng.random() < 0.5 else {}
        response = await self.read(params, name)
        if response is None:
            return
        if response.status_code == 404:
            # Deleted, at an RV this answer does not tell: a watch from the last RV seen may
            # still show its changes before the deletion. Checked against the truth only.
            self.view.present.discard(name)
            self.view.count("404")
            self.record.missing.append(name)
            return
        assert response.status_code == 200, response.text
        rv = rv_of(response.json())
        self.view.saw(name, rv, "get")
        self.record.gets.append((name, rv))

    async def walk(self) -> None:
        """A paged list, each page from the other replica than the page before."""
        params: dict[str, str] = {"limit": str(PAGE)}
        items: list[tuple[str, int]] = []
        rv = pages = 0
        while True:
            response = await self.read(params)
            if response is None:
                return
            if response.status_code == 410 and "continue" in params:
                self.view.count("410")
                if (wrong := expired_continue(response, params["continue"])) is not None:
                    self.view.violations.append(f"walk: {wrong}")
                return
            assert response.status_code == 200, response.text
            body = response.json()
            page_rv = int(body["metadata"]["resourceVersion"])
            if rv and page_rv != rv:
                self.view.violations.append(f"walk: a page at RV {page_rv} in a walk at {rv}")
            if not rv:
                self.view.moved_to(page_rv, "first page")
            rv = page_rv
            items += items_of(body)
            self.view.count("pages")
            pages += 1
            token = body["metadata"].get("continue")
            if not token:
                break
            if len(self.tokens) < 50 and not params.get("continue"):
                self.tokens.append(token)
            params = {"limit": str(PAGE), "continue": token}
        self.view.listed(rv, items, "walk")
        self.record.lists.append((f"walk of {pages} pages", rv, items))

    async def old_page(self) -> None:
        """A page of a walk begun long ago: that RV's state, or 410 once the replica's history
        no longer reaches it. Its objects may be older than what the client saw since (it asked
        for an old state): checked against the truth only."""
        if not self.tokens:
            return
        token = self.tokens.pop(0)
        response = await self.read({"limit": str(PAGE), "continue": token})
        if response is None:
            return
        if response.status_code == 410:
            self.view.count("410")
            if (wrong := expired_continue(response, token)) is not None:
                self.view.violations.append(f"old page: {wrong}")
            return
        assert response.status_code == 200, response.text
        self.view.count("old pages")
        rv = int(response.json()["metadata"]["resourceVersion"])
        start = decode_continue(token)
        if rv != start.resource_version:
            self.view.violations.append(f"old page: RV {rv}, its token's {start}")
        self.record.pages.append((rv, start.key, items_of(response.json())))

    async def resume_watch(self) -> None:
        """A watch from the last RV seen, on the other replica, for a few events."""
        start = self.view.last_rv
        replica = self.next_replica()
        events: list[tuple[str, str, int]] = []
        params = {"watch": "1", "resourceVersion": str(start), "timeoutSeconds": "10"}
        async with replica.stream("GET", self.path, params=params) as response:
            assert response.status_code == 200, await response.aread()
            lines = response.aiter_lines()
            while len(events) < WATCH_EVENTS:
                line = await asyncio.wait_for(anext(lines), GUARD)
                if not line:
                    continue
                event = orjson.loads(line)
                if event["type"] == "ERROR":
                    assert event["object"]["code"] == 410, event
                    self.view.count("410")
                    return
                name, rv = event["object"]["metadata"]["name"], rv_of(event["object"])
                if rv <= (events[-1][2] if events else start):
                    self.view.violations.append(f"watch from {start}: {rv} after {events}")
                self.view.saw(name, rv, "watch")
                if event["type"] == "DELETED":
                    self.view.deleted(name)
                events.append((event["type"], name, rv))
        self.view.count("watch resumes")
        self.view.count("watch events", len(events))
        self.view.moved_to(events[-1][2], "watch")
        self.record.watches.append((start, events))

    async def run(self, reads: int, *, watches: bool = True, walks: bool = True) -> None:
        """Until ``reads`` reads in all: the kinds in turn (walks if ``walks``), a watch resume
        (if ``watches``) every :data:`WATCH_EVERY` reads and an old page every
        :data:`OLD_TOKEN_EVERY`."""
        operations: list[Callable[[], Any]] = [
            lambda: self.list({}, "list"),
            lambda: self.list({"resourceVersion": str(self.view.last_rv)}, "list at RV"),
            self.get,
        ]
        if walks:
            operations.append(self.walk)
        done_watches = done_old = 0
        i = 0
        while self.view.counts.get("reads", 0) < reads:
            await operations[i % len(operations)]()
            i += 1
            done = self.view.counts["reads"]
            if watches and done // WATCH_EVERY > done_watches:
                done_watches = done // WATCH_EVERY
                await self.resume_watch()
            if done // OLD_TOKEN_EVERY > done_old:
                done_old = done // OLD_TOKEN_EVERY
                await self.old_page()


def against_the_truth(writes: list[Write], record: Record) -> list[str]:
    """What the client read that is not the state (or the changes) at its RV."""
    rvs = [w.rv for w in writes]
    assert rvs == sorted(rvs) and len(set(rvs)) == len(rvs)
    wrong: list[str] = []
    versions = {(w.name, w.rv) for w in writes if w.type != "DELETED"}
    wrong += [
        f"get: {n} at RV {rv} was never written" for n, rv in record.gets if (n, rv) not in versions
    ]
    deleted = {w.name for w in writes if w.type == "DELETED"}
    wrong += [f"get: 404 for {n}, never deleted" for n in record.missing if n not in deleted]
    # Every state the reads name, from one sweep over the writes.
    wanted = sorted({rv for _, rv, _ in record.lists} | {rv for rv, _, _ in record.pages})
    states: dict[int, list[tuple[str, int]]] = {}
    state: dict[str, int] = {}
    at = 0
    for rv in wanted:
        while at < len(writes) and writes[at].rv <= rv:
            w = writes[at]
            if w.type == "DELETED":
                state.pop(w.name, None)
            else:
                state[w.name] = w.rv
            at += 1
        states[rv] = sorted(state.items())
    for what, rv, items in record.lists:
        if items != states[rv]:
            wrong.append(f"{what} at {rv}: {_difference(items, states[rv])}")
    for rv, start, items in record.pages:
        expected = [item for item in states[rv] if item[0] >= start][:PAGE]
        if items != expected:
            wrong.append(f"old page at {rv} from {start!r}: {_difference(items, expected)}")
    for since, events in record.watches:
        first = bisect.bisect_right(rvs, since)
        expected_events = [(w.type, w.name, w.rv) for w in writes[first : first + len(events)]]
        if events != expected_events:
            wrong.append(f"watch from {since}: {events}, expected {expected_events}")
    return wrong


def _difference(got: list[tuple[str, int]], expected: list[tuple[str, int]]) -> str:
    missing = sorted(set(expected) - set(got))
    extra = sorted(set(got) - set(expected))
    repeated = len(got) - len(set(got))
    return f"missing {missing}, extra {extra}, {repeated} repeated, order ok: {got == sorted(got)}"


def count_waits(daemon: Daemon, counts: dict[str, int], monkeypatch: pytest.MonkeyPatch) -> None:
    """Count the reads that found the replica behind the RV they needed and waited for it."""
    assert daemon.server is not None
    for res in daemon.server.resources.values():
        original = res.wait_for

        async def wait_for(
            rv: int, *, within: float | None = None, _res: Any = res, _wait: Any = original
        ) -> None:
            if _res.resource_version < rv:
                counts["waits"] = counts.get("waits", 0) + 1
            await _wait(rv, within=within)

        monkeypatch.setattr(res, "wait_for", wait_for)


def config(namespace: str) -> dict[str, Any]:
    return {
        "resources": [
            {
                "resource": "configmaps",
                "namespace": namespace,
                "consistentReads": "strict",
                "history": 1000,  # the smallest: old continue tokens expire during the run
            }
        ],
        "extra": {"server.limits.consistentProbesPerSecond": 1000},
    }


@pytest.fixture
async def replicas(
    cluster: Cluster, upstream: httpx.AsyncClient, tmp_path: Path
) -> AsyncIterator[tuple[str, list[Daemon]]]:
    """Two replicas caching one fresh namespace's ConfigMaps: the first over the API server, the
    second behind a relay that delays it."""
    namespace = await fresh_namespace(upstream, "replicas")
    setting = config(namespace)
    port = int(cluster.url.rsplit(":", 1)[1])
    doc = yaml.safe_load(cluster.users["admin"].kubeconfig.read_text())
    async with Relay("127.0.0.1", port) as relay:
        doc["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{relay.port}"
        (tmp_path / "b").mkdir()
        kubeconfig = tmp_path / "b" / "relayed.kubeconfig"
        kubeconfig.write_text(yaml.safe_dump(doc))
        (tmp_path / "a").mkdir()
        async with (
            daemon_over(cluster, tmp_path / "a", **setting) as first,
            daemon_over(
                cluster,
                tmp_path / "b",
                resources=setting["resources"],
                extra={**setting["extra"], "upstream.kubeconfig": str(kubeconfig)},
            ) as second,
        ):
            relay.latency = LAG
            yield namespace, [first, second]


async def test_a_client_alternating_between_replicas_sees_one_consistent_view(
    replicas: tuple[str, list[Daemon]],
    cluster: Cluster,
    upstream: httpx.AsyncClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    namespace, daemons = replicas
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    empty = (await upstream.get(path)).json()
    assert empty["items"] == []  # the writer's objects only
    truth = Truth(upstream, path, int(empty["metadata"]["resourceVersion"]))
    watching = asyncio.create_task(truth.run())
    rng = random.Random(20261201)
    waits: dict[str, int] = {}
    for daemon in daemons:
        count_waits(daemon, waits, monkeypatch)
    writer = Writer(upstream, path, rng)
    writing = asyncio.create_task(writer.run())
    limits = httpx.Limits(max_keepalive_connections=4)
    admin = cluster.users["admin"].headers
    started = time.monotonic()
    async with (
        httpx.AsyncClient(
            base_url=daemons[0].url, timeout=GUARD, limits=limits, headers=admin
        ) as a,
        httpx.AsyncClient(
            base_url=daemons[1].url, timeout=GUARD, limits=limits, headers=admin
        ) as b,
    ):
        await writer.started.wait()
        client = Client([a, b], path, random.Random(7))
        try:
            await client.run(READS)
        finally:
            writer.stopped.set()
            await writing
        try:
            # Quiet: the ConfigMaps no longer change while other writes move upstream's RV (here
            # a namespace; on a cluster, leases), so the replicas' consistent reads are confirmed
            # rather than caught up with. No watch resumes (no event would come), no walks
            # (test_a_walk_of_a_quiet_resource_never_goes_back).
            await fresh_namespace(upstream, "elsewhere")
            await client.run(READS + QUIET_READS, watches=False, walks=False)
            await truth.wait_for(writer.made)
        finally:
            watching.cancel()
            await asyncio.gather(watching, return_exceptions=True)
    seconds = time.monotonic() - started
    view = client.view
    wrong = against_the_truth(truth.writes, client.record)
    consistent_waits = sum(
        res.consistency.stats.waits
        for d in daemons
        if d.server is not None
        for res in d.server.resources.values()
        if res.consistency is not None
    )
    figures = {
        **view.counts,
        "waits": waits.get("waits", 0),
        "consistent waits": consistent_waits,
        "writes": len(truth.writes),
        "lists checked": len(client.record.lists),
        "seconds": round(seconds, 1),
    }
    print(f"replicas: {figures}")
    for line in view.violations[:20] + wrong[:20]:
        print(line)
    assert view.counts["reads"] >= READS + QUIET_READS
    assert view.violations == [], (view.violations[:10], figures)
    assert wrong == [], (wrong[:10], figures)
    # The run did what it is for: the second replica was behind often enough to wait, pages
    # crossed replicas, watches resumed, old tokens were both served and refused.
    assert figures["waits"] > 0 and view.counts["pages"] > 1000, figures
    assert view.counts["watch resumes"] >= READS // WATCH_EVERY - 1, figures
    assert view.counts.get("old pages", 0) > 0 and view.counts.get("410", 0) > 0, figures


async def test_a_walk_of_a_quiet_resource_never_goes_back(
    replicas: tuple[str, list[Daemon]], cluster: Cluster, upstream: httpx.AsyncClient
) -> None:
    """Lists and walks alternating between the replicas of a resource nobody writes while
    upstream's RV moves (a write elsewhere): no RV may go back."""
    namespace, daemons = replicas
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    for i in range(2 * PAGE):
        await create(upstream, path, {"metadata": {"name": f"quiet-{i:02d}"}})
    await fresh_namespace(upstream, "elsewhere")  # upstream's RV moves past the ConfigMaps'
    admin = cluster.users["admin"].headers
    async with (
        httpx.AsyncClient(base_url=daemons[0].url, timeout=GUARD, headers=admin) as a,
        httpx.AsyncClient(base_url=daemons[1].url, timeout=GUARD, headers=admin) as b,
    ):
        client = Client([a, b], path, random.Random(7))
        for _ in range(20):
            await client.list({}, "list")
            await client.walk()
    assert client.view.violations == []
