"""The soak's clients: each keeps a view of one selection through the daemon, as a client-go
informer does, and has every answer checked (:class:`~loadtest.harness.soak_views.ViewChecker`).

A client syncs either by a list (sometimes paged with ``limit``/``continue``; at RV unset, "0",
NotOlderThan or Exact its last RV) or by a watch-list (``sendInitialEvents=true``); then watches
from the synced RV with ``allowWatchBookmarks=true`` and a short ``timeoutSeconds``; resumes from
the last RV seen (event or bookmark) when a stream ends (or, one time in five, starts over as a
restarted client would); relists on 410 (an HTTP 410 or an
``ERROR`` event with code 410); retries 429s and broken connections (the daemon restarting) after
a short pause, reading the daemon's current address from the shared :class:`Endpoint`.

Checked here, beside what :class:`~loadtest.harness.soak_views.ViewChecker` checks: paged lists keep one
RV on every page; NotOlderThan/Exact lists honour their RV; the daemon never answers 500 (nor any
status a correct client cannot cause), and a watch asked for bookmarks every second never goes
15 s without a byte.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import Any

import httpx
import orjson

from loadtest.harness.soak_model import Filter, UpstreamModel, Violations
from loadtest.harness.soak_views import Relist, ViewChecker

__all__ = ["Endpoint", "SoakClient"]

INITIAL_EVENTS_END = "k8s.io/initial-events-end"
_RESTART_CHANCE = 0.2
"""After a watch ends, the chance the client starts over with a new sync (as a restarted process
would), so lists keep coming whether or not the daemon's relists reach the clients as 410s."""
_TIMEOUT = httpx.Timeout(15.0, connect=2.0)
"""Watches are asked for bookmarks every second and end within 12 s: 15 s of silence is a fault."""


@dataclass
class Endpoint:
    """Where the daemon listens now (the soak updates it when it restarts the daemon)."""

    url: str


class _Retry(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class SoakClient(ViewChecker):
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
        super().__init__(
            name, selection=selection, model=model, violations=violations, tolerant=tolerant
        )
        self.watch_list = watch_list
        self.endpoint = endpoint
        self.rng = rng
        self.sabotage = sabotage
        """Checker self-test only: ``skip-event`` drops one DELETED event in five (a loss no
        later event repairs), ``duplicate-event`` repeats one event in a hundred: the soak must
        report violations."""
        self._deletes_seen = 0
        self.synced = False
        self._last_known_rv = 0
        self._initial: dict[str, int] | None = None

    # ------------------------------------------------------------------ loop

    async def run(self) -> None:
        async with httpx.AsyncClient(timeout=_TIMEOUT) as http:
            while True:
                try:
                    if not self.synced and not self.watch_list:
                        await self._list(http)
                    await self._watch(http, initial=not self.synced)
                    self.stats.resumes += 1
                    if not self.holding and self.rng.random() < _RESTART_CHANCE:
                        # A new process syncs again (never while a mismatch awaits judgement).
                        self.synced = False
                        self.stats.relists["client-restart"] += 1
                except Relist as relist:
                    self.synced = False
                    self.relisted(relist.reason)
                except _Retry as retry:
                    self.stats.retries[retry.reason] += 1
                    await asyncio.sleep(self.rng.uniform(0.05, 0.3))
                except httpx.ReadTimeout as exc:
                    self.violation("client-timeout", f"no byte for {_TIMEOUT.read} s: {exc!r}")
                    self.synced = False
                except httpx.TransportError as exc:
                    # Connections break when the daemon restarts (or closes an idle keep-alive).
                    self.stats.retries[type(exc).__name__] += 1
                    await asyncio.sleep(self.rng.uniform(0.05, 0.3))
                except Exception as exc:  # a wire-format surprise: record it, start over
                    self.violation("client-crash", repr(exc))
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
                raise Relist(f"list-{resp.status_code}")
            self.stats.pages += 1
            body = orjson.loads(resp.content)
            rv = int(body["metadata"]["resourceVersion"])
            if list_rv is None:
                list_rv = rv
            elif rv != list_rv:
                self.violation("page-rv", f"page RV {rv} after first page RV {list_rv}")
            for item in body["items"]:
                meta = item["metadata"]
                key = f"{meta['namespace']}/{meta['name']}"
                if key in items:
                    self.violation("list-duplicate", f"{key} twice in one paged list at {list_rv}")
                items[key] = int(meta["resourceVersion"])
            token = body["metadata"].get("continue", "")
            if not token:
                break
            if not limit:
                self.violation("list-continue", f"unpaged list returned a continue token at {rv}")
                break
        assert list_rv is not None
        if match == "Exact" and list_rv != known:
            self.violation("list-rv", f"Exact list at {known} answered at {list_rv}")
        if match == "NotOlderThan" and list_rv < known:
            self.violation("list-rv", f"NotOlderThan {known} list answered at {list_rv}")
        self.replace_view(items, list_rv, "list")
        self._last_known_rv = list_rv
        self.synced = True
        self.checkpoint(list_rv, "list" + (" (paged)" if limit else ""), firm=True)

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
            self.start_stream(known)
            self.stats.watch_lists += 1
        else:
            params["resourceVersion"] = str(self.view_rv)
            self._initial = None
            self.start_stream(self.view_rv)
        url = self.endpoint.url + self.selection.path
        async with http.stream("GET", url, params=params) as resp:
            if resp.status_code != 200:
                await resp.aread()
                self._check_status(resp, "watch")
                raise Relist(f"watch-{resp.status_code}")
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
                    self.checkpoint(self.view_rv, f"{applied} events")
            if buffer.strip():
                self.violation("partial-line", f"stream ended inside a line: {buffer[:120]!r}")
        if self._initial is not None:
            raise Relist("watch-list-ended-early")

    def _line(self, line: bytes) -> int:
        """Handle one watch line; 1 if an event was applied to the view."""
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError:
            self.violation("garbage-line", f"{line[:120]!r}")
            raise Relist("garbage") from None
        kind = event["type"]
        obj: dict[str, Any] = event["object"]
        if kind == "ERROR":
            code = obj.get("code")
            if code == 410:
                raise Relist("watch-410")
            self.violation(
                "http-500" if code == 500 else "watch-error", f"ERROR event {obj.get('message')!r}"
            )
            raise Relist(f"watch-error-{code}")
        meta = obj["metadata"]
        rv = int(meta["resourceVersion"])
        if kind == "BOOKMARK":
            self.stats.bookmarks += 1
            return self._bookmark(rv, meta)
        key = f"{meta['namespace']}/{meta['name']}"
        if self._initial is not None:
            if kind != "ADDED":
                self.violation("watch-list-initial", f"{kind} {key} among the initial events")
            self._initial[key] = rv
            return 0
        self.stream_event(kind, key, rv)
        if self.sabotage == "skip-event" and kind == "DELETED":
            self._deletes_seen += 1
            if self._deletes_seen % 5 == 1:
                return 0  # checker self-test: this client "loses" the event
        self.apply(kind, key, rv)
        self._last_known_rv = rv
        return 1

    def _bookmark(self, rv: int, meta: dict[str, Any]) -> int:
        if self._initial is not None:
            if (meta.get("annotations") or {}).get(INITIAL_EVENTS_END) != "true":
                return 0
            if rv < self.stream_rv:  # asked NotOlderThan stream_rv
                self.violation("list-rv", f"watch-list NotOlderThan {self.stream_rv} ended at {rv}")
            self.replace_view(self._initial, rv, "watch-list")
            self._initial = None
            self.synced = True
            self.start_stream(rv)
            self._last_known_rv = rv
            self.checkpoint(rv, "watch-list initial events", firm=True)
            return 0
        self.bookmark(rv)
        self._last_known_rv = rv
        return 0

    # ------------------------------------------------------------------ checks

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
            self.violation("http-500", f"{what}: {text}")
        else:
            self.violation("unexpected-status", f"{code} on {what}: {text}")
        raise _Retry(f"status-{code}")
