"""The soak's clients: each keeps a view of one selection of pods through the daemon, as a
client-go informer does, and checks every answer against upstream's history.

A client syncs either by a list (sometimes paged with ``limit``/``continue``; at RV unset, "0",
NotOlderThan or Exact its last RV) or by a watch-list (``sendInitialEvents=true``); then watches
from the synced RV with ``allowWatchBookmarks=true`` and a short ``timeoutSeconds``; resumes from
the last RV seen (event or bookmark) when a stream ends (or, one time in five, starts over as a
restarted client would); relists on 410 (an HTTP 410 or an
``ERROR`` event with code 410); retries 429s and broken connections (the daemon restarting) after
a short pause, reading the daemon's current address from the shared :class:`Endpoint`.

Checked on the way (each failure is recorded in :class:`~loadtest.soak_model.Violations`):

- within one stream, event RVs never go back (after the initial events of a watch-list), no
  event repeats, and a resumed stream starts after its RV; two objects at one RV are a violation
  ("rv-repeated": a resume from that RV could not tell whether the second was seen);
- every event's type agrees with the view (ADDED of a held key, MODIFIED/DELETED of an unknown
  key are violations);
- a *checkpoint* after every list, every watch-list's initial-events-end bookmark, every bookmark
  and every batch of events read from the socket: the view equals upstream's selection at that
  RV (:class:`~loadtest.soak_model.UpstreamModel`). A mismatch is recorded and the client relists,
  so later checks are independent of it. After a batch of events (not after a list or a
  bookmark), unless strict, a mismatch is first held: if a checkpoint within a second matches,
  it is counted as tolerated (a relist's difference passes through states upstream never had);
- paged lists keep one RV on every page; NotOlderThan/Exact lists honour their RV;
- no object state comes back once the client learnt it was superseded ("reappeared": a DELETED
  event at RV D, or a list at RV L without the object, means no state of it at or below D or L
  may be seen again; a re-created object has a higher RV);
- the daemon never answers 500 (nor any status a correct client cannot cause), and a watch asked
  for bookmarks every second never goes 15 s without a byte.

Against a real API server the model learns a write when its response is back, which may be
after a client saw the event: a checkpoint at an RV the model's history does not reach yet is
kept (the view's summary and items at that moment) and judged, in order, once it does
(:meth:`SoakClient.judge_waiting`, also called at every later checkpoint).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

import httpx
import orjson

from loadtest.soak_model import (
    ClientStats,
    Filter,
    UpstreamModel,
    View,
    Violations,
    describe_diff,
)

__all__ = ["Endpoint", "SoakClient"]

INITIAL_EVENTS_END = "k8s.io/initial-events-end"
_TRANSIENT = "view-mismatch resolved at a later checkpoint"
_RESTART_CHANCE = 0.2
"""After a watch ends, the chance the client starts over with a new sync (as a restarted process
would), so lists keep coming whether or not the daemon's relists reach the clients as 410s."""
_PENDING_SECONDS = 1.0
"""How long an event-batch mismatch may wait for a matching checkpoint (a relist's difference
is delivered at once: its bookmark follows within milliseconds)."""
_TIMEOUT = httpx.Timeout(15.0, connect=2.0)
"""Watches are asked for bookmarks every second and end within 12 s: 15 s of silence is a fault."""
_MAX_WAITING = 5000
"""Checkpoints kept per client while upstream's history catches up; older ones are dropped."""


@dataclass
class Endpoint:
    """Where the daemon listens now (the soak updates it when it restarts the daemon)."""

    url: str


class _Relist(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _Retry(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class _Waiting:
    """A checkpoint taken before upstream's history reached its RV."""

    rv: int
    after: str
    firm: bool
    summary: tuple[int, int]
    items: dict[str, int]
    at: float
    events: int


class SoakClient:
    """One client of the daemon; :meth:`run` until cancelled."""

    def __init__(
        self,
        name: str,
        *,
        selection: Filter,
        watch_list: bool,
        endpoint: Endpoint,
        model: UpstreamModel,
        violations: Violations,
        rng: random.Random,
        sabotage: str | None = None,
        tolerant: bool = True,
    ) -> None:
        self.name = name
        self.selection = selection
        self.watch_list = watch_list
        self.endpoint = endpoint
        self.model = model
        self.violations = violations
        self.rng = rng
        self.sabotage = sabotage
        """Checker self-test only: ``skip-event`` drops one DELETED event in five (a loss no
        later event repairs), ``duplicate-event`` repeats one event in a hundred: the soak must
        report violations."""
        self._deletes_seen = 0
        self.stats = ClientStats()
        self.view = View()
        self.view_rv = 0
        """The RV the view is at (a list's RV, the last event's or bookmark's)."""
        self.synced = False
        self._last_known_rv = 0
        self._stream_rv = 0
        self._stream_seen: set[tuple[str, int]] = set()
        self.tolerant = tolerant
        self._pending: tuple[float, str] | None = None
        """An event-batch checkpoint that failed and is not judged yet (when, what)."""
        self._initial: dict[str, int] | None = None
        self._unchecked = 0
        self._held_events = 0
        self._waiting: deque[_Waiting] = deque()
        self._failed_later = False
        """A waiting checkpoint failed when judged: the client relists at its next checkpoint."""
        self._gone: dict[str, int] = {}
        """key → RV at or below which no state of the object may be seen again."""
        self.relist_log: list[tuple[float, str]] = []
        """(``time.monotonic()``, reason) of every relist, for attributing them to faults."""

    # ------------------------------------------------------------------ loop

    async def run(self) -> None:
        async with httpx.AsyncClient(timeout=_TIMEOUT) as http:
            while True:
                try:
                    if not self.synced and not self.watch_list:
                        await self._list(http)
                    await self._watch(http, initial=not self.synced)
                    self.stats.resumes += 1
                    if self._pending is None and self.rng.random() < _RESTART_CHANCE:
                        # A new process syncs again (never while a mismatch awaits judgement).
                        self.synced = False
                        self.stats.relists["client-restart"] += 1
                except _Relist as relist:
                    self.synced = False
                    self.stats.relists[relist.reason] += 1
                    self.relist_log.append((time.monotonic(), relist.reason))
                    if self._pending is not None:  # the view is rebuilt before a checkpoint
                        self.stats.tolerated[f"{_TRANSIENT} (then relisted)"] += 1
                        self._pending = None
                except _Retry as retry:
                    self.stats.retries[retry.reason] += 1
                    await asyncio.sleep(self.rng.uniform(0.05, 0.3))
                except httpx.ReadTimeout as exc:
                    self._violation("client-timeout", f"no byte for {_TIMEOUT.read} s: {exc!r}")
                    self.synced = False
                except httpx.TransportError as exc:
                    # Connections break when the daemon restarts (or closes an idle keep-alive).
                    self.stats.retries[type(exc).__name__] += 1
                    await asyncio.sleep(self.rng.uniform(0.05, 0.3))
                except Exception as exc:  # a wire-format surprise: record it, start over
                    self._violation("client-crash", repr(exc))
                    self.synced = False
                    await asyncio.sleep(0.2)

    # ------------------------------------------------------------------ list

    async def _list(self, http: httpx.AsyncClient) -> None:
        params = dict(self.selection.params)
        roll, known = self.rng.random(), self._last_known_rv
        match = ""
        if known and roll < 0.2:
            match = "Exact"
        elif known and roll < 0.45:
            match = "NotOlderThan"
        elif roll < 0.7:
            params["resourceVersion"] = "0"
        if match:
            params.update(resourceVersion=str(known), resourceVersionMatch=match)
        limit = self.rng.randint(20, 80) if self.rng.random() < 0.5 else 0
        if limit:
            params["limit"] = str(limit)
        url = self.endpoint.url + self.selection.path
        items: dict[str, int] = {}
        list_rv: int | None = None
        token = ""
        self.stats.lists += 1
        self.stats.paged_lists += bool(limit)
        while True:
            page_params = (
                params
                if not token
                else {**dict(self.selection.params), "limit": str(limit), "continue": token}
            )
            resp = await http.get(url, params=page_params)
            self._check_status(resp, "list")
            if resp.status_code == 410 and match == "Exact":
                self._last_known_rv = 0  # as client-go: a 410 at an RV means list at "" next
            if resp.status_code != 200:
                raise _Relist(f"list-{resp.status_code}")
            self.stats.pages += 1
            body = orjson.loads(resp.content)
            rv = int(body["metadata"]["resourceVersion"])
            if list_rv is None:
                list_rv = rv
            elif rv != list_rv:
                self._violation("page-rv", f"page RV {rv} after first page RV {list_rv}")
            for item in body["items"]:
                meta = item["metadata"]
                key = f"{meta['namespace']}/{meta['name']}"
                if key in items:
                    self._violation("list-duplicate", f"{key} twice in one paged list at {list_rv}")
                items[key] = int(meta["resourceVersion"])
            token = body["metadata"].get("continue", "")
            if not token:
                break
            if not limit:
                self._violation("list-continue", f"unpaged list returned a continue token at {rv}")
                break
        assert list_rv is not None
        if match == "Exact" and list_rv != known:
            self._violation("list-rv", f"Exact list at {known} answered at {list_rv}")
        if match == "NotOlderThan" and list_rv < known:
            self._violation("list-rv", f"NotOlderThan {known} list answered at {list_rv}")
        self._replace_view(items, list_rv, "list")
        self.view_rv = self._last_known_rv = list_rv
        self.synced = True
        self._checkpoint(list_rv, "list" + (" (paged)" if limit else ""), firm=True)

    # ------------------------------------------------------------------ watch

    async def _watch(self, http: httpx.AsyncClient, *, initial: bool) -> None:
        params: dict[str, str] = {
            **dict(self.selection.params),
            "watch": "1",
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(self.rng.randint(2, 12)),
        }
        if initial:  # a watch-list: initial events, then the initial-events-end bookmark
            params.update(sendInitialEvents="true", resourceVersionMatch="NotOlderThan")
            known = self._last_known_rv if self.rng.random() < 0.5 else 0
            params["resourceVersion"] = str(known) if known else ""
            self._initial = {}
            self._stream_rv = known
            self.stats.watch_lists += 1
        else:
            params["resourceVersion"] = str(self.view_rv)
            self._initial = None
            self._stream_rv = self.view_rv
        self._stream_seen = set()
        url = self.endpoint.url + self.selection.path
        async with http.stream("GET", url, params=params) as resp:
            if resp.status_code != 200:
                await resp.aread()
                self._check_status(resp, "watch")
                raise _Relist(f"watch-{resp.status_code}")
            self._check_status(resp, "watch")
            self.stats.watches += 1
            buffer = b""
            async for chunk in resp.aiter_bytes():
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                applied = 0
                for line in lines:
                    if line.strip():
                        applied += self._line(line)
                        if self.sabotage == "duplicate-event" and self.stats.events % 100 == 99:
                            applied += self._line(line)
                if applied:
                    self._checkpoint(self.view_rv, f"{applied} events")
            if buffer.strip():
                self._violation("partial-line", f"stream ended inside a line: {buffer[:120]!r}")
        if self._initial is not None:
            raise _Relist("watch-list-ended-early")

    def _line(self, line: bytes) -> int:
        """Handle one watch line; 1 if an event was applied to the view."""
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError:
            self._violation("garbage-line", f"{line[:120]!r}")
            raise _Relist("garbage") from None
        kind = event["type"]
        obj: dict[str, Any] = event["object"]
        if kind == "ERROR":
            code = obj.get("code")
            if code == 410:
                raise _Relist("watch-410")
            self._violation(
                "http-500" if code == 500 else "watch-error", f"ERROR event {obj.get('message')!r}"
            )
            raise _Relist(f"watch-error-{code}")
        meta = obj["metadata"]
        rv = int(meta["resourceVersion"])
        if kind == "BOOKMARK":
            self.stats.bookmarks += 1
            return self._bookmark(rv, meta)
        key = f"{meta['namespace']}/{meta['name']}"
        if self._initial is not None:
            if kind != "ADDED":
                self._violation("watch-list-initial", f"{kind} {key} among the initial events")
            self._initial[key] = rv
            return 0
        if (key, rv) in self._stream_seen:
            self._violation("duplicate-event", f"{kind} {key} at {rv} twice in one stream")
            raise _Relist("violation")
        if rv < self._stream_rv or (rv == self._stream_rv and not self._stream_seen):
            where = "in one stream" if self._stream_seen else "resumed there"
            self._violation(
                "rv-backwards", f"{kind} {key} at {rv} after RV {self._stream_rv} ({where})"
            )
            raise _Relist("violation")
        if rv == self._stream_rv:
            # Two objects at one RV: a resume from it cannot tell whether the second was seen.
            self._violation("rv-repeated", f"{kind} {key} at {rv}, the RV of the event before")
            raise _Relist("violation")
        self._stream_rv = rv
        self._stream_seen.add((key, rv))
        self.stats.events += 1
        if self.sabotage == "skip-event" and kind == "DELETED":
            self._deletes_seen += 1
            if self._deletes_seen % 5 == 1:
                return 0  # checker self-test: this client "loses" the event
        if kind == "DELETED":
            self._gone[key] = max(rv, self._gone.get(key, 0))
        else:
            self._check_gone(key, rv, f"{kind} event")
        problem = self.view.apply(kind, key, rv)
        if problem is not None:
            self._violation("event-type", problem)
        self.view_rv = self._last_known_rv = rv
        self._unchecked += 1
        return 1

    def _bookmark(self, rv: int, meta: dict[str, Any]) -> int:
        if self._initial is not None:
            if (meta.get("annotations") or {}).get(INITIAL_EVENTS_END) != "true":
                return 0
            if rv < self._stream_rv:  # asked NotOlderThan _stream_rv
                self._violation(
                    "list-rv", f"watch-list NotOlderThan {self._stream_rv} ended at {rv}"
                )
            self._replace_view(self._initial, rv, "watch-list")
            self._initial = None
            self.synced = True
            self._stream_rv = self.view_rv = self._last_known_rv = rv
            self._checkpoint(rv, "watch-list initial events", firm=True)
            return 0
        if rv < self._stream_rv:
            self._violation("rv-backwards", f"BOOKMARK at {rv} after RV {self._stream_rv}")
            raise _Relist("violation")
        self._stream_rv = self.view_rv = self._last_known_rv = rv
        self._checkpoint(rv, "bookmark", firm=True)
        return 0

    # ------------------------------------------------------------------ checks

    def _replace_view(self, items: dict[str, int], rv: int, how: str) -> None:
        """A list or a watch-list's initial events: what left the view is gone at ``rv``."""
        for key, item_rv in items.items():
            self._check_gone(key, item_rv, f"{how} at {rv}")
        for key in self.view.items.keys() - items.keys():
            self._gone[key] = max(rv, self._gone.get(key, 0))
        self.view.replace(items)

    def _check_gone(self, key: str, rv: int, where: str) -> None:
        gone = self._gone.get(key)
        if gone is not None and rv <= gone:
            self._violation(
                "reappeared", f"{key} at {rv} in a {where}, after it was gone at RV {gone}"
            )

    def _checkpoint(self, rv: int, after: str, *, firm: bool = False) -> None:
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
            self._violation("rv-from-the-future", f"RV {rv} > upstream's {model.upstream_rv()}")
            raise _Relist("violation")
        check = _Waiting(
            rv,
            after,
            firm,
            self.view.summary(),
            self.view.items,  # copied below only if it has to wait
            time.monotonic(),
            self._unchecked,
        )
        self._unchecked = 0
        if not self._waiting and model.knows(rv):
            self._judge(check, at_once=True)
        else:
            self.stats.deferred += 1
            if len(self._waiting) >= _MAX_WAITING:
                self._waiting.popleft()
                self.stats.deferred_dropped += 1
            self._waiting.append(
                _Waiting(rv, after, firm, check.summary, dict(check.items), check.at, check.events)
            )
            self.judge_waiting()
        if self._failed_later:
            self._failed_later = False
            raise _Relist("violation")

    def judge_waiting(self) -> None:
        """Judge the waiting checkpoints that upstream's history now reaches, in order."""
        while self._waiting and self.model.knows(self._waiting[0].rv):
            if not self._judge(self._waiting.popleft(), at_once=False):
                self._waiting.clear()
                self._failed_later = True

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def _judge(self, check: _Waiting, *, at_once: bool) -> bool:
        """One checkpoint (see :meth:`_checkpoint`); False when it is a violation (recorded;
        raised as a relist when judged at once)."""
        name = self.selection.name
        if check.summary == self.model.summary_at(name, check.rv):
            self.stats.events_checked += check.events + self._held_events
            self._held_events = 0
            if self._pending is not None:
                self.stats.tolerated[_TRANSIENT] += 1
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
        self._violation("view-mismatch", detail)
        if at_once:
            raise _Relist("violation")
        return False

    def _tolerable(self, kind: str, detail: str) -> None:
        if self.tolerant:
            self.stats.tolerated[kind] += 1
        else:
            self._violation(kind, detail)

    def _check_status(self, resp: httpx.Response, what: str) -> None:
        code = resp.status_code
        self.stats.statuses[code] += 1
        if code in (200, 410):
            return
        if code == 429:  # the daemon (re)syncing: try the same request again shortly
            raise _Retry("status-429")
        if code == 503 and "retryAfterSeconds" in resp.text:
            # The daemon is shutting down (a watch asked for meanwhile): retry, elsewhere.
            raise _Retry("status-503")
        text = resp.text[:200]
        if code == 500:
            self._violation("http-500", f"{what}: {text}")
        else:
            self._violation("unexpected-status", f"{code} on {what}: {text}")
        raise _Retry(f"status-{code}")

    def _violation(self, kind: str, detail: str) -> None:
        self.violations.record(kind, f"{self.name} [{self.selection.name}] {detail}")
