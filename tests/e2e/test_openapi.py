"""OpenAPI against a real kube-apiserver: the daemon serves the API server's documents (v2 in JSON
and protobuf, v3 trimmed to the cached group versions), so ``kubectl explain`` through the daemon
prints what it prints against the API server and ``kubectl apply`` through it is told the cache is
read-only; and the simulator's stored v3 documents are the API server's, trimmed
(``CACHEPROXY_WRITE_OPENAPI=1`` rewrites them from this server instead of comparing)."""

from __future__ import annotations

import asyncio
import gzip
import os
from collections import defaultdict
from importlib import resources
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from cacheproxy.daemon.runtime import Daemon
from cacheproxy.envtest import Cluster
from cacheproxy.kube.resources import BUILTIN_RESOURCES
from cacheproxy.kube.versions import KubeVersion
from cacheproxy.sim import openapidocs as sim_openapi
from cacheproxy.sim.simulator import REVIEW_TYPES
from tests.integration.clients import KUBECTL_VERSIONS, kubectl_binary

GUARD = 60.0
V2_PROTOBUF = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
SERVED_KEYS = {"api/v1", "apis/apps/v1"}
"""The v3 index keys of the daemon's default resources (tests/e2e/support.py)."""


@pytest.fixture(params=KUBECTL_VERSIONS)
def kubectl(request: pytest.FixtureRequest) -> str:
    return kubectl_binary(request.param)


async def _run(binary: str, *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        binary, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), GUARD)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    return proc.returncode or 0, out.decode(), err.decode()


def _direct(cluster: Cluster, cache: Path) -> list[str]:
    return ["--kubeconfig", str(cluster.admin.kubeconfig), "--cache-dir", str(cache)]


def _proxied(daemon: Daemon, cache: Path) -> list[str]:
    return ["--kubeconfig", "/dev/null", "--server", daemon.url, "--cache-dir", str(cache)]


EXPLAINED = [
    ("pods.spec.containers",),
    ("pods.spec.containers.resources", "--recursive"),
    ("deployments.spec.strategy",),
    ("configmaps",),
    ("nodes.status.conditions",),
]


@pytest.mark.kubectl
@pytest.mark.parametrize("args", EXPLAINED, ids=[" ".join(a) for a in EXPLAINED])
async def test_kubectl_explain_through_the_daemon_prints_what_the_api_server_explains(
    kubectl: str, cluster: Cluster, daemon: Daemon, tmp_path: Path, args: tuple[str, ...]
) -> None:
    code, direct, err = await _run(kubectl, *_direct(cluster, tmp_path / "d"), "explain", *args)
    assert code == 0, err
    code, proxied, err = await _run(kubectl, *_proxied(daemon, tmp_path / "p"), "explain", *args)
    assert code == 0, err
    assert direct.strip()
    assert proxied == direct


@pytest.mark.kubectl
async def test_kubectl_apply_through_the_read_only_daemon_is_told_the_cache_is_read_only(
    kubectl: str, cluster: Cluster, read_only_daemon: Daemon, tmp_path: Path
) -> None:
    daemon = read_only_daemon
    manifest = tmp_path / "cm.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: ConfigMap\n"
        "metadata: {name: through-the-cache, namespace: ns-0}\ndata: {a: b}\n"
    )
    code, out, err = await _run(
        kubectl, *_proxied(daemon, tmp_path / "p"), "apply", "-f", str(manifest)
    )
    assert code != 0, out
    assert "openapi" not in err.lower(), err
    assert "Error from server (MethodNotAllowed)" in err
    assert "cacheproxy is a read-only cache of the Kubernetes API" in err
    assert f"Send this request to the API server at {cluster.url}." in err


async def test_the_openapi_documents_are_the_api_servers(
    daemon: Daemon, upstream: httpx.AsyncClient, proxy: httpx.AsyncClient
) -> None:
    for accept in ("application/json", V2_PROTOBUF):
        up = await upstream.get("/openapi/v2", headers={"Accept": accept})
        down = await proxy.get("/openapi/v2", headers={"Accept": accept})
        assert up.status_code == down.status_code == 200
        assert down.headers["content-type"] == up.headers["content-type"]
        assert down.content == up.content
        assert down.headers["etag"] == up.headers["etag"]
        again = await proxy.get(
            "/openapi/v2", headers={"Accept": accept, "If-None-Match": down.headers["etag"]}
        )
        assert again.status_code == 304
    up_index = (await upstream.get("/openapi/v3")).json()["paths"]
    down_index = (await proxy.get("/openapi/v3")).json()["paths"]
    assert down_index == {k: v for k, v in up_index.items() if k in SERVED_KEYS}
    for entry in down_index.values():
        url = entry["serverRelativeURL"]
        up = await upstream.get(url, headers={"Accept": "application/json"})
        down = await proxy.get(url, headers={"Accept": "application/json"})
        assert down.status_code == 200
        assert down.content == up.content
        assert down.headers["cache-control"] == up.headers["cache-control"] == "public, immutable"
    stale = await proxy.get("/openapi/v3/api/v1", params={"hash": "0" * 128})
    assert stale.status_code == 301
    assert stale.headers["location"] == down_index["api/v1"]["serverRelativeURL"]
    uncached = await proxy.get("/openapi/v3/apis/rbac.authorization.k8s.io/v1")
    assert uncached.status_code == 404


def _served_by_the_simulator() -> dict[str, list[str]]:
    served: dict[str, list[str]] = defaultdict(list)
    for rtype in (*BUILTIN_RESOURCES, *REVIEW_TYPES):
        key = f"apis/{rtype.group}/{rtype.version}" if rtype.group else f"api/{rtype.version}"
        served[key].append(rtype.resource)
    return dict(served)


async def _documents(upstream: httpx.AsyncClient, keys: list[str]) -> dict[str, Any]:
    index = (await upstream.get("/openapi/v3")).json()["paths"]
    out = {}
    for key in keys:
        response = await upstream.get(index[key]["serverRelativeURL"])
        assert response.status_code == 200
        out[key] = response.json()
    return out


def _stored(live: dict[str, Any], data: str, *, write: bool) -> Any:
    """The simulator's stored documents ``data`` (first replaced by ``live`` when ``write``)."""
    path = resources.files(sim_openapi.__package__).joinpath(data)
    if write:
        Path(str(path)).write_bytes(gzip.compress(orjson.dumps(live), compresslevel=9, mtime=0))
    return orjson.loads(gzip.decompress(path.read_bytes()))


@pytest.mark.every_server
@pytest.mark.also_on("1.32")  # the simulator's stored 1.32 documents
async def test_the_simulators_openapi_is_the_api_servers_trimmed(
    cluster: Cluster, upstream: httpx.AsyncClient
) -> None:
    version = (await upstream.get("/version")).json()
    release = sim_openapi.release_of(KubeVersion.of(version))
    served = _served_by_the_simulator()
    documents = await _documents(upstream, list(served))
    live = sim_openapi.trim(documents, served, source=release.source)
    stored = _stored(live, release.data, write=bool(os.environ.get("CACHEPROXY_WRITE_OPENAPI")))
    assert stored["source"] == live["source"]
    assert stored["documents"] == live["documents"]
    assert stored["schemas"] == live["schemas"]
