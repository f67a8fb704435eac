"""The same queries to the daemon and to the real API server, side by side.

:func:`measure_queries` asks a synced daemon (plain HTTP on loopback) and the API server it
caches (TLS, the admin's bearer token) the scenarios of :mod:`loadtest.clients.listbench` — the full pod
list, one namespace's pods, a 5 % label list (``app=app-K``), an index field list
(``spec.nodeName=node-K``), a single GET and a ``limit=500`` page walk — each at
``resourceVersion`` unset and ``resourceVersion=0``. The API server reads etcd for the first
(one range read per response; per page for the walk) and its watch cache for the second, where
v1.28 ignores ``limit``: its "walk" at RV=0 is one response. The daemon answers both from its
cache, and pages its walk at either.

For each query and RV:

1. **Items**: request 0's answer is fetched whole from both (walks followed to the end) and the
   (namespace, name, resourceVersion) of every item compared, order included; it also warms
   both paths up. Before any of it, the daemon must have caught up: its full list equal to the
   API server's from etcd and from its watch cache (polled, within ``catch_up_deadline``).
2. **Latency at 1 client**: ``rounds`` batches per server, alternating which goes first, each
   on a new keep-alive connection for at least ``min_requests`` requests and ``seconds``
   (none started after ``4 * seconds``: an API server list of seconds is asked fewer times).
   Both servers get the same request sequence (request ``i`` varies K and the GET's pod).
3. **Throughput at 16 clients**: one closed-loop batch per server (16 connections, each sends
   its next request when its answer's last byte is in), at least 16 requests and
   ``2 * seconds``; requests/s = requests ÷ wall time to the last answer. Above
   :data:`BIG_LIST_PODS` pods the API server is not asked at 16 clients the queries that make
   it hold every pod per request (:data:`WHOLE_COLLECTION`): its memory would not fit.

:func:`write_queries_config` is the daemon's config: the other daemons' plus an index on
``spec.nodeName``. The clients are the lean ones of :mod:`loadtest.clients.httpclient` (they count body bytes; TLS is
OpenSSL's, in this process, whose CPU time per request is recorded beside the servers').
Nothing writes to the cluster meanwhile; the daemon's full list is compared again at the end.
The daemon answers RV unset from its cache as it is (``consistentReads: cache``, see
:func:`write_queries_config`); :mod:`loadtest.scenarios.consistentbench` measures consistent reads.
"""

from __future__ import annotations

import asyncio
import math
import statistics
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import orjson
import yaml

from cacheproxy.envtest import Cluster
from cacheproxy.kube.liststream import ListSplitter
from loadtest.clients.httpclient import Connection, continue_token, open_connection
from loadtest.clients.listbench import Scenario, _one, scenarios
from loadtest.harness.processes import cpu_seconds, rss_bytes
from loadtest.harness.realcluster import APPS, NAMESPACES, NODES, write_config

__all__ = [
    "BIG_LIST_PODS",
    "CONCURRENCY",
    "INDEX",
    "SERVERS",
    "WHOLE_COLLECTION",
    "ItemCheck",
    "QueriesResult",
    "QueryRun",
    "Timing",
    "measure_queries",
    "query_scenarios",
    "write_queries_config",
]

SERVERS = ("daemon", "apiserver")
CONCURRENCY = 16
INDEX = "spec.nodeName"
BIG_LIST_PODS = 20_000
"""Above this many pods, the API server is not asked at :data:`CONCURRENCY` clients the queries
of :data:`WHOLE_COLLECTION` (as loadtest.scenarios.serve stops its simulator's full lists at 16 clients at
the same size). Each of their requests holds the whole collection decoded (from etcd) or encoded
(a watch-cache list is one response) at once: with 10 000 pods of ~7 KB its RSS went from 1.8 to
8.4 GiB with 16 full lists from etcd, from 1.6 to 5.7 GiB with 16 walks at RV=0; 50 000 pods
would need several times the machine's memory. Selective lists from etcd decode every pod too,
but one at a time: 16 of the index field list added 0.45 GiB."""
WHOLE_COLLECTION = frozenset({("full", ""), ("full", "0"), ("pages", "0")})
"""(query, RV) whose every request makes the API server hold every pod at once."""
RESOURCE_VERSIONS = ("", "0")
"""Unset (the API server reads etcd) and "0" (its watch cache)."""
_SLICE = 1 << 20
"""A whole body is fed to the item splitter in slices: at most one slice's items parsed at once."""

Connect = Callable[[], Awaitable[Connection]]
Key = tuple[str, str, str]
"""(namespace, name, resourceVersion) of an item."""


@dataclass(frozen=True, slots=True)
class Timing:
    """One server's answers to one query at one concurrency (batches merged)."""

    requests: int
    errors: int
    wall_s: float
    p50: float
    p99: float
    bytes_per_request: float
    pages_per_request: float
    client_cpu_s: float
    """This process's CPU time (reading the answers; TLS decryption for the API server)."""
    server_cpu_s: float
    """The daemon's, or the API server's and etcd's, CPU time."""
    server_peak_rss: int = 0
    """The server's highest RSS seen (sampled every 0.1 s; the API server's alone)."""
    server_rss_before: int = 0
    """Its RSS when the first batch started (a Go heap shrinks slowly: what an earlier query
    left counts in the peak)."""

    @property
    def rate(self) -> float:
        return self.requests / self.wall_s if self.wall_s > 0 else math.nan


@dataclass(frozen=True, slots=True)
class ItemCheck:
    """Request 0's items from both servers: equal when the same keys come in the same order."""

    daemon_items: int
    apiserver_items: int
    daemon_pages: int
    apiserver_pages: int
    equal: bool
    detail: str = ""
    """The first difference, when not equal."""


@dataclass(frozen=True, slots=True)
class QueryRun:
    query: str
    """The :mod:`loadtest.clients.listbench` scenario key."""
    title: str
    resource_version: str
    target: str
    """Request 0 (its first page, for a walk)."""
    check: ItemCheck
    latency: dict[str, Timing]
    """Per server, at 1 client."""
    throughput: dict[str, Timing]
    """Per server, at :data:`CONCURRENCY` clients (the API server's may be skipped: see
    :data:`BIG_LIST_PODS`)."""

    def ratio(self, value: Callable[[Timing], float], *, concurrency: int = 1) -> float:
        """``value`` of the daemon ÷ the API server's (NaN if either was not measured)."""
        runs = self.latency if concurrency == 1 else self.throughput
        if "daemon" not in runs or "apiserver" not in runs:
            return math.nan
        a, b = value(runs["daemon"]), value(runs["apiserver"])
        return a / b if b > 0 and math.isfinite(a) and math.isfinite(b) else math.nan


@dataclass(frozen=True, slots=True)
class QueriesResult:
    runs: list[QueryRun]
    caught_up_s: float
    """From the measurement's start until the daemon's full list was the API server's."""
    equal_at_end: bool
    """The daemon's full list still the API server's after every timing (nothing wrote)."""
    skipped: list[str] = field(default_factory=list)
    settings: dict[str, float] = field(default_factory=dict)

    def find(self, query: str, resource_version: str) -> QueryRun | None:
        for run in self.runs:
            if (run.query, run.resource_version) == (query, resource_version):
                return run
        return None


# ---------------------------------------------------------------------- the queries


def write_queries_config(workdir: Path, cluster: Cluster) -> Path:
    """:func:`loadtest.harness.realcluster.write_config`'s config with pods indexed by
    ``spec.nodeName`` (what the field list asks for; that config indexes nothing), read from the
    cache as it is (``consistentReads: cache``): these figures are the cache's serving cost.
    A consistent read adds a probe round and, since nothing writes to pods meanwhile, a listing
    that confirms the quiet cache; consistent reads are measured by
    :mod:`loadtest.scenarios.consistentbench`."""
    path = write_config(workdir, cluster, name="daemon-queries")
    doc = yaml.safe_load(path.read_text())
    doc["resources"] = [
        {"resource": "pods", "indexes": [INDEX], "consistentReads": "cache"} if r == "pods" else r
        for r in doc["resources"]
    ]
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _with_rv(target: str, resource_version: str) -> str:
    if not resource_version:
        return target
    return f"{target}{'&' if '?' in target else '?'}resourceVersion={resource_version}"


def query_scenarios(
    *, namespaces: int, apps: int, nodes: int, pods: Sequence[tuple[str, str]]
) -> list[tuple[Scenario, str]]:
    """Every listbench scenario at each resourceVersion, as (scenario, RV)."""

    def at(base: Scenario, rv: str) -> Scenario:
        return Scenario(base.key, base.title, lambda i: _with_rv(base.target(i), rv), base.walk)

    bases = scenarios(namespaces=namespaces, apps=apps, nodes=nodes, pods=pods)
    return [(at(base, rv), rv) for base in bases for rv in RESOURCE_VERSIONS]


# ---------------------------------------------------------------------- items


async def _keys(conn: Connection, scenario: Scenario, i: int) -> tuple[list[Key], int]:
    """Request ``i``'s items (every page of a walk) and how many responses they took."""
    first = scenario.target(i)
    target, keys, pages = first, [], 0
    while True:
        response = await conn.request(target, keep_body=True)
        pages += 1
        body = response.body or b""
        if response.status != 200:
            raise RuntimeError(f"GET {first}: {response.status} {body[:300]!r}")
        if scenario.key == "get":
            return [_key(orjson.loads(body))], pages
        splitter = ListSplitter()
        for at in range(0, len(body), _SLICE):
            keys += [_key(item) for item in splitter.feed(body[at : at + _SLICE])]
        keys += [_key(item) for item in splitter.close()[0]]
        token = continue_token(response.head) if scenario.walk else ""
        if not token:
            return keys, pages
        target = f"{first}&continue={quote(token, safe='')}"


def _key(item: Mapping[str, object]) -> Key:
    meta = item.get("metadata")
    assert isinstance(meta, dict), item
    return str(meta.get("namespace", "")), str(meta["name"]), str(meta["resourceVersion"])


async def _fetch_keys(connect: Connect, scenario: Scenario, i: int = 0) -> tuple[list[Key], int]:
    conn = await connect()
    try:
        return await _keys(conn, scenario, i)
    finally:
        conn.close()


def _compare(daemon: tuple[list[Key], int], apiserver: tuple[list[Key], int]) -> ItemCheck:
    ours, theirs = daemon[0], apiserver[0]
    detail = ""
    if ours != theirs:
        if set(ours) == set(theirs):
            detail = "the same items in another order"
        else:
            at = next(
                (k for k, (a, b) in enumerate(zip(ours, theirs, strict=False)) if a != b),
                min(len(ours), len(theirs)),
            )
            mine = "/".join(ours[at]) if at < len(ours) else "nothing"
            its = "/".join(theirs[at]) if at < len(theirs) else "nothing"
            detail = f"item {at}: the daemon has {mine}, the API server {its}"
    return ItemCheck(
        daemon_items=len(ours),
        apiserver_items=len(theirs),
        daemon_pages=daemon[1],
        apiserver_pages=apiserver[1],
        equal=ours == theirs,
        detail=detail,
    )


async def _catch_up(
    connects: Mapping[str, Connect], full: Scenario, full_rv0: Scenario, deadline: float
) -> float:
    """Seconds until the daemon's full list is the API server's from etcd and from its watch
    cache (NaN if not within ``deadline``)."""
    started = time.monotonic()
    while True:
        etcd = await _fetch_keys(connects["apiserver"], full)
        cache = await _fetch_keys(connects["apiserver"], full_rv0)
        ours = await _fetch_keys(connects["daemon"], full)
        if ours[0] == etcd[0] == cache[0]:
            return time.monotonic() - started
        if time.monotonic() - started > deadline:
            return math.nan
        await asyncio.sleep(0.5)


# ---------------------------------------------------------------------- timing


@dataclass
class _Batch:
    latencies: list[float] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    pages: list[int] = field(default_factory=list)
    errors: int = 0
    wall_s: float = 0.0
    client_cpu_s: float = 0.0
    server_cpu_s: float = 0.0
    server_peak_rss: int = 0
    server_rss_before: int = 0


async def _drive(
    connect: Connect,
    scenario: Scenario,
    batch: _Batch,
    *,
    start: int,
    concurrency: int,
    min_requests: int,
    min_seconds: float,
    max_seconds: float,
    server_cpu: Callable[[], float],
    server_rss: Callable[[], int],
) -> None:
    """A closed loop of ``concurrency`` connections asking requests ``start``, ``start + 1``,
    … until ``min_requests`` were started and ``min_seconds`` passed (none started after
    ``max_seconds``); adds to ``batch``."""
    conns = [await connect() for _ in range(concurrency)]
    begun = 0
    try:
        cpu0, server0 = time.process_time(), server_cpu()
        batch.server_rss_before = batch.server_rss_before or server_rss()
        started = time.perf_counter()

        def next_index() -> int | None:
            nonlocal begun
            elapsed = time.perf_counter() - started
            if elapsed >= max_seconds or (begun >= min_requests and elapsed >= min_seconds):
                return None
            begun += 1
            return start + begun - 1

        async def worker(conn: Connection) -> None:
            while (i := next_index()) is not None:
                try:
                    status, seconds, size, pages = await _one(conn, scenario, i)
                except ConnectionError:
                    batch.errors += 1
                    return
                if status != 200:
                    batch.errors += 1
                    continue
                batch.latencies.append(seconds)
                batch.sizes.append(size)
                batch.pages.append(pages)

        async def sample() -> None:
            while True:
                batch.server_peak_rss = max(batch.server_peak_rss, server_rss())
                await asyncio.sleep(0.1)

        sampler = asyncio.create_task(sample(), name="queries-rss")
        try:
            async with asyncio.timeout(max_seconds + 300):
                await asyncio.gather(*(worker(c) for c in conns))
        finally:
            sampler.cancel()
        batch.wall_s += time.perf_counter() - started
        batch.client_cpu_s += time.process_time() - cpu0
        batch.server_cpu_s += server_cpu() - server0
    finally:
        for conn in conns:
            conn.close()


def _timing(batch: _Batch) -> Timing:
    ordered = sorted(batch.latencies)
    n = len(ordered)
    return Timing(
        requests=n,
        errors=batch.errors,
        wall_s=batch.wall_s,
        p50=statistics.median(ordered) if ordered else math.nan,
        p99=ordered[min(n - 1, max(0, math.ceil(0.99 * n) - 1))] if ordered else math.nan,
        bytes_per_request=statistics.fmean(batch.sizes) if batch.sizes else math.nan,
        pages_per_request=statistics.fmean(batch.pages) if batch.pages else math.nan,
        client_cpu_s=batch.client_cpu_s,
        server_cpu_s=batch.server_cpu_s,
        server_peak_rss=batch.server_peak_rss,
        server_rss_before=batch.server_rss_before,
    )


# ---------------------------------------------------------------------- the run


async def measure_queries(
    cluster: Cluster,
    daemon_url: str,
    *,
    daemon_pid: int,
    pods: Sequence[tuple[str, str]],
    seconds: float = 0.4,
    rounds: int = 3,
    min_requests: int = 2,
    catch_up_deadline: float = 60.0,
    progress: Callable[[str], None] = lambda _: None,
) -> QueriesResult:
    """See the module docstring: ``cluster`` holds ``pods`` (namespace, name), as built by
    :func:`loadtest.harness.realcluster.build_objects`; the daemon at ``daemon_url`` caches them."""
    tls = cluster.ssl_context()
    connects: dict[str, Connect] = {
        "daemon": lambda: open_connection(daemon_url),
        "apiserver": lambda: open_connection(cluster.url, ssl=tls, headers=cluster.admin.headers),
    }
    cpu: dict[str, Callable[[], float]] = {
        "daemon": lambda: cpu_seconds(daemon_pid),
        "apiserver": lambda: cpu_seconds(cluster.apiserver_pid) + cpu_seconds(cluster.etcd_pid),
    }
    rss: dict[str, Callable[[], int]] = {
        "daemon": lambda: rss_bytes(daemon_pid),
        "apiserver": lambda: rss_bytes(cluster.apiserver_pid),
    }
    plan = query_scenarios(namespaces=len(NAMESPACES), apps=len(APPS), nodes=NODES, pods=pods)
    full = {rv: s for s, rv in plan if s.key == "full"}
    progress("queries: waiting until the daemon answers what the API server answers")
    caught_up_s = await _catch_up(connects, full[""], full["0"], catch_up_deadline)
    runs: list[QueryRun] = []
    skipped: list[str] = []
    for n, (scenario, rv) in enumerate(plan):
        label = f"{scenario.title}, RV {rv or 'unset'}"
        progress(f"queries: {label}: items")
        found = {s: await _fetch_keys(connects[s], scenario) for s in SERVERS}
        check = _compare(found["daemon"], found["apiserver"])
        del found
        latency = {s: _Batch() for s in SERVERS}
        progress(f"queries: {label}: 1 client, {rounds} rounds")
        for r in range(rounds):
            for server in SERVERS if r % 2 == 0 else SERVERS[::-1]:
                await _drive(
                    connects[server],
                    scenario,
                    latency[server],
                    start=1 + r * 1_000_000,
                    concurrency=1,
                    min_requests=min_requests,
                    min_seconds=seconds,
                    max_seconds=4 * seconds,
                    server_cpu=cpu[server],
                    server_rss=rss[server],
                )
        heavy = len(pods) > BIG_LIST_PODS and (scenario.key, rv) in WHOLE_COLLECTION
        if heavy:
            skipped.append(f"the API server's {label} at {CONCURRENCY} clients")
        throughput = {s: _Batch() for s in SERVERS if not (heavy and s == "apiserver")}
        progress(f"queries: {label}: {CONCURRENCY} clients")
        for server in [s for s in (SERVERS if n % 2 == 0 else SERVERS[::-1]) if s in throughput]:
            await _drive(
                connects[server],
                scenario,
                throughput[server],
                start=1,
                concurrency=CONCURRENCY,
                min_requests=CONCURRENCY,
                min_seconds=2 * seconds,
                max_seconds=8 * seconds,
                server_cpu=cpu[server],
                server_rss=rss[server],
            )
        runs.append(
            QueryRun(
                query=scenario.key,
                title=scenario.title,
                resource_version=rv,
                target=scenario.target(0),
                check=check,
                latency={s: _timing(b) for s, b in latency.items()},
                throughput={s: _timing(b) for s, b in throughput.items()},
            )
        )
    end = await asyncio.gather(*(_fetch_keys(connects[s], full[""]) for s in SERVERS))
    return QueriesResult(
        runs=runs,
        caught_up_s=caught_up_s,
        equal_at_end=end[0][0] == end[1][0],
        skipped=skipped,
        settings={"seconds": seconds, "rounds": rounds, "min_requests": min_requests},
    )
