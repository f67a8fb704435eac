"""Regression test for a bug the soak found: after a relist, a client resuming from an RV the
daemon gave it could keep objects upstream deleted, with no 410 to tell it.

The informer used to send every vanished object as DELETED at the relist's RV, where the event
log restarts: a client whose stream broke after the first of them resumed from that RV, without a
410, and never heard of the others. Each DELETED now has a distinct RV (one no changed object
holds, up to the relist's), so such a resume is below the log's start and gets 410.

The soak also sees the difference's intermediate states (after some of its events, a client's
view equals upstream at no RV at all) and counts them as tolerated ("view-mismatch resolved at a
later checkpoint", "rv-repeated"); ``python -m loadtest soak --strict`` counts them as violations.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import orjson
import pytest

from cacheproxy.daemon.config import DaemonConfig, ResourceConfig, ServerSettings, UpstreamSettings
from cacheproxy.daemon.runtime import Daemon
from cacheproxy.informer import Backoff, ReflectorOptions
from cacheproxy.kube.resources import builtin
from cacheproxy.sim import SimServer, Simulator
from cacheproxy.upstream import UpstreamConfig

CONFIGMAPS = builtin("configmaps")


class _FastBackoff(UpstreamSettings):
    def reflector_options(self) -> ReflectorOptions:
        options = super().reflector_options()
        options.backoff = lambda: Backoff(initial=0.05, cap=0.2)
        return options


def _rv(obj: dict[str, Any]) -> int:
    return int(obj["metadata"]["resourceVersion"])


def _apply(view: dict[str, int], event: dict[str, Any]) -> None:
    name = event["object"]["metadata"]["name"]
    if event["type"] == "DELETED":
        view.pop(name, None)
    else:
        view[name] = _rv(event["object"])


async def _until(predicate: Any, what: str) -> None:
    for _ in range(1000):
        if predicate():
            return
        await asyncio.sleep(0.01)
    pytest.fail(f"timed out waiting until {what}")


async def test_a_client_that_resumes_from_the_rv_of_its_last_event_ends_equal_to_upstream() -> None:
    sim = Simulator()
    for i in range(4):
        sim.store.create(CONFIGMAPS, {"metadata": {"name": f"cm-{i}", "namespace": "default"}})
    async with SimServer(sim) as server, httpx.AsyncClient(timeout=10) as http:
        config = DaemonConfig(
            resources=(ResourceConfig(rtype=CONFIGMAPS),),
            upstream=_FastBackoff(),
            server=ServerSettings(port=0),
        )
        daemon = Daemon(config, UpstreamConfig(server=server.url), manage_gc=False)
        await daemon.start()
        try:
            assert await daemon.wait_ready(10)
            url = f"{daemon.url}/api/v1/namespaces/default/configmaps"
            listed = (await http.get(url)).json()
            view = {i["metadata"]["name"]: _rv(i) for i in listed["items"]}
            rv = _rv(listed)
            watch = {"watch": "1", "allowWatchBookmarks": "true", "timeoutSeconds": "20"}
            async with http.stream("GET", url, params={**watch, "resourceVersion": str(rv)}) as r:
                # Keep the daemon's upstream watch away for a second (429, Retry-After: 1) while
                # three objects are deleted and the history compacted: the daemon must relist.
                taken = sim.faults.injected
                sim.faults.fail_next("watch", 429, retry_after=1)
                sim.end_watches()
                await _until(lambda: sim.faults.injected > taken, "the daemon met the 429")
                for i in range(3):
                    sim.store.delete(CONFIGMAPS, "default", f"cm-{i}")
                sim.compact()
                async for line in r.aiter_lines():
                    event = orjson.loads(line) if line else {"type": ""}
                    if event["type"] in ("ADDED", "MODIFIED", "DELETED"):
                        _apply(view, event)
                        rv = _rv(event["object"])
                        break  # the connection breaks after the first change
            # Resume from the last RV seen, as every informer does; relist on 410.
            resume = {**watch, "resourceVersion": str(rv), "timeoutSeconds": "3"}
            async with http.stream("GET", url, params=resume) as r:
                async for line in r.aiter_lines():
                    event = orjson.loads(line) if line else {"type": ""}
                    if event["type"] == "ERROR" and event["object"].get("code") == 410:
                        listed = (await http.get(url)).json()
                        view = {i["metadata"]["name"]: _rv(i) for i in listed["items"]}
                        break
                    if event["type"] in ("ADDED", "MODIFIED", "DELETED"):
                        _apply(view, event)
            assert view == {
                o.key.split("/")[1]: o.rv for o in sim.store.iter_range(CONFIGMAPS, None)
            }
        finally:
            await daemon.stop()
