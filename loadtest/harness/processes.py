"""The processes a serving benchmark runs: each server in its own process, on 127.0.0.1, port 0.

:func:`start_sim` runs ``cacheproxy sim``, :func:`start_daemon` ``cacheproxy serve --config FILE``
(a kubeconfig naming the simulator and a YAML config written next to it), :func:`start_module`
any ``python -m loadtest.<module>`` server of this package. Each one's output goes to a log file;
the bound URL is read from it (``… listening on URL``, the daemon's ``serving … on URL`` log line,
or the ``URL`` line our own servers print), and readiness is polled on ``/readyz``.
:class:`Service` also reads the process's resident memory and CPU time from ``/proc``.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "Service",
    "cpu_seconds",
    "machine_cpu",
    "rss_bytes",
    "start_daemon",
    "start_module",
    "start_sim",
    "write_daemon_config",
]

_URL = re.compile(rb"(?:listening on|serving .* on|^URL) (http://127\.0\.0\.1:\d+)", re.MULTILINE)
_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def rss_bytes(pid: int, field: str = "VmRSS") -> int:
    """``VmRSS`` of ``pid`` (or another ``/proc/PID/status`` size such as ``VmHWM``, the peak);
    0 when unknown."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    found = re.search(rf"^{field}:\s+(\d+) kB", text, re.MULTILINE)
    return int(found.group(1)) * 1024 if found else 0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid`` so far (``/proc/PID/stat``; NaN when unknown)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return float("nan")
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK  # utime, stime


def machine_cpu() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine so far (``/proc/stat``; busy includes
    interrupt and softirq time, where loopback TCP is mostly processed, and steal)."""
    try:
        first = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    except OSError:
        return float("nan"), float("nan")
    ticks = [int(x) for x in first[1:9]]  # user … steal (guest time is inside user)
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
    return (sum(ticks) - idle) / _CLK_TCK, sum(ticks) / _CLK_TCK


@dataclass
class Service:
    """A server process: its URL once it printed one; stopped by :meth:`stop` (SIGTERM, then
    SIGKILL after a grace period)."""

    name: str
    proc: subprocess.Popen[bytes]
    log: Path
    url: str = ""
    argv: list[str] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def rss(self) -> int:
        return rss_bytes(self.pid)

    def cpu(self) -> float:
        return cpu_seconds(self.pid)

    def tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def wait_url(self, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = _URL.search(self.log.read_bytes()) if self.log.exists() else None
            if found:
                self.url = found.group(1).decode()
                return self.url
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"{self.name} printed no URL within {timeout:.0f} s:\n{self.tail()}")

    def wait_ready(self, timeout: float, path: str = "/readyz") -> float:
        """Poll ``path`` until it answers 200; the seconds it took."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited ({self.proc.returncode}):\n{self.tail()}")
            try:
                with urllib.request.urlopen(self.url + path, timeout=5) as response:
                    if response.status == 200:
                        return time.monotonic() - started
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.05)
        raise RuntimeError(f"{self.name} not ready within {timeout:.0f} s:\n{self.tail()}")

    def stop(self, grace: float = 10.0) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _spawn(name: str, argv: Sequence[str], workdir: Path) -> Service:
    log = workdir / f"{name}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            list(argv), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
    return Service(name=name, proc=proc, log=log, argv=list(argv))


def _cacheproxy() -> list[str]:
    exe = Path(sys.executable).with_name("cacheproxy")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "cacheproxy"]


def start_sim(
    workdir: Path,
    *,
    pods: int,
    namespaces: int,
    nodes: int,
    apps: int,
    churn: float = 0.0,
    history: int = 100_000,
    seed: int = 1,
) -> Service:
    """``cacheproxy sim`` with ``pods`` demo pods; returns once it printed its URL."""
    argv = [
        *_cacheproxy(),
        "--log-level",
        "warning",
        "sim",
        "--port",
        "0",
        "--pods",
        str(pods),
        "--namespaces",
        str(namespaces),
        "--nodes",
        str(nodes),
        "--apps",
        str(apps),
        "--churn",
        str(churn),
        "--history",
        str(history),
        "--seed",
        str(seed),
    ]
    service = _spawn("sim", argv, workdir)
    # Building the demo pods costs ~1 ms each before the server listens.
    service.wait_url(timeout=60 + pods / 300)
    return service


def write_daemon_config(
    workdir: Path,
    *,
    name: str,
    upstream: str,
    indexes: Sequence[str] = ("spec.nodeName",),
    label_selector: str = "",
    consistent_reads: str = "cache",
    storage: str = "plain",
) -> Path:
    """A kubeconfig naming ``upstream`` and the daemon's YAML config (docs/configuration.md).

    ``consistent_reads`` is the pods' ``consistentReads``: ``cache`` by default, because these
    benchmarks measure what serving from memory costs (a consistent read adds a wait for
    upstream's RV, which :mod:`loadtest.scenarios.consistentbench` measures). ``storage`` is
    written only when it is not ``plain``, the default, so a daemon without the setting reads
    the file."""
    kubeconfig = workdir / f"{name}-kubeconfig.yaml"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters:\n- name: sim\n  cluster:\n    server: {upstream}\n"
        "users:\n- name: bench\n  user: {}\n"
        "contexts:\n- name: sim\n  context:\n    cluster: sim\n    user: bench\n"
        "current-context: sim\n"
    )
    resource = ["resources:", "  - resource: pods"]
    if indexes:
        resource.append("    indexes: [" + ", ".join(indexes) + "]")
    if label_selector:
        resource.append(f"    labelSelector: {label_selector!r}")
    resource.append(f"    consistentReads: {consistent_reads}")
    if storage != "plain":
        resource.append(f"    storage: {storage}")
    config = workdir / f"{name}.yaml"
    config.write_text(
        "\n".join(
            [
                *resource,
                "upstream:",
                f"  kubeconfig: {kubeconfig.name}",
                "server:",
                "  address: 127.0.0.1",
                "  port: 0",
                "logging:",
                "  level: info",
                "",
            ]
        )
    )
    return config


def start_daemon(workdir: Path, config: Path, *, name: str = "daemon") -> Service:
    """``cacheproxy serve --config FILE --port 0``; returns once it logged its URL."""
    argv = [*_cacheproxy(), "serve", "--config", str(config), "--port", "0"]
    service = _spawn(name, argv, workdir)
    service.wait_url(timeout=60)
    return service


def start_module(workdir: Path, name: str, module: str, *args: str, wait: bool = True) -> Service:
    """``python -m MODULE ARGS`` (a server of this package that prints ``URL http://…``);
    ``wait=False`` returns at once (call ``wait_url`` later)."""
    service = _spawn(name, [sys.executable, "-m", module, *args], workdir)
    if wait:
        service.wait_url(timeout=60)
    return service
