"""A full pod list over a fast and a slow link: cacheproxy's gzip answer, its identity answer, and
the real kube-apiserver's own gzip answer, side by side in one run.

``python -m loadtest gzipbench [--kube 1.28|1.32] [--pods 10000] [--rounds 3]
[--identity-slow-rounds 1] [--out DIR] [--skip-without-assets]`` starts etcd and kube-apiserver
(:mod:`cacheproxy.envtest`) holding ``--pods`` pods of ~7 KB and the rest of
:func:`loadtest.harness.realcluster.build_objects` (~2 minutes at 10 000 pods), one ``cacheproxy
serve`` in its default configuration (gzip above 128 KiB), and two byte relays
(:mod:`loadtest.harness.relay`, each in its own process): one in front of the daemon, one in front
of the API server (TLS passes through). Each relay is set to 1 Gbit/s, then 10 Mbit/s
(:data:`LINKS`, bytes per second per direction); at each, ``curl --http1.1`` lists
``/api/v1/pods?resourceVersion=0`` (the API server's watch cache: its fastest answer) asking for
``Accept-Encoding: gzip`` (cacheproxy, the API server) or ``identity`` (cacheproxy), ``--rounds``
times each, the cases interleaved; the identity list over the slow link (~35 MB at 1.25 MB/s)
``--identity-slow-rounds`` times. Reported: the median seconds per list (curl's total, the
body not decoded: the client's gunzip is the same for both servers), bytes on the wire, and the
ratios the issue judges — over 10 Mbit/s cacheproxy's gzip list at least 3x faster than its
identity list, and no slower than the API server's gzip list.

Writes ``gzipbench.md`` and ``gzipbench.json`` to ``--out`` (default
``loadtest/results/<date>-gzip``). Without the assets it exits 2 with a hint, or 0 after saying it
skipped with ``--skip-without-assets`` (``make bench``).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from cacheproxy.envtest import Cluster
from loadtest.harness.processes import start_daemon
from loadtest.harness.realcluster import (
    NoServer,
    add_kube_option,
    build_objects,
    cacheproxy_source,
    load,
    port_of,
    required_assets,
    write_config,
)
from loadtest.harness.relay import RelayProcess

__all__ = ["LINKS", "main"]

LINKS = (("1 Gbit/s", 125_000_000), ("10 Mbit/s", 1_250_000))
"""The links measured: name, bytes per second per direction."""
TARGET = "/api/v1/pods?resourceVersion=0"
CASES = (
    ("cacheproxy gzip", "cacheproxy", "gzip"),
    ("cacheproxy identity", "cacheproxy", "identity"),
    ("API server gzip", "apiserver", "gzip"),
)


@dataclass
class Case:
    link: str
    case: str
    seconds: list[float] = field(default_factory=list)
    wire_bytes: int = 0
    encoding: str = ""

    @property
    def median(self) -> float:
        return statistics.median(self.seconds) if self.seconds else float("nan")


def _progress(text: str) -> None:
    print(f"[gzipbench {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


async def _curl(
    url: str, headers: dict[str, str], *, cafile: Path, workdir: Path
) -> tuple[float, int, str]:
    """One list: curl's total seconds, the body's bytes as sent, its Content-Encoding."""
    header_file = workdir / "curl-headers.txt"
    header_file.write_text("".join(f"{k}: {v}\n" for k, v in headers.items()))
    dump = workdir / "curl-response-headers.txt"
    proc = await asyncio.create_subprocess_exec(
        "curl", "--http1.1", "--silent", "--show-error", "--cacert", str(cafile),
        "--header", f"@{header_file}", "--output", "/dev/null", "--dump-header", str(dump),
        "--write-out", "%{http_code} %{size_download} %{time_total}", url,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await proc.communicate()
    if proc.returncode:
        raise RuntimeError(f"curl {url}: {err.decode()}")
    code, size, total = out.decode().split()
    if code != "200":
        raise RuntimeError(f"curl {url}: HTTP {code}")
    encoding = ""
    for line in dump.read_text().splitlines():
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-encoding":
            encoding = value.strip()
    return float(total), int(size), encoding


async def _measure(
    cluster: Cluster, daemon_port: int, args: argparse.Namespace, workdir: Path
) -> list[Case]:
    relays = {
        "cacheproxy": RelayProcess(daemon_port, log=workdir / "relay-daemon.log"),
        "apiserver": RelayProcess(port_of(cluster.url), log=workdir / "relay-apiserver.log"),
    }
    for relay in relays.values():
        await relay.start()
    urls = {
        "cacheproxy": f"http://127.0.0.1:{relays['cacheproxy'].port}{TARGET}",
        "apiserver": f"https://127.0.0.1:{relays['apiserver'].port}{TARGET}",
    }
    results: list[Case] = []
    try:
        for link, rate in LINKS:
            for relay in relays.values():
                await relay.command(f"bandwidth {rate}")
            cases = {name: Case(link, name) for name, _, _ in CASES}
            slow = rate < 10_000_000
            for round_ in range(args.rounds):
                for name, side, encoding in CASES:
                    if slow and encoding == "identity" and round_ >= args.identity_slow_rounds:
                        continue
                    headers = {"Accept-Encoding": encoding, **cluster.admin.headers}
                    seconds, size, got = await _curl(
                        urls[side], headers, cafile=cluster.ca_file, workdir=workdir
                    )
                    case = cases[name]
                    case.seconds.append(seconds)
                    case.wire_bytes, case.encoding = size, got or "identity"
                    _progress(
                        f"{link}: {name}: {seconds:.2f} s, {size / 1e6:.1f} MB ({got or 'identity'})"
                    )
            results += cases.values()
    finally:
        for relay in relays.values():
            await relay.stop()
    return results


def render(result: dict[str, object], cases: list[Case]) -> str:
    lines = [
        "# A full pod list, gzip and identity, over a fast and a slow link",
        "",
        f"`{result['command']}` — kube-apiserver {result['kube']}, {result['pods']} pods, "
        f"cacheproxy {result['source']}, {result['date']}.",
        "",
        f"`curl --http1.1` of `{TARGET}` through a byte relay per server (its own process) set to "
        "the link's bandwidth; seconds per list are curl's total (median of the rounds), the body "
        "not decoded; bytes are the body as sent.",
        "",
        "| link | answer | encoding | seconds per list (median) | rounds | bytes on the wire |",
        "|---|---|---|---:|---:|---:|",
    ]
    for c in cases:
        lines.append(
            f"| {c.link} | {c.case} | {c.encoding} | {c.median:.2f} | {len(c.seconds)} | "
            f"{c.wire_bytes:,} |"
        )
    lines += ["", "Ratios:", ""]
    by = {(c.link, c.case): c for c in cases}
    for link, _ in LINKS:
        gz, ident, api = (by[(link, name)] for name, _, _ in CASES)
        lines.append(
            f"- {link}: cacheproxy identity / cacheproxy gzip = {ident.median / gz.median:.1f}x "
            f"the time, {ident.wire_bytes / gz.wire_bytes:.1f}x the bytes; API server gzip / "
            f"cacheproxy gzip = {api.median / gz.median:.2f}x the time, "
            f"{api.wire_bytes / gz.wire_bytes:.2f}x the bytes."
        )
    slow = LINKS[-1][0]
    gz, ident, api = (by[(slow, name)] for name, _, _ in CASES)
    faster = ident.median / gz.median
    lines += [
        "",
        f"Acceptance over {slow}: cacheproxy's gzip list ≥ 3x faster than its identity list: "
        f"{faster:.1f}x ({'met' if faster >= 3 else 'NOT met'}); no slower than the API "
        f"server's gzip list: {gz.median:.2f} s against {api.median:.2f} s "
        f"({'met' if gz.median <= api.median else 'NOT met'}).",
        "",
    ]
    return "\n".join(lines)


def _parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m loadtest gzipbench", description=__doc__)
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3, help="lists per case and link")
    parser.add_argument(
        "--identity-slow-rounds",
        type=int,
        default=1,
        help="identity lists over the slow link (~30 s each at 10 000 pods)",
    )
    parser.add_argument("--out", type=Path, help="default loadtest/results/<date>-gzip")
    parser.add_argument(
        "--skip-without-assets",
        action="store_true",
        help="without a kube-apiserver, say so and exit 0 (for make bench)",
    )
    add_kube_option(parser)
    args = parser.parse_args(argv)
    if min(args.pods, args.rounds, args.identity_slow_rounds) < 1:
        parser.error("--pods, --rounds and --identity-slow-rounds must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parse_args(argv)
    try:
        assets = required_assets(args, "python -m loadtest gzipbench")
    except NoServer as none:
        return none.code
    out: Path = args.out or Path("loadtest/results") / f"{dt.date.today().isoformat()}-gzip"
    workdir = Path(tempfile.mkdtemp(prefix="loadtest-gzipbench-"))
    cluster = Cluster(assets, workdir=workdir / "cluster")
    daemon = None
    source = cacheproxy_source()
    try:
        _progress(f"starting etcd and kube-apiserver {assets.version}, {args.pods} pods")
        cluster.start()
        objects, _ = build_objects(args.pods)
        asyncio.run(load(cluster, objects, progress=_progress))
        # Its clients reach it through the relay, from 127.0.0.1: compression's default (auto)
        # would answer them as loopback clients. A distant client is what the relay stands for.
        config = write_config(
            workdir, cluster, name="daemon", server={"compression": {"enabled": True}}
        )
        daemon = start_daemon(workdir, config)
        took = daemon.wait_ready(120 + args.pods / 50)
        _progress(f"cacheproxy ready after {took:.1f} s more")
        cases = asyncio.run(_measure(cluster, daemon.port, args, workdir))
    finally:
        if daemon is not None:
            daemon.stop()
        cluster.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    result: dict[str, object] = {
        "command": " ".join(["python -m loadtest gzipbench", *argv]),
        "kube": assets.git_version,
        "pods": args.pods,
        "source": source,
        "date": dt.datetime.now().isoformat(timespec="seconds"),
        "cases": [{**asdict(c), "median": c.median} for c in cases],
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "gzipbench.json").write_text(json.dumps(result, indent=2) + "\n")
    text = render(result, cases)
    (out / "gzipbench.md").write_text(text)
    print(text, flush=True)
    _progress(f"wrote {out}/gzipbench.md and gzipbench.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
