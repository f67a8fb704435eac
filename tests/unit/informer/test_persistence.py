"""The snapshot file: what is written comes back as the same entries, and anything but a whole,
valid snapshot of the same identity is refused with one sentence saying why."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import orjson
import pytest

from cacheproxy.informer import Store
from cacheproxy.informer.persistence import (
    FORMAT_VERSION,
    MAGIC,
    SnapshotRejected,
    SnapshotView,
    read_snapshot,
    remove_temporaries,
    snapshot_path,
    write_snapshot,
)

IDENTITY = {"server": "https://api:6443", "resource": "pods", "labelSelector": None}


def pod(name: str, node: str, **labels: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "labels": labels, "resourceVersion": "7"},
        "spec": {"nodeName": node},
    }


def store(indexes: tuple[str, ...] = ("spec.nodeName",)) -> Store:
    return Store(kind="Pod", api_version="v1", field_indexes=indexes)


def filled() -> Store:
    s = store()
    s.replace([s.make_entry(pod(f"p{i}", f"n{i % 3}", app=f"a{i % 2}")) for i in range(50)], 42)
    # An object of another type than the store's keeps its own prefix.
    s.put(s.make_entry({"kind": "Other", "apiVersion": "x/v1", "metadata": {"name": "odd"}}))
    return s


def written(tmp_path: Path, s: Store | None = None) -> Path:
    path = snapshot_path(tmp_path, "pods")
    write_snapshot(path, SnapshotView.of(s or filled(), IDENTITY))
    return path


def test_a_snapshot_comes_back_as_the_same_entries_at_the_same_rv(tmp_path: Path) -> None:
    original = filled()
    path = written(tmp_path, original)
    target = store()
    entries, rv = read_snapshot(path, identity=IDENTITY, store=target)
    assert rv == 42
    assert [(e.key, e.raw, e.labels, e.values) for e in entries] == [
        (e.key, e.raw, e.labels, e.values) for e in original.entries()
    ]
    target.replace(entries, rv)
    assert target.index_keys("spec.nodeName", "n1") == original.index_keys("spec.nodeName", "n1")
    assert target.label_keys("app", "a0") == original.label_keys("app", "a0")
    assert list(path.parent.iterdir()) == [path]  # no temporary left


def test_a_snapshot_written_with_other_indexes_is_reindexed(tmp_path: Path) -> None:
    path = written(tmp_path)
    target = store(("metadata.labels.app",))
    entries, _ = read_snapshot(path, identity=IDENTITY, store=target)
    target.replace(entries, 42)
    assert len(target.index_keys("metadata.labels.app", "a1")) == 25


def test_names_with_slashes_make_plain_file_names(tmp_path: Path) -> None:
    assert snapshot_path(tmp_path, "apps/v1/deployments").name == "apps_v1_deployments.snapshot"


def rejected(path: Path, **kwargs: Any) -> str:
    with pytest.raises(SnapshotRejected) as err:
        read_snapshot(path, identity=kwargs.get("identity", IDENTITY), store=store())
    return str(err.value)


def test_a_truncated_snapshot_is_refused_at_every_length(tmp_path: Path) -> None:
    path = written(tmp_path)
    data = path.read_bytes()
    for length in (0, 5, len(MAGIC) + 3, len(data) // 3, len(data) // 2, len(data) - 1):
        path.write_bytes(data[:length])
        assert rejected(path).split(":")[0] in (
            "truncated",
            "not a cacheproxy snapshot (no magic line)",
        )


def test_a_flipped_byte_anywhere_is_refused(tmp_path: Path) -> None:
    path = written(tmp_path)
    data = path.read_bytes()
    for at in range(len(MAGIC), len(data), max(1, len(data) // 40)):
        damaged = bytearray(data)
        damaged[at] ^= 0x01
        path.write_bytes(bytes(damaged))
        assert rejected(path).startswith(("corrupt", "truncated", "format version", "foreign"))


def test_another_configurations_snapshot_is_foreign(tmp_path: Path) -> None:
    path = written(tmp_path)
    other = {**IDENTITY, "labelSelector": "app=x"}
    assert rejected(path, identity=other) == "foreign: written for another labelSelector"


def test_another_format_version_is_refused(tmp_path: Path) -> None:
    path = written(tmp_path)
    data = path.read_bytes()
    end = data.index(b"\n", len(MAGIC))
    header = orjson.loads(data[len(MAGIC) : end])
    header["format"] = FORMAT_VERSION + 1
    body = MAGIC + orjson.dumps(header) + data[end:-32]
    path.write_bytes(body + hashlib.sha256(body).digest())
    assert rejected(path) == f"format version {FORMAT_VERSION + 1}, this cacheproxy reads 1"


def test_a_valid_checksum_over_bad_records_is_still_refused(tmp_path: Path) -> None:
    path = written(tmp_path)
    data = path.read_bytes()
    end = data.index(b"\n", len(MAGIC))
    header = orjson.loads(data[len(MAGIC) : end])
    header["count"] += 1
    body = MAGIC + orjson.dumps(header) + data[end:-32]
    path.write_bytes(body + hashlib.sha256(body).digest())
    assert rejected(path).startswith("corrupt: a record line runs past the end")


def test_an_interrupted_write_leaves_the_old_snapshot_and_a_temporary_to_remove(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = written(tmp_path)
    before = path.read_bytes()

    def fail(fd: int) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(os, "fsync", fail)
    with pytest.raises(OSError, match="disk gone"):
        write_snapshot(path, SnapshotView.of(store(), IDENTITY))
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert list(tmp_path.iterdir()) == [path]  # the failed write cleaned up after itself
    (tmp_path / f".{path.name}.abc.tmp").write_bytes(b"partial")
    assert remove_temporaries(path) == 1
    assert list(tmp_path.iterdir()) == [path]
