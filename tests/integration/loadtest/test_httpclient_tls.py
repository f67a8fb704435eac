"""The benchmark's lean HTTP/1.1 client speaks TLS and sends extra headers when asked, and only then.

A small server on 127.0.0.1 (asyncio streams, a throwaway PKI) records each request head and
answers keep-alive responses in both framings — chunked, split across writes, and
``Content-Length`` — so the client's parsing is exercised through the TLS transport too.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from cacheproxy.sim.testpki import generate_pki, ssl_server_context
from loadtest.clients.httpclient import fetch, open_connection

BODY = b'{"kind":"PodList","metadata":{"continue":"abc"},"items":[' + b"x" * 50_000 + b"]}"


@dataclass
class _Server:
    url: str
    heads: list[bytes] = field(default_factory=list)


async def _answer(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, seen: _Server
) -> None:
    try:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError:
                return
            seen.heads.append(head)
            if len(seen.heads) % 2:  # chunked, in several chunks and writes
                writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
                for at in range(0, len(BODY), 7_000):
                    piece = BODY[at : at + 7_000]
                    writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                    await writer.drain()
                writer.write(b"0\r\n\r\n")
            else:
                writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: %d\r\n\r\n" % len(BODY))
                writer.write(BODY)
            await writer.drain()
    finally:
        writer.close()


@pytest.fixture
def tls(tmp_path: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """(server context, client context trusting its CA)."""
    pki = generate_pki(tmp_path / "pki", hosts=("127.0.0.1",))
    return ssl_server_context(pki), ssl.create_default_context(cafile=str(pki.ca_cert))


@contextlib.asynccontextmanager
async def _serve(server_ssl: ssl.SSLContext | None) -> AsyncIterator[_Server]:
    seen = _Server(url="")
    server = await asyncio.start_server(
        lambda r, w: _answer(r, w, seen), "127.0.0.1", 0, ssl=server_ssl
    )
    port = server.sockets[0].getsockname()[1]
    seen.url = f"{'https' if server_ssl else 'http'}://127.0.0.1:{port}"
    async with server:
        yield seen
        server.close()
        await server.wait_closed()


@pytest.fixture
async def tls_server(tls: tuple[ssl.SSLContext, ssl.SSLContext]) -> AsyncIterator[_Server]:
    async with _serve(tls[0]) as seen:
        yield seen


@pytest.fixture
async def plain_server() -> AsyncIterator[_Server]:
    async with _serve(None) as seen:
        yield seen


async def test_a_tls_connection_sends_its_headers_with_every_request_and_reads_both_framings(
    tls_server: _Server, tls: tuple[ssl.SSLContext, ssl.SSLContext]
) -> None:
    conn = await open_connection(
        tls_server.url + "/ignored", ssl=tls[1], headers={"Authorization": "Bearer t0ken"}
    )
    try:
        chunked = await conn.request("/api/v1/pods?limit=500", keep_body=True)
        sized = await conn.request("/api/v1/pods/missing")
    finally:
        conn.close()
    assert (chunked.status, chunked.length, chunked.body) == (200, len(BODY), BODY)
    assert chunked.head == BODY[:4096]
    assert (sized.status, sized.length, sized.body) == (404, len(BODY), None)
    assert [h.split(b"\r\n", 1)[0] for h in tls_server.heads] == [
        b"GET /api/v1/pods?limit=500 HTTP/1.1",
        b"GET /api/v1/pods/missing HTTP/1.1",
    ]
    assert all(b"\r\nAuthorization: Bearer t0ken\r\n" in h for h in tls_server.heads)


async def test_fetch_over_tls_returns_the_whole_body(
    tls_server: _Server, tls: tuple[ssl.SSLContext, ssl.SSLContext]
) -> None:
    assert await fetch(tls_server.url, "/x", ssl=tls[1], headers={"X-Test": "1"}) == (200, BODY)
    assert b"\r\nX-Test: 1\r\n" in tls_server.heads[0]


async def test_a_plain_connection_sends_what_it_always_sent(plain_server: _Server) -> None:
    assert await fetch(plain_server.url, "/api") == (200, BODY)
    assert plain_server.heads == [
        b"GET /api HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json\r\n\r\n"
    ]


async def test_an_https_url_without_a_tls_context_is_refused() -> None:
    with pytest.raises(ValueError, match="SSL context"):
        await open_connection("https://127.0.0.1:1")


async def test_a_server_whose_certificate_is_not_trusted_is_refused(tls_server: _Server) -> None:
    with pytest.raises(ssl.SSLCertVerificationError):
        await open_connection(tls_server.url, ssl=ssl.create_default_context())
