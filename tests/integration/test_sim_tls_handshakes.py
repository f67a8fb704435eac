"""The throwaway PKI in real TLS handshakes on loopback: a server on 127.0.0.1 learns who each
client certificate names, and refuses what it must (the certificates themselves are checked in
tests/unit/sim/test_tls.py)."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import pytest

from cacheproxy.serving import user_from_peer_cert
from cacheproxy.sim.testpki import TestPKI, generate_pki, ssl_server_context


@pytest.fixture
def pki(tmp_path: Path) -> TestPKI:
    return generate_pki(tmp_path / "pki")


def _client_context(pki: TestPKI, cert: tuple[Path, Path] | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=pki.ca_cert)
    if cert is not None:
        ctx.load_cert_chain(*cert)
    return ctx


async def _identity_server(
    ctx: ssl.SSLContext,
) -> tuple[asyncio.Server, int, list[tuple[str, tuple[str, ...]] | None]]:
    """A server on 127.0.0.1:0 that records and answers who the peer certificate says it is."""
    seen: list[tuple[str, tuple[str, ...]] | None] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            ssl_object = writer.get_extra_info("ssl_object")
            identity = user_from_peer_cert(ssl_object.getpeercert())
            seen.append(identity)
            writer.write(repr(identity).encode() + b"\n")
            await writer.drain()
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=ctx)
    port = server.sockets[0].getsockname()[1]
    return server, port, seen


async def _ask(port: int, ctx: ssl.SSLContext, server_hostname: str = "127.0.0.1") -> bytes:
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=ctx, server_hostname=server_hostname
    )
    try:
        answer = await reader.readline()
    finally:
        writer.close()
        await writer.wait_closed()
    if not answer:  # the server hung up instead of answering: it refused us after the handshake
        raise ConnectionResetError("closed without an answer")
    return answer


async def test_handshake_gives_the_server_the_client_cert_identity(pki: TestPKI) -> None:
    server, port, seen = await _identity_server(ssl_server_context(pki))
    async with server:
        client = _client_context(pki, pki.client_cert("alice", ["devs", "ops"]))
        answer = await _ask(port, client)
        answer_by_name = await _ask(port, client, server_hostname="localhost")

    assert seen == [("alice", ("devs", "ops"))] * 2
    assert answer == answer_by_name == b"('alice', ('devs', 'ops'))\n"


async def test_client_without_a_cert_connects_as_nobody_unless_certs_are_required(
    pki: TestPKI,
) -> None:
    server, port, seen = await _identity_server(ssl_server_context(pki))
    async with server:
        assert await _ask(port, _client_context(pki)) == b"None\n"
    assert seen == [None]


async def test_required_client_cert_rejects_a_client_without_one(pki: TestPKI) -> None:
    server, port, seen = await _identity_server(ssl_server_context(pki, require_client_cert=True))
    async with server:
        # TLS 1.3 lets the client finish its handshake first; the refusal arrives on read.
        with pytest.raises((ssl.SSLError, ConnectionError)):
            await _ask(port, _client_context(pki))
        assert await _ask(port, _client_context(pki, pki.client_cert("carol"))) != b""
    assert seen == [("carol", ())]


async def test_client_not_trusting_the_ca_fails_verification(pki: TestPKI, tmp_path: Path) -> None:
    other = generate_pki(tmp_path / "other")
    server, port, seen = await _identity_server(ssl_server_context(pki))
    async with server:
        with pytest.raises(ssl.SSLCertVerificationError):
            await _ask(port, ssl.create_default_context(cafile=other.ca_cert))
        with pytest.raises(ssl.SSLCertVerificationError):
            await _ask(port, ssl.create_default_context())
    assert seen == []


async def test_server_refuses_a_client_cert_from_another_ca(pki: TestPKI, tmp_path: Path) -> None:
    other = generate_pki(tmp_path / "other")
    server, port, seen = await _identity_server(ssl_server_context(pki))
    async with server:
        with pytest.raises((ssl.SSLError, ConnectionError)):
            await _ask(port, _client_context(pki, other.client_cert("mallory")))
    assert seen == []
