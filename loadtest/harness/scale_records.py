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
    rate: float
    """Writes/s asked of the writer."""
    writes: int
    """Merge patches the simulator acknowledged."""
    write_rate: float
    """Writes/s the writer achieved."""
    applied: int
    """MODIFIED events the daemon applied over the same time (its ``/status``)."""
    daemon_cpu_s: float
    """Daemon CPU time from the first write until every write was applied."""
    catch_up_s: float
    """From the last write's acknowledgement until the daemon had applied every write."""
    idle_cpu: float = 0.0
    """Daemon CPU seconds per second over a moment without writes just before: what the
    per-event figure holds of the daemon's own timers."""

    @property
    def cpu_us_per_event(self) -> float:
        return self.daemon_cpu_s / self.applied * 1e6 if self.applied else _NAN

    @property
    def events_per_cpu_s(self) -> float:
        """What one core would apply per second at this cost."""
        return self.applied / self.daemon_cpu_s if self.daemon_cpu_s > 0 else _NAN


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
    """Daemon ``VmHWM`` (peak RSS) after every measurement, the relists last."""
    items: dict[str, int]
    """Items of one answer per list scenario (-1: not a 200)."""
    lists: list[Measurement]
    """Every repeat of every list scenario."""
    ingest: list[IngestReading]
    """Every repeat."""
    fanout: list[FanoutPoint]
    """Every repeat at every watcher count."""
    relists: list[RelistTiming]

    @property
    def net_rss(self) -> int:
        return self.rss - self.rss_empty

    @property
    def rss_ratio(self) -> float:
        """(RSS - empty RSS) ÷ stored JSON."""
        return self.net_rss / self.stored_bytes if self.stored_bytes else _NAN

    @property
    def relist_s(self) -> float:
        """The median relist."""
        return _median([r.seconds for r in self.relists])

    def p50(self, scenario: str) -> float:
        """The median of the repeats' p50 latencies."""
        return _median([m.p50 for m in self.lists if m.scenario == scenario])

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
