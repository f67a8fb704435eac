"""The daemon under test in the real-server soak, from the outside only.

The daemon runs as ``cacheproxy serve --config FILE``: a YAML config (docs/configuration.md)
and a kubeconfig written here are its whole interface, so refactors of its internals cannot
break the soak. :class:`DaemonProcess` starts it (one log file per start, JSON lines), kills it
(SIGKILL) and starts it again on the same port; :class:`LogReader` parses the new log lines of
every start; :class:`Probe` reads what the daemon says about itself (``/readyz``, ``/status``,
``/metrics``) every half second, and its RSS from ``/proc``.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import datetime
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson
import yaml

from loadtest.harness.processes import rss_bytes

__all__ = [
    "DaemonProcess",
    "DaemonSpec",
    "LogLine",
    "LogReader",
    "Probe",
    "Sample",
    "write_kubeconfig",
]

_METRIC = re.compile(r"^(cacheproxy_[a-z_]+)\{([^}]*)\} (\S+)$", re.MULTILINE)
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def write_kubeconfig(path: Path, *, server: str, ca_file: Path, token: str) -> Path:
    """A kubeconfig naming ``server`` (the relay, for the daemon) with a bearer token."""
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "soak", "cluster": {"server": server, "certificate-authority": str(ca_file)}}
        ],
        "users": [{"name": "soak", "user": {"token": token}}],
        "contexts": [{"name": "soak", "context": {"cluster": "soak", "user": "soak"}}],
        "current-context": "soak",
    }
    path.write_text(yaml.safe_dump(doc))
    return path


@dataclass(frozen=True)
class DaemonSpec:
    """What the soak's daemon is configured with."""

    kubeconfig: Path
    port: int
    label_selector: str = "soak=real"
    """Of the configmaps it caches (the API server writes configmaps of its own)."""
    min_watch_timeout: int = 10
    """Upstream watches last 10-20 s (the smallest the daemon accepts)."""
    page_size: int = 50
    bookmark_interval: int = 1
    ready_max_staleness: int = 10
    """``/readyz`` fails while a resource has heard nothing from upstream for this long; both
    resources are written several times a second, so only a fault makes it fail."""

    def config(self) -> dict[str, Any]:
        return {
            "resources": [
                {"resource": "pods", "indexes": ["spec.nodeName"]},
                {"resource": "configmaps", "labelSelector": self.label_selector},
            ],
            "upstream": {
                "kubeconfig": str(self.kubeconfig),
                "minWatchTimeoutSeconds": self.min_watch_timeout,
                "pageSize": self.page_size,
            },
            "server": {
                "address": "127.0.0.1",
                "port": self.port,
                "stalenessHeader": True,
                "limits": {
                    "bookmarkIntervalSeconds": self.bookmark_interval,
                    "readyMaxStalenessSeconds": self.ready_max_staleness,
                },
            },
            "logging": {"level": "info", "format": "json"},
        }


def _die_with_parent() -> None:
    """In the child: SIGKILL it when the soak dies, however it dies (Linux only)."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _cacheproxy() -> list[str]:
    exe = Path(sys.executable).with_name("cacheproxy")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "cacheproxy"]


class DaemonProcess:
    """``cacheproxy serve --config FILE``, started, killed and started again on its port."""

    def __init__(self, workdir: Path, spec: DaemonSpec) -> None:
        self.workdir = workdir
        self.spec = spec
        self.config = workdir / "daemon.yaml"
        self.config.write_text(yaml.safe_dump(spec.config(), sort_keys=False))
        self.generation = 0
        """Starts so far; the current process's log is ``logs[generation - 1]``."""
        self.logs: list[Path] = []
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.spec.port}"

    @property
    def pid(self) -> int:
        return self._proc.pid if self._proc is not None else 0

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def rss(self, what: str = "VmRSS") -> int:
        return rss_bytes(self.pid, what) if self.alive() else 0

    def spawn(self) -> None:
        """Start a new process (returns at once)."""
        self.generation += 1
        log = self.workdir / f"daemon-{self.generation}.log"
        self.logs.append(log)
        with log.open("wb") as out:
            self._proc = subprocess.Popen(
                [*_cacheproxy(), "serve", "--config", str(self.config)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent,
            )

    async def wait_ready(self, *, within: float = 60.0) -> float:
        """Seconds until ``/readyz`` answered 200."""
        began = time.monotonic()
        async with httpx.AsyncClient(timeout=2.0) as http:
            while time.monotonic() - began < within:
                if not self.alive():
                    raise RuntimeError(f"the daemon exited:\n{self.tail()}")
                with contextlib.suppress(httpx.HTTPError):
                    if (await http.get(self.url + "/readyz")).status_code == 200:
                        return time.monotonic() - began
                await asyncio.sleep(0.05)
        raise RuntimeError(f"the daemon was not ready within {within:.0f} s:\n{self.tail()}")

    async def wait_listening(self, *, within: float = 60.0) -> float:
        """Seconds until the process answers HTTP at all (``/livez``)."""
        began = time.monotonic()
        async with httpx.AsyncClient(timeout=2.0) as http:
            while time.monotonic() - began < within:
                if not self.alive():
                    raise RuntimeError(f"the daemon exited:\n{self.tail()}")
                with contextlib.suppress(httpx.HTTPError):
                    await http.get(self.url + "/livez")
                    return time.monotonic() - began
                await asyncio.sleep(0.02)
        raise RuntimeError(f"the daemon did not listen within {within:.0f} s:\n{self.tail()}")

    def kill(self) -> None:
        """SIGKILL, as a crash or the OOM killer would."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()

    async def stop(self, grace: float = 20.0) -> None:
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        for _ in range(int(grace * 10)):
            if proc.poll() is not None:
                return
            await asyncio.sleep(0.1)
        self.kill()

    def tail(self, lines: int = 30) -> str:
        if not self.logs:
            return ""
        text = self.logs[-1].read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])


# ---------------------------------------------------------------------- logs


@dataclass(frozen=True, slots=True)
class LogLine:
    at: float
    """Wall-clock time (epoch seconds) the daemon wrote it."""
    level: str
    logger: str
    message: str
    generation: int


class LogReader:
    """The daemon's log lines, read incrementally from every start's file."""

    def __init__(self, daemon: DaemonProcess) -> None:
        self.daemon = daemon
        self.lines: list[LogLine] = []
        self._offsets: dict[Path, int] = {}
        self.unparsed: list[str] = []
        """Lines that are not JSON log records (a traceback printed by the interpreter)."""

    def read(self) -> list[LogLine]:
        """The lines written since the last call (complete lines only)."""
        new: list[LogLine] = []
        for generation, path in enumerate(self.daemon.logs, start=1):
            offset = self._offsets.get(path, 0)
            try:
                with path.open("rb") as f:
                    f.seek(offset)
                    data = f.read()
            except OSError:
                continue
            end = data.rfind(b"\n") + 1
            self._offsets[path] = offset + end
            for raw in data[:end].splitlines():
                if not raw.strip():
                    continue
                try:
                    entry = orjson.loads(raw)
                    at = datetime.datetime.fromisoformat(entry["time"]).timestamp()
                    new.append(
                        LogLine(at, entry["level"], entry["logger"], entry["message"], generation)
                    )
                except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
                    self.unparsed.append(raw.decode(errors="replace")[:300])
        self.lines.extend(new)
        return new


# ---------------------------------------------------------------------- what it reports


@dataclass(slots=True)
class Sample:
    """What the daemon said about itself at one moment (``at``: wall-clock seconds)."""

    at: float
    generation: int
    readyz: int | None = None
    """``/readyz`` status (None: no answer)."""
    phases: dict[str, str] = field(default_factory=dict)
    staleness: dict[str, float] = field(default_factory=dict)
    """``/status`` ``stalenessSeconds`` per resource."""
    metric_staleness: dict[str, float] = field(default_factory=dict)
    """``cacheproxy_cache_staleness_seconds`` per resource."""
    relists: dict[str, float] = field(default_factory=dict)
    """``cacheproxy_informer_relists_total`` per resource (all reasons; since this start)."""
    rvs: dict[str, int] = field(default_factory=dict)
    rss: int = 0


class Probe:
    """Samples the daemon every ``every`` seconds until cancelled (:meth:`run`)."""

    def __init__(self, daemon: DaemonProcess, *, every: float = 0.5) -> None:
        self.daemon = daemon
        self.every = every
        self.samples: list[Sample] = []
        self.http_500: list[str] = []

    async def run(self) -> None:
        async with httpx.AsyncClient(timeout=2.0) as http:
            while True:
                self.samples.append(await self.sample(http))
                await asyncio.sleep(self.every)

    async def sample(self, http: httpx.AsyncClient) -> Sample:
        daemon = self.daemon
        sample = Sample(time.time(), daemon.generation, rss=daemon.rss())
        url = daemon.url
        try:
            ready = await http.get(url + "/readyz")
            sample.readyz = ready.status_code
            status = await http.get(url + "/status")
            metrics = await http.get(url + "/metrics")
        except httpx.HTTPError:
            return sample
        for resp in (ready, status, metrics):
            if resp.status_code >= 500 and resp.status_code != 503:
                self.http_500.append(f"{resp.request.url.path}: {resp.status_code} {resp.text}")
        if status.status_code == 200:
            for name, res in orjson.loads(status.content).get("resources", {}).items():
                sample.phases[name] = str(res.get("phase"))
                sample.staleness[name] = float(res.get("stalenessSeconds") or 0.0)
                sample.rvs[name] = int(res.get("resourceVersion") or 0)
        if metrics.status_code == 200:
            for name, labels, value in _METRIC.findall(metrics.text):
                resource = dict(_LABEL.findall(labels)).get("resource", "")
                if name == "cacheproxy_cache_staleness_seconds":
                    sample.metric_staleness[resource] = float(value)
                elif name == "cacheproxy_informer_relists_total":
                    sample.relists[resource] = sample.relists.get(resource, 0.0) + float(value)
        return sample
