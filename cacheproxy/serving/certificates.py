"""Making certificates: the X.509 building blocks (EC P-256 keys, PEM files, keys ``0600``) and a
self-signed serving certificate kept across restarts.

:func:`self_signed` is ``server.tls.selfSigned``: a sidecar's neighbours reach it over HTTPS —
the only way kubectl and client-go send a bearer token — without anyone issuing a certificate. It
makes a CA of its own and a serving certificate for the given hosts signed by it; the CA's key is
never written, so nothing can be signed with it afterwards. The files are reused while they
still cover the hosts and are valid for a while yet, else made anew (clients take the CA from
the kubeconfig the daemon writes beside them, ``server.clientKubeconfig``).

The simulator's throwaway PKI (:mod:`cacheproxy.sim.testpki`) builds its certificates from the same
blocks.
"""

from __future__ import annotations

import datetime
import ipaddress
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = [
    "ServingFiles",
    "certificate_builder",
    "leaf_builder",
    "load_private_key",
    "self_signed",
    "subject_alt_names",
    "write_certificate",
    "write_private_key",
]

log = logging.getLogger("cacheproxy.serving")

_BACKDATE = datetime.timedelta(hours=1)
"""Certificates start an hour back, so a client whose clock runs a little behind accepts them."""
LIFETIME = datetime.timedelta(days=365)
RENEW_BEFORE = datetime.timedelta(days=30)
"""A kept self-signed certificate is made anew once it has less than this left."""


def certificate_builder(
    subject: x509.Name,
    issuer: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    *,
    ca: bool,
    lifetime: datetime.timedelta = LIFETIME,
) -> x509.CertificateBuilder:
    """What every certificate made here has: valid from an hour back for ``lifetime``, its basic
    constraints and key usage (a CA signs certificates, a leaf only signatures) and its SKI."""
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + lifetime)
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


def leaf_builder(
    subject: x509.Name, key: ec.EllipticCurvePrivateKey, ca_cert: x509.Certificate
) -> x509.CertificateBuilder:
    """A leaf signed by the CA; Python 3.13's strict verification wants its AKI too."""
    ca_ski = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    return certificate_builder(subject, ca_cert.subject, key, ca=False).add_extension(
        x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False
    )


def subject_alt_names(hosts: Sequence[str]) -> list[x509.GeneralName]:
    """IP literals as IP-address SANs, everything else as DNS names."""
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return names


def load_private_key(path: Path) -> ec.EllipticCurvePrivateKey:
    key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{path}: expected an EC private key")
    return key


def write_certificate(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def write_private_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
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


# ---------------------------------------------------------------------- self-signed serving


@dataclass(frozen=True, slots=True)
class ServingFiles:
    """A serving certificate, its key, and the CA that signed it (what clients trust)."""

    cert: Path
    key: Path
    ca: Path
    made: bool
    """Made at this start (False: kept from an earlier one)."""


def self_signed(directory: Path, hosts: Sequence[str]) -> ServingFiles:
    """The serving certificate for ``hosts`` in ``directory`` (``tls.crt``, ``tls.key``,
    ``ca.crt``): kept if it is there, signed by that CA, covers every host and has more than
    :data:`RENEW_BEFORE` left; else made anew."""
    files = ServingFiles(
        cert=directory / "tls.crt", key=directory / "tls.key", ca=directory / "ca.crt", made=False
    )
    why = _unusable(files, hosts)
    if why is None:
        return files
    log.info("making a self-signed serving certificate for %s (%s)", ", ".join(hosts), why)
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "cacheproxy self-signed CA")])
    ca_cert = certificate_builder(ca_name, ca_name, ca_key, ca=True).sign(ca_key, hashes.SHA256())
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        leaf_builder(
            x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "cacheproxy")]), key, ca_cert
        )
        .add_extension(x509.SubjectAlternativeName(subject_alt_names(hosts)), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    write_private_key(files.key, key)
    write_certificate(files.cert, cert)
    write_certificate(files.ca, ca_cert)
    return ServingFiles(cert=files.cert, key=files.key, ca=files.ca, made=True)


def _unusable(files: ServingFiles, hosts: Sequence[str]) -> str | None:
    """Why the kept files cannot serve ``hosts`` (None: they can)."""
    if not (files.cert.exists() and files.key.exists() and files.ca.exists()):
        return "none kept"
    try:
        cert = x509.load_pem_x509_certificate(files.cert.read_bytes())
        ca = x509.load_pem_x509_certificate(files.ca.read_bytes())
        key = load_private_key(files.key)
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, OSError, InvalidSignature) as exc:
        return f"the kept files do not load: {exc}"
    if key.public_key().public_numbers() != cert.public_key().public_numbers():  # type: ignore[union-attr]
        return "the kept key is not the certificate's"
    left = cert.not_valid_after_utc - datetime.datetime.now(datetime.UTC)
    if left < RENEW_BEFORE:
        return "the kept one expires soon"
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return "the kept one names no host"
    if any(name not in sans for name in subject_alt_names(hosts)):
        return "the kept one does not cover every host"
    return None
