"""Every kustomization under ``deploy/`` applied to a real API server with a server-side dry run:
what the schemas accept offline (tests/integration/test_deploy.py), the API server must accept
too — admission, defaulting and version-specific validation included."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from cacheproxy.daemon.config import load_config, resolve_upstream
from cacheproxy.daemon.runtime import Daemon
from cacheproxy.envtest import Cluster
from tests.e2e.support import converged, crd, create, fresh_namespace
from tests.integration.clients import kubectl_binary

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
SERVICE_MONITOR_CRD = crd("monitoring.coreos.com", "ServiceMonitor", plural="servicemonitors")


def _kubectl(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    # The kubectl of the server's minor version, as an operator of that cluster has.
    return subprocess.run(
        [
            kubectl_binary(cluster.assets.version),
            "--kubeconfig",
            str(cluster.admin.kubeconfig),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _namespaces(directory: Path) -> set[str]:
    """The namespaces the kustomization creates (its Namespace objects), after checking that
    every namespaced object is in one of them: applied to a fresh cluster, nothing is left
    waiting for a namespace nobody creates."""
    out = subprocess.run(
        ["kubectl", "kustomize", str(directory)], capture_output=True, text=True, check=True
    ).stdout
    docs = [doc for doc in yaml.safe_load_all(out) if doc]
    created = {doc["metadata"]["name"] for doc in docs if doc["kind"] == "Namespace"}
    used = {doc["metadata"]["namespace"] for doc in docs if doc["metadata"].get("namespace")}
    assert used <= created, f"{directory} puts objects in {used - created} without creating it"
    return created


def _dry_run(cluster: Cluster, directory: Path) -> subprocess.CompletedProcess[str]:
    # A server-side dry run creates nothing, so the objects in the namespaces it would create
    # would be refused: those (and only those) are created first, as the apply would.
    for ns in _namespaces(directory):
        cluster.create_namespace(ns)
    return _kubectl(cluster, "apply", "--dry-run=server", "-k", str(directory))


APPLIED = {
    "base": "deployment.apps/cacheproxy",
    "overlays/service": "deployment.apps/cacheproxy",
    "overlays/shared-service": "horizontalpodautoscaler.autoscaling/cacheproxy",
    "overlays/sidecar-1.28": "deployment.apps/shop-app",
    "overlays/tiers": "daemonset.apps/cacheproxy-node",
}
"""Each kustomization applied as it is, and one object its dry run must name."""


@pytest.mark.every_server
@pytest.mark.parametrize("kustomization", sorted(APPLIED))
def test_the_kustomization_is_accepted_by_the_api_server(
    cluster: Cluster, kustomization: str
) -> None:
    done = _dry_run(cluster, DEPLOY / kustomization)
    assert done.returncode == 0, done.stderr
    assert "(server dry run)" in done.stdout
    assert f"{APPLIED[kustomization]} created (server dry run)" in done.stdout, done.stdout


def test_every_kustomization_is_dry_run_here() -> None:
    """A new kustomization is covered by one of the tests of this module."""
    found = {str(path.parent.relative_to(DEPLOY)) for path in DEPLOY.rglob("kustomization.yaml")}
    # The native sidecar and the monitoring component have tests of their own below; the image
    # component is in every other.
    assert found == set(APPLIED) | {"overlays/sidecar", "components/monitoring", "components/image"}


@pytest.mark.every_server
def test_the_native_sidecar_needs_1_29_and_says_so(cluster: Cluster) -> None:
    # kube-apiserver 1.28 does not know init containers with restartPolicy: Always (its
    # SidecarContainers gate is off): the overlay is refused there, and its kustomization says
    # why; 1.29 and later accept it.
    done = _dry_run(cluster, DEPLOY / "overlays" / "sidecar")
    if cluster.assets.minor < (1, 29):
        assert done.returncode != 0
        assert "may not be set for init containers without restartPolicy=Always" in done.stderr
    else:
        assert done.returncode == 0, done.stderr
        assert "deployment.apps/shop-app created (server dry run)" in done.stdout
    notes = (DEPLOY / "overlays" / "sidecar" / "kustomization.yaml").read_text()
    assert "Needs Kubernetes 1.29+" in notes and "../sidecar-1.28" in notes


def test_the_monitoring_component_is_accepted_once_its_crd_is_installed(
    cluster: Cluster, tmp_path: Path
) -> None:
    with cluster.client() as client:
        response = client.post(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=SERVICE_MONITOR_CRD
        )
        assert response.status_code in (201, 409), response.text
        _wait_established(client)
    # The shared service with the component switched on, as its kustomization's comment says
    # (in a copy: kustomize takes only relative paths).
    deploy = shutil.copytree(DEPLOY, tmp_path / "deploy")
    overlay = deploy / "overlays" / "with-monitoring"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": ["../shared-service"],
                "components": ["../../components/monitoring"],
            }
        )
    )
    done = _dry_run(cluster, overlay)
    assert done.returncode == 0, done.stderr
    assert "servicemonitor.monitoring.coreos.com/cacheproxy" in done.stdout


def _wait_established(client: httpx.Client) -> None:
    name = SERVICE_MONITOR_CRD["metadata"]["name"]  # type: ignore[index]
    for _ in range(100):
        crd = client.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}").json()
        conditions = (crd.get("status") or {}).get("conditions") or []
        established = any(c["type"] == "Established" and c["status"] == "True" for c in conditions)
        # Discovery (which kubectl reads) follows a moment later.
        if established and client.get("/apis/monitoring.coreos.com/v1").status_code == 200:
            return
        time.sleep(0.1)
    raise AssertionError(f"{name} was not established")


async def test_the_tiers_example_chains_over_the_real_api_server(
    cluster: Cluster, upstream: httpx.AsyncClient, tmp_path: Path
) -> None:
    """The tiers example's two configs, as they are but for where they listen and what they
    reach: the node tier reads through the central tier with a service account token of its
    own, which the central tier reviews with the API server, and is allowed exactly what the
    node tier's generated ClusterRole grants."""
    tiers = DEPLOY / "overlays" / "tiers"
    namespace = await fresh_namespace(upstream, "tiers")
    role = yaml.safe_load((tiers / "node-clusterrole.yaml").read_text())
    role["metadata"] = {"name": namespace}  # the example's role, under a name of this test's
    binding = {
        "metadata": {"name": namespace},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": namespace,
        },
        "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": namespace}],
    }
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    await create(upstream, f"{rbac}/clusterroles", role)
    await create(upstream, f"{rbac}/clusterrolebindings", binding)
    token = await create(
        upstream, f"/api/v1/namespaces/{namespace}/serviceaccounts/default/token", {"spec": {}}
    )
    (tmp_path / "token").write_text(token["status"]["token"])

    def config(name: str, **changes: Any) -> Path:
        doc = yaml.safe_load((tiers / f"{name}-config.yaml").read_text())
        doc["upstream"] = changes.pop("upstream")
        doc["server"] = {**doc["server"], "address": "127.0.0.1", "port": 0}
        doc["persistence"]["dir"] = str(tmp_path / name / "snapshots")
        (tmp_path / name).mkdir()
        path = tmp_path / name / "config.yaml"
        path.write_text(yaml.safe_dump(doc))
        return path

    central_path = config("central", upstream={"kubeconfig": str(cluster.admin.kubeconfig)})
    async with started(central_path) as central:
        kubeconfig = yaml.safe_load((tiers / "node-kubeconfig.yaml").read_text())
        kubeconfig["clusters"][0]["cluster"]["server"] = central.url
        kubeconfig["users"][0]["user"]["tokenFile"] = str(tmp_path / "token")
        (tmp_path / "node-kubeconfig").write_text(yaml.safe_dump(kubeconfig))
        node_path = config("node", upstream={"kubeconfig": str(tmp_path / "node-kubeconfig")})
        async with (
            started(node_path) as node,
            httpx.AsyncClient(base_url=node.url, timeout=30) as proxy,
            httpx.AsyncClient(base_url=central.url, timeout=30) as anonymous,
        ):
            for path in ("/api/v1/pods", "/api/v1/nodes", "/api/v1/namespaces/ns-1/services"):
                await converged(upstream, proxy, path)
            # The central tier serves nobody else (delegated auth): the node tier's token did.
            assert (await anonymous.get("/api/v1/pods")).status_code == 401


@contextlib.asynccontextmanager
async def started(path: Path) -> AsyncIterator[Daemon]:
    config = load_config(path, env={})
    async with Daemon(config, resolve_upstream(config.upstream)) as daemon:
        assert await daemon.wait_ready(30), f"{path.parent.name} did not sync"
        yield daemon
