"""The daemon's snapshots: written when a resource moved, restored at start when whole and this
configuration's, and otherwise ignored with one log line."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from cacheproxy.daemon.warmrestart import CachePersister, PersistenceOptions, identity_of
from cacheproxy.informer import Collection, FakeListerWatcher, SharedInformer, Store, Transform
from cacheproxy.informer.informer import CacheState
from cacheproxy.kube.resources import builtin
from tests.support import running_informer

CMS = Collection(builtin("configmaps"))
TRANSFORM = Transform()
SERVER = "https://api.example:6443"


def cm(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default"}, "data": {"k": name}}


def files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def informer(lw: FakeListerWatcher) -> SharedInformer:
    return SharedInformer(lw, name="configmaps", store=Store(kind="ConfigMap", api_version="v1"))


def persister(tmp_path: Path, **options: Any) -> CachePersister:
    return CachePersister(PersistenceOptions(directory=tmp_path, **options), server=SERVER)


async def saved_once(tmp_path: Path, lw: FakeListerWatcher) -> None:
    first = informer(lw)
    keeper = persister(tmp_path)
    keeper.track("configmaps", first, collection=CMS, transform=TRANSFORM)
    async with running_informer(first):
        keeper.start()
        assert await keeper.save() == 1
        assert await keeper.save() == 0  # nothing moved: not rewritten
    await keeper.stop()


@pytest.fixture
def lw() -> FakeListerWatcher:
    fake = FakeListerWatcher()
    for name in ("a", "b"):
        fake.emit("ADDED", cm(name))
    return fake


async def test_a_saved_state_restores_the_next_informer_without_a_list(
    tmp_path: Path, lw: FakeListerWatcher, caplog: pytest.LogCaptureFixture
) -> None:
    await saved_once(tmp_path, lw)
    assert files(tmp_path) == ["configmaps.snapshot"]
    lw.requests.clear()
    second = informer(lw)
    with caplog.at_level(logging.INFO, "cacheproxy.daemon.warmrestart"):
        persister(tmp_path).track("configmaps", second, collection=CMS, transform=TRANSFORM)
    assert "configmaps: restored 2 objects at resourceVersion 3" in caplog.text
    async with running_informer(second):
        assert second.state is CacheState.CONFIRMED
        assert sorted(second.store.keys()) == ["default/a", "default/b"]
    assert all(getattr(r, "resource_version", None) == "3" for r in lw.requests)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"server": "https://other:6443"}, "foreign: written for another server"),
        ({"collection": Collection(builtin("configmaps"), namespace="x")}, "another namespace"),
        ({"transform": Transform(drop_fields=())}, "foreign: written for another transform"),
    ],
)
async def test_another_configurations_snapshot_is_ignored_with_one_line(
    tmp_path: Path,
    lw: FakeListerWatcher,
    caplog: pytest.LogCaptureFixture,
    change: dict[str, Any],
    reason: str,
) -> None:
    await saved_once(tmp_path, lw)
    second = informer(lw)
    keeper = CachePersister(
        PersistenceOptions(directory=tmp_path), server=change.get("server", SERVER)
    )
    with caplog.at_level(logging.INFO, "cacheproxy.daemon.warmrestart"):
        keeper.track(
            "configmaps",
            second,
            collection=change.get("collection", CMS),
            transform=change.get("transform", TRANSFORM),
        )
    [line] = [r.getMessage() for r in caplog.records]
    assert "ignoring the snapshot" in line and reason in line
    assert second.state is CacheState.SYNCING and len(second.store) == 0


async def test_a_damaged_snapshot_is_ignored_and_a_cold_start_follows(
    tmp_path: Path, lw: FakeListerWatcher, caplog: pytest.LogCaptureFixture
) -> None:
    await saved_once(tmp_path, lw)
    path = tmp_path / "configmaps.snapshot"
    path.write_bytes(path.read_bytes()[:-10])
    (tmp_path / ".configmaps.snapshot.x1.tmp").write_bytes(b"left by a killed write")
    second = informer(lw)
    with caplog.at_level(logging.WARNING, "cacheproxy.daemon.warmrestart"):
        persister(tmp_path).track("configmaps", second, collection=CMS, transform=TRANSFORM)
    assert "ignoring the snapshot" in caplog.text and "truncated" in caplog.text
    assert files(tmp_path) == ["configmaps.snapshot"]
    async with running_informer(second):
        assert second.state is CacheState.SYNCED


def test_the_identity_names_the_upstream_the_resource_its_selectors_and_transform() -> None:
    collection = Collection(builtin("deployments"), namespace="ns", label_selector="app=x")
    assert identity_of(SERVER, collection, TRANSFORM) == {
        "server": SERVER,
        "resource": "apps/v1/deployments",
        "namespace": "ns",
        "labelSelector": "app=x",
        "fieldSelector": "",
        "transform": {"dropFields": ["metadata.managedFields"], "metadataOnly": False},
    }


async def test_a_resource_that_never_synced_is_not_written(
    tmp_path: Path, lw: FakeListerWatcher
) -> None:
    keeper = persister(tmp_path)
    keeper.track("configmaps", informer(lw), collection=CMS, transform=TRANSFORM)
    assert await keeper.save() == 0
    assert files(tmp_path) == []


async def test_snapshots_are_written_every_interval_and_at_stop(
    tmp_path: Path, lw: FakeListerWatcher
) -> None:
    inf = informer(lw)
    keeper = persister(tmp_path, interval=0.05)
    keeper.track("configmaps", inf, collection=CMS, transform=TRANSFORM)
    async with running_informer(inf):
        keeper.start()
        for _ in range(200):
            if "configmaps.snapshot" in files(tmp_path):
                break
            await asyncio.sleep(0.01)
        assert "configmaps.snapshot" in files(tmp_path)
        lw.emit("ADDED", cm("c"))
        for _ in range(200):
            if "default/c" in inf.store:
                break
            await asyncio.sleep(0.01)
    await keeper.stop()
    restored = informer(lw)
    persister(tmp_path).track("configmaps", restored, collection=CMS, transform=TRANSFORM)
    async with running_informer(restored):
        assert "default/c" in restored.store
