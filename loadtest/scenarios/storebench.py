"""The compressed store beside the plain one, in one run: memory, ingest, first sync, lists, GETs.

``python -m loadtest storebench [--pods 10000 50000] [--out DIR]``. For each pod count N:

1. **Ingest, in process** (:func:`loadtest.harness.pipeline.run_pipeline`: a real SharedInformer
   fed pre-encoded watch lines): the sync (N ADDED, applied as one relist: a compressed store
   trains its dictionary and packs everything there) and N MODIFIED events, as events per
   second, for each storage, alternating, best of ``--repeats``.
2. **The daemon, as processes**: the simulator with N demo pods; a daemon caching nothing (the
   RSS baseline); then a plain daemon and a compressed one, each started alone and timed to its
   first sync. Memory is each one's RSS over the empty daemon, per stored JSON byte (``/status``).
3. **Reads**: full list, label list (``app=app-K``: N / ``--apps`` pods) and single GET at
   concurrency 1, plain and compressed alternating ``--rounds`` times; the median of the rounds'
   p50s is reported, with the ratio compressed ÷ plain.

The acceptance this checks (judged in the report, never asserted): compressed at 50 000 pods,
RSS over an empty daemon ≤ 0.4x the stored JSON; full list p50 ≤ 2x the plain store's; GET
p50 ≤ 1.3x; ingest ≥ 10 000 events/s. Writes ``storebench.md`` (also printed) and
``storebench.json`` to ``--out`` (default ``loadtest/results/<today>-storebench``).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import gc
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import orjson

from cacheproxy.informer import Storage
from loadtest.clients.httpclient import fetch
from loadtest.clients.listbench import Scenario, measure, scenarios
from loadtest.harness.pipeline import run_pipeline
from loadtest.harness.processes import start_daemon, start_sim, write_daemon_config
from loadtest.harness.workload import build_workload
from loadtest.reports.report import MachineInfo, collect_machine_info
from loadtest.scenarios.ingest import _python_command

__all__ = ["main"]

STORAGES = ("plain", "compressed")
_DEFAULT = Storage(compressed=True)
READS = ("full", "label", "get")


@dataclass
class StorageResult:
    storage: str
    sync_events_per_s: float = 0.0
    modified_events_per_s: float = 0.0
    daemon_sync_s: float = 0.0
    rss_over_empty: int = 0
    stored_bytes: int = 0
    objects: int = 0
    p50_ms: dict[str, list[float]] = field(default_factory=dict)
    """Per read, the p50 of each round (ms)."""

    @property
    def memory_ratio(self) -> float:
        return self.rss_over_empty / self.stored_bytes if self.stored_bytes else float("nan")

    def p50(self, read: str) -> float:
        rounds = self.p50_ms.get(read) or [float("nan")]
        return statistics.median(rounds)


@dataclass
class SizeResult:
    pods: int
    storages: dict[str, StorageResult]


def _progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _storage(name: str) -> Storage:
    return Storage(compressed=name == "compressed")


async def _ingest(n: int, repeats: int, results: dict[str, StorageResult]) -> None:
    workload = build_workload(n)
    for run in range(repeats):
        for name in STORAGES if run % 2 == 0 else reversed(STORAGES):
            _progress(f"N={n}: ingest, {name}, run {run + 1} of {repeats}")
            gc.collect()
            done = await run_pipeline(workload, storage=_storage(name))
            result = results[name]
            result.sync_events_per_s = max(result.sync_events_per_s, done.sync.rate_wall)
            result.modified_events_per_s = max(
                result.modified_events_per_s, done.modified.rate_wall
            )
            del done
    del workload
    gc.collect()


def _bench_size(n: int, args: argparse.Namespace, workdir: Path) -> SizeResult:
    results = {name: StorageResult(name) for name in STORAGES}
    asyncio.run(_ingest(n, args.repeats, results))
    _progress(f"N={n}: starting the simulator")
    sim = start_sim(workdir, pods=n, namespaces=args.namespaces, nodes=args.nodes, apps=args.apps)
    services = [sim]
    try:
        empty = start_daemon(
            workdir,
            write_daemon_config(
                workdir, name="empty", upstream=sim.url, label_selector="loadtest/none=1"
            ),
            name="empty",
        )
        services.append(empty)
        empty.wait_ready(60)
        daemons = {}
        for name in STORAGES:
            _progress(f"N={n}: {name} daemon, first sync")
            config = write_daemon_config(workdir, name=name, upstream=sim.url, storage=name)
            daemon = start_daemon(workdir, config, name=name)
            services.append(daemon)
            results[name].daemon_sync_s = daemon.wait_ready(120 + n / 1000)
            time.sleep(1.0)  # the post-sync gc.freeze settles
            daemons[name] = daemon
        time.sleep(1.0)
        rss_empty = empty.rss()
        for name, daemon in daemons.items():
            status = asyncio.run(fetch(daemon.url, "/status"))[1]
            pods = orjson.loads(status)["resources"]["pods"]
            results[name].rss_over_empty = daemon.rss() - rss_empty
            results[name].stored_bytes = int(pods["bytes"])
            results[name].objects = int(pods["objects"])
        names_body = asyncio.run(fetch(daemons["plain"].url, "/api/v1/pods?limit=1000"))[1]
        pods_named = [
            (i["metadata"]["namespace"], i["metadata"]["name"])
            for i in orjson.loads(names_body)["items"]
        ]
        plan = {
            s.key: s
            for s in scenarios(
                namespaces=args.namespaces, apps=args.apps, nodes=args.nodes, pods=pods_named
            )
        }
        for round_ in range(args.rounds):
            for read in READS:
                order = STORAGES if round_ % 2 == 0 else tuple(reversed(STORAGES))
                for name in order:
                    _progress(f"N={n}: {read}, {name}, round {round_ + 1} of {args.rounds}")
                    p50 = asyncio.run(_p50(daemons[name].url, plan[read], args, name))
                    results[name].p50_ms.setdefault(read, []).append(p50 * 1e3)
    finally:
        for service in reversed(services):
            service.stop()
    return SizeResult(n, results)


async def _p50(url: str, scenario: Scenario, args: argparse.Namespace, name: str) -> float:
    heavy = scenario.key == "full"
    m = await measure(
        url,
        scenario,
        server=name,
        concurrency=1,
        min_requests=10 if heavy else 300,
        min_seconds=args.seconds,
        max_seconds=args.seconds * (6 if heavy else 3),
    )
    return m.p50


def _verdicts(sizes: Sequence[SizeResult]) -> list[tuple[str, str, str, bool]]:
    """(what, measured, bar, met) at the largest size measured."""
    last = max(sizes, key=lambda s: s.pods)
    plain, packed = last.storages["plain"], last.storages["compressed"]
    n = f"N = {last.pods:,}".replace(",", " ")
    full = packed.p50("full") / plain.p50("full")
    get = packed.p50("get") / plain.p50("get")
    ingest = min(packed.sync_events_per_s, packed.modified_events_per_s)
    return [
        (f"{n}: compressed RSS over empty ÷ JSON", f"{packed.memory_ratio:.3f}", "≤ 0.4", packed.memory_ratio <= 0.4),
        (f"{n}: full list p50, compressed ÷ plain", f"{full:.2f}x", "≤ 2x", full <= 2),
        (f"{n}: GET p50, compressed ÷ plain", f"{get:.2f}x", "≤ 1.3x", get <= 1.3),
        (f"{n}: compressed ingest, events/s (the lower of sync and MODIFIED)", f"{ingest:,.0f}", "≥ 10 000", ingest >= 10_000),
    ]  # fmt: skip


def _render(sizes: Sequence[SizeResult], args: argparse.Namespace, machine: MachineInfo) -> str:
    lines = [
        "# The compressed store beside the plain one",
        "",
        f"- command: `{_python_command()} -m loadtest storebench "
        f"--pods {' '.join(map(str, args.pods))} --rounds {args.rounds} --repeats {args.repeats} "
        f"--seconds {args.seconds:g}`",
        f"- date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M:%S} UTC",
        f"- machine: {machine.python}, orjson {machine.orjson}, zstandard "
        f"{metadata.version('zstandard')}; {machine.cpu_model}, nproc {machine.nproc}, "
        f"{machine.memory}; load average at start {machine.load_average}",
        f"- demo pods over {args.namespaces} namespaces, {args.apps} apps, {args.nodes} nodes; "
        "pods keep `spec.nodeName` indexed; storage `compressed` is the defaults "
        f"(zstd level {_DEFAULT.level}, {_DEFAULT.dictionary_bytes >> 10} KiB dictionary trained "
        f"on {_DEFAULT.training_bytes >> 20} MiB of the first list, a list's objects packed in "
        f"blocks of {_DEFAULT.block_objects})",
        "",
        "## Verdicts",
        "",
        "| acceptance | measured | bar | verdict |",
        "|---|---:|---:|---:|",
    ]
    for what, measured, bar, met in _verdicts(sizes):
        lines.append(f"| {what} | {measured} | {bar} | {'PASS' if met else 'FAIL'} |")
    for size in sizes:
        plain, packed = size.storages["plain"], size.storages["compressed"]
        lines += [
            "",
            f"## {size.pods:,} pods".replace(",", " "),
            "",
            "| | plain | compressed | compressed ÷ plain |",
            "|---|---:|---:|---:|",
        ]

        def row(
            what: str, a: float, b: float, fmt: str = "{:,.2f}", out: list[str] = lines
        ) -> None:
            ratio = b / a if a else float("nan")
            out.append(f"| {what} | {fmt.format(a)} | {fmt.format(b)} | {ratio:.2f} |")

        row(
            "RSS over an empty daemon, MiB",
            plain.rss_over_empty / 2**20,
            packed.rss_over_empty / 2**20,
        )
        row("… ÷ stored JSON", plain.memory_ratio, packed.memory_ratio, "{:.3f}")
        row("daemon first sync, s", plain.daemon_sync_s, packed.daemon_sync_s)
        row(
            "ingest: sync, events/s (in process)",
            plain.sync_events_per_s,
            packed.sync_events_per_s,
            "{:,.0f}",
        )
        row(
            "ingest: MODIFIED, events/s (in process)",
            plain.modified_events_per_s,
            packed.modified_events_per_s,
            "{:,.0f}",
        )
        for read, title in (
            ("full", "full list"),
            ("label", "label list (app=app-K)"),
            ("get", "single GET"),
        ):
            row(f"{title} p50, ms (median of rounds)", plain.p50(read), packed.p50(read), "{:.3f}")
        lines.append("")
        lines.append(
            f"Stored JSON: {plain.stored_bytes / 2**20:,.1f} MiB for {plain.objects} objects. "
            "Each round's p50 (ms), plain / compressed: "
            + "; ".join(
                f"{read} {' '.join(f'{v:.2f}' for v in plain.p50_ms.get(read, []))} / "
                f"{' '.join(f'{v:.2f}' for v in packed.p50_ms.get(read, []))}"
                for read in READS
            )
        )  # fmt: skip
    return "\n".join(lines) + "\n"


def _parse_args(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m loadtest storebench", description=__doc__)
    p.add_argument("--pods", type=int, nargs="+", default=[10_000, 50_000])
    p.add_argument("--namespaces", type=int, default=10)
    p.add_argument("--apps", type=int, default=20)
    p.add_argument("--nodes", type=int, default=20)
    p.add_argument("--rounds", type=int, default=3, help="read rounds, alternating the order")
    p.add_argument("--repeats", type=int, default=2, help="ingest runs per storage (best kept)")
    p.add_argument("--seconds", type=float, default=2.0, help="least time per read measurement")
    p.add_argument("--out", type=Path, default=None)
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(sys.argv[1:] if argv is None else argv)
    out = args.out or Path("loadtest/results") / f"{dt.date.today():%Y-%m-%d}-storebench"
    machine = collect_machine_info(command="storebench", loop="asyncio", cpu=None)
    sizes = []
    with tempfile.TemporaryDirectory(prefix="storebench-") as tmp:
        for n in args.pods:
            sizes.append(_bench_size(n, args, Path(tmp)))
    report = _render(sizes, args, machine)
    out.mkdir(parents=True, exist_ok=True)
    (out / "storebench.md").write_text(report, encoding="utf-8")
    data: dict[str, Any] = {
        "pods": [
            {"pods": s.pods, "storages": {k: asdict(v) for k, v in s.storages.items()}}
            for s in sizes
        ]
    }
    (out / "storebench.json").write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2))
    print(report)
    return 0
