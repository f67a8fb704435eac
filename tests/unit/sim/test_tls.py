"""The throwaway PKI: certificate contents on disk (the handshakes on loopback are in
tests/integration/test_sim_tls_handshakes.py), and the identity a peer certificate gives."""

from __future__ import annotations

import datetime
import ipaddress
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from cacheproxy.serving import user_from_peer_cert
from cacheproxy.sim.testpki import TestPKI, generate_pki


@pytest.fixture
def pki(tmp_path: Path) -> TestPKI:
    return generate_pki(tmp_path / "pki")


def _load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


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
