"""A throwaway PKI for the simulator's optional TLS: a CA, a server cert, client certs.

Tests and demos need HTTPS and client-certificate authentication without a real cluster. This
module owns making that PKI (EC P-256 keys, PEM files, keys ``0600``), the server-side
:class:`ssl.SSLContext`, and reading a verified peer certificate the way the API server's x509
authenticator does: the subject's CommonName is the user name and its Organizations are the
groups (``k8s.io/apiserver/pkg/authentication/request/x509``, ``CommonNameUserConversion``).

Nothing here is meant to protect anything real: the CA key sits next to the certificates.
"""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
import os
import re
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["TestPKI", "generate_pki", "ssl_server_context"]

_BACKDATE = datetime.timedelta(hours=1)
"""Certificates start an hour back, so a client whose clock runs a little behind accepts them."""
_LIFETIME = datetime.timedelta(days=365)
_CA_NAME = "cacheproxy-sim-ca"
_SERVER_NAME = "cacheproxy-sim"


@dataclass(frozen=True)
class TestPKI:
    """Paths of a generated PKI. Issue client certificates with :meth:`client_cert`."""

    __test__ = False  # a PKI *for* tests, not a test class: keep pytest from collecting it

    ca_cert: Path
    ca_key: Path
    server_cert: Path
    server_key: Path

    def client_cert(self, user: str, groups: Sequence[str] = ()) -> tuple[Path, Path]:
        """Issue a client certificate (CN=user, one O per group) signed by the CA.

        Written next to the CA as ``client-<user>.crt`` / ``.key``; returns ``(cert, key)``.
        """
        if not user:
            raise ValueError("a client certificate needs a user name (its CommonName)")
        ca_key = _load_key(self.ca_key)
        ca_cert = x509.load_pem_x509_certificate(self.ca_cert.read_bytes())
        key = ec.generate_private_key(ec.SECP256R1())
        subject = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
        subject.append(x509.NameAttribute(NameOID.COMMON_NAME, user))
        cert = (
            _leaf_builder(x509.Name(subject), key, ca_cert)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        stem = _file_stem(user, groups)
        cert_path = self.ca_cert.parent / f"{stem}.crt"
        key_path = self.ca_cert.parent / f"{stem}.key"
        _write_cert(cert_path, cert)
        _write_key(key_path, key)
        return cert_path, key_path


def generate_pki(
    directory: Path, *, hosts: Sequence[str] = ("127.0.0.1", "localhost", "::1")
) -> TestPKI:
    """Create a CA and a server certificate for ``hosts`` in ``directory`` (created if missing).

    IP literals become IP-address SANs, everything else DNS-name SANs. Existing files of the same
    names are overwritten.
    """
    if not hosts:
        raise ValueError("the server certificate needs at least one host")
    directory.mkdir(parents=True, exist_ok=True)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, _CA_NAME)])
    ca_cert = _builder(ca_name, ca_name, ca_key, ca=True).sign(ca_key, hashes.SHA256())

    server_key = ec.generate_private_key(ec.SECP256R1())
    server_cert = (
        _leaf_builder(
            x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, _SERVER_NAME)]), server_key, ca_cert
        )
        .add_extension(x509.SubjectAlternativeName(_sans(hosts)), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    pki = TestPKI(
        ca_cert=directory / "ca.crt",
        ca_key=directory / "ca.key",
        server_cert=directory / "server.crt",
        server_key=directory / "server.key",
    )
    _write_cert(pki.ca_cert, ca_cert)
    _write_key(pki.ca_key, ca_key)
    _write_cert(pki.server_cert, server_cert)
    _write_key(pki.server_key, server_key)
    return pki


def ssl_server_context(pki: TestPKI, *, require_client_cert: bool = False) -> ssl.SSLContext:
    """A TLS 1.2+ server context serving the PKI's server certificate.

    Client certificates signed by the PKI's CA are always requested and verified; like the API
    server (``tls.VerifyClientCertIfGiven``) a client may still connect without one unless
    ``require_client_cert`` is set.
    """
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(pki.server_cert, pki.server_key)
    ctx.load_verify_locations(cafile=pki.ca_cert)
    ctx.verify_mode = ssl.CERT_REQUIRED if require_client_cert else ssl.CERT_OPTIONAL
    return ctx


def _builder(
    subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePrivateKey, *, ca: bool
) -> x509.CertificateBuilder:
    """What every certificate of the PKI has: valid from an hour back for a year, its basic
    constraints and key usage (a CA signs certificates, a leaf only signatures) and its SKI."""
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + _LIFETIME)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=0 if ca else None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=ca,
                crl_sign=ca,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    )


def _leaf_builder(
    subject: x509.Name, key: ec.EllipticCurvePrivateKey, ca_cert: x509.Certificate
) -> x509.CertificateBuilder:
    """A leaf signed by the CA; Python 3.13's strict verification wants its AKI too."""
    ca_ski = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    return _builder(subject, ca_cert.subject, key, ca=False).add_extension(
        x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False
    )


def _sans(hosts: Sequence[str]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return names


def _file_stem(user: str, groups: Sequence[str]) -> str:
    """``client-<user>``, made file-safe; a digest keeps distinct identities in distinct files."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", user)
    if safe == user and not groups:
        return f"client-{user}"
    digest = hashlib.sha256("\0".join((user, *groups)).encode()).hexdigest()[:8]
    return f"client-{safe}-{digest}"


def _load_key(path: Path) -> ec.EllipticCurvePrivateKey:
    key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{path}: expected an EC private key")
    return key


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    """Write the key readable by its owner only, even if the file existed with wider rights."""
    data = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        os.fchmod(f.fileno(), 0o600)
        f.write(data)
