"""A sidecar its neighbours reach with their own identity: the daemon makes its own serving
certificate (``server.tls.selfSigned``), keeps it across restarts in ``persistence.dir``, and
writes a kubeconfig (``server.clientKubeconfig``) with which kubectl reaches it over HTTPS, its
token forwarded to upstream."""

from __future__ import annotations

import asyncio
import base64
import ssl
from pathlib import Path

import httpx
import yaml

from cacheproxy.daemon.config.model import (
    DaemonConfig,
    PersistenceSettings,
    ResourceConfig,
    ServerSettings,
    TLSSettings,
)
from cacheproxy.daemon.runtime import Daemon
from cacheproxy.kube.resources import builtin
from cacheproxy.sim import SimConfig, SimServer, Simulator
from cacheproxy.sim.policy import Policy
from cacheproxy.upstream import TokenSource, UpstreamConfig
from tests.integration.clients import KUBECTL_VERSIONS, kubectl_binary

POLICY = {
    "users": [
        {"name": "cacheproxy", "token": "daemon-token", "groups": ["system:masters"]},
        {"name": "app", "token": "app-token", "groups": ["system:masters"]},
    ],
    "rules": [],
}


def _config(tmp_path: Path) -> DaemonConfig:
    return DaemonConfig(
        resources=(ResourceConfig(rtype=builtin("pods")),),
        server=ServerSettings(
            port=0,
            tls=TLSSettings(self_signed=True),
            client_kubeconfig=tmp_path / "shared" / "kubeconfig",
        ),
        persistence=PersistenceSettings(directory=tmp_path / "state"),
    )


async def _kubectl(binary: str, kubeconfig: Path, cache: Path, *args: str) -> tuple[int, str]:
    """kubectl's exit code and what it printed (stdout), its errors in the assertion."""
    proc = await asyncio.create_subprocess_exec(
        binary,
        "--kubeconfig",
        str(kubeconfig),
        "--cache-dir",
        str(cache),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode() + err.decode() * (proc.returncode != 0)


def _manifest(tmp_path: Path, name: str) -> Path:
    # A manifest, not `kubectl create configmap`: kubectl 1.33's typed clients send protobuf,
    # which the simulator does not read (the API server does).
    path = tmp_path / f"{name}.yaml"
    doc = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"},
    }
    path.write_text(yaml.safe_dump(doc))
    return path


async def test_kubectl_reaches_a_self_signed_sidecar_through_the_kubeconfig_it_wrote(
    tmp_path: Path,
) -> None:
    sim = Simulator(config=SimConfig(policy=Policy.from_mapping(POLICY)))
    pods = sim.resource("pods")
    for i in range(3):
        sim.store.create(pods, {"metadata": {"name": f"p-{i}", "namespace": "default"}, "spec": {}})
    async with SimServer(sim) as server:
        upstream = UpstreamConfig(
            server=server.url, token_source=TokenSource.static("daemon-token")
        )
        config = _config(tmp_path)
        async with Daemon(config, upstream, manage_gc=False) as daemon:
            assert await daemon.wait_ready(10)
            kubeconfig = tmp_path / "shared" / "kubeconfig"
            doc = yaml.safe_load(kubeconfig.read_text())
            [cluster] = doc["clusters"]
            assert cluster["cluster"]["server"] == f"https://127.0.0.1:{daemon.port}"
            ca = base64.b64decode(cluster["cluster"]["certificate-authority-data"])
            assert ca == (tmp_path / "state" / "tls" / "ca.crt").read_bytes()
            # Not in a pod: no ServiceAccount token to name, so the user has none.
            assert doc["users"][0]["user"] == {}
            for version in (KUBECTL_VERSIONS[0], KUBECTL_VERSIONS[-1]):
                logged = len(sim.request_log)
                code, out = await _kubectl(
                    kubectl_binary(version),
                    kubeconfig,
                    tmp_path / f"cache-{version}",
                    "--token",
                    "app-token",
                    "create",
                    "-f",
                    str(_manifest(tmp_path, f"made-by-{version.replace('.', '-')}")),
                )
                assert code == 0, out
                created = [r for r in list(sim.request_log)[logged:] if r.verb == "create"]
                assert [r.user for r in created] == ["app"]  # the caller's token, over TLS
                code, out = await _kubectl(
                    kubectl_binary(version),
                    kubeconfig,
                    tmp_path / f"cache-{version}",
                    "--token",
                    "app-token",
                    "get",
                    "pods",
                    "-A",
                    "-o",
                    "name",
                )
                assert code == 0, out
                assert out.split() == [f"pod/p-{i}" for i in range(3)]
        first = (tmp_path / "state" / "tls" / "tls.crt").read_bytes()
        # A restart serves the kept certificate: the neighbours' trust still holds.
        async with Daemon(_config(tmp_path), upstream, manage_gc=False) as daemon:
            assert await daemon.wait_ready(10)
            assert (tmp_path / "state" / "tls" / "tls.crt").read_bytes() == first
            context = ssl.create_default_context(cafile=str(tmp_path / "state" / "tls" / "ca.crt"))
            async with httpx.AsyncClient(base_url=daemon.url, verify=context) as client:
                assert (await client.get("/readyz")).status_code == 200
            doc = yaml.safe_load(kubeconfig.read_text())
            assert doc["clusters"][0]["cluster"]["server"] == f"https://127.0.0.1:{daemon.port}"


async def test_without_persistence_the_certificate_lives_as_long_as_the_daemon(
    tmp_path: Path,
) -> None:
    async with SimServer(Simulator()) as server:
        config = DaemonConfig(
            resources=(ResourceConfig(rtype=builtin("pods")),),
            server=ServerSettings(
                port=0, tls=TLSSettings(self_signed=True), client_kubeconfig=tmp_path / "kc"
            ),
        )
        async with Daemon(config, UpstreamConfig(server=server.url), manage_gc=False) as daemon:
            assert await daemon.wait_ready(10)
            doc = yaml.safe_load((tmp_path / "kc").read_text())
            ca = tmp_path / "ca.crt"
            ca.write_bytes(
                base64.b64decode(doc["clusters"][0]["cluster"]["certificate-authority-data"])
            )
            context = ssl.create_default_context(cafile=str(ca))
            async with httpx.AsyncClient(base_url=daemon.url, verify=context) as client:
                assert (await client.get("/api/v1/pods")).status_code == 200
