"""The real-cluster fixtures: kube-apiserver + etcd of each server version, started once per test
session (per xdist worker) when a test first needs it, seeded with the demo cluster, stopped at
the end.

The servers are found as controller-runtime's envtest finds its assets: ``$KUBEBUILDER_ASSETS``,
else ``../shared/envtest`` beside the repository and the folders in it (1.28, ``1.32/``,
``1.36/``);
``$CACHEPROXY_ENVTEST_VERSIONS`` picks among them (``make e2e KUBE=1.32``). A test runs against
the oldest server; a test or module marked ``every_server`` runs against each of the suite's
(its id ends in ``kube1.28``, ``kube1.36``): that is where the versions behave differently
(watch-lists, consistent lists, discovery and Tables, the differential test); one also marked
``also_on("1.32")`` runs against 1.32 as well (``tests/conftest.py`` ``PARTIAL_VERSIONS``), where
that version behaves unlike both (``also_on("1.32", only=(patterns…))``: only its cases whose
names match). Without any server every test here is left
out with one line saying how to get them — unless ``CACHEPROXY_REQUIRE_ENVTEST`` is set (CI),
where a missing server fails the run instead. A test that reads the API server's audit log asks
for :func:`audited_cluster`, a cluster of its own (the log slows every request).
"""

from __future__ import annotations

import asyncio
import fnmatch
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from cacheproxy.daemon.runtime import Daemon
from cacheproxy.envtest import ASSETS_HINT, Cluster
from tests.conftest import ENVTEST_PARTIAL, ENVTEST_SERVERS, REQUIRE_ENV, required_versions
from tests.e2e.support import daemon_over, demo

HERE = Path(__file__).resolve().parent
SUITE = {assets.version: assets for assets in ENVTEST_SERVERS}
PARTIAL = {assets.version: assets for assets in ENVTEST_PARTIAL}
SERVERS = {**SUITE, **PARTIAL}
OLDEST = next(iter(SUITE), "")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "kube" not in metafunc.fixturenames:
        return
    every = metafunc.definition.get_closest_marker("every_server") is not None
    versions = list(SUITE) if every else [OLDEST]
    also = {v for m in metafunc.definition.iter_markers("also_on") for v in m.args}
    versions += [v for v in PARTIAL if v in also]
    versions.sort(key=lambda v: SERVERS[v].minor if v else (0, 0))
    metafunc.parametrize("kube", versions or [""], ids=lambda v: f"kube{v}" if v else "none")


def _not_on_partial(item: pytest.Item) -> bool:
    """Whether ``item`` runs on a server of ``PARTIAL_VERSIONS`` that its ``also_on`` marker
    names with ``only`` patterns (of test names: ``"*[[]*pages/*"``) none of which it matches."""
    callspec = getattr(item, "callspec", None)
    kube = callspec.params.get("kube") if callspec is not None else None
    if kube not in PARTIAL:
        return False
    patterns = [
        p for m in item.iter_markers("also_on") if kube in m.args for p in m.kwargs.get("only", ())
    ]
    return bool(patterns) and not any(fnmatch.fnmatchcase(item.name, p) for p in patterns)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    ours = [item for item in items if HERE in Path(str(item.path)).parents]
    for item in ours:
        item.add_marker(pytest.mark.envtest)
    elsewhere = [item for item in ours if _not_on_partial(item)]
    if elsewhere:
        config.hook.pytest_deselected(items=elsewhere)
        items[:] = [item for item in items if item not in set(elsewhere)]
        ours = [item for item in ours if item not in set(elsewhere)]
    missing = required_versions()
    if missing:
        names = ", ".join(v or "(any)" for v in missing)
        found = ", ".join(f"{v} ({a.kube_apiserver.parent})" for v, a in SERVERS.items())
        raise pytest.UsageError(
            f"{REQUIRE_ENV} requires kube-apiserver {names}, not found (found: {found or 'none'}"
            f"): {ASSETS_HINT}"
        )
    if not SERVERS and ours:
        # Left out with one line in the summary (tests/conftest.py), not a skip line per test.
        config.hook.pytest_deselected(items=ours)
        items[:] = [item for item in items if item not in set(ours)]


class Clusters:
    """The real clusters of one test session, by version and kind, each started when first
    asked for and stopped at the end of the session."""

    def __init__(self) -> None:
        self._started: dict[tuple[str, bool], Cluster] = {}
        self._audited: dict[str, Cluster] = {}

    def get(self, version: str, *, watch_list_gate: bool = False) -> Cluster:
        """The cluster of ``version`` holding the demo cluster. ``watch_list_gate``: one started
        with ``--feature-gates WatchList=true`` where the gate is off by default (before 1.32);
        from 1.32 on that is the plain cluster."""
        assets = SERVERS[version]
        gate = watch_list_gate and assets.minor < (1, 32)
        key = (version, gate)
        if key not in self._started:
            cluster = Cluster(assets, feature_gates={"WatchList": True} if gate else {})
            cluster.start()
            try:
                asyncio.run(cluster.load(demo()))
            except BaseException:
                cluster.stop()
                raise
            self._started[key] = cluster
        return self._started[key]

    def audited(self, version: str) -> Cluster:
        """The cluster of ``version`` writing an audit log (:meth:`Cluster.audit_events`), with
        no demo objects. Its own: the log costs every request a write (a third more time for a
        small get), which the other clusters' tests need not pay."""
        if version not in self._audited:
            self._audited[version] = Cluster(SERVERS[version], audit=True).start()
        return self._audited[version]

    def stop(self) -> None:
        for cluster in [*self._started.values(), *self._audited.values()]:
            cluster.stop()
        self._started.clear()
        self._audited.clear()


@pytest.fixture(scope="session")
def clusters() -> Iterator[Clusters]:
    started = Clusters()
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture
def cluster(clusters: Clusters, kube: str) -> Cluster:
    """A real API server (no feature gates) holding the demo cluster. Tests that write make
    objects of their own (unique names) and leave the demo objects as they are."""
    return clusters.get(kube)


@pytest.fixture
def watchlist_cluster(clusters: Clusters, kube: str) -> Cluster:
    """A real API server serving watch-lists (1.28: started with ``WatchList=true``), holding
    the demo cluster."""
    return clusters.get(kube, watch_list_gate=True)


@pytest.fixture
def audited_cluster(clusters: Clusters, kube: str) -> Cluster:
    """A real API server writing an audit log of every request, without the demo cluster."""
    return clusters.audited(kube)


@pytest.fixture
async def daemon(cluster: Cluster, tmp_path: Path) -> AsyncIterator[Daemon]:
    """cacheproxy in its default configuration in front of :func:`cluster`."""
    async with daemon_over(cluster, tmp_path) as d:
        yield d


@pytest.fixture
async def read_only_daemon(cluster: Cluster, tmp_path: Path) -> AsyncIterator[Daemon]:
    """cacheproxy with pass-through off (what the cache does not answer is refused)."""
    async with daemon_over(cluster, tmp_path, extra={"passthrough.enabled": False}) as d:
        yield d


@pytest.fixture
async def upstream(cluster: Cluster) -> AsyncIterator[httpx.AsyncClient]:
    """The API server, as admin."""
    async with cluster.async_client() as c:
        yield c


@pytest.fixture
async def proxy(daemon: Daemon) -> AsyncIterator[httpx.AsyncClient]:
    """The daemon."""
    async with httpx.AsyncClient(base_url=daemon.url, timeout=30) as c:
        yield c
