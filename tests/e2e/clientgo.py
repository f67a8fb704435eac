"""An informer that sends what client-go 1.35's sends (``tools/cache/reflector.go``, with the
``WatchListClient`` gate on by default): the requests, headers and reactions a Go controller's
informer has today, so the tests see what it would see through the daemon.

- it opens with a watch-list: ``watch=true&sendInitialEvents=true&resourceVersionMatch=
  NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=N`` (no ``resourceVersion`` the first time:
  a consistent start), reads ADDED events into a temporary store until the bookmark annotated
  ``k8s.io/initial-events-end``, replaces its store with them at the bookmark's RV, and goes on
  reading the same stream;
- when a stream ends it watches again from its last RV (bookmarks allowed, no initial events);
  a 410 starts a watch-list again from RV unset; a watch-list the server refuses (a 1.28 without
  the ``WatchList`` gate) makes it fall back to a list (``limit=500``, RV "0") and a watch;
- every request asks ``Accept: application/vnd.kubernetes.protobuf,application/json`` (a typed
  clientset) with client-go's User-Agent; an answer it can read is JSON (``content_types``).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson

ACCEPT = "application/vnd.kubernetes.protobuf,application/json"
USER_AGENT = "controller/v0.0.0 (linux/amd64) kubernetes/$Format"
END = "k8s.io/initial-events-end"


@dataclass
class Informer:
    """One informer of ``path`` over ``http`` (the API server or the daemon)."""

    http: httpx.AsyncClient
    path: str
    accept: str = ACCEPT
    """A typed clientset's (protobuf first); ``application/json`` where protobuf would be
    answered (the API server itself: this informer reads JSON only)."""
    store: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Its objects by namespace/name, as its handlers saw them last."""
    resource_version: str = ""
    synced: asyncio.Event = field(default_factory=asyncio.Event)
    requests: list[dict[str, str]] = field(default_factory=list)
    """The query of every request it made, in order."""
    content_types: set[str] = field(default_factory=set)
    """The Content-Type of every answer it read."""
    end_bookmarks: list[dict[str, Any]] = field(default_factory=list)
    """The objects of the initial-events-end bookmarks it read."""
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def headers(self) -> dict[str, str]:
        return {"Accept": self.accept, "User-Agent": USER_AGENT}

    async def run(self) -> None:
        """client-go's ListAndWatch, forever (cancel to stop)."""
        while True:
            stream = await self._watch_list()
            if stream is None:
                await self._list()
            await self._watch_from_last_rv(stream)

    def _timeout(self) -> str:
        return str(int(300 + random.random() * 300))  # minWatchTimeout 5 min, up to twice

    @contextlib.asynccontextmanager
    async def _stream(self, params: dict[str, str]) -> AsyncIterator[httpx.Response]:
        self.requests.append(params)
        async with self.http.stream("GET", self.path, params=params, headers=self.headers) as r:
            self.content_types.add(r.headers.get("content-type", ""))
            yield r

    async def _watch_list(self) -> AsyncIterator[dict[str, Any]] | None:
        params = {
            "allowWatchBookmarks": "true",
            "resourceVersionMatch": "NotOlderThan",
            "sendInitialEvents": "true",
            "timeoutSeconds": self._timeout(),
            "watch": "true",
        }
        if self.resource_version:
            params["resourceVersion"] = self.resource_version
        cm = self._stream(params)
        response = await cm.__aenter__()
        if response.status_code != 200:
            await response.aread()
            await cm.__aexit__(None, None, None)
            return None  # refused: fall back to a list
        events = self._events(response, cm)
        temporary: dict[str, dict[str, Any]] = {}
        async for event in events:
            obj = event["object"]
            if event["type"] == "ADDED":
                temporary[_key(obj)] = obj
            elif event["type"] == "BOOKMARK":
                annotations = obj["metadata"].get("annotations") or {}
                if annotations.get(END) == "true":
                    self.end_bookmarks.append(obj)
                    self._replace(temporary, obj["metadata"]["resourceVersion"])
                    return events
            elif event["type"] == "ERROR":
                await events.aclose()
                self.resource_version = ""  # expired: a consistent watch-list again
                return await self._watch_list()
        return None

    async def _list(self) -> None:
        items: dict[str, dict[str, Any]] = {}
        params = {"limit": "500", "resourceVersion": "0"}
        while True:
            self.requests.append(params)
            response = await self.http.get(self.path, params=params, headers=self.headers)
            response.raise_for_status()
            self.content_types.add(response.headers.get("content-type", ""))
            body = orjson.loads(response.content)
            for item in body["items"]:
                items[_key(item)] = item
            token = body["metadata"].get("continue")
            if not token:
                self._replace(items, body["metadata"]["resourceVersion"])
                return
            params = {"limit": "500", "continue": token}

    async def _watch_from_last_rv(self, stream: AsyncIterator[dict[str, Any]] | None) -> None:
        while True:
            if stream is None:
                params = {
                    "allowWatchBookmarks": "true",
                    "resourceVersion": self.resource_version,
                    "timeoutSeconds": self._timeout(),
                    "watch": "true",
                }
                cm = self._stream(params)
                response = await cm.__aenter__()
                if response.status_code != 200:
                    await response.aread()
                    await cm.__aexit__(None, None, None)
                    return
                stream = self._events(response, cm)
            async for event in stream:
                obj = event["object"]
                if event["type"] == "ERROR":
                    self.resource_version = ""  # 410: relist (a watch-list from RV unset)
                    return
                if event["type"] in ("ADDED", "MODIFIED"):
                    self.store[_key(obj)] = obj
                elif event["type"] == "DELETED":
                    self.store.pop(_key(obj), None)
                self.resource_version = obj["metadata"]["resourceVersion"]
                self.changed.set()
            stream = None

    async def _events(
        self, response: httpx.Response, cm: contextlib.AbstractAsyncContextManager[Any]
    ) -> AsyncIterator[dict[str, Any]]:
        try:
            async for line in response.aiter_lines():
                if line.strip():
                    yield orjson.loads(line)
        finally:
            await cm.__aexit__(None, None, None)

    def _replace(self, items: dict[str, dict[str, Any]], resource_version: str) -> None:
        self.store = dict(items)
        self.resource_version = resource_version
        self.synced.set()
        self.changed.set()

    def state(self) -> list[tuple[str, str]]:
        """(key, resourceVersion) of what it holds, in key order."""
        return sorted((k, o["metadata"]["resourceVersion"]) for k, o in self.store.items())


def _key(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"
