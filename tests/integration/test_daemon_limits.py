"""Limits against hostile or careless clients: every one answers a Status and is counted."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from cacheproxy.daemon.config import AuthMode, AuthSettings, ServerLimits
from cacheproxy.sim import SimServer
from tests.integration.daemon_support import daemon_for


async def test_requests_beyond_max_in_flight_get_429_with_retry_after(
    demo_server: SimServer,
) -> None:
    async with (
        daemon_for(demo_server.url, limits=ServerLimits(max_in_flight=1)) as daemon,
        httpx.AsyncClient(base_url=daemon.url, timeout=10) as c,
    ):
        # A read at a resourceVersion the cache has not reached waits (up to 3 s) in flight.
        future_rv = daemon.server.resources[next(iter(daemon.server.resources))].resource_version  # type: ignore[union-attr]
        slow = asyncio.create_task(
            c.get("/api/v1/pods", params={"resourceVersion": str(future_rv + 1000), "resourceVersionMatch": "NotOlderThan"})
        )  # fmt: skip
        for _ in range(100):
            if daemon.server.in_flight:  # type: ignore[union-attr]
                break
            await asyncio.sleep(0.01)
        refused = await c.get("/api/v1/pods")
        assert refused.status_code == 429
        assert refused.headers["retry-after"] == "1"
        assert refused.json()["message"] == "Too many requests, please try again later."
        # Health checks, monitoring and watches are not counted.
        assert (await c.get("/healthz")).status_code == 200
        assert (await c.get("/status")).status_code == 200
        assert (await c.get("/metrics")).status_code == 200
        async with c.stream("GET", "/api/v1/pods", params={"watch": "1"}) as watch:
            assert watch.status_code == 200
        assert (await slow).status_code == 504
        assert (await c.get("/api/v1/pods")).status_code == 200
        metrics = (await c.get("/metrics")).text
    assert 'cacheproxy_http_rejected_total{reason="in_flight"} 1.0' in metrics


async def test_watches_per_user_are_limited(demo_server: SimServer, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.csv"
    tokens.write_text("a-token,alice,1,system:masters\nb-token,bob,2,system:masters\n")
    async with (
        daemon_for(
            demo_server.url,
            auth=AuthSettings(mode=AuthMode.TOKEN, token_file=tokens),
            limits=ServerLimits(max_watchers_per_user=2),
        ) as daemon,
        httpx.AsyncClient(base_url=daemon.url, timeout=10) as c,
    ):
        alice = {"Authorization": "Bearer a-token"}
        streams = [
            await c.send(c.build_request("GET", "/api/v1/pods?watch=1", headers=alice), stream=True)
            for _ in range(2)
        ]
        assert [s.status_code for s in streams] == [200, 200]
        third = await c.get("/api/v1/pods?watch=1", headers=alice)
        assert third.status_code == 429
        assert third.json()["message"] == "too many watches by this user (limit 2)"
        bob = await c.send(
            c.build_request("GET", "/api/v1/pods?watch=1", headers={"Authorization": "Bearer b-token"}),
            stream=True,
        )  # fmt: skip
        assert bob.status_code == 200
        for s in [*streams, bob]:
            await s.aclose()
        for _ in range(100):
            if not daemon.server.watchers_by_user:  # type: ignore[union-attr]
                break
            await asyncio.sleep(0.02)
        assert daemon.server.watchers_by_user == {}  # type: ignore[union-attr]
        again = await c.send(
            c.build_request("GET", "/api/v1/pods?watch=1", headers=alice), stream=True
        )
        assert again.status_code == 200
        await again.aclose()


async def test_oversized_urls_and_headers_and_bodies_on_reads_are_refused(
    demo_server: SimServer,
) -> None:
    limits = ServerLimits(max_url_bytes=1024, max_header_bytes=4096)
    async with (
        daemon_for(demo_server.url, limits=limits) as daemon,
        httpx.AsyncClient(base_url=daemon.url, timeout=10) as c,
    ):
        long_url = await c.get("/api/v1/pods", params={"labelSelector": "a=" + "x" * 2000})
        assert long_url.status_code == 414
        assert long_url.json()["reason"] == "RequestURITooLong"
        big_headers = await c.get("/api/v1/pods", headers={"X-Junk": "y" * 5000})
        assert big_headers.status_code == 431
        assert big_headers.json()["kind"] == "Status"
        body = await c.request("GET", "/api/v1/pods", content=b'{"a": 1}')
        assert body.status_code == 400
        assert body.json()["message"] == "a request body is not allowed on a read"
        assert (await c.get("/api/v1/pods")).status_code == 200
        metrics = (await c.get("/metrics")).text
    for reason in ("url_too_long", "headers_too_large", "bad_request"):
        assert f'cacheproxy_http_rejected_total{{reason="{reason}"}} 1.0' in metrics


async def test_a_client_that_sends_headers_too_slowly_is_disconnected(
    demo_server: SimServer,
) -> None:
    limits = ServerLimits(header_timeout_seconds=0.3)
    async with daemon_for(demo_server.url, limits=limits) as daemon:
        host, port = daemon.url.removeprefix("http://").rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(b"GET /api/v1/pods HTTP/1.1\r\nHost: x\r\n")  # and never the blank line
        await writer.drain()
        assert await asyncio.wait_for(reader.read(), 5) == b""  # closed by the daemon
        writer.close()
        # An idle connection that sends nothing at all is closed as well; a prompt one is served.
        reader, writer = await asyncio.open_connection(host, int(port))
        assert await asyncio.wait_for(reader.read(), 5) == b""
        writer.close()
        async with httpx.AsyncClient(base_url=daemon.url, timeout=10) as c:
            assert (await c.get("/api/v1/pods")).status_code == 200
            metrics = (await c.get("/metrics")).text
    assert 'cacheproxy_http_rejected_total{reason="header_timeout"} 2.0' in metrics
