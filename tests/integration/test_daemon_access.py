"""A client reads through the daemon exactly what RBAC lets it read directly.

The simulator holds users with tokens and RBAC rules and answers TokenReview and
SubjectAccessReview; the daemon (credentials: system:masters) delegates both to it. For every
user, resource, scope and verb the daemon's answer must equal the simulator's own answer to the
same user: the same code, and for a 403 the same message.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import ssl
import warnings
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path

import httpx
import orjson
import pytest

from cacheproxy.daemon.config import AuthMode, AuthSettings, ResourceConfig, TLSSettings
from cacheproxy.daemon.runtime import Daemon
from cacheproxy.kube.resources import builtin
from cacheproxy.sim import SimConfig, SimServer, Simulator
from cacheproxy.sim.policy import Policy
from cacheproxy.sim.testpki import TestPKI, generate_pki
from cacheproxy.upstream import TokenSource, UpstreamConfig
from tests.integration.clients import kubectl_binary, run_kubectl
from tests.integration.daemon_support import daemon_for

READ = ["get", "list", "watch"]
POLICY = {
    "users": [
        {"name": "cacheproxy", "token": "daemon-token", "groups": ["system:masters"]},
        {"name": "reader", "token": "reader-token", "groups": ["readers"]},
        {"name": "ns-reader", "token": "ns-reader-token"},
        {"name": "nobody", "token": "nobody-token"},
        {"name": "no-secrets", "token": "no-secrets-token"},
    ],
    "rules": [
        {
            "name": "cluster-reader",
            "subjects": [{"kind": "Group", "name": "readers"}],
            "verbs": READ,
            "apiGroups": ["*"],
            "resources": ["*"],
        },
        {
            "name": "ns-1-reader",
            "subjects": [{"kind": "User", "name": "ns-reader"}],
            "verbs": READ,
            "apiGroups": ["", "apps"],
            "resources": ["*"],
            "namespaces": ["ns-1"],
        },
        {
            "name": "all-but-secrets",
            "subjects": [{"kind": "User", "name": "no-secrets"}],
            "verbs": READ,
            "apiGroups": [""],
            "resources": ["pods", "configmaps", "namespaces", "nodes"],
        },
        {
            "name": "all-but-secrets-apps",
            "subjects": [{"kind": "User", "name": "no-secrets"}],
            "verbs": READ,
            "apiGroups": ["apps"],
            "resources": ["*"],
        },
    ],
}
USERS = ["reader", "ns-reader", "nobody", "no-secrets"]
NAMESPACED = ["pods", "configmaps", "secrets", "apps/v1/deployments"]
CLUSTER = ["namespaces", "nodes"]


def sample_objects() -> list[tuple[str, dict[str, object]]]:
    objects: list[tuple[str, dict[str, object]]] = [
        ("nodes", {"metadata": {"name": "node-1"}}),
    ]
    for ns in ("ns-1", "ns-2"):
        meta = {"name": "one", "namespace": ns}
        objects += [
            ("namespaces", {"metadata": {"name": ns}}),
            ("pods", {"metadata": meta, "spec": {"containers": [{"name": "c", "image": "i"}]}}),
            ("configmaps", {"metadata": meta, "data": {"k": "v"}}),
            ("secrets", {"metadata": meta, "data": {"k": "dg=="}}),
            ("deployments", {"metadata": meta, "spec": {"replicas": 1}}),
        ]
    return objects


@dataclass
class Setup:
    sim: Simulator
    server: SimServer
    daemon: Daemon


@pytest.fixture
async def setup() -> AsyncIterator[Setup]:
    sim = Simulator(config=SimConfig(policy=Policy.from_mapping(POLICY)))
    sim.load(sample_objects())
    resources = tuple(ResourceConfig(rtype=builtin(n)) for n in (*NAMESPACED, *CLUSTER))
    async with (
        SimServer(sim) as server,
        daemon_for(
            server.url,
            resources=resources,
            upstream=UpstreamConfig(
                server=server.url, token_source=TokenSource.static("daemon-token")
            ),
            auth=AuthSettings(mode=AuthMode.DELEGATED),
        ) as daemon,
    ):
        yield Setup(sim, server, daemon)


def requests_for(resource: str) -> list[tuple[str, str]]:
    """(verb, path) of every read of ``resource`` at every scope."""
    rtype = builtin(resource)
    out: list[tuple[str, str]] = []
    if rtype.namespaced:
        for ns in (None, "ns-1", "ns-2"):
            out.append(("list", rtype.collection_path(ns)))
            out.append(("watch", rtype.collection_path(ns) + "?watch=1"))
        out += [("get", rtype.collection_path(ns) + "/one") for ns in ("ns-1", "ns-2")]
    else:
        # Namespaces: a namespace-limited rule may read its own namespace; nodes: a missing
        # one is 404 only to those who may read it.
        names = ("ns-1", "ns-2") if resource == "namespaces" else ("node-1", "node-9")
        out += [
            ("list", rtype.collection_path()),
            ("watch", rtype.collection_path() + "?watch=1"),
            *(("get", f"{rtype.collection_path()}/{name}") for name in names),
        ]
    return out


async def answer(client: httpx.AsyncClient, path: str, token: str) -> tuple[int, str]:
    """The status code, and the Status message for an error (a watch is not read further)."""
    headers = {"Authorization": f"Bearer {token}"}
    async with client.stream("GET", path, headers=headers) as response:
        if response.status_code == 200:
            return 200, ""
        await response.aread()
        body = response.json()
        assert body["kind"] == "Status", body
        return response.status_code, str(body["message"])


async def run_matrix(s: Setup) -> tuple[int, list[str], list[str]]:
    combos = [
        (user, resource, verb, path)
        for user, resource in itertools.product(USERS, [*NAMESPACED, *CLUSTER])
        for verb, path in requests_for(resource)
    ]
    leaks: list[str] = []
    differences: list[str] = []
    async with (
        httpx.AsyncClient(base_url=s.server.url, timeout=10) as direct,
        httpx.AsyncClient(base_url=s.daemon.url, timeout=10) as proxied,
    ):
        for user, _resource, verb, path in combos:
            token = f"{user}-token"
            want, through = await asyncio.gather(
                answer(direct, path, token), answer(proxied, path, token)
            )
            if through[0] == 200 and want[0] != 200:
                leaks.append(f"{user} {verb} {path}: the daemon allowed what RBAC denies")
            elif through != want:
                differences.append(f"{user} {verb} {path}: {through} != {want}")
    return len(combos), leaks, differences


async def test_rbac_matrix_daemon_allows_exactly_what_rbac_allows(setup: Setup) -> None:
    count, leaks, differences = await run_matrix(setup)
    assert count == 4 * (len(NAMESPACED) * 8 + len(CLUSTER) * 4) == 160
    assert leaks == []
    assert differences == []
    access = setup.daemon.server.access  # type: ignore[union-attr]
    assert access is not None
    first_misses = access.decision_cache.misses
    assert first_misses > 0
    # A second pass is answered from the caches: no new review upstream.
    reviews_before = setup.sim.requests["create subjectaccessreviews"]
    count, leaks, differences = await run_matrix(setup)
    assert (leaks, differences) == ([], [])
    assert access.decision_cache.misses == first_misses
    assert setup.sim.requests["create subjectaccessreviews"] == reviews_before
    assert access.token_cache.misses == len(USERS)


async def test_denied_allowed_mix_per_user(setup: Setup) -> None:
    """Spot checks that read as RBAC: the namespace reader, the secret-less user."""
    async with httpx.AsyncClient(base_url=setup.daemon.url, timeout=10) as c:
        assert (await answer(c, "/api/v1/namespaces/ns-1/secrets", "ns-reader-token"))[0] == 200
        code, message = await answer(c, "/api/v1/pods", "ns-reader-token")
        assert (code, message) == (
            403,
            'pods is forbidden: User "ns-reader" cannot list resource "pods" in API group "" '
            "at the cluster scope",
        )
        code, message = await answer(c, "/api/v1/namespaces/ns-2/secrets/one", "no-secrets-token")
        assert code == 403
        assert message == (
            'secrets "one" is forbidden: User "no-secrets" cannot get resource "secrets" in API '
            'group "" in the namespace "ns-2"'
        )
        # Credentials: none → 401 (anonymous is off), an unknown token → 401.
        response = await c.get("/api/v1/pods")
        assert response.status_code == 401
        assert response.json()["reason"] == "Unauthorized"
        assert (await answer(c, "/api/v1/pods", "stolen"))[0] == 401
        # Health checks answer everyone; discovery needs an authenticated user.
        assert (await c.get("/readyz")).status_code == 200
        assert (await answer(c, "/api", "nobody-token"))[0] == 200
        metrics = await c.get("/metrics", headers={"Authorization": "Bearer reader-token"})
        assert metrics.status_code == 403
        metrics = await c.get("/metrics", headers={"Authorization": "Bearer daemon-token"})
        assert metrics.status_code == 200
        text = metrics.text
    assert 'cacheproxy_http_rejected_total{reason="forbidden"}' in text
    assert 'cacheproxy_auth_cache_lookups_total{cache="access",result="miss"}' in text
    assert 'cacheproxy_auth_review_duration_seconds_count{kind="token"}' in text


async def test_upstream_down_keeps_cached_answers_and_refuses_new_ones_with_503(
    setup: Setup,
) -> None:
    async with httpx.AsyncClient(base_url=setup.daemon.url, timeout=10) as c:
        assert (await answer(c, "/api/v1/pods", "reader-token"))[0] == 200
        setup.sim.faults.fail_next("create", 500, count=10)
        assert (await answer(c, "/api/v1/pods", "reader-token"))[0] == 200  # cached
        code, message = await answer(c, "/api/v1/configmaps", "reader-token")
    assert code == 503
    assert message.startswith("cannot check the request's access with the upstream API server")


async def test_static_tokens_from_a_file_rotate_without_restart(tmp_path: Path) -> None:
    sim = Simulator(config=SimConfig(policy=Policy.from_mapping(POLICY)))
    sim.load(sample_objects())
    tokens = tmp_path / "tokens.csv"
    tokens.write_text('# token,user,uid,groups\nt-1,reader,1,"readers,extra"\nt-2,nobody,2\n')
    async with (
        SimServer(sim) as server,
        daemon_for(
            server.url,
            resources=(ResourceConfig(rtype=builtin("pods")),),
            upstream=UpstreamConfig(
                server=server.url, token_source=TokenSource.static("daemon-token")
            ),
            auth=AuthSettings(mode=AuthMode.TOKEN, token_file=tokens),
        ) as daemon,
        httpx.AsyncClient(base_url=daemon.url, timeout=10) as c,
    ):
        assert (await answer(c, "/api/v1/pods", "t-1"))[0] == 200
        assert (await answer(c, "/api/v1/pods", "t-2"))[0] == 403
        assert (await answer(c, "/api/v1/pods", "reader-token"))[0] == 401  # not in the file
        tokens.write_text("t-3,reader,1,readers\n")
        for _ in range(60):
            if (await answer(c, "/api/v1/pods", "t-3"))[0] == 200:
                break
            await asyncio.sleep(0.1)
        assert (await answer(c, "/api/v1/pods", "t-3"))[0] == 200
        assert sim.requests["create tokenreviews"] == 0


@pytest.fixture
def pki(tmp_path: Path) -> TestPKI:
    return generate_pki(tmp_path / "pki")


@pytest.mark.kubectl
@pytest.mark.parametrize("version", ["1.27", "1.33"])
async def test_kubectl_with_a_token_and_with_a_client_certificate_over_tls(
    pki: TestPKI, tmp_path: Path, version: str
) -> None:
    sim = Simulator(config=SimConfig(policy=Policy.from_mapping(POLICY)))
    sim.load(sample_objects())
    tls = TLSSettings(
        cert_file=pki.server_cert, key_file=pki.server_key, client_ca_file=pki.ca_cert
    )
    async with (
        SimServer(sim) as server,
        daemon_for(
            server.url,
            resources=(
                ResourceConfig(rtype=builtin("pods")),
                ResourceConfig(rtype=builtin("secrets")),
            ),
            upstream=UpstreamConfig(
                server=server.url, token_source=TokenSource.static("daemon-token")
            ),
            auth=AuthSettings(mode=AuthMode.DELEGATED),
            tls=tls,
        ) as daemon,
    ):
        kubectl = kubectl_binary(version)
        ca = ("--certificate-authority", str(pki.ca_cert))
        code, out, err = await run_kubectl(
            kubectl, daemon.url, tmp_path / "t", *ca, "--token", "ns-reader-token",
            "get", "pods", "-n", "ns-1", "-o", "name",
        )  # fmt: skip
        assert code == 0, err
        assert out.split() == ["pod/one"]
        code, out, err = await run_kubectl(
            kubectl, daemon.url, tmp_path / "t", *ca, "--token", "ns-reader-token",
            "get", "pods", "-n", "ns-2",
        )  # fmt: skip
        assert code != 0
        assert 'User "ns-reader" cannot list resource "pods"' in err
        # A client certificate: CN is the user, O the groups.
        cert, key = pki.client_cert("someone", ["readers"])
        code, out, err = await run_kubectl(
            kubectl, daemon.url, tmp_path / "c", *ca, "--client-certificate", str(cert),
            "--client-key", str(key), "get", "secrets", "-A", "-o", "name",
        )  # fmt: skip
        assert code == 0, err
        assert out.split() == ["secret/one", "secret/one"]
        cert, key = pki.client_cert("stranger")
        code, out, err = await run_kubectl(
            kubectl, daemon.url, tmp_path / "s", *ca, "--client-certificate", str(cert),
            "--client-key", str(key), "get", "pods", "-A",
        )  # fmt: skip
        assert code != 0
        assert 'User "stranger" cannot list resource "pods"' in err


async def test_the_serving_certificate_is_reloaded_when_it_changes(
    demo_server: SimServer, tmp_path: Path
) -> None:
    first = generate_pki(tmp_path / "first")
    second = generate_pki(tmp_path / "second")
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert.write_bytes(first.server_cert.read_bytes())
    key.write_bytes(first.server_key.read_bytes())
    async with daemon_for(demo_server.url, tls=TLSSettings(cert_file=cert, key_file=key)) as daemon:

        async def trusted_by(ca: Path) -> bool:
            context = ssl.create_default_context(cafile=str(ca))
            async with httpx.AsyncClient(base_url=daemon.url, verify=context, timeout=5) as c:
                try:
                    return (await c.get("/healthz")).status_code == 200
                except httpx.ConnectError:
                    return False

        assert await trusted_by(first.ca_cert)
        assert not await trusted_by(second.ca_cert)
        cert.write_bytes(second.server_cert.read_bytes())
        key.write_bytes(second.server_key.read_bytes())
        reloader = daemon._cert_reloader
        assert reloader is not None
        assert reloader.check()  # what the periodic task does, now
        assert await trusted_by(second.ca_cert)
        assert not await trusted_by(first.ca_cert)
        # TLS 1.2 at least.
        old = ssl.create_default_context(cafile=str(second.ca_cert))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            old.maximum_version = ssl.TLSVersion.TLSv1_1
            old.minimum_version = ssl.TLSVersion.TLSv1
        async with httpx.AsyncClient(base_url=daemon.url, verify=old, timeout=5) as c:
            with pytest.raises(httpx.ConnectError):
                await c.get("/healthz")


async def test_namespace_filtering_narrows_cluster_wide_reads_to_readable_namespaces() -> None:
    sim = Simulator(config=SimConfig(policy=Policy.from_mapping(POLICY)))
    sim.load(sample_objects())
    resources = (ResourceConfig(rtype=builtin("pods")), ResourceConfig(rtype=builtin("secrets")))
    upstream = UpstreamConfig(server="", token_source=TokenSource.static("daemon-token"))
    async with (
        SimServer(sim) as server,
        daemon_for(
            server.url,
            resources=resources,
            upstream=replace(upstream, server=server.url),
            auth=AuthSettings(mode=AuthMode.DELEGATED, namespace_filtering=True),
        ) as daemon,
        httpx.AsyncClient(base_url=daemon.url, timeout=10) as c,
    ):
        ns_reader = {"Authorization": "Bearer ns-reader-token"}
        listed = await c.get("/api/v1/pods", headers=ns_reader)
        assert listed.status_code == 200
        assert [p["metadata"]["namespace"] for p in listed.json()["items"]] == ["ns-1"]
        # The secret-less user reads every pod, but no secret: still the API server's 403.
        assert (await answer(c, "/api/v1/secrets", "no-secrets-token"))[0] == 403
        assert (await answer(c, "/api/v1/pods", "nobody-token"))[0] == 403
        # A watch sees only the readable namespaces, later events included.
        async with c.stream(
            "GET", "/api/v1/pods", params={"watch": "1"}, headers=ns_reader
        ) as watch:
            assert watch.status_code == 200
            lines = watch.aiter_lines()
            first = orjson.loads(await anext(lines))
            assert first["object"]["metadata"]["namespace"] == "ns-1"
            pods = sim.resource("pods")
            for ns in ("ns-2", "ns-1"):
                sim.store.create(pods, {"metadata": {"name": "two", "namespace": ns}, "spec": {}})
            second = orjson.loads(await anext(lines))
            assert (second["type"], second["object"]["metadata"]["namespace"]) == ("ADDED", "ns-1")
            assert second["object"]["metadata"]["name"] == "two"
            await lines.aclose()


async def test_tokens_are_never_logged(setup: Setup, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    async with httpx.AsyncClient(base_url=setup.daemon.url, timeout=10) as c:
        for token in ("reader-token", "ns-reader-token", "forged-token-123"):
            await answer(c, "/api/v1/pods", token)
            await answer(c, "/api/v1/namespaces/ns-1/secrets", token)
    assert caplog.records  # something was logged at debug level
    for record in caplog.records:
        text = record.getMessage()
        assert "-token" not in text, text
