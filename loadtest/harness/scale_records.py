"""What the scaling benchmark records: one pod count's readings (per storage), and the whole run.
Plain frozen dataclasses, dumped as JSON."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from loadtest.clients.fanout import FanoutPoint
from loadtest.clients.listbench import Measurement
from loadtest.reports.report import MachineInfo

__all__ = ["IngestReading", "RelistTiming", "ScalePoint", "ScaleResult"]

_NAN = float("nan")


@dataclass(frozen=True, slots=True)
class RelistTiming:
    seconds: float
    """From the last ``/status`` poll that saw the reflector backing off to the first that saw
    the relist applied and the watch open again: the relist itself, without the backoff."""
    total_s: float
    """From the fault to the relist applied (the reflector's backoff included)."""


@dataclass(frozen=True, slots=True)
class IngestReading:
    """One burst: writes the daemon did not see as they were made (its watch silent), then
    delivered to it all at once by its resumed watch."""

    writes: int
    """Merge patches the simulator acknowledged."""
    write_rate: float
    """Writes/s the simulator took (as fast as it would)."""
    early: int
    """MODIFIED events the daemon applied before the burst (0 unless its watch was not silent)."""
    applied: int
    """MODIFIED events the daemon applied in the burst (its ``/status``)."""
    burst_s: float
    """From the silent watch's end until the daemon had applied every write."""
    daemon_cpu_s: float
    sim_cpu_s: float
    """The simulator's CPU over the burst (sending the events from its history)."""

    @property
    def cpu_us_per_event(self) -> float:
        return self.daemon_cpu_s / self.applied * 1e6 if self.applied else _NAN

    @property
    def events_per_s(self) -> float:
        return self.applied / self.burst_s if self.burst_s > 0 else _NAN

    @property
    def daemon_busy(self) -> float:
        """The daemon's CPU ÷ the burst's time: near 1, it was the limit; well below, upstream."""
        return self.daemon_cpu_s / self.burst_s if self.burst_s > 0 else _NAN


@dataclass(frozen=True, slots=True)
class ScalePoint:
    pods: int
    storage: str
    selected: int
    """Pods per app and per node: what the label and index field lists select at every N."""
    sim_start_s: float
    sim_rss: int
    """The simulator's ``VmRSS`` once it listened (what a run at this N needs besides the
    daemon's)."""
    start_s: float
    """Daemon process start until it logged its URL (imports, configuration, listening)."""
    sync_s: float
    """From its URL until ``/readyz`` answered 200: the first sync."""
    objects: int
    stored_bytes: int
    """The daemon's stored JSON bytes (``/status``)."""
    rss: int
    """Daemon ``VmRSS`` after the sync."""
    rss_empty: int
    """``VmRSS`` of the same daemon caching nothing (an upstream selector matching no pod)."""
    hwm: int
    """Daemon ``VmHWM`` (peak RSS) before the relists: the sync, lists, ingest and watches."""
    rss_before_relists: int
    relist_peak: int
    """Daemon ``VmHWM`` over the relists alone (the peak reset before them; 0: not allowed)."""
    items: dict[str, int]
    """Items of one answer per list scenario (-1: not a 200)."""
    lists: list[Measurement]
    """Every connection's run of every list scenario."""
    ingest: list[IngestReading]
    """Every repeat."""
    fanout: list[FanoutPoint]
    """Every repeat at every watcher count."""
    relists: list[RelistTiming]
    wall_s: float = _NAN
    """How long this N took, the simulator's start to its stop (every storage)."""
    other_cpu_s: float = _NAN
    """CPU-seconds the machine was busy over ``wall_s`` beyond this benchmark's processes: other
    work (the numbers are then not this daemon's alone) and the kernel's loopback work."""

    @property
    def net_rss(self) -> int:
        return self.rss - self.rss_empty

    @property
    def rss_ratio(self) -> float:
        """(RSS - empty RSS) ÷ stored JSON."""
        return self.net_rss / self.stored_bytes if self.stored_bytes else _NAN

    @property
    def relist_memory(self) -> float:
        """What a relist holds on top of the state it replaces: its peak RSS less the RSS before."""
        return float(self.relist_peak - self.rss_before_relists) if self.relist_peak else _NAN

    @property
    def relist_s(self) -> float:
        """The median relist."""
        return _median([r.seconds for r in self.relists])

    def p50(self, scenario: str) -> float:
        """The mean of the connections' p50 latencies (each connection settles at one of a few
        speeds: their mean moves little from one run to the next, a median jumps)."""
        runs = [m.p50 for m in self.lists if m.scenario == scenario]
        return statistics.fmean(runs) if runs else _NAN

    @property
    def ingest_us_per_event(self) -> float:
        """The median of the repeats' daemon CPU per event."""
        return _median([g.cpu_us_per_event for g in self.ingest])

    def watch_lag_p99(self, watchers: int) -> float:
        """The median of the repeats' p99 delivery lags."""
        return _median([f.lag_p99 for f in self.fanout if f.watchers == watchers])


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else _NAN


@dataclass(frozen=True, slots=True)
class ScaleResult:
    machine: MachineInfo
    points: list[ScalePoint]
    settings: dict[str, Any]
    load_average_end: str = ""
    storages: list[str] = field(default_factory=lambda: ["plain"])
