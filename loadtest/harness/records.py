"""What the ingest benchmark measures: timed phases, memory readings, and one N's results.

:class:`Clock` times a phase three ways: wall (``time.perf_counter``), CPU of this process
(``time.process_time``: user + system, one thread here) and time inside the cyclic garbage
collector (``gc.callbacks``), which is part of both.
"""

from __future__ import annotations

import dataclasses
import gc
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["Clock", "IngestResult", "MemoryResult", "Phase", "PipelineRun", "best_of"]


@dataclass(frozen=True, slots=True)
class Phase:
    """One timed pass over ``events`` lines, of which ``applied`` reached the cache."""

    events: int
    applied: int
    wall_s: float
    cpu_s: float
    parse_s: float = 0.0
    """Time in ``orjson.loads`` of the lines (included in ``wall_s``)."""
    gc_s: float = 0.0
    """Time in the cyclic garbage collector (included in ``wall_s``)."""
    runs: tuple[float, ...] = ()
    """Events per CPU-second of every repetition, when this is the best of several."""

    @property
    def rate_cpu(self) -> float:
        return self.applied / self.cpu_s if self.cpu_s > 0 else float("nan")

    @property
    def rate_wall(self) -> float:
        return self.applied / self.wall_s if self.wall_s > 0 else float("nan")

    @property
    def median_rate_cpu(self) -> float:
        return statistics.median(self.runs) if self.runs else self.rate_cpu


def best_of(phases: Sequence[Phase]) -> Phase:
    """The repetition with the highest CPU rate (the least disturbed), knowing all the others."""
    best = max(phases, key=lambda p: p.rate_cpu)
    return dataclasses.replace(best, runs=tuple(p.rate_cpu for p in phases))


@dataclass(frozen=True, slots=True)
class MemoryResult:
    objects: int
    json_bytes: int
    """Sum of the stored JSON sizes (``len(entry.raw)``; the same objects re-encoded for dicts)."""
    held_bytes: int
    """tracemalloc: bytes still allocated after the sync, minus before it."""
    peak_bytes: int
    """tracemalloc: the highest allocation during the sync, minus before it."""
    sizeof_bytes: int
    """Deep ``sys.getsizeof`` of the cache's structures (cross-check)."""
    after_modified_bytes: int | None = None
    """tracemalloc after N MODIFIED more (Store + EventLog holding old and new entries)."""

    @property
    def ratio(self) -> float:
        return self.held_bytes / self.json_bytes if self.json_bytes else float("nan")

    def per_object(self, value: int | None) -> float:
        return value / self.objects if value is not None and self.objects else float("nan")


@dataclass(frozen=True, slots=True)
class PipelineRun:
    sync: Phase
    modified: Phase
    memory: MemoryResult | None = None
    profiles: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class IngestResult:
    """Everything measured for one N."""

    n: int
    line_bytes: float
    """Mean size of an ADDED watch line (the pod with managedFields, in its event)."""
    dumps_overallocation: float
    """Allocated bytes per byte of JSON for ``orjson.dumps`` of the stored objects (sample)."""
    parse_floor: tuple[Phase, Phase]
    codec_floor: tuple[Phase, Phase]
    store_only: tuple[Phase, Phase]
    pipeline: PipelineRun
    naive: tuple[Phase, Phase]
    pipeline_memory: MemoryResult
    naive_memory: MemoryResult
    pipeline_gc_off: PipelineRun | None = None
    """What-if: the same pipeline with the cyclic garbage collector disabled."""
    backlog: Phase | None = None
    """The MODIFIED phase again with the whole phase queued at once (no loop turns in between)."""
    repeats: int = 1
    chunk_events: int = 8
    """Watch lines the fake stream hands over per event-loop turn."""
    shape: str = "generated"
    """The workload's pods: ``sample`` (pod.json varied) or ``generated`` (``make_pod``)."""
    modified_line_bytes: float = float("nan")
    """Mean size of a MODIFIED watch line."""


class Clock:
    """Wall, CPU and garbage-collector time of one phase."""

    def __init__(self) -> None:
        self.gc_s = 0.0
        self._gc_started = 0.0
        self.wall0 = time.perf_counter()
        self.cpu0 = time.process_time()
        gc.callbacks.append(self._on_gc)

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
        else:
            self.gc_s += time.perf_counter() - self._gc_started

    def stop(
        self, *, events: int, applied: int | None = None, parse_s: float = 0.0, wall_end: float = 0
    ) -> Phase:
        cpu = time.process_time() - self.cpu0
        wall = (wall_end or time.perf_counter()) - self.wall0
        gc.callbacks.remove(self._on_gc)
        return Phase(
            events=events,
            applied=events if applied is None else applied,
            wall_s=wall,
            cpu_s=cpu,
            parse_s=parse_s,
            gc_s=self.gc_s,
        )
