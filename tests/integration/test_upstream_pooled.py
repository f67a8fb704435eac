"""The daemon's upstream client over the forwarding connections (cacheproxy/upstream/pooled.py):
its answers, timeouts and failures reach the callers as they did through httpx's own transport."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import pytest

from cacheproxy.errors import TransportError, UpstreamTimeout
from cacheproxy.upstream import UpstreamConfig, build_client
from cacheproxy.upstream.apierrors import transport_error
from cacheproxy.upstream.config import TokenSource
from cacheproxy.upstream.pooled import PooledTransport

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _head(reader: asyncio.StreamReader) -> bytes:
    return await reader.readuntil(b"\r\n\r\n")


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[Handler], Awaitable[str]]]:
    servers: list[asyncio.Server] = []
    handling: set[asyncio.Task[None]] = set()

    async def start(handler: Handler) -> str:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            assert task is not None
            handling.add(task)
            try:
                await handler(reader, writer)
            finally:
                writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        servers.append(server)
        return f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"

    yield start
    for server in servers:
        server.close()
    for task in handling:
        task.cancel()
    await asyncio.gather(*handling, return_exceptions=True)
    for server in servers:
        await server.wait_closed()


async def test_the_client_uses_it_and_an_answer_arrives_chunk_by_chunk(
    serve: Callable[[Handler], Awaitable[str]],
) -> None:
    heads: list[bytes] = []
    release = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        heads.append(await _head(reader))
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nfirst\r\n")
        await writer.drain()
        await release.wait()
        writer.write(b"6\r\nsecond\r\n0\r\n\r\n")
        await writer.drain()

    url = await serve(handler)
    async with build_client(
        UpstreamConfig(server=url, token_source=TokenSource(token="t0k"))
    ) as client:
        assert isinstance(client._transport, PooledTransport)
        async with client.stream("GET", "/api/v1/pods", params={"watch": "1"}) as response:
            chunks = response.aiter_bytes()
            assert await anext(chunks) == b"first"  # before the rest was even sent
            release.set()
            assert [chunk async for chunk in chunks] == [b"second"]
        assert response.extensions["network_stream"].get_extra_info("client_addr")
    [head] = heads
    lines = head.lower().split(b"\r\n")
    assert lines[0] == b"get /api/v1/pods?watch=1 http/1.1"
    assert b"authorization: bearer t0k" in lines
    assert sum(line.startswith(b"host:") for line in lines) == 1


async def test_a_silence_past_the_read_timeout_is_an_upstream_timeout(
    serve: Callable[[Handler], Awaitable[str]],
) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _head(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nsome")
        await writer.drain()
        await asyncio.sleep(30)

    url = await serve(handler)
    async with build_client(UpstreamConfig(server=url)) as client:
        with pytest.raises(httpx.ReadTimeout) as caught:
            await client.get("/api/v1/pods", timeout=httpx.Timeout(5.0, read=0.2))
    error = transport_error(caught.value)
    assert isinstance(error, UpstreamTimeout)
    assert "sent nothing for 0.2 s" in str(error)


async def test_a_refused_connection_is_worded_and_flagged_as_through_httpx() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed at once: nothing listens there
    async with build_client(UpstreamConfig(server=f"http://127.0.0.1:{port}")) as client:
        with pytest.raises(httpx.ConnectError) as caught:
            await client.get("/api/v1/pods")
    error = transport_error(caught.value)
    assert isinstance(error, TransportError)
    assert error.connection_refused
    assert "refused (is the API server running?)" in str(error)


async def test_a_connection_broken_mid_answer_is_a_read_error(
    serve: Callable[[Handler], Awaitable[str]],
) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _head(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nsome")
        await writer.drain()
        writer.transport.abort()

    url = await serve(handler)
    async with build_client(UpstreamConfig(server=url)) as client:
        with pytest.raises(httpx.ReadError) as caught:
            await client.get("/api/v1/pods")
    assert "mid-answer" in str(transport_error(caught.value))
