"""What every soak client checks, whatever it reads the daemon with: :class:`ViewChecker`.

A client keeps a *view* (key → object RV) of one selection, as a client-go informer does, and
hands the checker what it reads: list results and watch-list initial states
(:meth:`ViewChecker.replace_view`), each watch event (:meth:`ViewChecker.stream_event`, then
:meth:`ViewChecker.apply`) and *checkpoints* (:meth:`ViewChecker.checkpoint`: after a list, the
initial events, a bookmark or a batch of events). Checked on the way (each failure is recorded
in :class:`~loadtest.harness.soak_model.Violations`; those that make the view useless raise
:class:`Relist`, and the client syncs again):

- within one stream, event RVs never go back (after the initial events of a watch-list), no
  event repeats, and a resumed stream starts after its RV; two objects at one RV are a violation
  ("rv-repeated": a resume from that RV could not tell whether the second was seen);
- every event's type agrees with the view (ADDED of a held key, MODIFIED/DELETED of an unknown
  key are violations);
- no object state comes back once the client learnt it was superseded ("reappeared": a DELETED
  event at RV D, or a list at RV L without the object, means no state of it at or below D or L
  may be seen again; a re-created object has a higher RV);
- at every checkpoint the view equals upstream's selection at that RV
  (:class:`~loadtest.harness.soak_model.UpstreamModel`). A mismatch is recorded and the client relists,
  so later checks are independent of it. After a batch of events (not after a list or a
  bookmark), unless strict, a mismatch is first held: if a checkpoint within a second matches,
  it is counted as tolerated (a relist's difference passes through states upstream never had).

Against a real API server the model learns a write when its response is back, which may be
after a client saw the event: a checkpoint at an RV the model's history does not reach yet is
kept (the view's summary and items at that moment) and judged, in order, once it does
(:meth:`ViewChecker.judge_waiting`, also called at every later checkpoint).
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

from loadtest.harness.soak_model import (
    ClientStats,
    Filter,
    UpstreamModel,
    View,
    Violations,
    describe_diff,
)

__all__ = ["Relist", "ViewChecker"]

TRANSIENT = "view-mismatch resolved at a later checkpoint"
_PENDING_SECONDS = 1.0
"""How long an event-batch mismatch may wait for a matching checkpoint (a relist's difference
is delivered at once: its bookmark follows within milliseconds)."""
_MAX_WAITING = 5000
"""Checkpoints kept per client while upstream's history catches up; older ones are dropped."""


class Relist(Exception):
    """The client must sync again (``reason`` is counted in ``ClientStats.relists``)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class _Check:
    """One checkpoint, as taken (kept while upstream's history does not reach its RV)."""

    rv: int
    after: str
    firm: bool
    summary: tuple[int, int]
    items: dict[str, int]
    at: float
    events: int


class ViewChecker:
    """One client's view of ``selection`` and every check on it (see the module docstring)."""

    def __init__(
        self,
        name: str,
        *,
        selection: Filter,
        model: UpstreamModel,
        violations: Violations,
        tolerant: bool = True,
    ) -> None:
        self.name = name
        self.selection = selection
        self.model = model
        self.violations = violations
        self.tolerant = tolerant
        self.stats = ClientStats()
        self.view = View()
        self.view_rv = 0
        """The RV the view is at (a list's RV, the last event's or bookmark's)."""
        self.relist_log: list[tuple[float, str]] = []
        """(``time.monotonic()``, reason) of every relist, for attributing them to faults."""
        self._stream_rv = 0
        self._stream_seen: set[tuple[str, int]] = set()
        self._pending: tuple[float, str] | None = None
        """An event-batch checkpoint that failed and is not judged yet (when, what)."""
        self._unchecked = 0
        self._held_events = 0
        self._waiting: deque[_Check] = deque()
        self._failed_later = False
        """A waiting checkpoint failed when judged: the client relists at its next checkpoint."""
        self._gone: dict[str, int] = {}
        """key → RV at or below which no state of the object may be seen again."""

    # ------------------------------------------------------------------ what the client read

    def relisted(self, reason: str) -> None:
        """The client gave its view up and syncs again."""
        self.stats.relists[reason] += 1
        self.relist_log.append((time.monotonic(), reason))
        if self._pending is not None:  # the view is rebuilt before a checkpoint
            self.stats.tolerated[f"{TRANSIENT} (then relisted)"] += 1
            self._pending = None

    @property
    def stream_rv(self) -> int:
        """The RV the current watch stream is at (where it began, or its last event)."""
        return self._stream_rv

    def start_stream(self, rv: int) -> None:
        """A watch begins from ``rv`` (0: a watch-list, its initial events come first)."""
        self._stream_rv = rv
        self._stream_seen = set()

    def replace_view(self, items: dict[str, int], rv: int, how: str) -> None:
        """A list or a watch-list's initial events: what left the view is gone at ``rv``."""
        for key, item_rv in items.items():
            self._check_gone(key, item_rv, f"{how} at {rv}")
        for key in self.view.items.keys() - items.keys():
            self._gone[key] = max(rv, self._gone.get(key, 0))
        self.view.replace(items)
        self.view_rv = rv

    def stream_event(self, kind: str, key: str, rv: int) -> None:
        """The order checks of one watch event (before it is applied)."""
        if (key, rv) in self._stream_seen:
            self.violation("duplicate-event", f"{kind} {key} at {rv} twice in one stream")
            raise Relist("violation")
        if rv < self._stream_rv or (rv == self._stream_rv and not self._stream_seen):
            where = "in one stream" if self._stream_seen else "resumed there"
            self.violation(
                "rv-backwards", f"{kind} {key} at {rv} after RV {self._stream_rv} ({where})"
            )
            raise Relist("violation")
        if rv == self._stream_rv:
            # Two objects at one RV: a resume from it cannot tell whether the second was seen.
            self.violation("rv-repeated", f"{kind} {key} at {rv}, the RV of the event before")
            raise Relist("violation")
        self._stream_rv = rv
        self._stream_seen.add((key, rv))
        self.stats.events += 1

    def apply(self, kind: str, key: str, rv: int) -> None:
        """Apply one watch event to the view (after :meth:`stream_event`)."""
        if kind == "DELETED":
            self._gone[key] = max(rv, self._gone.get(key, 0))
        else:
            self._check_gone(key, rv, f"{kind} event")
        problem = self.view.apply(kind, key, rv)
        if problem is not None:
            self.violation("event-type", problem)
        self.view_rv = rv
        self._unchecked += 1

    def bookmark(self, rv: int) -> None:
        """A bookmark in a watch stream: the view is at ``rv``, checked there."""
        if rv < self._stream_rv:
            self.violation("rv-backwards", f"BOOKMARK at {rv} after RV {self._stream_rv}")
            raise Relist("violation")
        self._stream_rv = self.view_rv = rv
        self.checkpoint(rv, "bookmark", firm=True)

    def _check_gone(self, key: str, rv: int, where: str) -> None:
        gone = self._gone.get(key)
        if gone is not None and rv <= gone:
            self.violation(
                "reappeared", f"{key} at {rv} in a {where}, after it was gone at RV {gone}"
            )

    # ------------------------------------------------------------------ checkpoints

    def checkpoint(self, rv: int, after: str, *, firm: bool = False) -> None:
        """Does the view equal upstream's selection at ``rv``? A mismatch after a list, the
        initial events or a bookmark is a violation. After a batch of events it is judged at the
        next checkpoint, unless strict: the daemon delivers a relist as its difference (ADDED and
        MODIFIED in RV order, then DELETED at the relist RV, then a bookmark), whose
        intermediate states upstream never had; if a checkpoint within ``_PENDING_SECONDS``
        matches (or a relist rebuilds the view), it is counted as tolerated, else a violation.

        When upstream's history does not reach ``rv`` yet (a real upstream, writes in flight),
        the check waits, with the view as it is now; waiting checks are judged in order."""
        self.stats.checkpoints += 1
        model = self.model
        if model.complete_to is None and rv > model.upstream_rv():
            self.violation("rv-from-the-future", f"RV {rv} > upstream's {model.upstream_rv()}")
            raise Relist("violation")
        events, self._unchecked = self._unchecked, 0
        now = time.monotonic()
        if not self._waiting and model.knows(rv):
            check = _Check(rv, after, firm, self.view.summary(), self.view.items, now, events)
            self._judge(check, at_once=True)
        else:
            self.stats.deferred += 1
            if len(self._waiting) >= _MAX_WAITING:
                self._waiting.popleft()
                self.stats.deferred_dropped += 1
            items = dict(self.view.items)
            self._waiting.append(_Check(rv, after, firm, self.view.summary(), items, now, events))
            self.judge_waiting()
        if self._failed_later:
            self._failed_later = False
            raise Relist("violation")

    def judge_waiting(self) -> None:
        """Judge the waiting checkpoints that upstream's history now reaches, in order."""
        while self._waiting and self.model.knows(self._waiting[0].rv):
            if not self._judge(self._waiting.popleft(), at_once=False):
                self._waiting.clear()
                self._failed_later = True

    @property
    def holding(self) -> bool:
        """An event-batch mismatch awaits judgement (a relist's difference, perhaps)."""
        return self._pending is not None

    @property
    def waiting(self) -> int:
        """Checkpoints waiting for upstream's history."""
        return len(self._waiting)

    def _judge(self, check: _Check, *, at_once: bool) -> bool:
        """One checkpoint; False when it is a violation (recorded; raised as a relist when
        judged at once)."""
        name = self.selection.name
        if check.summary == self.model.summary_at(name, check.rv):
            self.stats.events_checked += check.events + self._held_events
            self._held_events = 0
            if self._pending is not None:
                self.stats.tolerated[TRANSIENT] += 1
                self._pending = None
            return True
        detail = f"at RV {check.rv} after {check.after}: "
        detail += describe_diff(check.items, self.model.state_at(name, check.rv))
        pending = self._pending
        if (
            not check.firm
            and self.tolerant
            and (pending is None or check.at - pending[0] < _PENDING_SECONDS)
        ):
            if pending is None:
                self._pending = (check.at, detail)
            self._held_events += check.events  # checked by the next matching checkpoint
            return True
        if pending is not None:
            detail += f" (unresolved since {check.at - pending[0]:.2f} s: {pending[1]})"
        self._pending = None
        self._held_events = 0
        self.violation("view-mismatch", detail)
        if at_once:
            raise Relist("violation")
        return False

    def violation(self, kind: str, detail: str) -> None:
        self.violations.record(kind, f"{self.name} [{self.selection.name}] {detail}")
