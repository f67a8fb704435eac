"""TLS for both servers: who a client certificate names, and serving certificates that rotate.

- :func:`user_from_peer_cert`: ``(CommonName, Organizations)`` of a verified client certificate,
  as the API server's x509 authenticator reads it;
- :class:`CertificateReloader`: a serving certificate and key re-read into the live
  ``SSLContext`` when they change on disk (cert-manager and kubelet rotate mounted secrets in
  place); :func:`file_stamp` is how a change is noticed (also used for token and config files).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cacheproxy.tasks import cancel_and_wait

__all__ = ["CertificateReloader", "file_stamp", "user_from_peer_cert"]

log = logging.getLogger("cacheproxy.serving")


def user_from_peer_cert(cert: Mapping[str, Any] | None) -> tuple[str, tuple[str, ...]] | None:
    """``(CommonName, Organizations)`` of a verified peer certificate, or None.

    ``cert`` is ``SSLObject.getpeercert()``, which is empty or None unless the peer presented a
    certificate that verified against the CA. As in the x509 authenticator, a certificate with no
    CommonName authenticates nobody; if several CNs are present the last wins (Go's
    ``pkix.Name.CommonName``).
    """
    if not cert:
        return None
    common_name = ""
    organizations: list[str] = []
    for rdn in cert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                common_name = value
            elif key == "organizationName":
                organizations.append(value)
    if not common_name:
        return None
    return common_name, tuple(organizations)


def file_stamp(*paths: Path) -> tuple[float, ...] | None:
    """When ``paths`` were last modified, or None if one cannot be read: compare stamps to notice
    a file rewritten or replaced in place (a rotated Secret, an updated ConfigMap)."""
    try:
        return tuple(path.stat().st_mtime for path in paths)
    except OSError:
        return None


class CertificateReloader:
    """Re-reads a serving certificate and key into a live ``SSLContext`` when either file
    changes on disk (cert-manager and kubelet rotate mounted secrets in place). Handshakes after
    the reload use the new pair; open connections keep theirs. A pair that does not load (caught
    half-written, or a key that does not match) is logged and retried at the next check."""

    def __init__(
        self, context: ssl.SSLContext, cert_file: Path, key_file: Path, *, interval: float = 2.0
    ) -> None:
        self.context, self.cert_file, self.key_file = context, cert_file, key_file
        self.interval = interval
        self.reloads = 0
        self._seen = file_stamp(cert_file, key_file)
        self._task: asyncio.Task[None] | None = None

    def check(self) -> bool:
        """Reload if the files changed since the last successful load; whether it did."""
        stamp = file_stamp(self.cert_file, self.key_file)
        if stamp is None or stamp == self._seen:
            return False
        try:
            self.context.load_cert_chain(self.cert_file, self.key_file)
        except (OSError, ssl.SSLError) as err:
            log.warning("keeping the current serving certificate: %s", err)
            return False
        self._seen = stamp
        self.reloads += 1
        log.info("reloaded the serving certificate from %s", self.cert_file)
        return True

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="certificate-reloader")

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            self.check()

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None
