"""First sync by watch-list against by paged list, on a real kube-apiserver that serves both.

``python -m loadtest syncmodes --kube 1.32 --pods 10000 50000 --repeat 3 --out DIR``: for each
N, a fresh etcd + kube-apiserver (the envtest assets of ``--kube``), N pods of ~7 KB and the
other objects of :mod:`loadtest.harness.realcluster`; then ``--repeat`` times, the modes alternated, a
daemon (``cacheproxy serve``, caching pods only, every other setting its default) with
``upstream.watchList: true`` and one with ``false``:

- start → ready (``/readyz`` 200), and the pods' sync as the daemon logs it (how: a watch-list
  or a list, and how long from its request to synced);
- the daemon's RSS after the sync and its peak (``VmHWM``), CPU seconds;
- the API server's RSS sampled every 20 ms during the sync: its peak over what it held before.

Reported as medians per mode and their ratios (watch-list ÷ list), in ``syncmodes.md`` and
``syncmodes.json``. Nothing is asserted: the report is what chooses ``upstream.watchList``'s
default. Without the assets it exits 2 with a hint, or 0 after saying it skipped with
``--skip-without-assets`` (``make bench``).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime as dt
import gc
import os
import re
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import yaml

from cacheproxy.envtest import Assets, Cluster
from loadtest.harness.processes import rss_bytes, start_daemon
from loadtest.harness.realcluster import NoServer, build_objects, load, required_assets
from loadtest.reports.report import MachineInfo, collect_machine_info
from loadtest.scenarios.ingest import _loop_factory, _python_command

__all__ = ["main"]

MODES = ("watch-list", "list")
_SYNCED = re.compile(r"pods: synced (\d+) objects by (.+?) in ([\d.]+) s")
MiB = 1 << 20


@dataclasses.dataclass(frozen=True, slots=True)
class Run:
    """One daemon's first sync."""

    mode: str
    ready_s: float
    sync_how: str
    sync_s: float
    objects: int
    rss: int
    hwm: int
    cpu_s: float
    apiserver_peak_added: int
    """The API server's highest RSS during the sync, less its RSS just before."""


@dataclasses.dataclass(frozen=True, slots=True)
class Size:
    pods: int
    stored_json: int
    apiserver_rss_before: int
    runs: list[Run]


def _progress(text: str) -> None:
    print(f"[{dt.datetime.now():%H:%M:%S}] {text}", flush=True)


def _config(workdir: Path, cluster: Cluster, *, watch_list: bool) -> Path:
    doc = {
        "resources": ["pods"],
        "upstream": {"kubeconfig": str(cluster.admin.kubeconfig), "watchList": watch_list},
        "server": {"port": 0},
    }
    path = workdir / f"daemon-{'watch-list' if watch_list else 'list'}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


class _Peak:
    """The highest RSS of a process while it runs, sampled every 20 ms."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = rss_bytes(pid)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="rss-sampler", daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, rss_bytes(self.pid))

    def __enter__(self) -> _Peak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _run(workdir: Path, cluster: Cluster, mode: str, rep: int, timeout: float) -> Run:
    config = _config(workdir, cluster, watch_list=mode == "watch-list")
    gc.collect()
    before = rss_bytes(cluster.apiserver_pid)
    started = time.monotonic()
    with _Peak(cluster.apiserver_pid) as apiserver:
        service = start_daemon(workdir, config, name=f"daemon-{mode}-{rep}")
        try:
            service.wait_ready(timeout)
            ready = time.monotonic() - started
        except BaseException:
            service.stop()
            raise
    try:
        cpu = service.cpu()
        time.sleep(0.5)  # the post-sync gc.freeze and frees settle before memory is read
        synced = _SYNCED.search(service.log.read_text(errors="replace"))
        rss, hwm = service.rss(), rss_bytes(service.pid, "VmHWM")
    finally:
        service.stop()
    return Run(
        mode=mode,
        ready_s=ready,
        sync_how=synced.group(2) if synced else "n/a",
        sync_s=float(synced.group(3)) if synced else float("nan"),
        objects=int(synced.group(1)) if synced else 0,
        rss=rss,
        hwm=hwm,
        cpu_s=cpu,
        apiserver_peak_added=max(0, apiserver.peak - before),
    )


def _size(assets: Assets, workdir: Path, pods: int, repeat: int, runner: asyncio.Runner) -> Size:
    cluster = Cluster(assets, workdir=workdir / f"cluster-{pods}")
    try:
        _progress(f"{pods} pods: starting etcd and kube-apiserver {assets.version}")
        cluster.start()
        objects, _ = build_objects(pods)
        runner.run(load(cluster, objects, progress=_progress))
        stored = sum(len(orjson.dumps(o)) for r, o in objects if r == "pods")
        del objects
        gc.collect()
        apiserver_before = rss_bytes(cluster.apiserver_pid)
        runs: list[Run] = []
        timeout = 120 + pods / 250
        for rep in range(repeat):
            order = MODES if rep % 2 == 0 else MODES[::-1]  # alternated
            for mode in order:
                _progress(f"{pods} pods: run {rep + 1} of {repeat}, by {mode}")
                runs.append(_run(workdir, cluster, mode, rep, timeout))
        return Size(pods, stored, apiserver_before, runs)
    finally:
        cluster.stop()


def _median(runs: Sequence[Run], name: str) -> float:
    return statistics.median(float(getattr(r, name)) for r in runs)


def _machine(m: MachineInfo, end_load: str) -> str:
    return (
        f"{m.date}; {m.python}, {m.loop}, orjson {m.orjson}; nproc {m.nproc}, {m.cpu_model}, "
        f"{m.memory} RAM; load average at start {m.load_average}, at the end {end_load}"
    )


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "n/a"


def render(sizes: Sequence[Size], *, version: str, machine: str, command: str) -> str:
    lines = [
        f"# First sync by watch-list and by paged list, kube-apiserver {version}",
        "",
        f"Command: `{command}`",
        "",
        "Medians of each mode's runs (alternated). The daemon caches pods only; `upstream.watchList` "
        "is the only setting changed. Sync: from the daemon's first pods request to synced, as "
        "it logs it. Peak: the daemon's VmHWM; the API server's highest RSS sampled during the "
        "sync, over its RSS before it.",
        "",
        "| pods | mode | runs | how | ready s | sync s | daemon RSS MiB | daemon peak MiB | "
        "daemon CPU s | API server peak added MiB |",
        "|---:|---|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    ratios = [
        "",
        "| pods | sync s | daemon peak | daemon CPU | API server peak added |",
        "|---:|---:|---:|---:|---:|",
    ]
    for size in sizes:
        medians: dict[str, dict[str, float]] = {}
        for mode in MODES:
            runs = [r for r in size.runs if r.mode == mode]
            how = ", ".join(sorted({r.sync_how for r in runs}))
            m = {
                k: _median(runs, k)
                for k in ("ready_s", "sync_s", "rss", "hwm", "cpu_s", "apiserver_peak_added")
            }
            medians[mode] = m
            lines.append(
                f"| {size.pods} | {mode} | {len(runs)} | {how} | {m['ready_s']:.2f} | "
                f"{m['sync_s']:.2f} | {m['rss'] / MiB:.0f} | {m['hwm'] / MiB:.0f} | "
                f"{m['cpu_s']:.2f} | {m['apiserver_peak_added'] / MiB:.0f} |"
            )
        w, li = medians["watch-list"], medians["list"]
        ratios.append(
            f"| {size.pods} | {_ratio(w['sync_s'], li['sync_s'])} | "
            f"{_ratio(w['hwm'], li['hwm'])} | {_ratio(w['cpu_s'], li['cpu_s'])} | "
            f"{_ratio(w['apiserver_peak_added'], li['apiserver_peak_added'])} |"
        )
    lines += ["", "Watch-list / list (below 1: the watch-list is cheaper):", *ratios]
    lines += [
        "",
        "Stored JSON of the pods: "
        + ", ".join(f"{s.pods}: {s.stored_json / MiB:.0f} MiB" for s in sizes),
    ]
    lines += ["", "## Machine", "", machine, ""]
    return "\n".join(lines)


def _parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m loadtest syncmodes", description=__doc__)
    parser.add_argument("--kube", default="1.32", help="the envtest server version (1.32)")
    parser.add_argument("--pods", type=int, nargs="+", default=[10_000, 50_000])
    parser.add_argument("--repeat", type=int, default=3, help="runs per mode and size")
    parser.add_argument("--out", type=Path, help="default loadtest/results/<date>-syncmodes")
    parser.add_argument(
        "--skip-without-assets",
        action="store_true",
        help="without that kube-apiserver, say so and exit 0 (for make bench)",
    )
    args = parser.parse_args(argv)
    if args.repeat < 1 or min(args.pods) < 1:
        parser.error("--pods and --repeat must be positive")
    args.out = args.out or Path("loadtest/results") / f"{dt.date.today().isoformat()}-syncmodes"
    return args


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parse_args(argv)
    try:
        assets = required_assets(args, "python -m loadtest syncmodes")
    except NoServer as none:
        return none.code
    command = " ".join([_python_command(), "-m", "loadtest.scenarios.syncmodes", *argv])
    machine = collect_machine_info(command=command, loop="uvloop (the daemon)", cpu=None)
    workdir = Path(tempfile.mkdtemp(prefix="loadtest-syncmodes-"))
    sizes: list[Size] = []
    try:
        with asyncio.Runner(loop_factory=_loop_factory("uvloop")) as runner:
            for pods in args.pods:
                sizes.append(_size(assets, workdir, pods, args.repeat, runner))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {
        "kube": assets.git_version,
        "machine": dataclasses.asdict(machine),
        "sizes": [dataclasses.asdict(s) for s in sizes],
    }
    (out / "syncmodes.json").write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    machine_text = _machine(machine, " ".join(f"{x:.2f}" for x in os.getloadavg()))
    text = render(sizes, version=assets.git_version, machine=machine_text, command=command)
    (out / "syncmodes.md").write_text(text)
    print(text, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
