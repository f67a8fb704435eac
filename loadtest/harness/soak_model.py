"""The soak's truth and its bookkeeping: upstream's objects at any RV, client views, violations.

- :class:`UpstreamModel` holds every write of one resource, in RV order. Against the simulator
  it is a :class:`~cacheproxy.sim.storage.WatchSink` registered on the simulator's store before
  any pod exists: the store offers it every pod write synchronously, in RV order, whatever the
  faults (``end_watches`` and restarts close only ``SimWatcher``\\ s, and compaction does not
  touch it), so upstream's state at any RV can be rebuilt from it. Against a real API server
  (:mod:`loadtest.scenarios.soakreal`) the harness, the only writer, calls :meth:`UpstreamModel.record`
  with each write's result; a write is known only once its response is back, possibly after a
  client saw its event, so the model says up to which RV its history is complete
  (``complete_to``) and a client's check at a later RV waits until then. For every
  :class:`Filter` (the query one client kind makes) it keeps, after each write, the count and an
  order-free hash (sum of ``hash((key, rv))``) of the matching objects: "does this view equal
  upstream at RV R" is a bisect and two integer comparisons, cheap enough to ask after every
  event batch. A full replay (:meth:`UpstreamModel.state_at`) is made only to describe a mismatch.
- :class:`View` is one client's picture (key → object RV) with the same running count and hash.
- :class:`Violations` records broken invariants by kind, with the first details of each.
- :class:`ErrorCapture` collects WARNING/ERROR log records and asyncio exception-handler calls;
- :class:`ClientStats` and :class:`SoakReport`: the figures of a run, rendered as Markdown.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from cacheproxy.kube.resources import ResourceType
from cacheproxy.sim.storage import Event, Progress, WatchSink

__all__ = [
    "FILTERS",
    "ClientStats",
    "ErrorCapture",
    "Filter",
    "SoakReport",
    "UpstreamModel",
    "View",
    "Violations",
    "describe_diff",
    "read_rss",
]

_MASK = (1 << 64) - 1
_LOGGERS = ("", "uvicorn")
"""Root, and uvicorn's own tree, which does not propagate (``uvicorn.error`` reaches it)."""
JsonObject = dict[str, Any]


def item_hash(key: str, rv: int) -> int:
    return hash((key, rv)) & _MASK


@dataclass(frozen=True)
class Filter:
    """One client query: a path and parameters on the daemon, and the same test on an object."""

    name: str
    path: str
    params: tuple[tuple[str, str], ...]
    test: Callable[[JsonObject], bool]

    def matches(self, obj: JsonObject) -> bool:
        return self.test(obj)


def _meta(obj: JsonObject) -> JsonObject:
    meta: JsonObject = obj.get("metadata") or {}
    return meta


FILTERS: tuple[Filter, ...] = (
    Filter("all", "/api/v1/pods", (), lambda o: True),
    Filter(
        "ns-1",
        "/api/v1/namespaces/ns-1/pods",
        (),
        lambda o: _meta(o).get("namespace") == "ns-1",
    ),
    Filter(
        "app-2",
        "/api/v1/pods",
        (("labelSelector", "app=app-2"),),
        lambda o: (_meta(o).get("labels") or {}).get("app") == "app-2",
    ),
    # Phases move (Pending → Running → Failed): objects enter and leave the selection, so the
    # daemon's transition rule (ADDED / DELETED at the event's RV) is checked.
    Filter(
        "running",
        "/api/v1/pods",
        (("fieldSelector", "status.phase=Running"),),
        lambda o: (o.get("status") or {}).get("phase") == "Running",
    ),
    # An indexed field (the daemon indexes spec.nodeName) within a namespace.
    Filter(
        "ns-0-node-1",
        "/api/v1/namespaces/ns-0/pods",
        (("fieldSelector", "spec.nodeName=node-1"),),
        lambda o: (
            _meta(o).get("namespace") == "ns-0"
            and (o.get("spec") or {}).get("nodeName") == "node-1"
        ),
    ),
)


class UpstreamModel(WatchSink):
    """Every pod write of the simulator, and per filter the (count, hash) after each one.

    Register it with ``store.add_watcher`` before the first pod is created. ``offer`` runs inside
    the store's write: it never raises (a failure is kept in ``errors`` and reported).
    """

    def __init__(
        self,
        rtype: ResourceType,
        filters: Iterable[Filter] = FILTERS,
        *,
        upstream_rv: Callable[[], int] | None = None,
        complete_to: Callable[[], int] | None = None,
    ) -> None:
        self.rtype = rtype
        self.upstream_rv = upstream_rv or (lambda: self.latest_rv)
        """Upstream's current RV (the store's: other resources' writes move it too); states at
        RVs up to it are known, and an RV beyond it comes from the future."""
        self.complete_to = complete_to
        """When writes are recorded after the fact (a real upstream): the RV up to which every
        write is recorded. A check at a later RV is not wrong, only early: it waits."""
        self.namespace = None
        self.filters = {f.name: f for f in filters}
        self._order = list(self.filters)
        self.rvs: list[int] = []
        """RV of each pod write, ascending."""
        self.writes: list[tuple[int, str, int]] = []
        """(rv, key, bitmask of the filters the new object matches; 0 for a delete)."""
        self._sums: dict[str, list[tuple[int, int]]] = {n: [] for n in self._order}
        self.current: dict[str, dict[str, int]] = {n: {} for n in self._order}
        self._count = dict.fromkeys(self._order, 0)
        self._hash = dict.fromkeys(self._order, 0)
        self.by_type: Counter[str] = Counter()
        self.errors: list[str] = []

    # ------------------------------------------------------------------ WatchSink

    def offer(self, event: Event | Progress) -> None:
        if not isinstance(event, Event):  # a progress notification: no write
            return
        try:
            self.record(event.type, event.obj.key, event.rv, event.obj.obj)
        except Exception as exc:  # never break the simulator's write
            self.errors.append(f"model failed on rv {event.rv}: {exc!r}")

    def record(self, event_type: str, key: str, rv: int, obj: JsonObject | None) -> None:
        """One write, after every write of a lower RV: ``obj`` is the new object (ignored for
        ``DELETED``)."""
        if self.rvs and rv <= self.rvs[-1]:
            self.errors.append(f"write at rv {rv} recorded after {self.rvs[-1]}")
        new = None if event_type == "DELETED" or obj is None else obj
        mask = 0
        for i, name in enumerate(self._order):
            state = self.current[name]
            old_rv = state.get(key)
            if old_rv is not None:
                del state[key]
                self._count[name] -= 1
                self._hash[name] = (self._hash[name] - item_hash(key, old_rv)) & _MASK
            if new is not None and self.filters[name].matches(new):
                mask |= 1 << i
                state[key] = rv
                self._count[name] += 1
                self._hash[name] = (self._hash[name] + item_hash(key, rv)) & _MASK
            self._sums[name].append((self._count[name], self._hash[name]))
        self.rvs.append(rv)
        self.writes.append((rv, key, mask))
        self.by_type[event_type] += 1

    # ------------------------------------------------------------------ questions

    @property
    def latest_rv(self) -> int:
        return self.rvs[-1] if self.rvs else 0

    def knows(self, rv: int) -> bool:
        """Whether upstream's state at ``rv`` is known (every write up to it recorded)."""
        limit = self.complete_to if self.complete_to is not None else self.upstream_rv
        return rv <= limit()

    def summary_at(self, name: str, rv: int) -> tuple[int, int]:
        """(count, hash) of the objects matching filter ``name`` at ``rv``."""
        i = bisect.bisect_right(self.rvs, rv) - 1
        return self._sums[name][i] if i >= 0 else (0, 0)

    def state_at(self, name: str, rv: int) -> dict[str, int]:
        """key → object RV of the objects matching filter ``name`` at ``rv`` (a replay)."""
        bit = 1 << self._order.index(name)
        state: dict[str, int] = {}
        for wrv, key, mask in self.writes:
            if wrv > rv:
                break
            if mask & bit:
                state[key] = wrv
            else:
                state.pop(key, None)
        return state

    def writes_between(self, low: int, high: int) -> int:
        """How many pod writes have an RV in (low, high]."""
        return bisect.bisect_right(self.rvs, high) - bisect.bisect_right(self.rvs, low)


class View:
    """A client's picture of its selection: key → object RV, with a running count and hash."""

    def __init__(self, items: dict[str, int] | None = None) -> None:
        self.items: dict[str, int] = {}
        self.hash = 0
        if items:
            self.replace(items)

    def replace(self, items: dict[str, int]) -> None:
        self.items = dict(items)
        total = 0
        for key, rv in self.items.items():
            total += item_hash(key, rv)
        self.hash = total & _MASK

    def apply(self, event_type: str, key: str, rv: int) -> str | None:
        """Apply one watch event; a description when its type contradicts the view."""
        old = self.items.get(key)
        problem = None
        if event_type == "ADDED" and old is not None:
            problem = f"ADDED {key} at {rv}, but the view holds it at {old}"
        elif event_type in ("MODIFIED", "DELETED") and old is None:
            problem = f"{event_type} {key} at {rv}, but the view does not hold it"
        if old is not None:
            self.hash = (self.hash - item_hash(key, old)) & _MASK
        if event_type == "DELETED":
            self.items.pop(key, None)
        else:
            self.items[key] = rv
            self.hash = (self.hash + item_hash(key, rv)) & _MASK
        return problem

    def summary(self) -> tuple[int, int]:
        return len(self.items), self.hash


def describe_diff(got: dict[str, int], want: dict[str, int], *, limit: int = 5) -> str:
    missing = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    stale = sorted(k for k in set(got) & set(want) if got[k] != want[k])
    parts = [f"view {len(got)} objects, upstream {len(want)}"]
    if missing:
        parts.append(
            f"missing {len(missing)}: {', '.join(f'{k}@{want[k]}' for k in missing[:limit])}"
        )
    if extra:
        parts.append(f"extra {len(extra)}: {', '.join(f'{k}@{got[k]}' for k in extra[:limit])}")
    if stale:
        shown = ", ".join(f"{k} view@{got[k]} upstream@{want[k]}" for k in stale[:limit])
        parts.append(f"other RV {len(stale)}: {shown}")
    return "; ".join(parts)


@dataclass
class Violations:
    """Broken invariants by kind; the first ``keep`` details of each kind are kept."""

    keep: int = 20
    counts: Counter[str] = field(default_factory=Counter)
    details: dict[str, list[str]] = field(default_factory=dict)

    def record(self, kind: str, detail: str) -> None:
        self.counts[kind] += 1
        shown = self.details.setdefault(kind, [])
        if len(shown) < self.keep:
            shown.append(detail)

    @property
    def total(self) -> int:
        return sum(self.counts.values())


@dataclass
class ClientStats:
    lists: int = 0
    paged_lists: int = 0
    pages: int = 0
    watch_lists: int = 0
    watches: int = 0
    resumes: int = 0
    events: int = 0
    bookmarks: int = 0
    checkpoints: int = 0
    events_checked: int = 0
    deferred: int = 0
    """Checkpoints judged later: upstream's history was not complete to their RV yet."""
    deferred_dropped: int = 0
    """Checkpoints never judged: too many waited at once (see ``SoakClient``)."""
    relists: Counter[str] = field(default_factory=Counter)
    tolerated: Counter[str] = field(default_factory=Counter)
    """Deviations of known designs, tolerated unless strict (kind → count)."""
    retries: Counter[str] = field(default_factory=Counter)
    statuses: Counter[int] = field(default_factory=Counter)

    def add(self, other: ClientStats) -> None:
        for f in fields(self):
            mine = getattr(self, f.name)
            if isinstance(mine, Counter):
                mine.update(getattr(other, f.name))
            else:
                setattr(self, f.name, mine + getattr(other, f.name))


class ErrorCapture(logging.Handler):
    """WARNING and ERROR records of every logger (root, and uvicorn's tree, which does not
    propagate) and the calls of the loop's exception handler (a task that died unawaited)."""

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.records: list[str] = []
        """ERROR and above."""
        self.warnings: Counter[str] = Counter()
        """WARNING records by logger and message start."""
        self.loop_errors: list[str] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._previous: Any = None
        self._began = time.time()

    def emit(self, record: logging.LogRecord) -> None:
        text = f"{record.name}: {record.getMessage()}"
        if record.levelno < logging.ERROR:
            self.warnings[text[:90]] += 1
            return
        if record.exc_info and record.exc_info[1] is not None:
            text += f" ({record.exc_info[1]!r})"
        self.records.append(f"[{record.created - self._began:.1f} s] {text}")

    def install(self, loop: asyncio.AbstractEventLoop) -> None:
        self.attach()
        self._loop = loop
        self._previous = loop.get_exception_handler()
        loop.set_exception_handler(self._on_loop_error)

    def attach(self) -> None:
        """(Re)attach to the loggers: uvicorn's ``dictConfig`` replaces its loggers' handlers
        each time a server is configured, so this is called after every (re)start."""
        for name in _LOGGERS:
            logger = logging.getLogger(name)
            if self not in logger.handlers:
                logger.addHandler(self)

    def uninstall(self) -> None:
        for name in _LOGGERS:
            logging.getLogger(name).removeHandler(self)
        if self._loop is not None:
            self._loop.set_exception_handler(self._previous)
            self._loop = None

    def _on_loop_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        at = time.time() - self._began
        self.loop_errors.append(f"[{at:.1f} s] {context.get('message', '')} {exc!r}")


# ---------------------------------------------------------------------- the report


def read_rss() -> dict[str, int]:
    """This process's VmRSS and VmHWM (peak) in KiB, from /proc (empty elsewhere)."""
    out: dict[str, int] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                out[name] = int(value.split()[0])
    return out


def _counts(counter: Mapping[Any, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counter.items(), key=str)) or "none"


def _seconds(value: float | None) -> str:
    return "never" if value is None else f"{value:.3f}"


@dataclass
class SoakReport:
    """The figures of one soak run."""

    config: Any
    rss_start: dict[str, int]
    rss_end: dict[str, int] = field(default_factory=dict)
    rss_samples: list[tuple[float, int]] = field(default_factory=list)
    """(seconds into the run, VmRSS KiB), every tenth of the run."""
    seconds: float = 0.0
    upstream_writes: int = 0
    upstream_by_type: Counter[str] = field(default_factory=Counter)
    churn: Any = None
    injected: Counter[str] = field(default_factory=Counter)
    consumed: Counter[str] = field(default_factory=Counter)
    daemon_restarts: int = 0
    daemon_relists: int = 0
    """The daemon's reflector relists (after each daemon's first sync)."""
    sim_restarts: int = 0
    clients: ClientStats = field(default_factory=ClientStats)
    client_modes: Counter[str] = field(default_factory=Counter)
    violations: Violations = field(default_factory=Violations)
    errors: list[str] = field(default_factory=list)
    loop_errors: list[str] = field(default_factory=list)
    warnings: Counter[str] = field(default_factory=Counter)
    known: Counter[str] = field(default_factory=Counter)
    """Known issues, tolerated: ERROR records of known bugs, the relist difference's deviations."""
    fault_log: list[tuple[float, str, int]] = field(default_factory=list)
    """(seconds into the run, fault kind, upstream RV when it began)."""
    last_fault: str = ""
    """The last fault episode, and how long before the faults stopped it ended."""
    faults_stopped_rv: int = 0
    final_rv: int = 0
    converge_after_faults: float | None = None
    converge_after_churn: float | None = None
    clients_converge: float | None = None

    def render(self) -> str:
        cfg, c = self.config, self.clients
        mib = {k: f"{v / 1024:.0f}" for k, v in self.rss_end.items()}
        rows = [
            ("seconds (seed)", f"{self.seconds:.1f} ({cfg.seed})"),
            (
                "daemon restarts",
                f"{self.daemon_restarts} (restart port: {cfg.restart_port})"
                if cfg.daemon_restarts
                else "off",
            ),
            ("clients", f"{cfg.clients}: {_counts(self.client_modes)}"),
            ("churn (pod writes/s)", f"{cfg.churn:g}: {self.churn}"),
            (
                "upstream pod events generated",
                f"{self.upstream_writes}: {_counts(self.upstream_by_type)}",
            ),
            ("faults injected", f"{sum(self.injected.values())}: {_counts(self.injected)}"),
            ("faults taken by upstream requests", _counts(self.consumed)),
            ("simulator restarts / daemon relists", f"{self.sim_restarts} / {self.daemon_relists}"),
            ("client lists (paged) / pages", f"{c.lists} ({c.paged_lists}) / {c.pages}"),
            (
                "client watches / watch-lists / resumes",
                f"{c.watches} / {c.watch_lists} / {c.resumes}",
            ),
            ("client relists by reason", _counts(c.relists)),
            ("client retries by reason", _counts(c.retries)),
            ("daemon answers by status", _counts(c.statuses)),
            ("client events received / checked", f"{c.events} / {c.events_checked}"),
            ("client bookmarks / checkpoints", f"{c.bookmarks} / {c.checkpoints}"),
            (
                "daemon caught up after faults stopped (s)",
                f"{_seconds(self.converge_after_faults)} (to RV {self.faults_stopped_rv}; "
                f"last fault: {self.last_fault})",
            ),
            (
                "daemon equal to upstream after churn stopped (s)",
                f"{_seconds(self.converge_after_churn)} (RV {self.final_rv})",
            ),
            (
                "all clients equal to upstream after churn stopped (s)",
                _seconds(self.clients_converge),
            ),
            (
                "RSS start / end / peak (MiB)",
                f"{self.rss_start.get('VmRSS', 0) / 1024:.0f} / {mib.get('VmRSS', '?')} / {mib.get('VmHWM', '?')}",
            ),
            (
                "RSS during the run (s: MiB)",
                ", ".join(f"{t:.0f}: {kib / 1024:.0f}" for t, kib in self.rss_samples) or "-",
            ),
            (
                "ERROR log records / loop exception-handler calls",
                f"{len(self.errors)} / {len(self.loop_errors)}",
            ),
            ("known issues, tolerated (`--strict` counts them)", _counts(self.known)),
            ("WARNING log records", f"{sum(self.warnings.values())}"),
            (
                "**violations**",
                f"**{self.violations.total}**"
                + (f": {_counts(self.violations.counts)}" if self.violations.total else ""),
            ),
        ]
        lines = ["| figure | value |", "|---|---|"]
        lines += [f"| {name} | {value} |" for name, value in rows]
        if self.warnings:
            lines += ["", "WARNING records (logger: message, first 90 characters):"]
            lines += [f"- {n} x {text}" for text, n in self.warnings.most_common(10)]
        if self.violations.total and self.fault_log:
            lines += ["", "Fault timeline (s: kind @ upstream RV):"]
            lines.append(", ".join(f"{t:.1f}: {k} @{rv}" for t, k, rv in self.fault_log))
        for kind, details in self.violations.details.items():
            lines += ["", f"Violations `{kind}` ({self.violations.counts[kind]}), first ones:"]
            lines += [f"- {d}" for d in details]
        return "\n".join(lines)
