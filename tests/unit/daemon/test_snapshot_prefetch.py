"""``cacheproxy serve`` reads its snapshots in a thread while the upstream's credentials load: a
restore uses what was read only while the file is still the one read, and what no restore took
is dropped when the persister starts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cacheproxy.daemon import warmrestart
from cacheproxy.daemon.warmrestart import CachePersister, PersistenceOptions, prefetch_snapshots
from cacheproxy.informer import Collection, FakeListerWatcher, SharedInformer, Store, Transform
from cacheproxy.informer.persistence import (
    SnapshotFile,
    SnapshotView,
    read_snapshot,
    write_snapshot,
)
from cacheproxy.kube.resources import builtin

CMS = Collection(builtin("configmaps"))
IDENTITY = {"server": "https://api:6443"}


def cm(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default"}, "data": {"k": name}}


def snapshot(path: Path, *names: str, rv: int = 5) -> None:
    store = Store(kind="ConfigMap", api_version="v1")
    store.replace([store.make_entry(cm(n)) for n in names], rv)
    write_snapshot(path, SnapshotView.of(store, IDENTITY))


def test_a_file_read_ahead_gives_the_same_entries(tmp_path: Path) -> None:
    path = tmp_path / "configmaps.snapshot"
    snapshot(path, "a", "b")
    read = SnapshotFile.read(path)
    assert read.current(path)
    store = Store(kind="ConfigMap", api_version="v1")
    ahead, rv = read_snapshot(path, identity=IDENTITY, store=store, read=read)
    now, _ = read_snapshot(path, identity=IDENTITY, store=store)
    assert rv == 5 and [e.raw for e in ahead] == [e.raw for e in now]


def test_a_file_rewritten_since_is_not_the_one_read(tmp_path: Path) -> None:
    path = tmp_path / "configmaps.snapshot"
    snapshot(path, "a")
    read = SnapshotFile.read(path)
    snapshot(path, "a", "b", rv=6)  # a new file renamed over the old one
    assert not read.current(path)
    path.unlink()
    assert not read.current(path)


def test_prefetched_snapshots_are_used_while_current(tmp_path: Path) -> None:
    options = PersistenceOptions(directory=tmp_path)
    for name in ("configmaps", "secrets"):
        snapshot(tmp_path / f"{name}.snapshot", "a")
    prefetch_snapshots(options, ["configmaps", "secrets", "pods"])  # no pods.snapshot: skipped
    configmaps, secrets = tmp_path / "configmaps.snapshot", tmp_path / "secrets.snapshot"
    try:
        assert set(warmrestart._prefetched) == {configmaps, secrets}
        warmrestart._prefetched[secrets].result()
        snapshot(secrets, "a", "b", rv=9)  # rewritten since it was read
        assert warmrestart._take_prefetched(secrets) is None  # read again by the restore
        assert warmrestart._take_prefetched(configmaps) is not None
        assert warmrestart._take_prefetched(configmaps) is None  # taken once
    finally:
        warmrestart._prefetched.clear()


async def test_what_no_restore_took_is_dropped_when_the_persister_starts(tmp_path: Path) -> None:
    options = PersistenceOptions(directory=tmp_path)
    snapshot(tmp_path / "configmaps.snapshot", "a")
    snapshot(tmp_path / "secrets.snapshot", "a")
    prefetch_snapshots(options, ["configmaps", "secrets"])
    keeper = CachePersister(options, server=IDENTITY["server"])
    informer = SharedInformer(
        FakeListerWatcher(), name="configmaps", store=Store(kind="ConfigMap", api_version="v1")
    )
    keeper.track("configmaps", informer, collection=CMS, transform=Transform())
    assert set(warmrestart._prefetched) == {tmp_path / "secrets.snapshot"}
    keeper.start()
    assert warmrestart._prefetched == {}
    await keeper.stop()
