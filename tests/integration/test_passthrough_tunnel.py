"""Connection upgrades through pass-through: a websocket client (as ``kubectl exec`` ≥ 1.30 and
the Python client's ``stream``) reaches a websocket server upstream through our serving protocol
and :class:`PassThrough`, with the protocol it asked for, its own credentials, and bytes both
ways; an upstream that refuses the switch is answered as upstream answered."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
import uvicorn
from websockets.asyncio.client import connect
from websockets.asyncio.server import ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import InvalidStatus
from websockets.http11 import Request as WsRequest
from websockets.http11 import Response as WsResponse
from websockets.typing import Subprotocol

from cacheproxy.errors import ApiError
from cacheproxy.server.admission import ServedRequest
from cacheproxy.server.passthrough import Forward, PassThrough
from cacheproxy.serving import UvicornRunner, send_status, serving_protocol
from cacheproxy.upstream import UpstreamConfig, build_forwarding_target

CHANNELS = Subprotocol("v5.channel.k8s.io")


@dataclass
class Upstream:
    """A websocket server standing in for the API server's exec endpoint: it records each
    handshake's headers, refuses a caller without a token, and echoes what it gets."""

    port: int = 0
    handshakes: list[dict[str, str]] = field(default_factory=list)

    def process_request(self, _: ServerConnection, request: WsRequest) -> WsResponse | None:
        self.handshakes.append({k.lower(): v for k, v in request.headers.raw_items()})
        if "authorization" not in {k.lower() for k in request.headers}:
            body = b'{"kind":"Status","code":403,"reason":"Forbidden"}'
            return WsResponse(403, "Forbidden", _headers(body), body)
        return None

    async def handler(self, connection: ServerConnection) -> None:
        async for message in connection:
            await connection.send(message.upper() if isinstance(message, str) else message[::-1])


def _headers(body: bytes) -> Headers:
    return Headers([("Content-Type", "application/json"), ("Content-Length", str(len(body)))])


@pytest.fixture
async def upstream() -> AsyncIterator[Upstream]:
    up = Upstream()
    async with serve(
        up.handler, "127.0.0.1", 0, subprotocols=[CHANNELS], process_request=up.process_request
    ) as server:
        up.port = next(iter(server.sockets)).getsockname()[1]
        yield up


@pytest.fixture
async def proxy_url(upstream: Upstream) -> AsyncIterator[str]:
    target = build_forwarding_target(UpstreamConfig(server=f"http://127.0.0.1:{upstream.port}"))
    passthrough = PassThrough(target)

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        req = ServedRequest(scope, receive)
        try:
            await passthrough.forward(
                req, send, Forward(verb="create", resource="pods/exec", long_running=True)
            )
        except ApiError as exc:
            await send_status(send, exc, started=req.started)

    config = uvicorn.Config(
        app,
        http=serving_protocol(header_timeout=10),
        lifespan="off",
        ws="none",
        log_level="warning",
    )
    runner = UvicornRunner(config, host="127.0.0.1", port=0, name="tunnel")
    await runner.start()
    try:
        yield f"ws://127.0.0.1:{runner.port}/api/v1/namespaces/ns-0/pods/p/exec?command=sh"
    finally:
        await runner.stop()
        await target.aclose()


async def test_a_websocket_passes_through_both_ways_with_the_callers_token(
    upstream: Upstream, proxy_url: str
) -> None:
    async with connect(
        proxy_url,
        subprotocols=[CHANNELS],
        additional_headers={"Authorization": "Bearer callers-own"},
        max_size=None,
    ) as ws:
        assert ws.subprotocol == CHANNELS
        await ws.send("hello")
        assert await asyncio.wait_for(ws.recv(), 10) == "HELLO"
        big = bytes(range(256)) * 4096  # 1 MiB: more than either side buffers
        await ws.send(big)
        assert await asyncio.wait_for(ws.recv(), 10) == big[::-1]
    [seen] = upstream.handshakes
    assert seen["authorization"] == "Bearer callers-own"
    assert seen["sec-websocket-protocol"] == CHANNELS
    assert seen["connection"] == "Upgrade" and seen["upgrade"] == "websocket"
    assert seen["x-forwarded-for"] == "127.0.0.1"


async def test_a_refused_switch_comes_back_as_upstream_answered_it(
    upstream: Upstream, proxy_url: str
) -> None:
    with pytest.raises(InvalidStatus) as refused:
        async with connect(proxy_url, subprotocols=[CHANNELS]):
            pass
    assert refused.value.response.status_code == 403
    assert b'"reason":"Forbidden"' in refused.value.response.body
    assert len(upstream.handshakes) == 1


async def test_a_plain_request_to_an_upgrade_endpoint_is_not_switched(
    upstream: Upstream, proxy_url: str
) -> None:
    # No Upgrade offer: forwarded as any request (the websocket server answers 426).
    async with httpx.AsyncClient() as client:
        answer = await client.get(
            proxy_url.replace("ws://", "http://"), headers={"Authorization": "Bearer t"}
        )
    assert answer.status_code == 426
