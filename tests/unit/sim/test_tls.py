"""The throwaway PKI: certificate contents on disk and real TLS handshakes on loopback."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import ssl
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from cacheproxy.serving import user_from_peer_cert
from cacheproxy.sim.tls import TestPKI, generate_pki, ssl_server_context


@pytest.fixture
def pki(tmp_path: Path) -> TestPKI:
    return generate_pki(tmp_path / "pki")


def _load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


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


def test_generated_files_are_pem_and_keys_are_private(pki: TestPKI) -> None:
    for path in (pki.ca_cert, pki.server_cert, pki.ca_key, pki.server_key):
        assert path.read_bytes().startswith(b"-----BEGIN ")
    for key in (pki.ca_key, pki.server_key, pki.client_cert("lowpriv")[1]):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600


def test_ca_is_a_ca_and_server_cert_names_every_host(tmp_path: Path) -> None:
    pki = generate_pki(tmp_path, hosts=("127.0.0.1", "localhost", "::1", "sim.example"))
    ca, server = _load(pki.ca_cert), _load(pki.server_cert)

    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    assert server.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    assert server.issuer == ca.subject
    san = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.IPAddress) == [
        ipaddress.ip_address("127.0.0.1"),
        ipaddress.ip_address("::1"),
    ]
    assert san.get_values_for_type(x509.DNSName) == ["localhost", "sim.example"]
    eku = server.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH]


def test_certificates_start_an_hour_back_and_last_a_year(pki: TestPKI) -> None:
    now = datetime.datetime.now(datetime.UTC)
    for path in (pki.ca_cert, pki.server_cert, pki.client_cert("u")[0]):
        cert = _load(path)
        start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
        assert now - datetime.timedelta(minutes=61) <= start <= now - datetime.timedelta(minutes=59)
        assert end - start == datetime.timedelta(days=365, hours=1)


def test_client_cert_carries_user_as_cn_and_groups_as_o(pki: TestPKI) -> None:
    cert_path, key_path = pki.client_cert("alice", ["devs", "system:masters"])
    cert = _load(cert_path)

    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "alice"
    orgs = [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    assert orgs == ["devs", "system:masters"]
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert cert_path.parent == pki.ca_cert.parent
    assert key_path.exists()


def test_client_certs_for_different_identities_get_different_files(pki: TestPKI) -> None:
    plain = pki.client_cert("bob")
    grouped = pki.client_cert("bob", ["devs"])
    odd = pki.client_cert("system:node:n1")

    assert plain[0].name == "client-bob.crt"
    assert len({plain[0], grouped[0], odd[0]}) == 3
    assert ":" not in odd[0].name


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


def test_user_from_peer_cert_reads_cn_and_organizations() -> None:
    cert = {
        "subject": (
            (("organizationName", "devs"),),
            (("organizationName", "ops"),),
            (("commonName", "alice"),),
        )
    }
    assert user_from_peer_cert(cert) == ("alice", ("devs", "ops"))


@pytest.mark.parametrize(
    "cert",
    [
        None,
        {},
        {"subject": ((("organizationName", "devs"),),)},
        {"subject": ((("commonName", ""),),)},
    ],
)
def test_user_from_peer_cert_without_a_common_name_is_nobody(
    cert: dict[str, object] | None,
) -> None:
    assert user_from_peer_cert(cert) is None
