"""Slow watchers: many watchers of pod-sized events, some of which never read, with the watch byte
bounds and without them.

``python -m loadtest slowwatchers [--watchers 1000] [--non-readers 100] [--rate 20]
[--seconds 75] [--object-bytes 7000] [--reader-processes 2] [--out loadtest/out]``

The simulator and the daemon run as processes (:mod:`loadtest.harness.processes`). A few pods
are patched in a loop at ``--rate`` writes/s for ``--seconds`` (an annotation padding each one to
~``--object-bytes`` bytes of JSON), each write's resourceVersion kept. ``--watchers`` watch the
pods through the daemon from the resourceVersion of a list taken before the first write:
``--non-readers`` of them are raw sockets that send the request and never read (``SO_RCVBUF``
1 KiB, so the daemon's queues fill, not the kernel's); the others read everything
(:mod:`loadtest.clients.slowwatch`, ``--reader-processes`` processes of asyncio clients).

Twice: **bounded**, with the daemon's defaults (``server.limits.watchBufferBytes`` 16 MiB per
watcher, ``watchBuffersTotalBytes`` 256 MiB for all), and **before**, with both raised to their
maximum so that only the event-count bound (``watchBuffer``, 1 000 events) applies. In both,
``watchStallSeconds`` is raised to ``--stall-seconds`` (600): at its default (10 s) a client
that takes nothing is dropped for stalling long before either byte bound is reached at these
rates, and the bytes are what this measures.

Measured, every 0.5 s: the daemon's RSS and ``cacheproxy_watch_evicted_total`` by reason (when
each non-reader was cut: seconds after the first write, which is when its queue starts to fill);
at the end the peak (``VmHWM``), and whether every reader got every write, in RV order, nothing
missing or duplicated. Written to ``OUT/slowwatchers.md`` and ``OUT/slowwatchers.json``. Nothing
is asserted; the exit status is 0 unless something crashed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import socket
import statistics
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from loadtest.clients.slowwatch import open_non_reader
from loadtest.harness.processes import (
    Service,
    rss_bytes,
    start_daemon,
    start_sim,
    write_daemon_config,
)

MIB = 1 << 20
BOUNDED = {"watchBufferBytes": 16 << 20, "watchBuffersTotalBytes": 256 << 20}
"""The daemon's defaults (docs/configuration.md)."""
UNBOUNDED = {"watchBufferBytes": 17_179_869_184, "watchBuffersTotalBytes": 1_099_511_627_776}
"""The largest values the configuration accepts: only ``watchBuffer`` (events) applies."""
REASONS = ("events", "bytes", "total_bytes", "stall")
SAMPLE_SECONDS = 0.5


@dataclass
class Sample:
    t: float
    """Seconds after the first write."""
    rss: int
    evicted: dict[str, int]
    watchers: int


@dataclass
class Run:
    """One pass: its configuration, samples and the readers' summary."""

    name: str
    limits: dict[str, int]
    rss_synced: int = 0
    rss_peak: int = 0
    samples: list[Sample] = field(default_factory=list)
    writes: int = 0
    write_seconds: float = 0.0
    line_bytes: float = 0.0
    readers: dict[str, Any] = field(default_factory=dict)
    watchers_registered: int = 0

    def cut_times(self) -> dict[str, list[float]]:
        """For each reason, the time of every eviction (the sample that first counted it)."""
        out: dict[str, list[float]] = {r: [] for r in REASONS}
        before = dict.fromkeys(REASONS, 0)
        for s in self.samples:
            for reason in REASONS:
                n = s.evicted.get(reason, 0)
                out[reason] += [s.t] * (n - before[reason])
                before[reason] = n
        return out

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "limits": self.limits,
            "rss_synced": self.rss_synced,
            "rss_peak": self.rss_peak,
            "writes": self.writes,
            "write_seconds": round(self.write_seconds, 2),
            "line_bytes": round(self.line_bytes),
            "watchers_registered": self.watchers_registered,
            "readers": self.readers,
            "cut_times": self.cut_times(),
            "samples": [
                {"t": round(s.t, 2), "rss": s.rss, "evicted": s.evicted, "watchers": s.watchers}
                for s in self.samples
            ],
        }


def parse_metrics(text: str) -> tuple[dict[str, int], int]:
    """``cacheproxy_watch_evicted_total`` by reason (summed over resources) and
    ``cacheproxy_watch_watchers`` (summed) from a ``/metrics`` page."""
    evicted = dict.fromkeys(REASONS, 0)
    watchers = 0
    for line in text.splitlines():
        if line.startswith("cacheproxy_watch_evicted_total{"):
            labels, value = line.rsplit(" ", 1)
            for reason in REASONS:
                if f'reason="{reason}"' in labels:
                    evicted[reason] += int(float(value))
        elif line.startswith("cacheproxy_watch_watchers{"):
            watchers += int(float(line.rsplit(" ", 1)[1]))
    return evicted, watchers


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        text: str = response.read().decode()
        return text


async def _sampler(daemon: Service, run: Run, start: float, stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        t = time.monotonic() - start
        rss = daemon.rss()
        try:
            evicted, watchers = parse_metrics(
                await loop.run_in_executor(None, _get, daemon.url + "/metrics")
            )
        except OSError:
            evicted, watchers = (run.samples[-1].evicted if run.samples else {}), -1
        run.samples.append(Sample(t=t, rss=rss, evicted=evicted, watchers=watchers))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), SAMPLE_SECONDS)


async def _writer(
    sim_url: str, pods: list[dict[str, Any]], args: argparse.Namespace
) -> tuple[list[int], float]:
    """Patch ``pods`` round-robin at ``args.rate``/s for ``args.seconds``: the RVs written."""
    written: list[int] = []
    total = int(args.rate * args.seconds)
    pads = [max(0, args.object_bytes - len(json.dumps(p, separators=(",", ":")))) for p in pods]
    headers = {"Content-Type": "application/merge-patch+json"}
    began = time.monotonic()
    async with httpx.AsyncClient(base_url=sim_url, timeout=30) as client:
        for i in range(total):
            delay = began + i / args.rate - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            pod = pods[i % len(pods)]["metadata"]
            pad = pads[i % len(pods)]
            body = {"metadata": {"annotations": {"loadtest/ballast": f"{i:08d}".ljust(pad, "x")}}}
            path = f"/api/v1/namespaces/{pod['namespace']}/pods/{pod['name']}"
            response = await client.patch(path, content=json.dumps(body), headers=headers)
            response.raise_for_status()
            written.append(int(response.json()["metadata"]["resourceVersion"]))
    return written, time.monotonic() - began


async def one_run(name: str, limits: dict[str, int], args: argparse.Namespace, work: Path) -> Run:
    run = Run(name=name, limits=limits)
    workdir = work / name
    workdir.mkdir()
    sim = start_sim(workdir, pods=args.pods, namespaces=1, nodes=1, apps=1, churn=0.0)
    daemon: Service | None = None
    procs: list[asyncio.subprocess.Process] = []
    sockets: list[socket.socket] = []
    try:
        config = write_daemon_config(workdir, name="daemon", upstream=sim.url, indexes=())
        lines = [f"    {key}: {value}" for key, value in limits.items()]
        lines.append(f"    watchStallSeconds: {args.stall_seconds:g}")
        config.write_text(
            config.read_text().replace(
                "  port: 0\n", "  port: 0\n  limits:\n" + "\n".join(lines) + "\n"
            )
        )
        daemon = start_daemon(workdir, config)
        daemon.wait_ready(120)
        listed = json.loads(_get(daemon.url + "/api/v1/pods"))
        pods = listed["items"]
        watch = f"/api/v1/pods?watch=1&resourceVersion={listed['metadata']['resourceVersion']}"
        run.rss_synced = daemon.rss()

        readers = args.watchers - args.non_readers
        share = [readers // args.reader_processes] * args.reader_processes
        share[0] += readers - sum(share)
        outs = [workdir / f"readers-{i}.json" for i in range(len(share))]
        for count, out in zip(share, outs, strict=True):
            procs.append(
                await asyncio.create_subprocess_exec(
                    *(sys.executable, "-m", "loadtest.clients.slowwatch", daemon.url, watch),
                    *(str(count), str(out), "--drain", str(args.drain)),
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                )
            )
        for proc in procs:
            assert proc.stdout is not None
            ready = (await proc.stdout.readline()).decode().split()
            if not ready or ready[0] != "READY":
                raise RuntimeError(f"readers did not start: {ready}")
        host, port = daemon.url.removeprefix("http://").rsplit(":", 1)
        for _ in range(args.non_readers):
            sockets.append(open_non_reader(host, int(port), watch))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            run.watchers_registered = parse_metrics(_get(daemon.url + "/metrics"))[1]
            if run.watchers_registered >= args.watchers:
                break
            await asyncio.sleep(0.2)

        stop = asyncio.Event()
        start = time.monotonic()
        sampling = asyncio.create_task(_sampler(daemon, run, start, stop))
        written, run.write_seconds = await _writer(sim.url, pods, args)
        run.writes = len(written)
        written_file = workdir / "written.json"
        written_file.write_text(json.dumps(written))
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write(f"{written_file}\n".encode())
            await proc.stdin.drain()
        await asyncio.gather(*(proc.wait() for proc in procs))
        stop.set()
        await sampling
        run.rss_peak = rss_bytes(daemon.pid, "VmHWM")
        run.readers = merge_reader_summaries([json.loads(out.read_text()) for out in outs])
        if run.readers["events_received"]:
            run.line_bytes = run.readers["bytes_read"] / run.readers["events_received"]
        return run
    finally:
        for sock in sockets:
            sock.close()
        for proc in procs:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        if daemon is not None:
            daemon.stop()
        sim.stop()


def merge_reader_summaries(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """The summaries of the reader processes as one."""
    merged: dict[str, Any] = {}
    for key in (
        "readers",
        "answered_200",
        "matched",
        "missing",
        "duplicated",
        "out_of_order",
        "unexpected",
        "events_received",
        "bytes_read",
        "ended_early_count",
    ):
        merged[key] = sum(int(p.get(key, 0)) for p in parts)
    merged["ended_early"] = sorted({why for p in parts for why in p.get("ended_early", [])})
    merged["drain_seconds"] = max((float(p.get("drain_seconds", 0)) for p in parts), default=0.0)
    merged["worst"] = next((p["worst"] for p in parts if p.get("worst")), None)
    return merged


def _mib(n: float) -> str:
    return f"{n / MIB:,.0f}"


def _spread(times: list[float]) -> str:
    if not times:
        return "—"
    return (
        f"{len(times)}: first {min(times):.1f} s, median {statistics.median(times):.1f} s, "
        f"last {max(times):.1f} s"
    )


def render(args: dict[str, Any], runs: list[Run]) -> str:
    """The markdown report: the runs side by side."""
    non_readers = int(args["non_readers"])
    readers = int(args["watchers"]) - non_readers
    command = (
        f"python -m loadtest slowwatchers --watchers {args['watchers']} --non-readers "
        f"{non_readers} --rate {args['rate']:g} --seconds {args['seconds']:g} --object-bytes "
        f"{args['object_bytes']} --pods {args['pods']} --stall-seconds {args['stall_seconds']:g}"
        + (" --bounded-only" if args.get("bounded_only") else "")
    )
    head = "| | " + " | ".join(r.name for r in runs) + " |"
    lines = [
        "# Slow watchers: byte bounds on what the daemon queues",
        "",
        f"`{command}`",
        "",
        f"{args['watchers']} watchers of pods through the daemon over the simulator, {non_readers}"
        f" of which never read (raw sockets, `SO_RCVBUF` 1 KiB), {readers} read everything; the "
        f"pods patched at {args['rate']:g}/s for {args['seconds']:g} s. `watchStallSeconds` "
        f"{args['stall_seconds']:g} (see below). Times are seconds after the first "
        "write, when the non-readers' queues start to fill; evictions are read from `/metrics` "
        f"every {SAMPLE_SECONDS:g} s.",
        "",
        head,
        "|---" * (len(runs) + 1) + "|",
    ]

    def row(label: str, cell: Any) -> None:
        lines.append(f"| {label} | " + " | ".join(str(cell(r)) for r in runs) + " |")

    row(
        "watchBufferBytes / watchBuffersTotalBytes (MiB)",
        lambda r: (
            f"{_mib(r.limits['watchBufferBytes'])} / {_mib(r.limits['watchBuffersTotalBytes'])}"
        ),
    )
    row(
        f"what the byte bounds allow for {non_readers} (MiB): min(per-watcher x "
        f"{non_readers}, total)",
        lambda r: _mib(
            min(r.limits["watchBufferBytes"] * non_readers, r.limits["watchBuffersTotalBytes"])
        ),
    )
    row("watchers registered", lambda r: r.watchers_registered)
    row(
        "writes (s taken)",
        lambda r: f"{r.writes} ({r.write_seconds:.1f} s)",
    )
    row("mean event line (bytes)", lambda r: f"{r.line_bytes:,.0f}")
    row(
        "all the event lines written, once (MiB)",
        lambda r: f"{r.writes * r.line_bytes / MIB:,.1f}",
    )
    row("daemon RSS synced (MiB)", lambda r: _mib(r.rss_synced))
    row("daemon RSS peak, VmHWM (MiB)", lambda r: _mib(r.rss_peak))
    row("peak above synced (MiB)", lambda r: _mib(r.rss_peak - r.rss_synced))
    row(
        "RSS at the end of the writes (MiB)",
        lambda r: _mib(r.samples[-1].rss) if r.samples else "—",
    )
    for reason in REASONS:
        row(f"evicted `{reason}`", lambda r, reason=reason: _spread(r.cut_times()[reason]))
    row(
        f"non-readers not cut by the end (of {non_readers})",
        lambda r: max(0, non_readers - sum(len(v) for v in r.cut_times().values())),
    )
    row(
        f"readers with every write, in order, once (of {readers})",
        lambda r: r.readers.get("matched", 0),
    )
    row(
        "readers' missing / duplicated / out of order / unexpected",
        lambda r: (
            f"{r.readers.get('missing', 0)} / {r.readers.get('duplicated', 0)} / "
            f"{r.readers.get('out_of_order', 0)} / {r.readers.get('unexpected', 0)}"
        ),
    )
    row("readers whose stream ended early", lambda r: r.readers.get("ended_early_count", 0))
    row("readers caught up (s after the last write)", lambda r: r.readers.get("drain_seconds", 0))
    lines += ["", "## RSS over time (MiB, every 5 s)", ""]
    lines += ["| t (s) | " + " | ".join(r.name for r in runs) + " |"]
    lines += ["|---" * (len(runs) + 1) + "|"]
    until = max((r.samples[-1].t for r in runs if r.samples), default=0.0)
    t = 0.0
    while t <= until + 1e-9:
        cells = []
        for r in runs:
            near = [s for s in r.samples if s.t <= t + SAMPLE_SECONDS / 2]
            cells.append(_mib(near[-1].rss) if near else "—")
        lines.append(f"| {t:.0f} | " + " | ".join(cells) + " |")
        t += 5.0
    return "\n".join(lines) + "\n"


async def run_all(args: argparse.Namespace, work: Path) -> list[Run]:
    runs = []
    for name, limits in (("bounded", BOUNDED), ("before (no byte bounds)", UNBOUNDED)):
        if name.startswith("before") and args.bounded_only:
            continue
        print(f"slowwatchers: {name} …", file=sys.stderr, flush=True)
        runs.append(await one_run(name.split()[0], limits, args, work))
    return runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtest slowwatchers", description=__doc__)
    parser.add_argument("--watchers", type=int, default=1000)
    parser.add_argument("--non-readers", type=int, default=100)
    parser.add_argument("--rate", type=float, default=20.0, help="writes per second")
    parser.add_argument("--seconds", type=float, default=75.0, help="seconds of writes")
    parser.add_argument("--object-bytes", type=int, default=7000)
    parser.add_argument("--pods", type=int, default=10, help="pods patched round-robin")
    parser.add_argument("--reader-processes", type=int, default=2)
    parser.add_argument("--stall-seconds", type=float, default=600.0)
    parser.add_argument("--drain", type=float, default=60.0, help="seconds readers may lag")
    parser.add_argument("--bounded-only", action="store_true", help="skip the 'before' run")
    parser.add_argument("--out", type=Path, default=Path("loadtest/out"))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="cacheproxy-slowwatchers-") as tmp:
        runs = asyncio.run(run_all(args, Path(tmp)))
    settings = {k: v for k, v in vars(args).items() if k != "out"}
    text = render(settings, runs)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "slowwatchers.md").write_text(text)
    data = {"args": settings, "runs": [r.as_dict() for r in runs]}
    (args.out / "slowwatchers.json").write_text(json.dumps(data, indent=1) + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
