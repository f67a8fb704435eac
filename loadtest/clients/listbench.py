"""List and get latency: the request scenarios and the closed-loop driver that times them.

A :class:`Scenario` names what a client asks (:func:`scenarios`): the full pod list, one
namespace's pods, a label-selected list (``app=app-K``), an index field-selected list
(``spec.nodeName=node-K``), a single GET, and a ``limit=500`` page walk following ``continue``
tokens (one "request" = the whole walk). Each request ``i`` varies K (and the GET's pod) so no
answer is the same twice in a row.

:func:`measure` runs one scenario against one server with ``concurrency`` keep-alive connections
in a closed loop (each sends its next request when the previous answer's last byte arrived) for
at least ``min_requests`` requests and ``min_seconds``, at most ``max_seconds`` (a request in
flight then finishes). One untimed request first warms the path. :func:`verify` fetches one
answer of each scenario whole and counts its items, so every server is checked to answer the
same thing before it is timed.
"""

from __future__ import annotations

import asyncio
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import quote

import orjson

from loadtest.clients.httpclient import Connection, continue_token, open_connection

__all__ = ["PAGE", "Measurement", "Scenario", "measure", "scenarios", "verify"]

PAGE = 500
_PARSE_LIMIT = 32 << 20


@dataclass(frozen=True, slots=True)
class Scenario:
    key: str
    title: str
    target: Callable[[int], str]
    """The request target of request ``i``."""
    walk: bool = False
    """A ``limit`` page walk: one measured request is the whole walk."""


def scenarios(
    *, namespaces: int, apps: int, nodes: int, pods: Sequence[tuple[str, str]]
) -> list[Scenario]:
    """The six scenarios over a demo cluster of that shape; ``pods`` are (namespace, name)."""
    return [
        Scenario("full", "full list", lambda i: "/api/v1/pods"),
        Scenario(
            "namespace",
            "namespace list",
            lambda i: f"/api/v1/namespaces/ns-{i % namespaces}/pods",
        ),
        Scenario(
            "label",
            "label list (app=app-K)",
            lambda i: f"/api/v1/pods?labelSelector=app%3Dapp-{i % apps}",
        ),
        Scenario(
            "field",
            "index field list (spec.nodeName=node-K)",
            lambda i: f"/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-{i % nodes}",
        ),
        Scenario(
            "get",
            "single GET",
            lambda i: "/api/v1/namespaces/{}/pods/{}".format(*pods[(i * 7919) % len(pods)]),
        ),
        Scenario("pages", f"limit={PAGE} page walk", lambda i: f"/api/v1/pods?limit={PAGE}", True),
    ]


@dataclass(frozen=True, slots=True)
class Measurement:
    server: str
    scenario: str
    concurrency: int
    requests: int
    errors: int
    wall_s: float
    latencies: tuple[float, ...]
    bytes_per_request: float
    pages_per_request: float = 1.0
    client_cpu_s: float = 0.0
    server_cpu_s: float = float("nan")

    @property
    def rate(self) -> float:
        """Requests (walks) per second."""
        return self.requests / self.wall_s if self.wall_s > 0 else float("nan")

    def quantile(self, q: float) -> float:
        """Nearest-rank quantile of the latencies."""
        if not self.latencies:
            return float("nan")
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]

    @property
    def p50(self) -> float:
        return statistics.median(self.latencies) if self.latencies else float("nan")

    @property
    def p99(self) -> float:
        return self.quantile(0.99)


async def _walk(conn: Connection, first: str) -> tuple[int, float, int, int]:
    """A page walk from ``first``: (status, seconds, bytes, pages)."""
    started = time.perf_counter()
    target, size, pages = first, 0, 0
    while True:
        response = await conn.request(target)
        size += response.length
        pages += 1
        if response.status != 200:
            return response.status, time.perf_counter() - started, size, pages
        token = continue_token(response.head)
        if not token:
            return 200, time.perf_counter() - started, size, pages
        target = f"{first}&continue={quote(token, safe='')}"


async def measure(
    url: str,
    scenario: Scenario,
    *,
    server: str,
    concurrency: int,
    min_requests: int,
    min_seconds: float,
    max_seconds: float,
    server_cpu: Callable[[], float] = lambda: float("nan"),
) -> Measurement:
    """One scenario against ``url`` (see the module docstring)."""
    conns = [await open_connection(url) for _ in range(concurrency)]
    try:
        await _one(conns[0], scenario, 0)  # warm-up, untimed
        latencies: list[float] = []
        sizes: list[int] = []
        pages: list[int] = []
        errors = 0
        counter = iter(range(1, 1 << 62))
        cpu0, server0 = time.process_time(), server_cpu()
        started = time.perf_counter()

        def more() -> bool:
            elapsed = time.perf_counter() - started
            done = len(latencies) + errors
            return elapsed < max_seconds and (done < min_requests or elapsed < min_seconds)

        async def worker(conn: Connection) -> None:
            nonlocal errors
            while more():
                status, seconds, size, n = await _one(conn, scenario, next(counter))
                if status == 200:
                    latencies.append(seconds)
                    sizes.append(size)
                    pages.append(n)
                else:
                    errors += 1

        await asyncio.gather(*(worker(c) for c in conns))
        wall = time.perf_counter() - started
        client_cpu, server_cpu_s = time.process_time() - cpu0, server_cpu() - server0
    finally:
        for conn in conns:
            conn.close()
    return Measurement(
        server=server,
        scenario=scenario.key,
        concurrency=concurrency,
        requests=len(latencies),
        errors=errors,
        wall_s=wall,
        latencies=tuple(latencies),
        bytes_per_request=statistics.fmean(sizes) if sizes else float("nan"),
        pages_per_request=statistics.fmean(pages) if pages else float("nan"),
        client_cpu_s=client_cpu,
        server_cpu_s=server_cpu_s,
    )


async def _one(conn: Connection, scenario: Scenario, i: int) -> tuple[int, float, int, int]:
    if scenario.walk:
        return await _walk(conn, scenario.target(i))
    response = await conn.request(scenario.target(i))
    return response.status, response.seconds, response.length, 1


async def verify(url: str, scenario: Scenario, i: int = 0) -> tuple[int, bytes]:
    """(items, body of the first page) of request ``i`` fetched whole; a walk counts every
    page's items. -1 items when a response was not 200."""
    conn = await open_connection(url)
    try:
        first = scenario.target(i)
        target, items, body0 = first, 0, b""
        while True:
            response = await conn.request(target, keep_body=True)
            if response.status != 200 or response.body is None:
                return -1, response.body or b""
            body0 = body0 or response.body
            if len(response.body) > _PARSE_LIMIT:
                # Too big to parse in this process (a 100 000-pod list would take ~5 GB): count
                # the separators between items instead (every server writes them alike).
                items += response.body.count(b',{"metadata":') + 1
                token = continue_token(response.head) if scenario.walk else None
            else:
                doc = orjson.loads(response.body)
                items += len(doc["items"]) if "items" in doc else 1
                token = (doc.get("metadata") or {}).get("continue") if scenario.walk else None
            if not token:
                return items, body0
            target = f"{first}&continue={quote(token, safe='')}"
    finally:
        conn.close()
