"""A throwaway PKI for the simulator's optional TLS: a CA, a server cert, client certs.

Tests and demos need HTTPS and client-certificate authentication without a real cluster. This
module makes that PKI (from :mod:`cacheproxy.serving.certificates`' building blocks), the server-side
:class:`ssl.SSLContext`, and reading a verified peer certificate the way the API server's x509
authenticator does: the subject's CommonName is the user name and its Organizations are the
groups (``k8s.io/apiserver/pkg/authentication/request/x509``, ``CommonNameUserConversion``).

Nothing here is meant to protect anything real: the CA key sits next to the certificates.
"""

from __future__ import annotations

import hashlib
import re
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from cacheproxy.serving.certificates import (
    certificate_builder,
    leaf_builder,
    load_private_key,
    subject_alt_names,
    write_certificate,
    write_private_key,
)

__all__ = ["TestPKI", "generate_pki", "ssl_server_context"]

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
        ca_key = load_private_key(self.ca_key)
        ca_cert = x509.load_pem_x509_certificate(self.ca_cert.read_bytes())
        key = ec.generate_private_key(ec.SECP256R1())
        subject = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
        subject.append(x509.NameAttribute(NameOID.COMMON_NAME, user))
        cert = (
            leaf_builder(x509.Name(subject), key, ca_cert)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        stem = _file_stem(user, groups)
        cert_path = self.ca_cert.parent / f"{stem}.crt"
        key_path = self.ca_cert.parent / f"{stem}.key"
        write_certificate(cert_path, cert)
        write_private_key(key_path, key)
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
    ca_cert = certificate_builder(ca_name, ca_name, ca_key, ca=True).sign(ca_key, hashes.SHA256())

    server_key = ec.generate_private_key(ec.SECP256R1())
    server_cert = (
        leaf_builder(
            x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, _SERVER_NAME)]), server_key, ca_cert
        )
        .add_extension(x509.SubjectAlternativeName(subject_alt_names(hosts)), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    pki = TestPKI(
        ca_cert=directory / "ca.crt",
        ca_key=directory / "ca.key",
        server_cert=directory / "server.crt",
        server_key=directory / "server.key",
    )
    write_certificate(pki.ca_cert, ca_cert)
    write_private_key(pki.ca_key, ca_key)
    write_certificate(pki.server_cert, server_cert)
    write_private_key(pki.server_key, server_key)
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


def _file_stem(user: str, groups: Sequence[str]) -> str:
    """``client-<user>``, made file-safe; a digest keeps distinct identities in distinct files."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", user)
    if safe == user and not groups:
        return f"client-{user}"
    digest = hashlib.sha256("\0".join((user, *groups)).encode()).hexdigest()[:8]
    return f"client-{safe}-{digest}"
