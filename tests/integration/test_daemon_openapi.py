"""OpenAPI through the daemon in front of the simulator: ``kubectl explain`` prints what it prints
against the simulator directly, ``kubectl apply`` reaches its write and is told the cache is
read-only; and the simulator's own OpenAPI is served as kube-openapi serves it (index, hashes,
redirects, the empty v2 in JSON and protobuf)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import httpx
import pytest

from cacheproxy.daemon.runtime import Daemon
from cacheproxy.kube.resources import builtin
from cacheproxy.sim import SimServer
from tests.integration.clients import run_kubectl
from tests.support import until

V2_PROTOBUF = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"


EXPLAINED = [
    ("pods.spec.containers",),
    ("deployments.spec.template.spec", "--recursive"),
    ("configmaps.data",),
]


@pytest.mark.kubectl
@pytest.mark.parametrize("args", EXPLAINED, ids=[" ".join(a) for a in EXPLAINED])
async def test_kubectl_explain_through_the_daemon_prints_what_the_simulator_explains(
    kubectl: str, daemon: Daemon, demo_server: SimServer, tmp_path: Path, args: tuple[str, ...]
) -> None:
    code, direct, err = await run_kubectl(
        kubectl, demo_server.url, tmp_path / "direct", "explain", *args
    )
    assert code == 0, err
    code, proxied, err = await run_kubectl(
        kubectl, daemon.url, tmp_path / "proxied", "explain", *args
    )
    assert code == 0, err
    assert "DESCRIPTION:" in direct or "FIELDS:" in direct
    assert proxied == direct


@pytest.mark.kubectl
@pytest.mark.parametrize("change", ["create", "patch"])
async def test_kubectl_apply_through_the_daemon_is_told_the_cache_is_read_only(
    kubectl: str,
    read_only_daemon: Daemon,
    demo_server: SimServer,
    tmp_path: Path,
    change: str,
) -> None:
    name = "applied"
    if change == "patch":
        # An object the cache holds, so kubectl reads it and sends a patch.
        async with httpx.AsyncClient(base_url=demo_server.url) as sim:
            created = await sim.post(
                "/api/v1/namespaces/ns-0/configmaps", json={"metadata": {"name": name}}
            )
        assert created.status_code == 201, created.text
        assert read_only_daemon.server is not None
        configmaps = read_only_daemon.server.resources[builtin("configmaps")]
        await until(lambda: configmaps.store.get(f"ns-0/{name}") is not None, "the cache has it")
    manifest = tmp_path / "cm.yaml"
    manifest.write_text(
        f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: ns-0}}\n"
        "data: {a: b}\n"
    )
    code, out, err = await run_kubectl(
        kubectl, read_only_daemon.url, tmp_path / "p", "apply", "-f", str(manifest)
    )
    assert code != 0, out
    assert "openapi" not in err.lower(), err
    verb = "create" if change == "create" else "patch"
    assert f"it does not {verb} configmaps" in err, err
    assert f"Send this request to the API server at {demo_server.url}." in err


async def test_the_simulator_serves_openapi_v3_as_the_api_server(demo_server: SimServer) -> None:
    sim = httpx.AsyncClient(base_url=demo_server.url)
    async with sim:
        index = await sim.get("/openapi/v3")
        assert index.status_code == 200
        assert index.headers["content-type"] == "text/plain; charset=utf-8"
        paths = index.json()["paths"]
        assert {"api/v1", "apis/apps/v1", "apis/batch/v1", "apis/networking.k8s.io/v1"} <= set(
            paths
        )
        url = paths["api/v1"]["serverRelativeURL"]
        doc = await sim.get(url)
        assert doc.status_code == 200
        digest = hashlib.sha512(doc.content).hexdigest().upper()
        assert url == f"/openapi/v3/api/v1?hash={digest}"
        assert doc.headers["etag"] == f'"{digest}"'
        assert doc.headers["cache-control"] == "public, immutable"
        body = doc.json()
        pod = body["components"]["schemas"]["io.k8s.api.core.v1.Pod"]
        assert pod["x-kubernetes-group-version-kind"] == [
            {"group": "", "kind": "Pod", "version": "v1"}
        ]
        assert body["info"]["version"] == (await sim.get("/version")).json()["gitVersion"]
        stale = await sim.get("/openapi/v3/api/v1", params={"hash": "00"})
        assert stale.status_code == 301
        assert stale.headers["location"] == url
        unchanged = await sim.get(url, headers={"If-None-Match": f'"{digest}"'})
        assert unchanged.status_code == 304
        assert (await sim.get("/openapi/v3/apis/scheduling.k8s.io/v1")).status_code == 404


async def test_the_simulators_openapi_v2_is_an_empty_document(demo_server: SimServer) -> None:
    async with httpx.AsyncClient(base_url=demo_server.url) as sim:
        as_json = await sim.get("/openapi/v2", headers={"Accept": "application/json"})
        version = (await sim.get("/version")).json()["gitVersion"]
        assert as_json.json() == {
            "swagger": "2.0",
            "info": {"title": "Kubernetes", "version": version},
            "paths": {},
            "definitions": {},
        }
        as_proto = await sim.get("/openapi/v2", headers={"Accept": V2_PROTOBUF})
        assert as_proto.headers["content-type"] == (
            "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
        )
        # swagger = 1, info = 2 (title = 1, version = 2): what kube-apiserver's document starts with.
        info = b"\n\nKubernetes\x12" + bytes([len(version)]) + version.encode()
        assert as_proto.content == b"\n\x032.0\x12" + bytes([len(info)]) + info


async def test_the_read_only_daemon_passes_the_upstreams_documents_on(
    demo_server: SimServer, read_only_daemon: Daemon
) -> None:
    async with (
        httpx.AsyncClient(base_url=demo_server.url) as sim,
        httpx.AsyncClient(base_url=read_only_daemon.url) as proxy,
    ):
        for accept in ("application/json", V2_PROTOBUF):
            up = await sim.get("/openapi/v2", headers={"Accept": accept})
            down = await proxy.get("/openapi/v2", headers={"Accept": accept})
            assert down.content == up.content
        up_index = (await sim.get("/openapi/v3")).json()["paths"]
        down_index = (await proxy.get("/openapi/v3")).json()["paths"]
        # The daemon caches core and apps resources only (daemon_support.default_resources).
        assert down_index == {k: up_index[k] for k in ("api/v1", "apis/apps/v1")}
        url = down_index["apis/apps/v1"]["serverRelativeURL"]
        assert (await proxy.get(url)).content == (await sim.get(url)).content
