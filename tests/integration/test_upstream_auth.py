"""Reaching an HTTPS simulator with every way a kubeconfig or a pod authenticates.

Each kubeconfig is a YAML file written into ``tmp_path`` and loaded by the ``kubernetes``
package's loaders through ``load_kubeconfig``/``load_upstream``; the in-cluster tests lay out a
service-account token and CA and point ``KUBERNETES_SERVICE_HOST``/``_PORT`` at the simulator.
"""

from __future__ import annotations

import base64
import datetime
import sys
import types
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from kubernetes.config import incluster_config

from cacheproxy.errors import ApiError, ConfigError, TransportError
from cacheproxy.informer import ListRequest
from cacheproxy.kube.resources import builtin
from cacheproxy.sim import SimConfig, SimServer, Simulator
from cacheproxy.sim.policy import Policy
from cacheproxy.sim.testpki import TestPKI, generate_pki
from cacheproxy.sim.workload import DemoSpec, demo_objects
from cacheproxy.upstream import (
    ApiListerWatcher,
    UpstreamConfig,
    build_client,
    load_incluster,
    load_kubeconfig,
    load_upstream,
)
from tests.integration.samples import load_http

PODS = builtin("pods")
CONFIGMAPS = builtin("configmaps")
POLICY = {
    "users": [
        {"name": "admin", "token": "admin-token", "groups": ["system:masters"]},
        {"name": "alice", "token": "alice-token"},
        {"name": "bob", "token": "bob-token"},
    ],
    "rules": [
        {
            "subjects": [{"kind": "User", "name": "reader"}, {"kind": "User", "name": "alice"}],
            "verbs": ["get", "list", "watch"],
            "apiGroups": [""],
            "resources": ["pods"],
            "namespaces": ["ns-1"],
        },
        {
            "subjects": [{"kind": "User", "name": "bob"}],
            "verbs": ["list"],
            "apiGroups": [""],
            "resources": ["configmaps"],
        },
    ],
}
EXEC_API = "client.authentication.k8s.io/v1"


@pytest.fixture
def pki(tmp_path: Path) -> TestPKI:
    return generate_pki(tmp_path / "pki")


@pytest.fixture
def secure_sim() -> Simulator:
    sim = Simulator(config=SimConfig(policy=Policy.from_mapping(POLICY)))
    sim.load(demo_objects(DemoSpec(pods=20)))
    return sim


@pytest.fixture
async def secure_server(secure_sim: Simulator, pki: TestPKI) -> AsyncIterator[SimServer]:
    async with SimServer(secure_sim, pki=pki) as server:
        yield server


@pytest.fixture(autouse=True)
def _outside_a_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever runs the tests, they start outside a pod and without $KUBECONFIG."""
    for name in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "KUBECONFIG"):
        monkeypatch.delenv(name, raising=False)
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"):
        monkeypatch.delenv(name, raising=False)


def write_kubeconfig(
    path: Path,
    server: str,
    *,
    cluster: dict[str, Any] | None = None,
    user: dict[str, Any] | None = None,
    context: str = "test",
) -> Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "sim", "cluster": {"server": server, **(cluster or {})}}],
        "users": [{"name": "me", "user": user or {}}],
        "contexts": [{"name": context, "context": {"cluster": "sim", "user": "me"}}],
        "current-context": context,
    }
    path.write_text(yaml.safe_dump(doc))
    return path


async def list_names(config: UpstreamConfig, namespace: str = "ns-1") -> list[str]:
    """List pods in ``namespace`` through a client built from ``config``."""
    async with build_client(config) as client:
        page = await ApiListerWatcher(client, PODS, namespace=namespace).list(ListRequest())
    return [p["metadata"]["name"] for p in page.items]


# ---------------------------------------------------------------------------- kubeconfig


async def test_a_kubeconfig_with_a_ca_and_a_bearer_token_lists_pods(
    secure_server: SimServer, pki: TestPKI, tmp_path: Path
) -> None:
    path = write_kubeconfig(
        tmp_path / "kubeconfig",
        secure_server.url,
        cluster={"certificate-authority": str(pki.ca_cert)},
        user={"token": "admin-token"},
    )
    config = load_kubeconfig(path)
    assert config.server == secure_server.url
    assert config.ca_file == pki.ca_cert and config.verify
    assert await config.token_source.token() == "admin-token"
    assert len(await list_names(config)) == len(await list_names(config, "ns-0")) > 0


async def test_inline_ca_data_and_a_token_file_work_like_files(
    secure_server: SimServer, pki: TestPKI, tmp_path: Path
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("admin-token")
    path = write_kubeconfig(
        tmp_path / "kubeconfig",
        secure_server.url,
        cluster={"certificate-authority-data": base64.b64encode(pki.ca_cert.read_bytes()).decode()},
        user={"tokenFile": str(token_file)},
    )
    config = load_kubeconfig(path)
    assert config.ca_file is not None and config.ca_file.read_bytes() == pki.ca_cert.read_bytes()
    assert await list_names(config)


async def test_a_client_certificate_authenticates_as_its_common_name(
    secure_server: SimServer, pki: TestPKI, tmp_path: Path
) -> None:
    cert, key = pki.client_cert("reader")
    path = write_kubeconfig(
        tmp_path / "kubeconfig",
        secure_server.url,
        cluster={"certificate-authority": str(pki.ca_cert)},
        user={"client-certificate": str(cert), "client-key": str(key)},
    )
    config = load_kubeconfig(path)
    assert (config.client_cert, config.client_key) == (cert, key)
    assert await config.token_source.token() is None
    assert len(await list_names(config, "ns-1")) > 0
    with pytest.raises(ApiError) as caught:
        await list_names(config, "ns-0")
    # 403 keeps the API server's Status: a person reads who was refused what.
    assert caught.value.code == 403
    assert caught.value.status["message"] == (
        'pods is forbidden: User "reader" cannot list resource "pods" in API group "" '
        'in the namespace "ns-0"'
    )


async def test_insecure_skip_tls_verify_connects_without_a_ca(
    secure_server: SimServer, tmp_path: Path
) -> None:
    path = write_kubeconfig(
        tmp_path / "kubeconfig",
        secure_server.url,
        cluster={"insecure-skip-tls-verify": True},
        user={"token": "admin-token"},
    )
    config = load_kubeconfig(path)
    assert not config.verify and config.ca_file is None
    assert await list_names(config)


async def test_tls_server_name_is_the_name_the_certificate_is_verified_against(
    secure_sim: Simulator, tmp_path: Path
) -> None:
    named = generate_pki(tmp_path / "named", hosts=("kube.internal",))
    async with SimServer(secure_sim, pki=named) as server:
        cluster = {"certificate-authority": str(named.ca_cert)}
        user = {"token": "admin-token"}
        plain = write_kubeconfig(tmp_path / "plain", server.url, cluster=cluster, user=user)
        with pytest.raises(TransportError, match="certificate verify failed: IP address mismatch"):
            await list_names(load_kubeconfig(plain))
        named_config = write_kubeconfig(
            tmp_path / "named.yaml",
            server.url,
            cluster={**cluster, "tls-server-name": "kube.internal"},
            user=user,
        )
        config = load_kubeconfig(named_config)
        assert config.tls_server_name == "kube.internal"
        assert await list_names(config)


async def test_the_simulator_offers_no_http2_so_the_client_settles_on_http11(
    secure_server: SimServer, pki: TestPKI, tmp_path: Path
) -> None:
    path = write_kubeconfig(
        tmp_path / "kubeconfig",
        secure_server.url,
        cluster={"certificate-authority": str(pki.ca_cert)},
        user={"token": "admin-token"},
    )
    versions: list[str] = []

    async def record(response: httpx.Response) -> None:
        versions.append(response.http_version)

    async with build_client(load_kubeconfig(path)) as client:
        client.event_hooks["response"].append(record)
        await ApiListerWatcher(client, PODS).list(ListRequest(limit=1))
    assert versions == ["HTTP/1.1"]


# ---------------------------------------------------------------------------- exec plugin


def exec_plugin(tmp_path: Path, *, token: str, lifetime: datetime.timedelta) -> tuple[Path, Path]:
    """An exec credential plugin printing ``token`` valid for ``lifetime``; it appends a line to
    the returned counter file each time it runs."""
    script = tmp_path / "credential-plugin"
    counter = tmp_path / "plugin-runs"
    counter.write_text("")
    script.write_text(
        f"""#!{sys.executable}
import datetime, json
with open({str(counter)!r}, "a") as runs:
    runs.write("run\\n")
expiry = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(
    seconds={lifetime.total_seconds()}
)
print(json.dumps({{
    "apiVersion": {EXEC_API!r},
    "kind": "ExecCredential",
    "status": {{"token": {token!r}, "expirationTimestamp": expiry.strftime("%Y-%m-%dT%H:%M:%SZ")}},
}}))
"""
    )
    script.chmod(0o755)
    return script, counter


def runs(counter: Path) -> int:
    return len(counter.read_text().splitlines())


def exec_kubeconfig(tmp_path: Path, server: SimServer, pki: TestPKI, script: Path) -> Path:
    return write_kubeconfig(
        tmp_path / "kubeconfig",
        server.url,
        cluster={"certificate-authority": str(pki.ca_cert)},
        user={"exec": {"apiVersion": EXEC_API, "command": str(script), "interactiveMode": "Never"}},
    )


async def test_an_exec_plugin_token_is_used_and_cached_until_it_nears_expiry(
    secure_server: SimServer, pki: TestPKI, tmp_path: Path
) -> None:
    script, counter = exec_plugin(
        tmp_path, token="alice-token", lifetime=datetime.timedelta(hours=1)
    )
    config = load_kubeconfig(exec_kubeconfig(tmp_path, secure_server, pki, script))
    assert runs(counter) == 1
    assert config.token_source.refreshes
    for _ in range(3):
        assert len(await list_names(config)) > 0
    assert runs(counter) == 1


async def test_an_exec_plugin_runs_again_when_its_credential_is_about_to_expire(
    secure_server: SimServer, pki: TestPKI, tmp_path: Path
) -> None:
    # Within the loader's 5-minute skew, a credential counts as expired: every request re-runs.
    script, counter = exec_plugin(
        tmp_path, token="alice-token", lifetime=datetime.timedelta(minutes=1)
    )
    config = load_kubeconfig(exec_kubeconfig(tmp_path, secure_server, pki, script))
    for _ in range(3):
        assert len(await list_names(config)) > 0
    assert runs(counter) == 1 + 3


async def test_a_failing_exec_plugin_is_a_config_error_with_its_message(
    secure_server: SimServer, pki: TestPKI, tmp_path: Path
) -> None:
    script = tmp_path / "broken-plugin"
    script.write_text(
        f"#!{sys.executable}\nimport sys\nsys.stderr.write('please log in first')\nsys.exit(3)\n"
    )
    script.chmod(0o755)
    path = exec_kubeconfig(tmp_path, secure_server, pki, script)
    with pytest.raises(ConfigError, match="please log in first") as caught:
        load_kubeconfig(path)
    assert str(path) in str(caught.value)


# ---------------------------------------------------------------------------- in-cluster


@pytest.fixture
def service_account(tmp_path: Path, pki: TestPKI) -> tuple[Path, Path]:
    directory = tmp_path / "serviceaccount"
    directory.mkdir()
    token, ca = directory / "token", directory / "ca.crt"
    token.write_text("alice-token")
    ca.write_bytes(pki.ca_cert.read_bytes())
    return token, ca


@pytest.fixture
def in_pod(monkeypatch: pytest.MonkeyPatch, secure_server: SimServer) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", secure_server.host)
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(secure_server.port))


class LoaderClock:
    """The in-cluster loader's clock, moved forward on demand: it re-reads the token file once
    its one-minute refresh period has passed, and the tests do not wait a minute."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.offset = datetime.timedelta()
        clock = self

        class ShiftedDatetime(datetime.datetime):
            @classmethod
            def now(cls, tz: datetime.tzinfo | None = None) -> datetime.datetime:  # type: ignore[override]
                return datetime.datetime.now(tz) + clock.offset

        fake = types.SimpleNamespace(datetime=ShiftedDatetime, timedelta=datetime.timedelta)
        monkeypatch.setattr(incluster_config, "datetime", fake)

    def advance(self, delta: datetime.timedelta) -> None:
        self.offset += delta


@pytest.mark.usefixtures("in_pod")
async def test_in_cluster_config_uses_the_service_account_token_and_ca(
    secure_server: SimServer, service_account: tuple[Path, Path]
) -> None:
    token, ca = service_account
    config = load_incluster(token_file=token, ca_file=ca)
    assert config.server == secure_server.url
    assert config.ca_file == ca
    assert config.in_cluster and config.nearby
    assert await config.token_source.token() == "alice-token"
    assert len(await list_names(config)) > 0


@pytest.mark.usefixtures("in_pod")
async def test_a_rotated_service_account_token_is_used_without_restarting(
    monkeypatch: pytest.MonkeyPatch, secure_server: SimServer, service_account: tuple[Path, Path]
) -> None:
    clock = LoaderClock(monkeypatch)
    token, ca = service_account
    config = load_incluster(token_file=token, ca_file=ca)
    async with build_client(config) as client:
        configmaps = ApiListerWatcher(client, CONFIGMAPS)
        with pytest.raises(ApiError) as as_alice:
            await configmaps.list(ListRequest())
        assert 'User "alice" cannot list' in as_alice.value.message

        token.write_text("bob-token\n")  # kubelet rotates the projected token
        with pytest.raises(ApiError):  # within the refresh period the old token is still sent
            await configmaps.list(ListRequest())
        clock.advance(datetime.timedelta(minutes=2))
        page = await configmaps.list(ListRequest())
    assert len(page.items) > 0
    assert await config.token_source.token() == "bob-token"


def test_load_upstream_goes_in_cluster_when_the_service_env_is_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "6443")
    # (On a machine that is itself a pod, the real service-account files would be read.)
    assert not Path("/var/run/secrets/kubernetes.io/serviceaccount/token").exists()
    with pytest.raises(
        ConfigError,
        match=r"in-cluster config \(token /var/run/secrets/kubernetes.io/serviceaccount/token",
    ):
        load_upstream()


# ---------------------------------------------------------------------------- failures


async def test_a_wrong_token_is_the_api_servers_401_status(
    secure_server: SimServer, pki: TestPKI, tmp_path: Path, samples_dir: Path
) -> None:
    path = write_kubeconfig(
        tmp_path / "kubeconfig",
        secure_server.url,
        cluster={"certificate-authority": str(pki.ca_cert)},
        user={"token": "not-a-token"},
    )
    with pytest.raises(ApiError) as caught:
        await list_names(load_kubeconfig(path))
    sample = load_http(samples_dir / "protocol" / "err_unauthorized_bad_token.http")
    assert caught.value.code == sample.status == 401
    assert caught.value.status == sample.json()


async def test_an_untrusted_ca_is_a_transport_error_naming_the_tls_failure(
    secure_server: SimServer, tmp_path: Path
) -> None:
    other = generate_pki(tmp_path / "other")
    path = write_kubeconfig(
        tmp_path / "kubeconfig",
        secure_server.url,
        cluster={"certificate-authority": str(other.ca_cert)},
        user={"token": "admin-token"},
    )
    with pytest.raises(TransportError) as caught:
        await list_names(load_kubeconfig(path))
    message = str(caught.value)
    assert message.startswith(f"GET {secure_server.url}/api/v1/namespaces/ns-1/pods: ")
    assert f"TLS handshake with {secure_server.url} failed: certificate verify failed" in message
    assert not caught.value.connection_refused
    assert isinstance(caught.value.__cause__, httpx.ConnectError)


def test_a_missing_kubeconfig_is_a_config_error_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(ConfigError, match=f"kubeconfig {missing} does not exist"):
        load_upstream(missing)


def test_an_unknown_context_is_a_config_error_listing_the_contexts(tmp_path: Path) -> None:
    path = write_kubeconfig(tmp_path / "kubeconfig", "https://127.0.0.1:1", context="real")
    with pytest.raises(ConfigError) as caught:
        load_upstream(path, "imaginary")
    assert str(caught.value) == (
        f"kubeconfig {path} (context 'imaginary'): no context named 'imaginary' (contexts: real)"
    )


def test_a_kubeconfig_that_is_not_yaml_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text("clusters: [\n")
    with pytest.raises(ConfigError, match=f"kubeconfig {path}: "):
        load_kubeconfig(path)


def test_a_context_whose_cluster_is_missing_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "contexts": [{"name": "c", "context": {"cluster": "gone", "user": "u"}}],
                "clusters": [],
                "users": [],
                "current-context": "c",
            }
        )
    )
    with pytest.raises(ConfigError, match="gone"):
        load_kubeconfig(path)


def test_without_kubeconfig_or_cluster_the_error_says_where_it_looked(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "a") + ":" + str(tmp_path / "b"))
    with pytest.raises(ConfigError) as caught:
        load_upstream()
    assert str(tmp_path / "a") in str(caught.value)
    assert "KUBERNETES_SERVICE_HOST is not set" in str(caught.value)


async def test_kubeconfig_from_the_environment_is_used_when_not_in_a_cluster(
    monkeypatch: pytest.MonkeyPatch, secure_server: SimServer, pki: TestPKI, tmp_path: Path
) -> None:
    path = write_kubeconfig(
        tmp_path / "env-kubeconfig",
        secure_server.url,
        cluster={"certificate-authority": str(pki.ca_cert)},
        user={"token": "admin-token"},
    )
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'absent'}:{path}")
    config = load_upstream()
    assert config.server == secure_server.url
    assert await list_names(config)
