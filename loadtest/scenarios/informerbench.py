"""cacheproxy's informer beside the official Python client's, on a real kube-apiserver.

``python -m loadtest informerbench --kube 1.28 --pods 10000 50000 --repeat 1 --out DIR``: for each
N, a fresh etcd + kube-apiserver (the envtest assets of ``--kube``) holding N pods of ~7 KB (with
their managedFields, as the API server keeps them) and the other objects of
:mod:`loadtest.harness.realcluster`; then ``--repeat`` rounds, in alternating order, of one
process per client (:mod:`loadtest.clients.informersync`) syncing every pod:

- ``cacheproxy`` — ``cacheproxy.controller.InformerFactory`` and a pods informer, defaults;
- ``cacheproxy-full`` — the same keeping every field (what the official client holds);
- ``official`` — ``kubernetes.informer.SharedInformer`` (kubernetes 37+).

Reported per N, as medians: seconds from the informer's start to every pod in its cache, the
resident memory the synced pods add to the process (after a full collection, over the same
process just before the informer started, its libraries imported), the process's peak, and the
ratios to the official client (the issue's bar: memory ≤ 1/5, sync ≤ 1/3). Nothing is asserted.
Without the assets: exits 2 with a hint, or 0 after saying it skipped with
``--skip-without-assets`` (``make bench``).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime as dt
import gc
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from cacheproxy.envtest import Assets, Cluster
from loadtest.clients.informersync import CLIENTS
from loadtest.harness.realcluster import (
    NoServer,
    add_kube_option,
    build_objects,
    load,
    required_assets,
)
from loadtest.reports.report import collect_machine_info
from loadtest.scenarios.ingest import _python_command

__all__ = ["main"]

MiB = 1 << 20


@dataclasses.dataclass(frozen=True, slots=True)
class Sync:
    """One client's first sync, in a process of its own."""

    client: str
    pods: int
    sync_s: float
    rss_before: int
    rss_after: int
    rss_before_trimmed: int
    rss_after_trimmed: int
    hwm: int

    @property
    def added(self) -> int:
        return self.rss_after - self.rss_before

    @property
    def held(self) -> int:
        """What the pods add once the allocator gave its free pages back (``malloc_trim``)."""
        return self.rss_after_trimmed - self.rss_before_trimmed


@dataclasses.dataclass(frozen=True, slots=True)
class Size:
    pods: int
    stored_json: int
    """Bytes of the pods' JSON as the API server returns them (managedFields included)."""
    load_s: float
    syncs: list[Sync]

    def median(self, client: str, name: str) -> float:
        values = [float(getattr(s, name)) for s in self.syncs if s.client == client]
        return statistics.median(values) if values else float("nan")


def _progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] informerbench: {message}", flush=True)


def _sync(client: str, kubeconfig: Path, pods: int) -> Sync:
    argv = [sys.executable, "-m", "loadtest.clients.informersync", client]
    argv += ["--kubeconfig", str(kubeconfig), "--expect", str(pods)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600 + pods / 20)
    if done.returncode != 0:
        raise RuntimeError(f"{client} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    result: dict[str, Any] = orjson.loads(done.stdout.strip().splitlines()[-1])
    result.pop("pods")
    return Sync(pods=pods, **result)


def _size(assets: Assets, workdir: Path, pods: int, repeat: int) -> Size:
    cluster = Cluster(assets, workdir=workdir / f"cluster-{pods}")
    try:
        _progress(f"{pods} pods: starting etcd and kube-apiserver {assets.version}")
        cluster.start()
        objects, _ = build_objects(pods)
        load_s = asyncio.run(load(cluster, objects, progress=_progress))
        with cluster.client() as admin:
            items = admin.get("/api/v1/pods", timeout=600).json()["items"]
        stored = sum(len(orjson.dumps(p)) for p in items)
        del objects, items
        gc.collect()
        syncs: list[Sync] = []
        for rep in range(repeat):
            order = CLIENTS if rep % 2 == 0 else CLIENTS[::-1]
            for client in order:
                _progress(f"{pods} pods: round {rep + 1} of {repeat}, {client}")
                sync = _sync(client, cluster.admin.kubeconfig, pods)
                _progress(
                    f"{pods} pods: {client} synced in {sync.sync_s:.2f} s, "
                    f"+{sync.added / MiB:.0f} MiB"
                )
                syncs.append(sync)
        return Size(pods, stored, load_s, syncs)
    finally:
        cluster.stop()


def render(sizes: Sequence[Size], *, version: str, machine: str, command: str) -> str:
    lines = [
        f"# cacheproxy's informer beside the official Python client's, kube-apiserver {version}",
        "",
        f"Command: `{command}`",
        "",
        f"Machine: {machine}",
        "",
        "Each client in a process of its own, syncing every pod of the cluster (medians of the "
        "rounds). Sync: from the informer's start to every pod in its cache. Memory: what the "
        "synced pods add to the process's RSS (after a full collection) over the same process "
        "just before the informer started, its libraries imported; and the same after glibc's "
        "`malloc_trim` gave the allocator's free pages back (what the objects hold, not what "
        "decoding the list once used). Peak: the process's VmHWM. "
        "`cacheproxy` drops `metadata.managedFields` (its default); `cacheproxy-full` keeps "
        "every field, as the official client does.",
        "",
        "| pods | pods' JSON MiB | client | rounds | sync s | memory added MiB | ÷ JSON "
        "| after malloc_trim MiB | ÷ JSON | peak MiB | sync ÷ official | memory ÷ official "
        "| trimmed ÷ official |",
        "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for size in sizes:
        base_sync = size.median("official", "sync_s")
        base_mem = size.median("official", "added")
        base_held = size.median("official", "held")
        json_bytes = size.stored_json
        for client in CLIENTS:
            rounds = sum(1 for s in size.syncs if s.client == client)
            sync_s, added = size.median(client, "sync_s"), size.median(client, "added")
            held, hwm = size.median(client, "held"), size.median(client, "hwm")
            lines.append(
                f"| {size.pods} | {json_bytes / MiB:.0f} | {client} | {rounds} | {sync_s:.2f} | "
                f"{added / MiB:.0f} | {added / json_bytes:.2f} | {held / MiB:.0f} | "
                f"{held / json_bytes:.2f} | {hwm / MiB:.0f} | {sync_s / base_sync:.3f} | "
                f"{added / base_mem:.3f} | {held / base_held:.3f} |"
            )
    lines += [
        "",
        "Bar (the informer library's acceptance): cacheproxy's memory ≤ 1/5 of the official "
        "client's and its sync ≤ 1/3, in the same run.",
        "",
    ]
    return "\n".join(lines)


def _parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m loadtest informerbench", description=(__doc__ or "").splitlines()[0]
    )
    add_kube_option(parser)
    parser.add_argument("--pods", type=int, nargs="+", default=[10_000, 50_000])
    parser.add_argument("--repeat", type=int, default=1, help="rounds per size")
    parser.add_argument("--out", type=Path, help="default loadtest/results/<date>-informerbench")
    parser.add_argument(
        "--skip-without-assets",
        action="store_true",
        help="without that kube-apiserver, say so and exit 0 (for make bench)",
    )
    args = parser.parse_args(argv)
    if args.repeat < 1 or min(args.pods) < 1:
        parser.error("--pods and --repeat must be positive")
    args.out = args.out or Path("loadtest/results") / f"{dt.date.today().isoformat()}-informerbench"
    return args


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parse_args(argv)
    try:
        assets = required_assets(args, "python -m loadtest informerbench")
    except NoServer as none:
        return none.code
    command = " ".join([_python_command(), "-m", "loadtest", "informerbench", *argv])
    machine = collect_machine_info(command=command, loop="asyncio", cpu=None)
    workdir = Path(tempfile.mkdtemp(prefix="loadtest-informerbench-"))
    try:
        sizes = [_size(assets, workdir, pods, args.repeat) for pods in args.pods]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    doc = {
        "kube": assets.git_version,
        "machine": dataclasses.asdict(machine),
        "sizes": [dataclasses.asdict(s) for s in sizes],
    }
    (out / "informerbench.json").write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    machine_text = (
        f"{machine.date}; {machine.python}; nproc {machine.nproc}, {machine.cpu_model}, "
        f"{machine.memory} RAM; load average at start {machine.load_average}, at the end "
        + " ".join(f"{x:.2f}" for x in os.getloadavg())
    )
    text = render(sizes, version=assets.git_version, machine=machine_text, command=command)
    (out / "informerbench.md").write_text(text)
    print(text, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
