"""kill -9 while persisting: a process writing snapshots in a loop is killed at random points, 60
times; each time, what the next start reads is a whole, checksum-valid snapshot of one generation
(its count of objects, every one of them from that generation) or nothing — never a part of one,
never a mix of two. Every fourth run starts from an empty directory, so some kills land in the
first write. Leftover temporary files are removed by the next start."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import orjson

from cacheproxy.informer.persistence import (
    SnapshotRejected,
    read_snapshot,
    remove_temporaries,
    snapshot_path,
)
from tests.integration.snapshot_writer import IDENTITY, count, store

ROOT = Path(__file__).resolve().parents[2]
ITERATIONS = 60


def start_writer(directory: Path) -> subprocess.Popen[str]:
    writer = subprocess.Popen(
        [sys.executable, "-m", "tests.integration.snapshot_writer", str(directory)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert writer.stdout is not None
    assert writer.stdout.readline().strip() == "writing"
    return writer


def next_start(directory: Path) -> str:
    """What a start makes of the directory: ``loaded``, ``none`` or ``rejected``; asserts that a
    loaded snapshot is whole."""
    path = snapshot_path(directory, "pods")
    remove_temporaries(path)
    assert [p.name for p in directory.iterdir()] in ([], [path.name])
    try:
        entries, rv = read_snapshot(path, identity=IDENTITY, store=store())
    except FileNotFoundError:
        return "none"
    except SnapshotRejected:
        return "rejected"
    assert len(entries) == count(rv)
    assert {orjson.loads(e.raw)["gen"] for e in entries} == {rv}
    assert len({e.key for e in entries}) == len(entries)
    return "loaded"


def test_a_snapshot_killed_mid_write_is_whole_or_absent_never_partial(tmp_path: Path) -> None:
    rng = random.Random(18)
    outcomes: Counter[str] = Counter()
    leftovers = 0
    for iteration in range(ITERATIONS):
        if iteration % 4 == 0:  # now and then from nothing: a kill during the first write
            for stale in tmp_path.iterdir():
                stale.unlink()
        writer = start_writer(tmp_path)
        time.sleep(rng.uniform(0.0, 0.03 if iteration % 4 == 0 else 0.25))
        writer.send_signal(signal.SIGKILL)
        writer.wait(10)
        assert writer.stdout is not None
        writer.stdout.close()
        assert writer.returncode == -signal.SIGKILL
        leftovers += sum(1 for p in tmp_path.iterdir() if p.name.endswith(".tmp"))
        outcomes[next_start(tmp_path)] += 1
    print(f"outcomes over {ITERATIONS} kills: {dict(outcomes)}; temporaries left: {leftovers}")
    # "none": killed before the first snapshot was complete: the start finds nothing to load.
    # The rename is atomic: once one snapshot was complete, every start finds a whole one.
    assert outcomes["rejected"] == 0
    assert outcomes["loaded"] >= ITERATIONS // 2
    assert leftovers > 0  # most kills landed mid-write
