"""Pass-through against a real kube-apiserver: what forwarding through cacheproxy costs.

``python -m loadtest passthroughbench [--kube 1.28] [--seconds 2] [--rounds 3] [--clients 16]
[--watch-writes 300] [--out DIR] [--skip-without-assets]`` starts etcd and kube-apiserver
(:mod:`cacheproxy.envtest`, the oldest found unless ``--kube``), and ``cacheproxy serve`` in its
default configuration (pass-through on) caching what the other real-server benchmarks cache
(:func:`loadtest.harness.realcluster.write_config`), which leaves Services uncached. Every request
carries the API server's admin bearer token, to the daemon (plain HTTP on loopback; it forwards
the ``Authorization`` header as sent) and straight to the API server (TLS) alike. Then, in one
run, each operation is timed both ways in alternating batches (:data:`OPERATIONS`):

- **forwarded GET**: one Service of 20 (an uncached kind);
- **write**: a merge patch of a ConfigMap (each client its own, a new annotation value each
  time: every patch is a write to etcd);
- **create + delete**: a new ConfigMap created, then deleted (the pair timed as one).

Per operation, ``--rounds`` batches at 1 client and then at ``--clients`` clients, the side that
goes first alternated; each batch on new keep-alive HTTP/1.1 connections of
:mod:`loadtest.clients.httpclient` (one per client, each warmed up by a few requests), closed loop, for at
least ``--seconds``. Before the rounds at each concurrency both sides get an untimed warm-up at
that concurrency, ``--warmup`` seconds long: the daemon's pool of upstream connections is then
that of a steady load (httpx keeps an idle connection 5 s, and each one costs every request a
look at it: after a burst of 16 clients, 1 client would pay for 16 idle connections). Reported:
p50/p99 at 1 client, the overhead (cacheproxy's p50 less the direct p50, target ≤ 1 ms per
forwarded request on loopback, not asserted), requests/s at ``--clients``, the daemon's CPU per
request.

Beforehand a few forwarded requests are asked both ways and their answers compared (status and
body bytes). Then **a watch of an uncached resource** (:mod:`loadtest.clients.passthroughbench_watch`):
Services of another namespace watched through cacheproxy and on the API server from the same
resourceVersion while ``--watch-writes`` writes (create, merge patch, delete in turn) go
upstream; the events each watch delivered are counted against the writes and compared.

Writes ``passthrough.md`` and ``passthrough.json`` to ``--out`` (default
``loadtest/results/<date>-passthrough``), one progress line per phase; ``--report-from JSON``
writes a run's report again. Without the assets it exits 2 with a hint, or 0 after saying it
skipped with ``--skip-without-assets`` (``make bench``).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime as dt
import itertools
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import uvloop

from cacheproxy.envtest import Cluster
from loadtest.clients.fanout import percentile
from loadtest.clients.httpclient import Connection, open_connection
from loadtest.clients.passthroughbench_watch import WATCH_NAMESPACE, check_watch, service_object
from loadtest.harness.processes import cpu_seconds, machine_cpu, start_daemon
from loadtest.harness.realcluster import (
    NoServer,
    add_kube_option,
    cacheproxy_source,
    required_assets,
    write_config,
)
from loadtest.reports.passthroughbench_report import (
    SIDES,
    AnswerCheck,
    OperationRun,
    PassthroughResult,
    Timing,
    WatchCheck,
    load_result,
    render_report,
)
from loadtest.reports.report import collect_machine_info

__all__ = ["OPERATIONS", "Operation", "main"]

NAMESPACE = "passthrough"
SERVICES = 20
_BASE = f"/api/v1/namespaces/{NAMESPACE}"
_MERGE = "application/merge-patch+json"
_WARM_PER_CONNECTION = 3

Connect = Callable[[], Awaitable[Connection]]


@dataclass(frozen=True, slots=True)
class Outcome:
    """One operation: answered as it should be (200, or 201 for a create), its time from the
    first request's write to the last answer's last byte, what went wrong if not."""

    ok: bool
    seconds: float
    error: str = ""


@dataclass(frozen=True, slots=True)
class Operation:
    """One row of the plan: ``run(conn, client, n)`` does request ``n`` (unique in the run) of
    client ``client`` on ``conn``."""

    key: str
    title: str
    run: Callable[[Connection, int, int], Awaitable[Outcome]]
    requests: int = 1
    """Requests each run forwards."""


def _error(method: str, target: str, status: int, head: bytes) -> str:
    return f"{method} {target}: {status} {head[:300].decode(errors='replace')}"


async def _get(conn: Connection, client: int, n: int) -> Outcome:
    target = f"{_BASE}/services/svc-{n % SERVICES}"
    r = await conn.request(target)
    ok = r.status == 200
    return Outcome(ok, r.seconds, "" if ok else _error("GET", target, r.status, r.head))


async def _patch(conn: Connection, client: int, n: int) -> Outcome:
    target = f"{_BASE}/configmaps/writer-{client}"
    body = orjson.dumps({"metadata": {"annotations": {"loadtest/n": str(n)}}})
    r = await conn.request(target, method="PATCH", body=body, content_type=_MERGE)
    ok = r.status == 200
    return Outcome(ok, r.seconds, "" if ok else _error("PATCH", target, r.status, r.head))


async def _create_delete(conn: Connection, client: int, n: int) -> Outcome:
    name = f"pair-{n}"
    body = orjson.dumps({"metadata": {"name": name}, "data": {"n": str(n)}})
    created = await conn.request(f"{_BASE}/configmaps", method="POST", body=body)
    if created.status != 201:
        return Outcome(False, created.seconds, _error("POST", name, created.status, created.head))
    target = f"{_BASE}/configmaps/{name}"
    deleted = await conn.request(target, method="DELETE")
    ok = deleted.status == 200
    error = "" if ok else _error("DELETE", target, deleted.status, deleted.head)
    return Outcome(ok, created.seconds + deleted.seconds, error)


OPERATIONS = (
    Operation("get", "GET of a Service (not cached)", _get),
    Operation("patch", "merge patch of a ConfigMap", _patch),
    Operation("create-delete", "create + delete of a ConfigMap", _create_delete, requests=2),
)


def _progress(text: str) -> None:
    print(f"[{dt.datetime.now():%H:%M:%S}] {text}", flush=True)


# ---------------------------------------------------------------------- batches


@dataclass
class _Batch:
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    first_error: str = ""
    wall_s: float = 0.0
    daemon_cpu_s: float = 0.0
    client_cpu_s: float = 0.0

    def note(self, outcome: Outcome) -> None:
        if outcome.ok:
            return
        self.errors += 1
        self.first_error = self.first_error or outcome.error

    def timing(self) -> Timing:
        ordered = sorted(self.latencies)
        return Timing(
            requests=len(ordered),
            errors=self.errors,
            wall_s=self.wall_s,
            p50_ms=1000 * statistics.median(ordered) if ordered else float("nan"),
            p99_ms=1000 * percentile(ordered, 0.99),
            mean_ms=1000 * statistics.fmean(ordered) if ordered else float("nan"),
            daemon_cpu_s=self.daemon_cpu_s,
            client_cpu_s=self.client_cpu_s,
            first_error=self.first_error,
        )


async def _drive(
    connect: Connect,
    op: Operation,
    batch: _Batch,
    *,
    clients: int,
    seconds: float,
    counter: Iterator[int],
    daemon_pid: int,
) -> None:
    """``clients`` new connections, each warmed up, then a closed loop of ``op`` for ``seconds``
    (no request started after); adds the timed requests to ``batch``."""
    numbers = iter(counter)
    conns = [await connect() for _ in range(clients)]
    try:

        async def warm(client: int, conn: Connection) -> None:
            for _ in range(_WARM_PER_CONNECTION):
                batch.note(await op.run(conn, client, next(numbers)))

        await asyncio.gather(*(warm(c, conn) for c, conn in enumerate(conns)))
        cpu0, daemon0 = time.process_time(), cpu_seconds(daemon_pid)
        started = time.perf_counter()

        async def worker(client: int, conn: Connection) -> None:
            while time.perf_counter() - started < seconds:
                outcome = await op.run(conn, client, next(numbers))
                batch.note(outcome)
                if outcome.ok:
                    batch.latencies.append(outcome.seconds)

        async with asyncio.timeout(seconds + 120):
            await asyncio.gather(*(worker(c, conn) for c, conn in enumerate(conns)))
        batch.wall_s += time.perf_counter() - started
        batch.client_cpu_s += time.process_time() - cpu0
        batch.daemon_cpu_s += cpu_seconds(daemon_pid) - daemon0
    finally:
        for conn in conns:
            conn.close()


async def _measure_operation(
    op: Operation, connects: dict[str, Connect], args: argparse.Namespace, *, daemon_pid: int
) -> OperationRun:
    counter = itertools.count()  # one sequence per operation: every name is new
    merged: dict[int, dict[str, _Batch]] = {}
    for clients in (1, args.clients):
        for side in SIDES:
            _progress(f"{op.title}: warm-up, {side}, {_clients(clients)}")
            await _drive(
                connects[side],
                op,
                _Batch(),
                clients=clients,
                seconds=args.warmup,
                counter=counter,
                daemon_pid=daemon_pid,
            )
        batches = merged[clients] = {side: _Batch() for side in SIDES}
        for r in range(args.rounds):
            for side in SIDES if r % 2 == 0 else SIDES[::-1]:
                batch = _Batch()
                await _drive(
                    connects[side],
                    op,
                    batch,
                    clients=clients,
                    seconds=args.seconds,
                    counter=counter,
                    daemon_pid=daemon_pid,
                )
                t = batch.timing()
                _progress(
                    f"{op.title}: {_clients(clients)}, round {r + 1} of {args.rounds}, "
                    f"{side}: p50 {t.p50_ms:.2f} ms, p99 "
                    f"{t.p99_ms:.2f} ms, {t.rate:.0f}/s, {t.errors} errors"
                )
                _merge(batches[side], batch)
    return OperationRun(
        key=op.key,
        title=op.title,
        latency={s: b.timing() for s, b in merged[1].items()},
        throughput={s: b.timing() for s, b in merged[args.clients].items()},
        requests=op.requests,
    )


def _clients(n: int) -> str:
    return f"{n} client{'s' if n > 1 else ''}"


def _merge(into: _Batch, batch: _Batch) -> None:
    into.latencies += batch.latencies
    into.errors += batch.errors
    into.first_error = into.first_error or batch.first_error
    into.wall_s += batch.wall_s
    into.daemon_cpu_s += batch.daemon_cpu_s
    into.client_cpu_s += batch.client_cpu_s


# ---------------------------------------------------------------------- answers


_ANSWERS: tuple[tuple[str, str, bytes], ...] = (
    ("GET", f"{_BASE}/services/svc-0", b""),
    ("GET", f"{_BASE}/services/svc-missing", b""),
    ("GET", f"{_BASE}/services", b""),
    (
        "POST",
        f"{_BASE}/services",
        orjson.dumps({**service_object("svc-0", NAMESPACE), "kind": "Service"}),
    ),
)
"""Forwarded requests (method, target, body) that change nothing: a GET, its 404, a list (the
items compared: its resourceVersion is etcd's, which the API server's leases move) and a create
refused with 409."""


async def _answers(connects: dict[str, Connect]) -> list[AnswerCheck]:
    """Each of :data:`_ANSWERS` asked both ways: the same status and body bytes."""
    checks = []
    for method, target, body in _ANSWERS:
        got: dict[str, tuple[int, bytes]] = {}
        for side in SIDES:
            conn = await connects[side]()
            try:
                r = await conn.request(target, method=method, body=body, keep_body=True)
            finally:
                conn.close()
            got[side] = (r.status, _comparable(r.body or b""))
        (ours, ours_body), (theirs, theirs_body) = got["cacheproxy"], got["direct"]
        equal = ours == theirs and ours_body == theirs_body
        detail = ""
        if not equal:
            detail = f"cacheproxy {ours_body[:300]!r}, direct {theirs_body[:300]!r}"
        checks.append(AnswerCheck(f"{method} {target}", ours, theirs, equal, detail))
    return checks


def _comparable(body: bytes) -> bytes:
    """``body``, a list's resourceVersion left out."""
    if not body.startswith(b'{"kind":"ServiceList"'):
        return body
    doc = orjson.loads(body)
    doc["metadata"].pop("resourceVersion", None)
    return orjson.dumps(doc)


# ---------------------------------------------------------------------- the run


async def _set_up(cluster: Cluster, clients: int) -> None:
    """The Services the GETs read, a ConfigMap per writing client."""
    objects: list[tuple[str, dict[str, Any]]] = [
        ("services", service_object(f"svc-{k}", NAMESPACE)) for k in range(SERVICES)
    ]
    objects += [
        (
            "configmaps",
            {"metadata": {"name": f"writer-{c}", "namespace": NAMESPACE}, "data": {"a": "b"}},
        )
        for c in range(max(clients, 1))
    ]
    objects.append(("namespaces", {"metadata": {"name": WATCH_NAMESPACE}}))
    await cluster.load(objects)


async def _measure(
    cluster: Cluster, daemon_url: str, daemon_pid: int, args: argparse.Namespace
) -> tuple[list[OperationRun], list[AnswerCheck], WatchCheck]:
    tls = cluster.ssl_context()
    headers = cluster.admin.headers
    connects: dict[str, Connect] = {
        "cacheproxy": lambda: open_connection(daemon_url, headers=headers),
        "direct": lambda: open_connection(cluster.url, ssl=tls, headers=headers),
    }
    _progress("answers: the same requests both ways")
    answers = await _answers(connects)
    runs = []
    for op in OPERATIONS:
        runs.append(await _measure_operation(op, connects, args, daemon_pid=daemon_pid))
    _progress(f"watch: {args.watch_writes} writes to Services, watched both ways")
    watch = await check_watch(cluster, daemon_url, writes=args.watch_writes)
    _progress(
        f"watch: cacheproxy delivered {watch.delivered['cacheproxy']} of {watch.writes}, "
        f"direct {watch.delivered['direct']}"
    )
    return runs, answers, watch


class _OthersCpu:
    """The cores the processes other than ``ours`` kept busy (other people's tests: the machine
    is shared), on average from now to :meth:`cores`."""

    def __init__(self, ours: Sequence[int]) -> None:
        self.ours = ours
        self.busy0, self.own0, self.t0 = machine_cpu()[0], self._own(), time.monotonic()

    def _own(self) -> float:
        return sum(cpu_seconds(pid) for pid in self.ours)

    def cores(self) -> float:
        busy, own = machine_cpu()[0] - self.busy0, self._own() - self.own0
        return max(0.0, busy - own) / (time.monotonic() - self.t0)


_COMPLAINT = re.compile(r" (?:WARNING|ERROR|CRITICAL) |^Traceback")


def _complaints(log: Path) -> list[str]:
    """The daemon's log lines at WARNING and above, and the starts of tracebacks."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return []
    return [line for line in lines if _COMPLAINT.search(line)]


def _uptime() -> str:
    try:
        done = subprocess.run(["uptime"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return "n/a"
    return done.stdout.strip()


def _parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m loadtest passthroughbench", description=__doc__
    )
    parser.add_argument("--seconds", type=float, default=2.0, help="per timed batch")
    parser.add_argument("--rounds", type=int, default=3, help="timed batches per side")
    parser.add_argument("--clients", type=int, default=16, help="for the throughput")
    parser.add_argument(
        "--warmup",
        type=float,
        default=6.0,
        help="seconds per side, operation and concurrency (default 6: more than the 5 s the "
        "daemon's upstream client keeps an idle connection after a burst)",
    )
    parser.add_argument("--watch-writes", type=int, default=300)
    parser.add_argument("--out", type=Path, help="default loadtest/results/<date>-passthrough")
    parser.add_argument(
        "--skip-without-assets",
        action="store_true",
        help="without a kube-apiserver, say so and exit 0 (for make bench)",
    )
    parser.add_argument(
        "--report-from", type=Path, help="write the report of a run's JSON again, and exit"
    )
    add_kube_option(parser)
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.clients < 1 or args.watch_writes < 1:
        parser.error("--rounds, --clients and --watch-writes must be positive")
    args.out = args.out or Path("loadtest/results") / f"{dt.date.today().isoformat()}-passthrough"
    return args


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parse_args(argv)
    if args.report_from is not None:
        result = load_result(orjson.loads(args.report_from.read_bytes()))
        args.report_from.with_suffix(".md").write_text(render_report(result))
        return 0
    try:
        assets = required_assets(args, "python -m loadtest passthroughbench")
    except NoServer as none:
        return none.code
    command = " ".join(["python -m loadtest passthroughbench", *argv])
    machine = collect_machine_info(command=command, loop="uvloop (the clients)", cpu=None)
    uptime = _uptime()
    source = cacheproxy_source()
    workdir = Path(tempfile.mkdtemp(prefix="loadtest-passthrough-"))
    complaints: list[str] = []
    cluster = Cluster(assets, workdir=workdir / "cluster")
    daemon = None
    try:
        _progress(f"starting etcd and kube-apiserver {assets.version}")
        cluster.start()
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(_set_up(cluster, args.clients))
            _progress("starting cacheproxy serve")
            daemon = start_daemon(workdir, write_config(workdir, cluster, name="daemon"))
            daemon.wait_ready(120)
            ours = (os.getpid(), daemon.pid, cluster.apiserver_pid, cluster.etcd_pid)
            others = _OthersCpu(ours)
            runs, answers, watch = runner.run(_measure(cluster, daemon.url, daemon.pid, args))
            others_cores = others.cores()
    finally:
        if daemon is not None:
            daemon.stop()
            complaints = _complaints(daemon.log)
        cluster.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    if cacheproxy_source() != source:
        source += f"; at the end: {cacheproxy_source()}"
    result = PassthroughResult(
        command=command,
        kube=assets.git_version,
        clients=args.clients,
        rounds=args.rounds,
        seconds=args.seconds,
        machine=machine,
        load_at_end=" ".join(f"{x:.2f}" for x in os.getloadavg()),
        uptime=uptime,
        operations=runs,
        answers=answers,
        watch=watch,
        warmup=args.warmup,
        others_cores=others_cores,
        daemon_complaints=complaints,
        source=source,
    )
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    (out / "passthrough.json").write_bytes(
        orjson.dumps(dataclasses.asdict(result), option=orjson.OPT_INDENT_2)
    )
    text = render_report(result)
    (out / "passthrough.md").write_text(text)
    print(text, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
