"""A process that writes snapshots of a changing store in a loop, for the kill -9 test
(``test_persistence_kill.py``): ``python -m tests.integration.snapshot_writer DIRECTORY``.

Generation ``g`` is written at resourceVersion ``g`` and holds :func:`count` objects, each saying
``"gen": g`` — so a reader can tell a whole snapshot from a mix of two. It prints ``writing``
once its imports are done, then writes until it is killed.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from cacheproxy.informer import Store
from cacheproxy.informer.persistence import SnapshotView, snapshot_path, write_snapshot

IDENTITY: dict[str, Any] = {"server": "https://kill-test", "resource": "/v1/pods"}


def count(generation: int) -> int:
    """Objects in generation ``generation`` (sizes vary, so a mix or a cut cannot add up)."""
    return 300 + (generation * 389) % 1700


def store() -> Store:
    return Store(kind="Pod", api_version="v1", field_indexes=("spec.nodeName",))


def pod(generation: int, i: int) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"p{i}",
            "namespace": f"ns{i % 7}",
            "labels": {"gen": str(generation)},
        },
        "spec": {"nodeName": f"node-{i % 13}", "padding": "x" * (200 + i % 700)},
        "gen": generation,
    }


def main(directory: Path) -> None:
    path = snapshot_path(directory, "pods")
    print("writing", flush=True)
    generation = 0
    while True:
        generation += 1
        s = store()
        s.replace([s.make_entry(pod(generation, i)) for i in range(count(generation))], generation)
        write_snapshot(path, SnapshotView.of(s, IDENTITY))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
