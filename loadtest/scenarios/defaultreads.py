"""Default reads (resourceVersion unset, as kubectl and client libraries send them) through
cacheproxy beside the same reads straight to a real kube-apiserver, side by side in one run.

``python -m loadtest defaultreads [--kube 1.28|1.32] [--pods 10000] [--seconds 3] [--rounds 3]
[--clients 16] [--visible-writes 200] [--out DIR] [--skip-without-assets] [--report-from JSON]``
starts etcd and kube-apiserver (:mod:`cacheproxy.envtest`) holding ``--pods`` pods and the
rest of :func:`loadtest.harness.realcluster.build_objects`, and two ``cacheproxy serve`` caching what
:func:`~loadtest.harness.realcluster.write_config` caches: **default**, in its default configuration,
and **strict**, whose pods say ``consistentReads:`` :data:`STRICT`. Every request, to the
daemons (plain HTTP on loopback; they forward the caller's ``Authorization``) and to the API
server (TLS), carries the admin bearer token.

Three conditions follow (:data:`CONDITIONS`): a quiet cluster, ConfigMaps of another namespace
patched 20 times a second, the pods themselves patched 20 times a second (writers straight to
the API server, bounded in count and time). In each, one client reads the full pod list, one
namespace's, a label list, a field list and a GET of one pod, in batches of ``--seconds``
(:func:`loadtest.scenarios.passthroughbench._drive`: new keep-alive connections, warmed up, a closed
loop), ``--rounds`` per side and read, the sides' order rotated each round: p50/p99 per side,
the speed-up (the API server's p50 over the daemon's) and, as a sanity check, each side's item
count. Under the pod writes then: ``--clients`` closed-loop clients (label lists and GETs with
RV unset, GETs at ``resourceVersion=0``, the API server beside the default daemon), and
``--visible-writes`` patches of one pod straight to the API server, each followed by RV-unset
GETs through the default daemon until the new value shows. Last, the default daemon's RSS
before and after 100 full lists. Around each phase, each daemon's ``*consisten*``, ``*probe*``
and ``cacheproxy_passthrough_requests_total`` counters (``/metrics``): what the reads cost.

Budgets are judged in the report (:mod:`loadtest.reports.defaultreads_report`), never asserted. Writes
``defaultreads.md`` and ``defaultreads.json`` to ``--out`` (default
``loadtest/results/<date>-defaultreads-<kube>``), one progress line per phase; ``--report-from
JSON`` writes a run's report again. Without the assets it exits 2 with a hint, or 0 after saying
it skipped with ``--skip-without-assets`` (``make bench``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import datetime as dt
import functools
import itertools
import json
import math
import os
import re
import shutil
import sys
import tempfile
import time
from array import array
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import uvloop
import yaml

from cacheproxy.envtest import Cluster
from loadtest.clients.fanout import percentile
from loadtest.clients.httpclient import Connection, fetch, open_connection
from loadtest.clients.watchclient import WatchStream
from loadtest.harness.processes import Service, rss_bytes, start_daemon
from loadtest.harness.realcluster import (
    APPS,
    NoServer,
    add_kube_option,
    build_objects,
    cacheproxy_source,
    load,
    required_assets,
    write_config,
)
from loadtest.reports.defaultreads_report import (
    SIDES,
    Condition,
    DefaultReadsResult,
    Memory,
    ReadRow,
    Visibility,
    load_result,
    render_report,
)
from loadtest.reports.passthroughbench_report import Timing
from loadtest.scenarios.passthroughbench import (
    Operation,
    Outcome,
    _Batch,
    _complaints,
    _drive,
    _error,
    _OthersCpu,
    _progress,
    _uptime,
)

__all__ = ["CONDITIONS", "STRICT", "main"]

STRICT = "strict"
"""The strict daemon's pods' ``consistentReads``: linearizable reads (a shared probe of
upstream's resourceVersion, or forwarded upstream as the caller)."""

CONDITIONS = (
    ("quiet", "(a) A quiet cluster"),
    ("writes elsewhere", "(b) ConfigMaps of another namespace written, 20/s"),
    ("pods written", "(c) The pods written (an annotation), 20/s"),
)
PHASES = ("reads", "throughput", "visible", "memory")
"""What a run measures (``--phases``): the reads in each condition, the throughput at
``--clients``, write -> visible, the memory after full lists."""
ELSEWHERE = "defaultreads-elsewhere"
WRITE_RATE = 20.0
MEMORY_LISTS = 100
_CONFIGMAPS = 20
_MERGE = "application/merge-patch+json"
_VISIBLE_KEY = "defaultreads/visible"
_VISIBLE_TIMEOUT_S = 5.0
_VISIBLE_MARKER = b'"' + _VISIBLE_KEY.encode() + b'":"'
_METRIC = re.compile(r"^(\w+)(\{[^}]*\})? (\S+)$")
_WATCHED = ("consisten", "probe", "passthrough_requests_total")

Connect = Callable[[], Awaitable[Connection]]
Targets = Callable[[int], str]
"""Request ``n`` of a batch or of a writer: its target."""


def _pod_path(pod: tuple[str, str]) -> str:
    return f"/api/v1/namespaces/{pod[0]}/pods/{pod[1]}"


def _reading(key: str, targets: Targets | str) -> Operation:
    """GET ``targets(n)`` (or always ``targets``), timed by passthroughbench's batches."""

    async def run(conn: Connection, client: int, n: int) -> Outcome:
        target = targets if isinstance(targets, str) else targets(n)
        r = await conn.request(target)
        ok = r.status == 200
        return Outcome(ok, r.seconds, "" if ok else _error("GET", target, r.status, r.head))

    return Operation(key, key, run)


async def _items(connect: Connect, target: str) -> int:
    """Items in one answer to ``target`` (a GET: 1); -1 when it is not a 200."""
    conn = await connect()
    try:
        r = await conn.request(target, keep_body=True)
    finally:
        conn.close()
    if r.status != 200:
        return -1
    doc = orjson.loads(r.body or b"{}")
    return len(doc["items"] or []) if "items" in doc else 1


@dataclass
class _Writes:
    count: int = 0
    errors: int = 0
    seconds: float = 0.0
    first_error: str = ""


@contextlib.asynccontextmanager
async def _writing(
    connect: Connect, targets: Targets | None, max_seconds: float
) -> AsyncIterator[_Writes]:
    """While inside: merge patches of an annotation of ``targets(i)`` straight to the API
    server, :data:`WRITE_RATE` a second, for at most ``max_seconds`` (none when None)."""
    writes = _Writes()

    async def write(targets: Targets) -> None:
        conn, started = await connect(), time.perf_counter()
        try:
            for i in range(math.ceil(WRITE_RATE * max_seconds)):
                await asyncio.sleep(max(0.0, started + i / WRITE_RATE - time.perf_counter()))
                if time.perf_counter() - started >= max_seconds:
                    return
                body = orjson.dumps({"metadata": {"annotations": {"defaultreads/n": str(i)}}})
                r = await conn.request(targets(i), method="PATCH", body=body, content_type=_MERGE)
                writes.count, writes.seconds = writes.count + 1, time.perf_counter() - started
                if r.status != 200:
                    writes.errors += 1
                    writes.first_error = writes.first_error or f"{r.status} {r.head[:200]!r}"
        except OSError as error:  # the API server went away: said in the report
            writes.first_error = writes.first_error or repr(error)
        finally:
            conn.close()

    task = asyncio.create_task(write(targets)) if targets is not None else None
    try:
        yield writes
    finally:
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def _counters(url: str, headers: Mapping[str, str]) -> dict[str, float]:
    """The daemon's counters of :data:`_WATCHED` (``name{labels}`` → value); {} without them."""
    try:
        status, body = await fetch(url, "/metrics", headers=headers)
    except OSError:
        return {}
    out: dict[str, float] = {}
    for line in body.decode(errors="replace").splitlines() if status == 200 else ():
        m = _METRIC.match(line)
        name = m.group(1) if m else ""
        if m and any(w in name for w in _WATCHED) and not name.endswith(("_created", "_bucket")):
            out[name + (m.group(2) or "")] = float(m.group(3))
    return out


@dataclass
class _Measured:
    conditions: list[Condition] = field(default_factory=list)
    throughput: dict[str, dict[str, Timing]] = field(default_factory=dict)
    visibility: Visibility | None = None
    memory: Memory | None = None
    metrics: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)


class _DirectWatch(WatchStream):
    """A watch straight on the API server (:class:`~loadtest.clients.watchclient.WatchStream`'s framing):
    when each value of the :data:`_VISIBLE_KEY` annotation first arrived (``time.time()``, at
    the read that completed its line)."""

    def __init__(self, request: bytes) -> None:
        super().__init__(request, array("d"))
        self.arrivals: dict[str, float] = {}
        self._changed = asyncio.Event()

    @classmethod
    async def open(cls, cluster: Cluster, target: str) -> _DirectWatch:
        host, _, port = cluster.url.split("://", 1)[1].split("/", 1)[0].rpartition(":")
        head = [f"GET {target} HTTP/1.1", f"Host: {host}:{port}"]
        head += [f"{k}: {v}" for k, v in cluster.admin.headers.items()]
        request = ("\r\n".join(head) + "\r\n\r\n").encode()
        _, watch = await asyncio.get_running_loop().create_connection(
            lambda: cls(request), host, int(port), ssl=cluster.ssl_context()
        )
        if (code := await watch.started) != 200:
            raise RuntimeError(f"the direct watch {target}: HTTP {code}")
        return watch

    def _line(self, buf: bytes, start: int, end: int) -> None:
        at = buf.find(_VISIBLE_MARKER, start, end)
        if at >= 0:
            at += len(_VISIBLE_MARKER)
            value = buf[at : buf.find(b'"', at, end)].decode()
            self.arrivals.setdefault(value, self._now)
            self._changed.set()

    async def wait_for(self, value: str) -> None:
        """Until ``value`` arrived."""
        while value not in self.arrivals:
            self._changed.clear()
            await self._changed.wait()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class _Bench:
    """The phases, against the API server and the daemons (:data:`SIDES`)."""

    def __init__(
        self,
        cluster: Cluster,
        daemons: Mapping[str, Service],
        pods: Sequence[tuple[str, str]],
        args: argparse.Namespace,
    ) -> None:
        self.args = args
        self.cluster = cluster
        self.headers = headers = cluster.admin.headers
        tls = cluster.ssl_context()
        self.connects: dict[str, Connect] = {
            "apiserver": functools.partial(open_connection, cluster.url, ssl=tls, headers=headers)
        }
        self.pids = {"apiserver": cluster.apiserver_pid}
        for name, daemon in daemons.items():
            self.connects[name] = functools.partial(open_connection, daemon.url, headers=headers)
            self.pids[name] = daemon.pid
        self.urls = {name: daemon.url for name, daemon in daemons.items()}
        self.pods, self.got = pods, _Measured()

    @contextlib.asynccontextmanager
    async def phase(self, name: str) -> AsyncIterator[None]:
        """The daemons' :func:`_counters` before and after: their growth, in ``metrics``."""
        before = {d: await _counters(url, self.headers) for d, url in self.urls.items()}
        yield
        grew = self.got.metrics[name] = {}
        for d, url in self.urls.items():
            after = await _counters(url, self.headers)
            grew[d] = {k: v - before[d].get(k, 0.0) for k, v in after.items()}

    async def compare(self, sides: Sequence[str], op: Operation, clients: int) -> dict[str, Timing]:
        """``--rounds`` batches of ``op`` per side (passthroughbench's :func:`_drive`: new
        connections, each warmed up, then a closed loop), the sides' order rotated each round."""
        batches = {side: _Batch() for side in sides}
        drive = functools.partial(_drive, op=op, clients=clients, seconds=self.args.seconds)
        for r in range(self.args.rounds):
            for side in [*sides[r % len(sides) :], *sides[: r % len(sides)]]:
                conn, pid = self.connects[side], self.pids[side]
                await drive(conn, batch=batches[side], counter=itertools.count(), daemon_pid=pid)
        return {side: b.timing() for side, b in batches.items()}

    async def reads(self, key: str) -> list[ReadRow]:
        """One client, RV unset: each read of the condition ``key`` on each side."""
        ns, name = next(p for p in self.pods if p[0] == "ns-3")
        reads = {
            "full list": "/api/v1/pods",
            "namespace list": "/api/v1/namespaces/ns-3/pods",
            "label list": "/api/v1/pods?labelSelector=app%3Dapp-3",
            "field list": "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-7",
            "get": _pod_path((ns, name)),
        }
        rows = []
        for read, target in reads.items():
            timings = await self.compare(SIDES, _reading(read, target), 1)
            items = {side: await _items(self.connects[side], target) for side in SIDES}
            rows.append(row := ReadRow(read, target, timings, items))
            p50s = ", ".join(f"{s} {timings[s].p50_ms:.2f}" for s in SIDES)
            _progress(
                f"{key}: {read}: p50 ms {p50s}; speed-up {row.speedup():.1f}x (strict "
                f"{row.speedup('strict'):.2f}x); items {'/'.join(map(str, items.values()))} "
                f"{'the same' if row.counts_agree() else 'DIFFER'}"
            )
        return rows

    async def throughput(self) -> None:
        """``--clients`` clients, the API server beside the default daemon."""
        pods, clients = self.pods, self.args.clients

        def label(n: int) -> str:
            return f"/api/v1/pods?labelSelector=app%3D{APPS[n % len(APPS)]}"

        def get(n: int) -> str:
            return _pod_path(pods[n % len(pods)])

        targets: dict[str, Targets] = {
            "label list": label,
            "get": get,
            "get rv=0": lambda n: get(n) + "?resourceVersion=0",
        }
        for key, target in targets.items():
            op = _reading(key, target)
            got = await self.compare(("apiserver", "default"), op, clients)
            self.got.throughput[key] = got
            api, ours = got["apiserver"].rate, got["default"].rate
            _progress(
                f"throughput at {clients} clients: {key}: API server {api:.0f}/s, default "
                f"daemon {ours:.0f}/s ({ours / api if api else math.nan:.1f}x)"
            )

    async def visibility(self, count: int) -> Visibility:
        """``count`` patches of one pod straight to the API server, each followed by RV-unset
        GETs through the default daemon until the new value shows (or
        :data:`_VISIBLE_TIMEOUT_S` passed): the delays from the writes' answers. Beside them, a
        watch of the pod straight on the API server: when each write's event arrived there
        (the floor any watch-fed cache sees it at)."""
        target = _pod_path(self.pods[0])
        namespace, name = self.pods[0]
        watch_target = (
            f"/api/v1/namespaces/{namespace}/pods?watch=true"
            f"&fieldSelector=metadata.name%3D{name}&allowWatchBookmarks=false"
        )
        direct = await _DirectWatch.open(self.cluster, watch_target)
        writer, reader = await self.connects["apiserver"](), await self.connects["default"]()
        delays: list[float] = []
        answers: list[float] = []
        polls = 0
        try:
            for i in range(count):
                body = orjson.dumps({"metadata": {"annotations": {_VISIBLE_KEY: f"v{i}"}}})
                r = await writer.request(target, method="PATCH", body=body, content_type=_MERGE)
                if r.status != 200:
                    raise RuntimeError(f"PATCH {target}: {r.status} {r.head[:300]!r}")
                answered = time.perf_counter()
                answers.append(time.time())  # the direct watch's clock
                while time.perf_counter() - answered < _VISIBLE_TIMEOUT_S:
                    got = await reader.request(target, keep_body=True)
                    polls += 1
                    doc = orjson.loads(got.body or b"{}") if got.status == 200 else {}
                    if doc.get("metadata", {}).get("annotations", {}).get(_VISIBLE_KEY) == f"v{i}":
                        delays.append(time.perf_counter() - answered)
                        break
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_VISIBLE_TIMEOUT_S):
                    await direct.wait_for(f"v{count - 1}")
        finally:
            writer.close()
            reader.close()
            direct.close()
        ordered = sorted(delays)
        p50, p99, top = (1000 * percentile(ordered, q, total=count) for q in (0.5, 0.99, 1.0))
        watch_ms: list[float | None] = []
        for i, answered_at in enumerate(answers):
            arrived = direct.arrivals.get(f"v{i}")
            watch_ms.append(None if arrived is None else 1000 * (arrived - answered_at))
        visibility = Visibility(
            count,
            len(ordered),
            p50,
            p99,
            top,
            polls,
            background_writes=0,
            delays_ms=[1000 * d for d in delays],
            watch_ms=watch_ms,
        )
        _progress(
            f"write -> visible: seen {len(ordered)} of {count}, p50 {p50:.1f} ms, "
            f"p99 {p99:.1f} ms, max {top:.1f} ms; the direct watch p99 "
            f"{visibility.watch_percentile(0.99):.1f} ms, the daemon's excess p99 "
            f"{visibility.excess_percentile(0.99):.1f} ms"
        )
        return visibility

    async def memory(self) -> Memory:
        """The default daemon's RSS before and after :data:`MEMORY_LISTS` full lists."""
        pid = self.pids["default"]
        before = rss_bytes(pid)
        conn = await self.connects["default"]()
        try:
            for _ in range(MEMORY_LISTS):
                if (r := await conn.request("/api/v1/pods")).status != 200:
                    raise RuntimeError(f"full list through the default daemon: {r.status}")
        finally:
            conn.close()
        _progress(f"memory: RSS {before >> 20} MiB before, {rss_bytes(pid) >> 20} MiB after")
        return Memory(MEMORY_LISTS, before, rss_bytes(pid), rss_bytes(pid, "VmHWM"))

    async def run(self) -> _Measured:
        args, others = self.args, self.pods[1:] or self.pods
        writers: dict[str, Targets | None] = {
            "quiet": None,
            "writes elsewhere": lambda i: (
                f"/api/v1/namespaces/{ELSEWHERE}/configmaps/cm-{i % _CONFIGMAPS}"
            ),
            "pods written": lambda i: _pod_path(others[i % len(others)]),
        }
        # Generous: each writer stops by itself well after its condition should have ended
        # (per round: a batch per read and side, then the throughput's).
        batches = 5 * len(SIDES) + 3 * 2
        bound = 3 * batches * args.rounds * (args.seconds + 1) + args.visible_writes + 300
        for key, title in CONDITIONS:
            _progress(f"{key}: {args.rounds} rounds of {args.seconds:g} s per side and read")
            if "reads" not in args.phases and key != "pods written":
                continue
            async with _writing(self.connects["apiserver"], writers[key], bound) as writes:
                started = time.perf_counter()
                async with self.phase(key):
                    rows = await self.reads(key) if "reads" in args.phases else []
                seconds = time.perf_counter() - started
                self.got.conditions.append(
                    Condition(
                        key, title, seconds, writes.count, writes.errors, writes.seconds, rows
                    )
                )
                if writes.first_error:
                    _progress(f"{key}: the writer's first error: {writes.first_error}")
                if key != "pods written":
                    continue
                if "throughput" in args.phases:
                    async with self.phase("throughput"):
                        await self.throughput()
                if "visible" in args.phases:
                    _progress(f"write -> visible: {args.visible_writes} writes, under pod writes")
                    async with self.phase("write -> visible"):
                        already = writes.count
                        self.got.visibility = await self.visibility(args.visible_writes)
                        self.got.visibility.background_writes = writes.count - already
        if "memory" in args.phases:
            _progress(f"memory: {MEMORY_LISTS} full lists through the default daemon")
            async with self.phase("memory"):
                self.got.memory = await self.memory()
        return self.got


# ---------------------------------------------------------------------- set-up and the run


def _configs(workdir: Path, cluster: Cluster) -> tuple[Path, Path]:
    """The default daemon's config, and the strict one's (its pods say :data:`STRICT`)."""
    default = write_config(workdir, cluster, name="default")
    strict = write_config(workdir, cluster, name="strict")
    doc = yaml.safe_load(strict.read_text())
    pods = {"resource": "pods", "consistentReads": STRICT}
    doc["resources"] = [pods if r == "pods" else r for r in doc["resources"]]
    strict.write_text(yaml.safe_dump(doc, sort_keys=False))
    return default, strict


async def _set_up(cluster: Cluster, pods: int) -> list[tuple[str, str]]:
    objects, names = build_objects(pods)
    await load(cluster, objects, progress=_progress)
    await cluster.load(
        [
            ("configmaps", {"metadata": {"name": f"cm-{k}", "namespace": ELSEWHERE}, "data": {}})
            for k in range(_CONFIGMAPS)
        ]
    )
    return names


def _parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m loadtest defaultreads", description=__doc__)
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=3.0, help="per timed batch")
    parser.add_argument("--rounds", type=int, default=3, help="timed batches per side and read")
    parser.add_argument("--clients", type=int, default=16, help="for the throughput")
    parser.add_argument("--visible-writes", type=int, default=200)
    parser.add_argument(
        "--out", type=Path, help="default loadtest/results/<date>-defaultreads-<kube>"
    )
    parser.add_argument(
        "--skip-without-assets",
        action="store_true",
        help="without a kube-apiserver, say so and exit 0 (for make bench)",
    )
    parser.add_argument(
        "--report-from", type=Path, help="write the report of a run's JSON again, and exit"
    )
    parser.add_argument(
        "--phases",
        type=lambda v: set(v.split(",")),
        default=set(PHASES),
        help=f"a comma-separated subset of {','.join(PHASES)} (default all; a partial run's "
        "report judges only what it measured)",
    )
    add_kube_option(parser)
    args = parser.parse_args(argv)
    if not args.phases or not args.phases <= set(PHASES):
        parser.error(f"--phases: a comma-separated subset of {','.join(PHASES)}")
    if min(args.pods, args.rounds, args.clients, args.visible_writes) < 1 or args.seconds <= 0:
        parser.error("--pods, --seconds, --rounds, --clients and --visible-writes must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parse_args(argv)
    if args.report_from is not None:
        result = load_result(json.loads(args.report_from.read_text()))
        args.report_from.with_suffix(".md").write_text(render_report(result))
        return 0
    try:
        assets = required_assets(args, "python -m loadtest defaultreads")
    except NoServer as none:
        return none.code
    out: Path = args.out or Path("loadtest/results") / (
        f"{dt.date.today().isoformat()}-defaultreads-{assets.version}"
    )
    command = " ".join(["python -m loadtest defaultreads", *argv])
    source, uptime = cacheproxy_source(), _uptime()
    load_at_start = " ".join(f"{x:.2f}" for x in os.getloadavg())
    workdir = Path(tempfile.mkdtemp(prefix="loadtest-defaultreads-"))
    cluster = Cluster(assets, workdir=workdir / "cluster")
    daemons: dict[str, Service] = {}
    complaints: dict[str, list[str]] = {}
    try:
        _progress(f"starting etcd and kube-apiserver {assets.version}, {args.pods} pods")
        cluster.start()
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            pods = runner.run(_set_up(cluster, args.pods))
            default, strict = _configs(workdir, cluster)
            _progress(f"starting two cacheproxy serve: default, strict ({STRICT})")
            for name, config in (("default", default), ("strict", strict)):
                daemons[name] = start_daemon(workdir, config, name=name)
            for name, daemon in daemons.items():
                took = daemon.wait_ready(120 + args.pods / 50)
                _progress(f"{name} daemon ready after {took:.1f} s more")
            ours = (os.getpid(), cluster.apiserver_pid, cluster.etcd_pid)
            others = _OthersCpu(ours + tuple(d.pid for d in daemons.values()))
            measured = runner.run(_Bench(cluster, daemons, pods, args).run())
            others_cores = others.cores()
    finally:
        for name, daemon in daemons.items():
            daemon.stop()
            complaints[name] = _complaints(daemon.log)
        cluster.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    if cacheproxy_source() != source:
        source += f"; at the end: {cacheproxy_source()}"
    result = DefaultReadsResult(
        command=command,
        kube=assets.git_version,
        pods=args.pods,
        seconds=args.seconds,
        rounds=args.rounds,
        clients=args.clients,
        strict_value=STRICT,
        strict_refused="",
        source=source,
        load_at_start=load_at_start,
        load_at_end=" ".join(f"{x:.2f}" for x in os.getloadavg()),
        uptime=uptime,
        others_cores=others_cores,
        conditions=measured.conditions,
        throughput_condition=CONDITIONS[2][1],
        throughput=measured.throughput,
        visibility=measured.visibility,
        memory=measured.memory,
        metrics=measured.metrics,
        daemon_complaints=complaints,
    )
    out.mkdir(parents=True, exist_ok=True)
    (out / "defaultreads.json").write_text(json.dumps(dataclasses.asdict(result), indent=2) + "\n")
    text = render_report(result)
    (out / "defaultreads.md").write_text(text)
    print(text, flush=True)
    _progress(f"wrote {out}/defaultreads.md and defaultreads.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
