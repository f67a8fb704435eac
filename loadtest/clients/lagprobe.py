"""Event delivery lag through a daemon in front of a real API server, against the API server's own.

:func:`measure_lag` writes to the API server at a steady rate — ConfigMaps created, then
merge-patched, and one write in five a merge patch of a pod's annotation — and, for each write,
times from its HTTP response (read in this process) to:

- **watch**: its event (same object, same resourceVersion) read on a watch through the daemon
  (``/api/v1/{configmaps,pods}?watch=1``, from the daemon's current resourceVersion);
- **get**: a GET of the object through the daemon first answering that resourceVersion or a newer
  one (polled every ``poll_interval`` on keep-alive connections, starting at the response);
- **direct**: its event read on the same watch opened directly on the API server (the baseline:
  what any watcher of the API server sees).

Both watches are read by the same client code (httpx over HTTP/1.1, a connection each, lines
timed when their chunk arrives), so the two differ only by the daemon. Everything runs on one
event loop: the clocks are the same ``time.perf_counter``. A write whose event or GET did not
come within ``deadline`` seconds counts as not seen (an infinite lag in the percentiles). A lag
can be slightly negative when an event is read before the write's own response.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson

from cacheproxy.envtest import Cluster
from loadtest.clients.fanout import percentile
from loadtest.clients.httpclient import Connection, open_connection
from loadtest.harness.processes import cpu_seconds

__all__ = ["SOURCES", "LagRun", "LagStats", "lag_stats", "measure_lag"]

SOURCES = ("watch", "get", "direct")
"""The three timings of a write, in report order; ``direct`` is the baseline."""
_WATCHED = ("configmaps", "pods")
_MERGE = {"Content-Type": "application/merge-patch+json"}
_WATCH_TIMEOUT = httpx.Timeout(10.0, read=None)
_CACHE_RV = {"resourceVersion": "0", "fieldSelector": "metadata.name=lagprobe-none"}

Key = tuple[str, str, str, int]
"""(resource, namespace, name, resourceVersion) of one written version of an object."""


@dataclass(frozen=True, slots=True)
class LagStats:
    """Lags of ``writes`` writes, of which ``seen`` within the deadline (seconds)."""

    writes: int
    seen: int
    p50: float
    p99: float
    max: float

    @property
    def missed(self) -> int:
        return self.writes - self.seen


def lag_stats(lags: Sequence[float | None]) -> LagStats:
    """Percentiles of ``lags`` where None (not seen) counts as infinite."""
    seen = sorted(x for x in lags if x is not None)
    return LagStats(
        writes=len(lags),
        seen=len(seen),
        p50=percentile(seen, 0.5, total=len(lags)),
        p99=percentile(seen, 0.99, total=len(lags)),
        max=(seen[-1] if len(seen) == len(lags) else math.inf) if lags else math.nan,
    )


@dataclass(frozen=True, slots=True)
class LagRun:
    """One lag measurement: the stats of each source and the raw lags (write order)."""

    transport: str
    writes: int
    by_verb: dict[str, int]
    write_rate: float
    """Writes/s achieved."""
    stats: dict[str, LagStats]
    daemon_cpu_s: float
    apiserver_cpu_s: float
    polls: int
    """GET requests the pollers made."""
    added: dict[str, LagStats]
    """Per write, a daemon path's lag minus the direct watch's (``watch`` and ``get``; writes the
    direct watch did not see are left out)."""
    errors: list[str]
    lags: dict[str, list[float | None]] = field(repr=False)


@dataclass(frozen=True, slots=True)
class _Write:
    key: Key
    verb: str
    at: float


class _Probe:
    def __init__(
        self,
        daemon_url: str,
        *,
        pods: Sequence[tuple[str, str]],
        namespaces: Sequence[str],
        prefix: str,
        deadline: float,
        poll_interval: float,
    ) -> None:
        self.daemon_url = daemon_url
        self.pods = pods
        self.namespaces = namespaces
        self.prefix = prefix
        self.deadline = deadline
        self.poll_interval = poll_interval
        self.arrivals: dict[str, dict[Key, float]] = {"watch": {}, "direct": {}}
        self.got: dict[int, float] = {}
        self.polls = 0
        self.errors: list[str] = []
        """What went wrong with a watch (an ERROR event, an early end)."""
        self.changed = asyncio.Event()
        """Set whenever an arrival or a GET is recorded."""
        self._idle: list[Connection] = []

    # ------------------------------------------------------------------ watches

    async def watch(
        self, source: str, client: httpx.AsyncClient, resource: str, opened: asyncio.Event
    ) -> None:
        # The resourceVersion of the server's cache (RV "0"; an empty selection keeps it small):
        # a watch from a newer one (a quorum list's) would wait for a quiet resource's cache.
        response = await client.get(f"/api/v1/{resource}", params=_CACHE_RV)
        response.raise_for_status()
        rv = orjson.loads(response.content)["metadata"]["resourceVersion"]
        path = f"/api/v1/{resource}?watch=1&resourceVersion={rv}"
        arrivals = self.arrivals[source]
        async with client.stream("GET", path, timeout=_WATCH_TIMEOUT) as response:
            if response.status_code != 200:
                raise RuntimeError(f"{source} watch of {resource}: {response.status_code}")
            opened.set()
            partial = b""
            async for chunk in response.aiter_bytes():
                now = time.perf_counter()
                *lines, partial = (partial + chunk).split(b"\n")
                for line in lines:
                    event = orjson.loads(line)
                    if event["type"] == "ERROR":
                        self.errors.append(f"{source} watch of {resource}: {event['object']}")
                    elif event["type"] in ("ADDED", "MODIFIED", "DELETED"):
                        meta = event["object"]["metadata"]
                        key = (
                            resource,
                            meta["namespace"],
                            meta["name"],
                            int(meta["resourceVersion"]),
                        )
                        arrivals.setdefault(key, now)
                self.changed.set()
        self.errors.append(f"{source} watch of {resource}: the server ended it")

    # ------------------------------------------------------------------ writes

    async def write(self, client: httpx.AsyncClient, k: int, *, prefix: str = "") -> _Write:
        """Write ``k`` of a cycle of five: ConfigMap creates (0, 2), merge patches of the
        ConfigMap created just before (1, 3), a merge patch of a pod's annotation (4)."""
        slot, prefix = k % 5, prefix or self.prefix
        if slot == 4:
            resource, verb = "pods", "patch pod"
            namespace, name = self.pods[(k // 5) % len(self.pods)]
            path = f"/api/v1/namespaces/{namespace}/pods/{name}"
            # A value never written before: a patch that changes nothing makes no event.
            body: dict[str, Any] = {"metadata": {"annotations": {"bench/seq": f"{prefix}-{k}"}}}
            request = client.patch(path, content=orjson.dumps(body), headers=_MERGE)
        else:
            created = k - slot % 2
            resource = "configmaps"
            namespace = self.namespaces[created % len(self.namespaces)]
            name = f"{prefix}-{created}"
            path = f"/api/v1/namespaces/{namespace}/configmaps"
            data = {"seq": str(k), "settings": f"key-{k}: " + "x" * 200}
            if slot % 2 == 0:
                verb = "create configmap"
                body = {"metadata": {"name": name}, "data": data}
                request = client.post(path, content=orjson.dumps(body))
            else:
                verb = "patch configmap"
                body = {"data": data}
                request = client.patch(f"{path}/{name}", content=orjson.dumps(body), headers=_MERGE)
        response = await request
        at = time.perf_counter()
        if response.status_code not in (200, 201):
            raise RuntimeError(f"{verb} {namespace}/{name}: {response.status_code} {response.text}")
        rv = int(orjson.loads(response.content)["metadata"]["resourceVersion"])
        return _Write((resource, namespace, name, rv), verb, at)

    # ------------------------------------------------------------------ polls

    async def poll(self, index: int, write: _Write) -> None:
        """GET the object through the daemon until it has ``write``'s version or newer."""
        resource, namespace, name, rv = write.key
        target = f"/api/v1/namespaces/{namespace}/{resource}/{name}"
        conn = await self._connection()
        try:
            while time.perf_counter() - write.at < self.deadline:
                try:
                    response = await conn.request(target, keep_body=True)
                except (ConnectionError, RuntimeError):
                    # The server closed it (an idle keep-alive connection reaped): another one.
                    conn.close()
                    conn = await self._connection()
                    continue
                self.polls += 1
                if response.status == 200 and response.body:
                    have = int(orjson.loads(response.body)["metadata"]["resourceVersion"])
                    if have >= rv:
                        self.got[index] = time.perf_counter()
                        self.changed.set()
                        return
                await asyncio.sleep(self.poll_interval)
        finally:
            self._idle.append(conn)

    async def _connection(self) -> Connection:
        """A pooled keep-alive connection still open, else a new one."""
        while self._idle:
            conn = self._idle.pop()
            if conn.transport is not None and not conn.transport.is_closing():
                return conn
        return await open_connection(self.daemon_url)

    def close(self) -> None:
        for conn in self._idle:
            conn.close()
        self._idle.clear()

    def seen_everywhere(self, index: int, write: _Write, *, polled: bool = True) -> bool:
        if polled and index not in self.got:
            return False
        return all(write.key in a for a in self.arrivals.values())

    async def settle(self, writes: Sequence[_Write], until: float, *, polled: bool = True) -> bool:
        """Wait until every write was seen everywhere (True) or ``until`` (``perf_counter``)."""
        pending = list(enumerate(writes))
        while True:
            pending = [(i, w) for i, w in pending if not self.seen_everywhere(i, w, polled=polled)]
            remaining = until - time.perf_counter()
            if not pending or remaining <= 0:
                return not pending
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):
                    await self.changed.wait()

    def lags(self, writes: Sequence[_Write]) -> dict[str, list[float | None]]:
        out: dict[str, list[float | None]] = {s: [] for s in SOURCES}
        for i, w in enumerate(writes):
            times = {
                "watch": self.arrivals["watch"].get(w.key),
                "get": self.got.get(i),
                "direct": self.arrivals["direct"].get(w.key),
            }
            for source, t in times.items():
                lag = None if t is None else t - w.at
                out[source].append(lag if lag is not None and lag <= self.deadline else None)
        return out


async def measure_lag(
    cluster: Cluster,
    daemon_url: str,
    *,
    transport: str,
    pods: Sequence[tuple[str, str]],
    namespaces: Sequence[str],
    writes: int,
    rate: float,
    daemon_pid: int,
    deadline: float = 5.0,
    poll_interval: float = 0.002,
    progress: Callable[[str], None] = lambda _: None,
) -> LagRun:
    """``writes`` writes at ``rate``/s, each timed three ways (see the module docstring)."""
    probe = _Probe(
        daemon_url,
        pods=pods,
        namespaces=namespaces,
        prefix=f"lag-{transport.replace('/', '').replace('.', '').lower()}",
        deadline=deadline,
        poll_interval=poll_interval,
    )
    async with (
        httpx.AsyncClient(base_url=daemon_url, timeout=30.0) as through,
        cluster.async_client() as direct,
        cluster.async_client() as writer,
        asyncio.TaskGroup() as group,
    ):
        streams = [(s, c, r) for s, c in (("watch", through), ("direct", direct)) for r in _WATCHED]
        opened = [asyncio.Event() for _ in streams]
        watchers = [
            group.create_task(probe.watch(*stream, event))
            for stream, event in zip(streams, opened, strict=True)
        ]
        try:
            async with asyncio.timeout(30):
                await asyncio.gather(*(e.wait() for e in opened))
            if not await _warm_up(probe, writer, deadline):
                progress(f"{transport}: the warm-up writes were not seen on every watch")
            progress(f"{transport}: {writes} writes at {rate:g}/s")
            done: list[_Write] = []
            pollers: list[asyncio.Task[None]] = []
            cpu = (cpu_seconds(daemon_pid), cpu_seconds(cluster.apiserver_pid))
            started = time.perf_counter()
            for k in range(writes):
                delay = started + k / rate - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                done.append(await probe.write(writer, k))
                pollers.append(group.create_task(probe.poll(k, done[-1])))
            elapsed = time.perf_counter() - started
            await probe.settle(done, done[-1].at + deadline)
            cpu_after = (cpu_seconds(daemon_pid), cpu_seconds(cluster.apiserver_pid))
            for task in pollers:
                task.cancel()
        finally:
            for task in watchers:
                task.cancel()
    probe.close()
    lags = probe.lags(done)
    added = {
        source: lag_stats(
            [
                None if x is None else x - c
                for x, c in zip(lags[source], lags["direct"], strict=True)
                if c is not None
            ]
        )
        for source in ("watch", "get")
    }
    for error in probe.errors:
        progress(f"{transport}: {error}")
    return LagRun(
        transport=transport,
        writes=len(done),
        by_verb=dict(Counter(w.verb for w in done)),
        write_rate=len(done) / elapsed if elapsed > 0 else math.nan,
        stats={s: lag_stats(lags[s]) for s in SOURCES},
        daemon_cpu_s=cpu_after[0] - cpu[0],
        apiserver_cpu_s=cpu_after[1] - cpu[1],
        polls=probe.polls,
        added=added,
        errors=probe.errors,
        lags=lags,
    )


async def _warm_up(probe: _Probe, writer: httpx.AsyncClient, within: float) -> bool:
    """One write of each kind before anything is timed (connections warm, watches surely
    started); whether both were seen on every watch within ``within`` seconds."""
    writes = [await probe.write(writer, k, prefix=f"{probe.prefix}-warm-up") for k in (0, 4)]
    return await probe.settle(writes, time.perf_counter() + within, polled=False)
