"""Watch fan-out: K watchers, R pod events/s, the delivery lag from creation to the client's read.

One *point* (:func:`run_point`) against a watch server (the daemon, or the bare broadcaster of
:mod:`loadtest.baselines.broadcaster`): ``K`` watchers of ``/api/v1/pods?watch=1`` from the server's
current resourceVersion, spread over a few :mod:`loadtest.clients.watchclient` processes; then the
:class:`StampWriter` PATCHes pods on the simulator at ``R`` events/s for ``duration`` seconds,
each merge patch setting the annotation :data:`~loadtest.clients.watchclient.STAMP_KEY` to the wall-clock
time it is sent, so every event is a whole pod (~5 KB once managedFields are dropped) and its
lag is measured end to end: simulator write → its watch → the server's ingest → fan-out → the
client's read. After the writes the clients are polled until every delivery arrived (or
``drain`` seconds): a delivery still missing then counts as an infinite lag, so it weighs on
p99. Evictions are the server's own count (``cacheproxy_watch_evicted`` in ``/metrics``, the
broadcaster's ``/status``) plus watchers whose stream ended early.

A point is *sustained* when p99 lag < 1 s, nothing was evicted and every delivery arrived;
:func:`capacity` is the highest delivery rate (watchers x events/s) sustained at a watcher count.
A point whose writer fell short of the rate asked (the simulator could not take the writes)
still counts at the rate it achieved, and ends a ladder: a higher rate cannot be offered.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import sys
import tempfile
import time
from array import array
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import orjson

from loadtest.clients.httpclient import Connection, fetch, open_connection
from loadtest.clients.watchclient import STAMP_KEY
from loadtest.harness.processes import machine_cpu

__all__ = [
    "LAG_BUDGET",
    "FanoutPoint",
    "StampWriter",
    "broadcaster_evictions",
    "capacity",
    "daemon_evictions",
    "percentile",
    "run_point",
    "wait_watchers_gone",
]

LAG_BUDGET = 1.0
"""p99 delivery lag under which a point counts as sustained (seconds)."""
_PER_PROCESS = 500
_EVICTED = re.compile(rb"^cacheproxy_watch_evicted(?:_total)?\{[^}]*\} (\S+)", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class FanoutPoint:
    target: str
    watchers: int
    rate: float
    """Events/s asked of the writer."""
    duration: float
    events: int
    """Writes the simulator acknowledged."""
    write_rate: float
    """Events/s the writer achieved."""
    expected: int
    """events x connected watchers."""
    delivered: int
    lag_p50: float
    lag_p99: float
    lag_max: float
    evicted: int
    closed: int
    failed: int
    client_procs: int
    client_cpu_s: float
    server_cpu_s: float
    sim_cpu_s: float
    wall_s: float
    machine_busy_s: float = float("nan")
    """CPU-seconds the whole machine was busy over the point (softirq, steal and other
    processes included)."""
    harness_cpu_s: float = 0.0
    """CPU of this process (the writer) over the point."""

    @property
    def deliveries_per_s(self) -> float:
        """Deliveries per second of writing (the writer may take longer than ``duration``)."""
        seconds = self.events / self.write_rate if self.write_rate > 0 else self.duration
        return self.delivered / seconds if seconds else float("nan")

    @property
    def rate_reached(self) -> bool:
        """Whether the writer achieved the rate asked (else the simulator was the limit)."""
        return self.write_rate >= 0.9 * self.rate

    @property
    def server_us_per_delivery(self) -> float:
        """Server CPU per delivered line (µs): what the fan-out costs the server."""
        return self.server_cpu_s / self.delivered * 1e6 if self.delivered else float("nan")

    @property
    def other_cpu_s(self) -> float:
        """Machine busy time no measured process accounts for (kernel softirq, other load)."""
        measured = self.server_cpu_s + self.sim_cpu_s + self.client_cpu_s + self.harness_cpu_s
        return self.machine_busy_s - measured

    @property
    def offered_per_s(self) -> float:
        return self.watchers * self.rate

    @property
    def sustained(self) -> bool:
        return (
            self.lag_p99 < LAG_BUDGET
            and self.evicted == 0
            and self.closed == 0
            and self.failed == 0
            and self.delivered >= self.expected > 0
        )


def percentile(ordered: Sequence[float], q: float, *, total: int | None = None) -> float:
    """The ``q`` quantile of ``total`` values of which ``ordered`` are known (sorted) and the
    rest are infinite (deliveries that never came)."""
    n = len(ordered) if total is None else max(total, len(ordered))
    if n == 0:
        return float("nan")
    index = max(0, math.ceil(q * n) - 1)
    return ordered[index] if index < len(ordered) else math.inf


def capacity(points: Sequence[FanoutPoint], target: str, watchers: int) -> float:
    """Highest deliveries/s sustained by ``target`` with ``watchers`` (0 when none was)."""
    rates = [
        p.deliveries_per_s
        for p in points
        if p.target == target and p.watchers == watchers and p.sustained
    ]
    return max(rates, default=0.0)


async def daemon_evictions(url: str) -> int:
    """Watchers the daemon closed as too slow so far (``/metrics``)."""
    _, text = await fetch(url, "/metrics")
    return int(sum(float(v) for v in _EVICTED.findall(text)))


async def broadcaster_evictions(url: str) -> int:
    """Clients the bare broadcaster closed as too slow so far (``/status``)."""
    _, body = await fetch(url, "/status")
    return int(orjson.loads(body)["evicted"])


class StampWriter:
    """Merge-PATCHes pods on the simulator at a steady rate, stamping each with its send time."""

    def __init__(self, sim_url: str, *, connections: int = 4) -> None:
        self.sim_url = sim_url
        self.connections = connections
        self._conns: list[Connection] = []
        self._pods: list[str] = []

    async def open(self, pods: int = 500) -> None:
        conn = await open_connection(self.sim_url)
        response = await conn.request(f"/api/v1/pods?limit={pods}", keep_body=True)
        conn.close()
        assert response.body is not None
        items = orjson.loads(response.body)["items"]
        self._pods = [
            f"/api/v1/namespaces/{i['metadata']['namespace']}/pods/{i['metadata']['name']}"
            for i in items
        ]
        if not self._pods:
            raise RuntimeError("the simulator has no pods to write")
        self._conns = [await open_connection(self.sim_url) for _ in range(self.connections)]

    def close(self) -> None:
        for conn in self._conns:
            conn.close()

    async def run(self, rate: float, duration: float) -> tuple[int, float]:
        """Write ``rate`` x ``duration`` events on schedule; (acknowledged, achieved rate)."""
        total = max(1, round(rate * duration))
        started = time.perf_counter()
        results = await asyncio.gather(
            *(self._lane(conn, lane, total, rate, started) for lane, conn in enumerate(self._conns))
        )
        elapsed = time.perf_counter() - started
        acked = sum(results)
        return acked, acked / elapsed if elapsed > 0 else float("nan")

    async def _lane(
        self, conn: Connection, lane: int, total: int, rate: float, started: float
    ) -> int:
        acked = 0
        pods = self._pods
        for i in range(lane, total, len(self._conns)):
            delay = started + i / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            body = b'{"metadata":{"annotations":{"%b":"%.6f"}}}' % (
                STAMP_KEY.encode(),
                time.time(),
            )
            response = await conn.request(
                pods[i % len(pods)],
                method="PATCH",
                body=body,
                content_type="application/merge-patch+json",
            )
            acked += response.status == 200
        return acked


async def _read_line(proc: asyncio.subprocess.Process, within: float) -> str:
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), within)
    if not line:
        raise RuntimeError(f"watch client {proc.pid} exited ({await proc.wait()})")
    return line.decode().strip()


async def _tell(proc: asyncio.subprocess.Process, command: str) -> None:
    assert proc.stdin is not None
    proc.stdin.write(command.encode() + b"\n")
    await proc.stdin.drain()


async def run_point(
    *,
    target: str,
    url: str,
    writer: StampWriter,
    watchers: int,
    rate: float,
    duration: float,
    drain: float = 3.0,
    max_procs: int = 2,
    evictions: Callable[[], Awaitable[int]],
    server_cpu: Callable[[], float],
    sim_cpu: Callable[[], float],
) -> FanoutPoint:
    """One fan-out measurement (see the module docstring)."""
    procs_n = max(1, min(max_procs, math.ceil(watchers / _PER_PROCESS)))
    conn = await open_connection(url)
    head = (await conn.request("/api/v1/pods?limit=1")).head
    conn.close()
    rv = re.search(rb'"resourceVersion":"(\d+)"', head)
    path = "/api/v1/pods?watch=1" + (f"&resourceVersion={rv.group(1).decode()}" if rv else "")
    workdir = Path(tempfile.mkdtemp(prefix="loadtest-fanout-"))
    shares = [watchers // procs_n + (i < watchers % procs_n) for i in range(procs_n)]
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "loadtest.clients.watchclient",
            "--url",
            url,
            "--path",
            path,
            "--watchers",
            str(share),
            "--out",
            str(workdir / f"client-{i}.json"),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        for i, share in enumerate(shares)
    ]
    try:
        connected = failed = 0
        for proc in procs:
            _, ok, bad = (await _read_line(proc, 60 + watchers / 50)).split()
            connected, failed = connected + int(ok), failed + int(bad)
        evicted_before = await evictions()
        await asyncio.sleep(0.2)  # every watcher registered before the first write
        cpu0, sim0, wall0 = server_cpu(), sim_cpu(), time.perf_counter()
        busy0, _ = machine_cpu()
        harness0 = time.process_time()
        events, write_rate = await writer.run(rate, duration)
        expected = events * connected
        deadline = time.perf_counter() + drain
        while time.perf_counter() < deadline:
            counts = 0
            for proc in procs:
                await _tell(proc, "COUNT")
                counts += int((await _read_line(proc, 10)).split()[1])
            if counts >= expected:
                break
            await asyncio.sleep(0.1)
        cpu1, sim1, wall1 = server_cpu(), sim_cpu(), time.perf_counter()
        busy1, _ = machine_cpu()
        harness1 = time.process_time()
        for proc in procs:
            await _tell(proc, "STOP")
        for proc in procs:
            while (await _read_line(proc, 60)) != "DONE":
                pass
            await proc.wait()
        evicted = await evictions() - evicted_before
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    summaries = [json.loads((workdir / f"client-{i}.json").read_text()) for i in range(procs_n)]
    lags: array[float] = array("d")
    for i in range(procs_n):
        with (workdir / f"client-{i}.json.lags").open("rb") as f:
            lags.frombytes(f.read())
    ordered = sorted(lags)
    total = max(expected, len(ordered))
    return FanoutPoint(
        target=target,
        watchers=watchers,
        rate=rate,
        duration=duration,
        events=events,
        write_rate=write_rate,
        expected=expected,
        delivered=len(ordered),
        lag_p50=percentile(ordered, 0.5, total=total),
        lag_p99=percentile(ordered, 0.99, total=total),
        lag_max=percentile(ordered, 1.0, total=total),
        evicted=evicted,
        closed=sum(s["closed_by_server"] for s in summaries),
        failed=failed,
        client_procs=procs_n,
        client_cpu_s=sum(s["cpu_s"] for s in summaries),
        server_cpu_s=cpu1 - cpu0,
        sim_cpu_s=sim1 - sim0,
        wall_s=wall1 - wall0,
        machine_busy_s=busy1 - busy0,
        harness_cpu_s=harness1 - harness0,
    )


async def wait_watchers_gone(url: str, *, within: float = 15.0) -> None:
    """Until the daemon serves no watch (the previous point's watchers were let go)."""
    deadline = time.monotonic() + within
    pattern = re.compile(rb"^cacheproxy_watch_watchers\{[^}]*\} (\S+)", re.MULTILINE)
    while time.monotonic() < deadline:
        _, text = await fetch(url, "/metrics")
        if not any(float(v) for v in pattern.findall(text)):
            return
        await asyncio.sleep(0.1)
