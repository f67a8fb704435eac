"""The simulator over TLS with client certificates and token auth, driven by httpx and kubectl."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from cacheproxy.sim import SimConfig, SimServer, Simulator
from cacheproxy.sim.policy import Policy
from cacheproxy.sim.testpki import TestPKI, generate_pki
from cacheproxy.sim.workload import DemoSpec, demo_objects
from tests.integration.clients import KUBECTL_VERSIONS, kubectl_binary, run_kubectl

POLICY = {
    "users": [
        {"name": "admin", "token": "admin-token", "groups": ["system:masters"]},
        {"name": "lowpriv", "token": "lowpriv-token"},
    ],
    "rules": [
        {
            "subjects": [{"kind": "User", "name": "reader"}],
            "verbs": ["get", "list", "watch"],
            "apiGroups": [""],
            "resources": ["pods"],
            "namespaces": ["ns-1"],
        }
    ],
}


@pytest.fixture
def pki(tmp_path: Path) -> TestPKI:
    return generate_pki(tmp_path / "pki")


@pytest.fixture
async def secure_server(pki: TestPKI) -> AsyncIterator[SimServer]:
    sim = Simulator(config=SimConfig(policy=Policy.from_mapping(POLICY)))
    sim.load(demo_objects(DemoSpec(pods=20)))
    async with SimServer(sim, pki=pki) as server:
        yield server


def _client(server: SimServer, pki: TestPKI, **kwargs: object) -> httpx.AsyncClient:
    context = ssl.create_default_context(cafile=str(pki.ca_cert))
    cert = kwargs.pop("cert", None)
    if cert is not None:
        context.load_cert_chain(*cert)  # type: ignore[misc]
    return httpx.AsyncClient(base_url=server.url, verify=context, timeout=10, **kwargs)  # type: ignore[arg-type]


async def test_serves_https_that_verifies_against_the_generated_ca(
    secure_server: SimServer, pki: TestPKI
) -> None:
    assert secure_server.url.startswith("https://127.0.0.1:")
    async with _client(secure_server, pki, headers={"Authorization": "Bearer admin-token"}) as c:
        r = await c.get("/api/v1/pods")
    assert r.status_code == 200
    assert len(r.json()["items"]) == 20


async def test_a_client_that_does_not_trust_the_ca_fails_the_handshake(
    secure_server: SimServer,
) -> None:
    async with httpx.AsyncClient(base_url=secure_server.url, timeout=10) as c:
        with pytest.raises(httpx.ConnectError):
            await c.get("/version")


async def test_unknown_token_is_401_and_anonymous_is_403(
    secure_server: SimServer, pki: TestPKI
) -> None:
    async with _client(secure_server, pki, headers={"Authorization": "Bearer nope"}) as c:
        r = await c.get("/api/v1/pods")
    assert r.status_code == 401
    assert r.json() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Unauthorized",
        "reason": "Unauthorized",
        "code": 401,
    }
    async with _client(secure_server, pki) as c:
        r = await c.get("/api/v1/pods")
    assert r.status_code == 403
    assert r.json()["message"] == (
        'pods is forbidden: User "system:anonymous" cannot list resource "pods" in API group "" '
        "at the cluster scope"
    )


async def test_a_client_certificate_user_reads_only_what_its_rules_allow(
    secure_server: SimServer, pki: TestPKI
) -> None:
    cert = pki.client_cert("reader")
    async with _client(secure_server, pki, cert=cert) as c:
        allowed = await c.get("/api/v1/namespaces/ns-1/pods")
        denied = await c.get("/api/v1/namespaces/ns-0/pods")
    assert allowed.status_code == 200
    assert {p["metadata"]["namespace"] for p in allowed.json()["items"]} == {"ns-1"}
    assert denied.status_code == 403
    assert denied.json()["message"] == (
        'pods is forbidden: User "reader" cannot list resource "pods" in API group "" '
        'in the namespace "ns-0"'
    )


@pytest.mark.kubectl
@pytest.mark.parametrize("version", KUBECTL_VERSIONS)
async def test_kubectl_uses_the_ca_a_client_certificate_and_a_token(
    version: str, secure_server: SimServer, pki: TestPKI, tmp_path: Path
) -> None:
    kubectl = kubectl_binary(version)
    cert, key = pki.client_cert("reader")
    tls = ["--certificate-authority", str(pki.ca_cert)]
    code, out, err = await run_kubectl(
        kubectl,
        secure_server.url,
        tmp_path / "c1",
        *tls,
        "--client-certificate",
        str(cert),
        "--client-key",
        str(key),
        "get",
        "pods",
        "-n",
        "ns-1",
        "-o",
        "name",
    )
    assert code == 0, err
    assert out.splitlines() and all(line.startswith("pod/") for line in out.splitlines())
    code, out, err = await run_kubectl(
        kubectl,
        secure_server.url,
        tmp_path / "c2",
        *tls,
        "--token",
        "lowpriv-token",
        "get",
        "pods",
        "-n",
        "ns-1",
    )
    assert code != 0
    assert 'User "lowpriv" cannot list resource "pods"' in err
    code, out, err = await run_kubectl(
        kubectl,
        secure_server.url,
        tmp_path / "c3",
        *tls,
        "--token",
        "admin-token",
        "get",
        "pods",
        "-A",
        "-o",
        "name",
    )
    assert code == 0, err
    assert len(out.splitlines()) == 20
