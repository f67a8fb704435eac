"""The real-cluster fixtures: kube-apiserver + etcd, started once per test session (per xdist
worker), seeded with the demo cluster, stopped at the end.

The assets are found as controller-runtime's envtest finds them: ``$KUBEBUILDER_ASSETS``, else
``../shared/envtest`` beside the repository. Without them every test here is skipped with one
line saying how to get them — unless ``CACHEPROXY_REQUIRE_ENVTEST`` is set (CI), where missing
assets fail the run instead.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from cacheproxy.daemon.runtime import Daemon
from cacheproxy.envtest import ASSETS_HINT, Assets, Cluster
from tests.conftest import ENVTEST_ASSETS as ASSETS
from tests.e2e.support import daemon_over, demo

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    required = bool(os.environ.get("CACHEPROXY_REQUIRE_ENVTEST"))
    ours = [item for item in items if HERE in Path(str(item.path)).parents]
    for item in ours:
        item.add_marker(pytest.mark.envtest)
    if ASSETS is None and not required and ours:
        # Left out with one line in the summary (tests/conftest.py), not a skip line per test.
        config.hook.pytest_deselected(items=ours)
        items[:] = [item for item in items if item not in set(ours)]


def _assets() -> Assets:
    if ASSETS is None:
        pytest.fail(f"CACHEPROXY_REQUIRE_ENVTEST is set but {ASSETS_HINT}")
    return ASSETS


def _started(**options: object) -> Iterator[Cluster]:
    cluster = Cluster(_assets(), **options)  # type: ignore[arg-type]
    cluster.start()
    try:
        asyncio.run(cluster.load(demo()))
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    """A real API server (no feature gates) holding the demo cluster. Tests that write make
    objects of their own (unique names) and leave the demo objects as they are."""
    yield from _started()


@pytest.fixture(scope="session")
def watchlist_cluster() -> Iterator[Cluster]:
    """A real API server with ``--feature-gates WatchList=true``, holding the demo cluster."""
    yield from _started(feature_gates={"WatchList": True})


@pytest.fixture
async def daemon(cluster: Cluster, tmp_path: Path) -> AsyncIterator[Daemon]:
    """cacheproxy in its default configuration in front of :func:`cluster`."""
    async with daemon_over(cluster, tmp_path) as d:
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
