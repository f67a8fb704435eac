"""A real control plane with cacheproxy as its only server: kube-controller-manager and
kube-scheduler 1.36 and a fake kubelet talk to the daemon (TLS, the admin's token), the daemon to
kube-apiserver, and the scenario of :mod:`cacheproxy.envtest.scenario` (Deployments scaled and
rolled out, a Job, a DaemonSet, a StatefulSet, Endpoints and EndpointSlices, PDB and quota status,
garbage collection, namespace deletion) must converge, as judged on the API server. How long each
step took is printed, never judged (``python -m loadtest controlplane`` compares it with direct).

It needs a server folder that has kube-controller-manager and kube-scheduler beside kube-apiserver
(``../shared/envtest/1.36/``), whatever servers the rest of the suite runs on; without one it is
skipped, or fails when ``CACHEPROXY_REQUIRE_ENVTEST`` is set.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from cacheproxy.daemon.runtime import Daemon
from cacheproxy.envtest import (
    Assets,
    Cluster,
    ControlPlane,
    FakeKubelet,
    find_all_assets,
)
from cacheproxy.envtest.scenario import CACHED_RESOURCES, STEPS, run_scenario
from cacheproxy.sim.testpki import generate_pki
from tests.conftest import ENVTEST_ROOT, REQUIRE_ENV
from tests.e2e.support import counters, daemon_over

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

NODES = ("node-a", "node-b")


WITH_CONTROL_PLANE = next(
    (a for a in reversed(find_all_assets(ENVTEST_ROOT)) if a.has_control_plane), None
)
"""The newest server folder that has kube-controller-manager and kube-scheduler, whichever
servers the suite runs on (:data:`tests.conftest.SUITE_VERSIONS`)."""
_KUBE_ID = f"kube{WITH_CONTROL_PLANE.version}" if WITH_CONTROL_PLANE else "none"
"""The test's id names its server, as the other real-server tests' ids do (the suite's summary
counts it under that server)."""


@pytest.fixture(scope="module", params=[WITH_CONTROL_PLANE], ids=[_KUBE_ID])
def control_plane_assets(request: pytest.FixtureRequest) -> Assets:
    found: Assets | None = request.param
    if found is None:
        why = (
            "no server folder with kube-controller-manager and kube-scheduler beside "
            "kube-apiserver: set KUBEBUILDER_ASSETS to one (../shared/envtest/1.36/)"
        )
        if os.environ.get(REQUIRE_ENV, "").strip():
            pytest.fail(f"{REQUIRE_ENV} is set: {why}")
        pytest.skip(why)
    return found


@pytest.fixture(scope="module")
def cluster_36(control_plane_assets: Assets) -> Iterator[Cluster]:
    """etcd and kube-apiserver of the control plane's folder, nothing in them (its own: the
    controllers act on everything they find)."""
    with Cluster(control_plane_assets) as cluster:
        yield cluster


@contextlib.asynccontextmanager
async def _running(plane: ControlPlane) -> AsyncIterator[ControlPlane]:
    """``plane`` started and stopped without blocking the event loop: the controllers wait for
    the daemon serving on it."""
    await plane.start_async()
    try:
        yield plane
    finally:
        await asyncio.to_thread(plane.stop)


async def test_the_control_plane_converges_with_cacheproxy_as_its_only_server(
    control_plane_assets: Assets, cluster_36: Cluster, tmp_path: Path
) -> None:
    pki = generate_pki(tmp_path / "pki", hosts=("127.0.0.1",))
    tls = {"server.tls.certFile": str(pki.server_cert), "server.tls.keyFile": str(pki.server_key)}
    (tmp_path / "daemon").mkdir()
    plane = ControlPlane(
        control_plane_assets,
        tmp_path / "control-plane",
        server="",
        ca_file=pki.ca_cert,
        token=cluster_36.admin.token,
        service_account_key=cluster_36.workdir / "sa.key" if cluster_36.workdir else Path(),
        root_ca=cluster_36.ca_file,
    )
    async with daemon_over(
        cluster_36, tmp_path / "daemon", resources=list(CACHED_RESOURCES), extra=tls
    ) as daemon:
        assert daemon.url.startswith("https://")
        plane.server = daemon.url
        async with (
            _running(plane),
            httpx.AsyncClient(
                base_url=daemon.url,
                verify=ssl.create_default_context(cafile=str(pki.ca_cert)),
                headers=cluster_36.admin.headers,
                timeout=30,
            ) as through,
            FakeKubelet(through, NODES) as kubelet,
            cluster_36.async_client() as upstream,
        ):
            results = await run_scenario(upstream, namespace="scenario", nodes=len(NODES))
            alive = plane.pids
            watched = _watchers(daemon)
        for r in results:
            print(
                f"{r.name:<36} {'converged' if r.converged else 'NOT converged'} {r.seconds:.3f} s"
            )

        failed = [f"{r.name}: {r.detail}" for r in results if not r.converged]
        assert not failed, f"did not converge through cacheproxy: {failed}"
        assert [r.name for r in results] == [name for name, _ in STEPS]
        assert set(alive) == {"kube-controller-manager", "kube-scheduler"}, (
            f"a controller exited during the run:\n{_tails(plane)}"
        )
        assert kubelet.pods_started >= 10 and kubelet.pods_completed == 1
        _assert_the_controllers_went_through(daemon)
        # Only the controllers watch these (the kubelet watches pods; the scenario asks upstream).
        for resource in ("deployments", "replicasets", "statefulsets", "daemonsets", "jobs"):
            assert watched.get(resource, 0) >= 1, f"nobody watched {resource}: {watched}"


def _assert_the_controllers_went_through(daemon: Daemon) -> None:
    """The controllers' writes were passed through: the pods the ReplicaSet controller
    created."""
    forwarded = counters(daemon, "cacheproxy_passthrough_requests_total")
    created = sum(
        v
        for labels, v in forwarded.items()
        if dict(labels)["verb"] == "create" and dict(labels)["resource"] == "pods"
    )
    assert created >= 10, f"pod creations passed through: {created} ({forwarded})"


def _watchers(daemon: Daemon) -> dict[str, float]:
    """Open watches the daemon serves from its cache now, by resource (``deployments``)."""
    return {
        dict(labels)["resource"].rsplit("/", 1)[-1]: value
        for labels, value in counters(daemon, "cacheproxy_watch_watchers").items()
    }


def _tails(plane: ControlPlane) -> str:
    return "\n".join(p.tail() for p in (plane.kcm, plane.scheduler) if p is not None)
