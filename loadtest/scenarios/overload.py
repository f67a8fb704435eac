"""Overload: many more clients than the daemon serves at once, while upstream keeps changing.

``python -m loadtest overload [--pods 10000] [--clients 160] [--watchers 200] [--seconds 20]
[--max-in-flight 16] [--churn 100] [--out loadtest/out]``

The simulator (``--pods`` demo pods, ``--churn`` writes/s) and the daemon run as processes, the
daemon with ``server.limits.maxInFlight`` = ``--max-in-flight``. For ``--seconds`` this process
keeps ``--clients`` connections each asking for the full pod list again and again (10 times the
in-flight limit by default: ~50 MB per answer at 10 000 pods), half of them reading slowly
(64 KiB every 10 ms, so the daemon must hold its writes back), and ``--watchers`` watches open.
Measured, and written to ``OUT/overload.md``:

- the answers: 200s, 429s (with ``Retry-After``), anything else (must be none);
- the daemon's RSS: after sync, peak (``VmHWM``) and at the end; were a list materialised per
  request, 16 in flight would be ~800 MB more — streamed with backpressure it stays near the
  ``maxInFlight`` times socket-buffer scale;
- the informer's lag: every 0.5 s the simulator's resourceVersion against the daemon's (``/status``),
  and the daemon's staleness (seconds since upstream last moved its cache);
- the watchers: events received, and whether any stream was cut.

Nothing is asserted; the exit status is 0 unless something crashed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from loadtest.harness.processes import Service, start_daemon, start_sim, write_daemon_config

SLOW_READ = 64 << 10


@dataclass
class Tally:
    codes: Counter[int] = field(default_factory=Counter)
    bytes_read: int = 0
    lags: list[int] = field(default_factory=list)
    staleness: list[float] = field(default_factory=list)
    rss: list[int] = field(default_factory=list)
    watch_events: int = 0
    watch_cut: int = 0
    status_unanswered: int = 0


def get_json(url: str) -> dict[str, object]:
    with urllib.request.urlopen(url, timeout=5) as response:
        data: dict[str, object] = json.loads(response.read())
        return data


async def lister(url: str, tally: Tally, until: float, *, slow: bool) -> None:
    """One client asking for the full list again and again (reading slowly if ``slow``)."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    request = b"GET /api/v1/pods HTTP/1.1\r\nHost: x\r\nAccept: application/json\r\n\r\n"
    while time.monotonic() < until:
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            code = int(head.split(b" ", 2)[1])
            tally.codes[code] += 1
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            while length > 0 and time.monotonic() < until + 30:
                chunk = await reader.read(SLOW_READ if slow else 1 << 20)
                if not chunk:
                    break
                length -= len(chunk)
                tally.bytes_read += len(chunk)
                if slow:
                    await asyncio.sleep(0.01)
            if code == 429:
                await asyncio.sleep(0.05)
        except (ConnectionError, asyncio.IncompleteReadError):
            tally.codes[0] += 1
        finally:
            writer.close()


async def watcher(url: str, tally: Tally, until: float) -> None:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(b"GET /api/v1/pods?watch=1&resourceVersion=0 HTTP/1.1\r\nHost: x\r\n\r\n")
    try:
        while time.monotonic() < until:
            try:
                chunk = await asyncio.wait_for(reader.read(1 << 16), 1.0)
            except TimeoutError:
                continue
            if not chunk:
                tally.watch_cut += 1
                return
            tally.watch_events += chunk.count(b'{"type":')
    finally:
        writer.close()


async def sampler(sim_url: str, daemon: Service, url: str, tally: Tally, until: float) -> None:
    loop = asyncio.get_running_loop()
    while time.monotonic() < until:
        tally.rss.append(daemon.rss())
        try:
            sim_rv, status = await asyncio.gather(
                loop.run_in_executor(None, get_json, f"{sim_url}/_sim/stats"),
                loop.run_in_executor(None, get_json, f"{url}/status"),
            )
        except (OSError, urllib.error.URLError):  # a 429 or a timeout: the daemon is saturated
            tally.status_unanswered += 1
        else:
            pods = status["resources"]["pods"]  # type: ignore[index]
            tally.lags.append(int(sim_rv["resourceVersion"]) - int(pods["resourceVersion"]))  # type: ignore[arg-type]
            tally.staleness.append(float(pods["stalenessSeconds"]))
        await asyncio.sleep(0.5)


def peak_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


async def run(args: argparse.Namespace, workdir: Path) -> str:
    sim = start_sim(workdir, pods=args.pods, namespaces=10, nodes=20, apps=20, churn=args.churn)
    daemon = None
    try:
        config = write_daemon_config(workdir, name="daemon", upstream=sim.url)
        text = config.read_text().replace(
            "  port: 0\n", f"  port: 0\n  limits:\n    maxInFlight: {args.max_in_flight}\n"
        )
        config.write_text(text)
        daemon = start_daemon(workdir, config)
        daemon.wait_ready(120)
        url = daemon.url
        await asyncio.sleep(1.0)
        synced_rss = daemon.rss()
        tally = Tally()
        until = time.monotonic() + args.seconds
        began = time.monotonic()
        await asyncio.gather(
            sampler(sim.url, daemon, url, tally, until),
            *(watcher(url, tally, until) for _ in range(args.watchers)),
            *(lister(url, tally, until, slow=i % 2 == 1) for i in range(args.clients)),
        )
        elapsed = time.monotonic() - began
        return report(args, tally, synced_rss, peak_rss(daemon.pid), daemon.rss(), elapsed)
    finally:
        if daemon is not None:
            daemon.stop()
        sim.stop()


def report(
    args: argparse.Namespace, t: Tally, synced: int, peak: int, end: int, elapsed: float
) -> str:
    mib = 1 << 20
    other = sum(n for code, n in t.codes.items() if code not in (200, 429))
    lines = [
        "# Overload: more clients than the daemon serves at once",
        "",
        f"`python -m loadtest overload --pods {args.pods} --clients {args.clients} --watchers "
        f"{args.watchers} --seconds {args.seconds} --max-in-flight {args.max_in_flight} "
        f"--churn {args.churn}` ({elapsed:.1f} s; half the list clients read 64 KiB per 10 ms)",
        "",
        "| measure | value |",
        "|---|---:|",
        f"| full lists answered 200 | {t.codes[200]} ({t.bytes_read / mib:,.0f} MiB read) |",
        f"| refused 429 (Retry-After) | {t.codes[429]} |",
        f"| other answers or broken connections | {other} |",
        f"| daemon RSS after sync / peak / end (MiB) | {synced / mib:.0f} / {peak / mib:.0f} / "
        f"{end / mib:.0f} |",
        f"| peak RSS above synced (MiB) | {(peak - synced) / mib:.0f} |",
        f"| informer lag, RVs behind upstream: median / max | "
        f"{statistics.median(t.lags) if t.lags else 0:.0f} / {max(t.lags, default=0)} |",
        f"| staleness seconds: median / max | "
        f"{statistics.median(t.staleness) if t.staleness else 0:.2f} / "
        f"{max(t.staleness, default=0):.2f} |",
        f"| watch events received ({args.watchers} watchers) / streams cut | {t.watch_events} / "
        f"{t.watch_cut} |",
        f"| status samples answered / not (429 or > 5 s) | {len(t.lags)} / {t.status_unanswered} |",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtest overload", description=__doc__)
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=160)
    parser.add_argument("--watchers", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--max-in-flight", type=int, default=16)
    parser.add_argument("--churn", type=float, default=100.0)
    parser.add_argument("--out", type=Path, default=Path("loadtest/out"))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="cacheproxy-overload-") as tmp:
        text = asyncio.run(run(args, Path(tmp)))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "overload.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
