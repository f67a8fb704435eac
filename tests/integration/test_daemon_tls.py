"""The daemon over TLS, requiring client certificates signed by the configured CA."""

from __future__ import annotations

import ssl
from pathlib import Path

import httpx
import pytest

from cacheproxy.daemon.config import TLSSettings
from cacheproxy.sim import SimServer
from cacheproxy.sim.testpki import generate_pki
from tests.integration.clients import kubectl_binary, run_kubectl
from tests.integration.daemon_support import daemon_for


async def test_tls_with_a_client_ca_serves_only_clients_with_certificates(
    demo_server: SimServer, tmp_path: Path
) -> None:
    pki = generate_pki(tmp_path / "pki")
    tls = TLSSettings(
        cert_file=pki.server_cert, key_file=pki.server_key, client_ca_file=pki.ca_cert
    )
    async with daemon_for(demo_server.url, tls=tls) as daemon:
        assert daemon.url.startswith("https://127.0.0.1:")
        cert, key = pki.client_cert("reader")
        context = ssl.create_default_context(cafile=str(pki.ca_cert))
        context.load_cert_chain(cert, key)
        async with httpx.AsyncClient(base_url=daemon.url, verify=context, timeout=10) as c:
            r = await c.get("/api/v1/pods")
        assert r.status_code == 200
        assert len(r.json()["items"]) == 60
        anonymous = ssl.create_default_context(cafile=str(pki.ca_cert))
        async with httpx.AsyncClient(base_url=daemon.url, verify=anonymous, timeout=10) as c:
            with pytest.raises(httpx.HTTPError):
                await c.get("/api/v1/pods")
        code, out, err = await run_kubectl(
            kubectl_binary("1.33"),
            daemon.url,
            tmp_path / "cache",
            "--certificate-authority",
            str(pki.ca_cert),
            "--client-certificate",
            str(cert),
            "--client-key",
            str(key),
            "get",
            "pods",
            "-A",
            "-o",
            "name",
        )
        assert code == 0, err
        assert len(out.splitlines()) == 60
