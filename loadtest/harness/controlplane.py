"""What the control-plane benchmark measures, and the daemon it runs: read from the processes
themselves (their logs, ``/proc``, the API server's audit log, the daemon's ``/metrics``), never
from inside them.

- :data:`KCM_SIGNS`: the lines of kube-controller-manager's ``-v=2`` log that say a controller
  acted on a stale cache or lost a write race, by what they say (:func:`kcm_signs`);
- :func:`write_latencies`, :func:`conflicts`: the writes of the controllers and the kubelet as the
  API server's audit log saw them (received → answered; answered 409);
- :func:`histogram_buckets`, :func:`histogram_quantile`: a quantile of one of the daemon's
  Prometheus histograms between two readings;
- :func:`established`: a process's established TCP connections (``/proc/PID/fd`` against
  ``/proc/PID/net/tcp{,6}``);
- :class:`DaemonProcess`: ``cacheproxy serve`` over TLS on a port of its choosing, kept across a
  restart (SIGTERM, then a new process on the same port).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import math
import re
import ssl
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml
from prometheus_client.parser import text_string_to_metric_families

from cacheproxy.envtest.process import free_port

__all__ = [
    "KCM_SIGNS",
    "WRITE_VERBS",
    "DaemonProcess",
    "config_label",
    "conflicts",
    "error_lines",
    "established",
    "histogram_buckets",
    "histogram_quantile",
    "kcm_signs",
    "percentile",
    "resource_label",
    "write_latencies",
]

KCM_SIGNS: dict[str, re.Pattern[str]] = {
    # The endpoints and EndpointSlice controllers compare their informer with what they wrote.
    "informer cache is out of date": re.compile(r"informer cache is out of date"),
    # 1.36's stale-controller check: a controller whose informer has not yet seen
    # its own last write skips the sync and retries.
    "read version is not as new as written": re.compile(r"is not as new as written version"),
    # A write refused on a stale resourceVersion (409 Conflict), as the controllers log it.
    "409: object has been modified": re.compile(
        r"the object has been modified|Operation cannot be fulfilled"
    ),
    # The namespace controller found what it deleted still listed.
    "namespace: unexpected items still remain": re.compile(r"unexpected items still remain"),
}
"""kube-controller-manager's log lines (``-v=2``) that mean a retry, by the phrase they carry."""

WRITE_VERBS = frozenset(("create", "update", "patch", "delete", "deletecollection"))


_SOURCE = re.compile(r"^[IWE]\d{4} \S+\s+\d+ ([\w.]+\.go):\d+\]")


def kcm_signs(log: Path, *, since: int = 0) -> tuple[dict[str, int], dict[str, int]]:
    """How many lines of ``log`` from byte ``since`` on carry each of :data:`KCM_SIGNS`, and how
    many of those each source file logged (``replica_set.go``: which controller retried)."""
    counts = dict.fromkeys(KCM_SIGNS, 0)
    sources: dict[str, int] = {}
    with log.open("rb") as f:
        f.seek(since)
        for raw in f:
            line = raw.decode(errors="replace")
            signs = [name for name, pattern in KCM_SIGNS.items() if pattern.search(line)]
            for name in signs:
                counts[name] += 1
            if signs:
                found = _SOURCE.match(line)
                source = found[1] if found else "?"
                sources[source] = sources.get(source, 0) + 1
    return counts, sources


def error_lines(log: Path) -> list[str]:
    """The lines of a daemon's log at level ERROR (its text format: ``time LEVEL logger: …``)."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return []
    return [line for line in text.splitlines() if re.match(r"^\S+ \S+ ERROR ", line)]


def _timestamp(value: str) -> float:
    return datetime.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def _writes(events: Iterable[Mapping[str, Any]], agents: Sequence[str]) -> list[Mapping[str, Any]]:
    return [
        e
        for e in events
        if e.get("stage") == "ResponseComplete"
        and e.get("verb") in WRITE_VERBS
        and str(e.get("userAgent", "")).startswith(tuple(agents))
    ]


def resource_label(resource: str, group: str = "") -> str:
    """How the daemon's metrics name a resource: ``pods``, ``deployments.apps``."""
    return f"{resource}.{group}" if group else resource


def config_label(config_name: str) -> str:
    """:func:`resource_label` of a configuration's resource name (``apps/v1/deployments``)."""
    parts = config_name.split("/")
    return resource_label(parts[-1], parts[0] if len(parts) == 3 else "")


def write_latencies(
    events: Iterable[Mapping[str, Any]],
    agents: Sequence[str],
    *,
    resources: Callable[[str], bool] = lambda label: True,
) -> list[float]:
    """Seconds from received to answered of the writes of the clients whose User-Agent starts
    with one of ``agents``, as the API server's audit log says; only those on a resource whose
    :func:`resource_label` ``resources`` accepts (a subresource counts as its resource's)."""
    return [
        _timestamp(e["stageTimestamp"]) - _timestamp(e["requestReceivedTimestamp"])
        for e in _writes(events, agents)
        if resources(
            resource_label(
                (e.get("objectRef") or {}).get("resource", ""),
                (e.get("objectRef") or {}).get("apiGroup", ""),
            )
        )
    ]


def conflicts(events: Iterable[Mapping[str, Any]], agents: Sequence[str]) -> int:
    """The writes of those clients the API server answered 409 Conflict."""
    return sum(
        1 for e in _writes(events, agents) if (e.get("responseStatus") or {}).get("code") == 409
    )


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0 to 1) by nearest rank; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def histogram_buckets(
    exposition: str, name: str, *, keep: Callable[[Mapping[str, str]], bool]
) -> dict[float, float]:
    """The cumulative buckets (upper bound → count) of histogram ``name``, summed over the series
    whose labels ``keep`` accepts."""
    buckets: dict[float, float] = {}
    for family in text_string_to_metric_families(exposition):
        for s in family.samples:
            if s.name != f"{name}_bucket" or not keep(s.labels):
                continue
            bound = float(s.labels["le"])
            buckets[bound] = buckets.get(bound, 0.0) + s.value
    return buckets


def histogram_quantile(
    after: Mapping[float, float], q: float, *, before: Mapping[float, float] | None = None
) -> tuple[float, int]:
    """The ``q`` quantile of the observations between two readings of cumulative buckets
    (:func:`histogram_buckets`), interpolated inside its bucket as Prometheus's
    ``histogram_quantile`` does, and how many there were; NaN for none."""
    buckets = {b: n - (before or {}).get(b, 0.0) for b, n in after.items()}
    bounds = sorted(buckets)
    total = buckets[bounds[-1]] if bounds else 0.0
    if total <= 0:
        return math.nan, 0
    rank = q * total
    lower, below = 0.0, 0.0
    for bound in bounds:
        if buckets[bound] >= rank:
            if math.isinf(bound):
                return lower, int(total)
            inside = buckets[bound] - below
            share = (rank - below) / inside if inside else 1.0
            return lower + (bound - lower) * share, int(total)
        lower, below = bound, buckets[bound]
    return lower, int(total)


def _socket_inodes(pid: int) -> set[str]:
    inodes: set[str] = set()
    try:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                target = str(fd.readlink())
            except OSError:
                continue
            found = re.fullmatch(r"socket:\[(\d+)\]", target)
            if found:
                inodes.add(found.group(1))
    except OSError:
        pass
    return inodes


def established(pid: int, *, remote_port: int | None = None) -> int:
    """TCP connections of ``pid`` in state ESTABLISHED (to ``remote_port`` only, when given)."""
    inodes = _socket_inodes(pid)
    count = 0
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] != "01" or fields[9] not in inodes:
                continue
            if remote_port is not None and int(fields[2].rsplit(":", 1)[1], 16) != remote_port:
                continue
            count += 1
    return count


@dataclass
class DaemonProcess:
    """``cacheproxy serve`` over TLS in front of an API server, caching ``resources``; one port
    for all its lives. ``kubeconfig`` is the daemon's upstream (the admin's)."""

    workdir: Path
    kubeconfig: Path
    resources: Sequence[str]
    cert: Path
    key: Path
    ca: Path
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    lives: int = 0

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.workdir / f"daemon-{self.lives}.log"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, *, timeout: float = 60.0) -> float:
        """Start a new process (on the port of the last one, if any); the seconds to
        ``/readyz`` 200."""
        self.port = self.port or free_port()
        config = self.workdir / "cacheproxy.yaml"
        doc = {
            "resources": list(self.resources),
            "upstream": {"kubeconfig": str(self.kubeconfig)},
            "server": {
                "address": "127.0.0.1",
                "port": self.port,
                "tls": {"certFile": str(self.cert), "keyFile": str(self.key)},
            },
            # As the deploy manifests have it (an emptyDir): a restart resumes warm.
            "persistence": {"dir": str(self.workdir / "snapshots")},
            "logging": {"level": "info"},
        }
        config.write_text(yaml.safe_dump(doc))
        self.lives += 1
        exe = Path(sys.executable).with_name("cacheproxy")
        argv = [str(exe)] if exe.exists() else [sys.executable, "-m", "cacheproxy"]
        started = time.monotonic()
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [*argv, "serve", "--config", str(config)],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        context = ssl.create_default_context(cafile=str(self.ca))
        with httpx.Client(verify=context, timeout=2.0) as client:
            while time.monotonic() - started < timeout:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"the daemon exited at start:\n{self._tail()}")
                try:
                    if client.get(f"{self.url}/readyz").status_code == 200:
                        return time.monotonic() - started
                except httpx.HTTPError:
                    pass
                time.sleep(0.05)
        raise RuntimeError(f"the daemon was not ready within {timeout:.0f} s:\n{self._tail()}")

    def stop(self, *, kill_after: float = 60.0) -> float:
        """SIGTERM; the seconds until the process exited (killed after ``kill_after``)."""
        if self.proc is None:
            return 0.0
        started = time.monotonic()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(kill_after)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        return time.monotonic() - started

    def metrics(self) -> str:
        context = ssl.create_default_context(cafile=str(self.ca))
        with httpx.Client(verify=context, timeout=10.0) as client:
            return client.get(f"{self.url}/metrics").text

    def _tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-20:])


PROBE_NAMESPACE = "default"


async def probe_writes(
    sides: Mapping[str, httpx.AsyncClient],
    done: asyncio.Event,
    *,
    interval: float = 0.2,
) -> dict[str, list[float]]:
    """Writes of a kind the daemon does not cache (a PodTemplate's merge patch) as a client sees
    them,
    through each of ``sides`` by turns (straight to the API server, through the daemon: the
    same client settings, HTTP/1.1 over TLS), until ``done``: what pass-through adds to a write
    under the load of the running control plane. Seconds per write, by side. A few writes a
    second, so that the probe adds little to what it measures."""
    path = f"/api/v1/namespaces/{PROBE_NAMESPACE}/podtemplates"
    first = next(iter(sides.values()))
    for side in sides:
        made = await first.post(path, json=_probe_template(f"probe-{side}"))
        if made.status_code not in (201, 409):
            raise RuntimeError(f"the write probe's PodTemplate: {made.status_code} {made.text}")
    times: dict[str, list[float]] = {side: [] for side in sides}
    n = 0
    while not done.is_set():
        order = list(sides.items())
        if n % 2:
            order.reverse()
        for side, client in order:
            patch = {"metadata": {"annotations": {"probe": str(n)}}}
            began = time.perf_counter()
            answer = await client.patch(
                f"{path}/probe-{side}",
                json=patch,
                headers={"Content-Type": "application/merge-patch+json"},
            )
            if answer.status_code == 200:
                times[side].append(time.perf_counter() - began)
        n += 1
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), interval)
    return times


def _probe_template(name: str) -> dict[str, Any]:
    container = {"name": "c", "image": "registry.k8s.io/pause:3.10"}
    return {"metadata": {"name": name}, "template": {"spec": {"containers": [container]}}}
