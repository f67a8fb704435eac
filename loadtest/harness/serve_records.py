"""What the serving benchmark records: memory and offload readings, one object count's results,
and the whole run (with the fan-out points). Plain frozen dataclasses, dumped as JSON."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from loadtest.clients.fanout import FanoutPoint
from loadtest.clients.listbench import Measurement
from loadtest.reports.report import MachineInfo

__all__ = ["MemoryReading", "OffloadPhase", "OffloadResult", "ServeResult", "SizeResult"]


@dataclass(frozen=True, slots=True)
class MemoryReading:
    objects: int
    stored_bytes: int
    """The daemon's stored JSON bytes (``/status``: after its transform, managedFields gone)."""
    rss: int
    """Daemon ``VmRSS`` after the sync."""
    rss_empty: int
    """``VmRSS`` of the same daemon configured to cache nothing (an upstream selector matching
    no pod): the process's fixed cost."""
    hwm: int
    """Daemon ``VmHWM`` (peak RSS) once the list benchmarks ran."""
    naive_rss_before: int
    naive_rss_after: int

    @property
    def net_ratio(self) -> float:
        """(RSS - empty RSS) ÷ stored JSON: what each cached object costs, as a multiple."""
        return (self.rss - self.rss_empty) / self.stored_bytes if self.stored_bytes else _NAN

    @property
    def gross_ratio(self) -> float:
        return self.rss / self.stored_bytes if self.stored_bytes else _NAN

    @property
    def naive_ratio(self) -> float:
        net = self.naive_rss_after - self.naive_rss_before
        return net / self.stored_bytes if self.stored_bytes else _NAN


_NAN = float("nan")


@dataclass(frozen=True, slots=True)
class OffloadPhase:
    client_requests: int
    """Requests the daemon answered in this phase (all 200)."""
    upstream_requests: int
    """Pod requests the simulator saw in the same phase."""
    upstream_by_verb: dict[str, int]
    seconds: float


@dataclass(frozen=True, slots=True)
class OffloadResult:
    upstream_at_sync: dict[str, int]
    """Pod requests the simulator saw from start to the daemon's sync (the daemon's and the
    naive server's initial list)."""
    phases: tuple[OffloadPhase, ...]
    run_client_requests: int = 0
    """Requests the daemon answered during the whole run (its ``/metrics``, watches included)."""
    run_upstream_requests: int = 0
    """Requests the daemon made upstream during the whole run (its ``/metrics``)."""


@dataclass(frozen=True, slots=True)
class SizeResult:
    pods: int
    sim_start_s: float
    daemon_sync_s: float
    sim_item_bytes: float
    """Mean bytes of a pod in the simulator's full list (managedFields included)."""
    items: dict[str, dict[str, int]]
    """Items of one answer per server and scenario (-1: not a 200)."""
    measurements: list[Measurement]
    floor: list[Measurement]
    memory: MemoryReading
    offload: OffloadResult
    skipped: list[str] = field(default_factory=list)

    def find(self, server: str, scenario: str, concurrency: int) -> Measurement | None:
        pool = self.floor if server == "floor" else self.measurements
        for m in pool:
            if (m.server, m.scenario, m.concurrency) == (server, scenario, concurrency):
                return m
        return None


@dataclass(frozen=True, slots=True)
class ServeResult:
    machine: MachineInfo
    sizes: list[SizeResult]
    fanout: list[FanoutPoint]
    fanout_pods: int
    settings: dict[str, Any]
    load_average_end: str = ""
