"""Tiers against the real API server: a chain of three cacheproxies (the API server → top →
middle → bottom), each one's upstream the one above it, as node sidecars in front of a node-pool
cacheproxy in front of a central one.

The bottom answers lists, gets, pages, Tables and the watch rules (resume, 410, watch-list,
bookmarks) as the top does; a write on the API server reaches a watcher at the bottom; and the
middle one restarting (a new process with no history) costs the bottom's clients nothing: the
bottom relists from the new middle and delivers the difference as events, so its watcher sees
every write once, in order, and never has to relist.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import yaml

from cacheproxy.daemon.config import load_config, resolve_upstream
from cacheproxy.daemon.runtime import Daemon
from cacheproxy.envtest import Cluster
from loadtest.harness.relay import Relay
from loadtest.scenarios.tiers import write_kubeconfig
from tests.e2e.support import create, daemon_over, fresh_namespace, keyed, merge_patch, rv_of
from tests.support import CONFIGMAP_LIST_BLUEPRINT, end_annotations

pytestmark = [pytest.mark.envtest, pytest.mark.every_server]

RESOURCES: list[Any] = [{"resource": "pods", "indexes": ["spec.nodeName"]}, "configmaps"]
GUARD = 30.0
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


def _config_behind(directory: Path, url: str) -> Path:
    """A cacheproxy configuration whose upstream is the cacheproxy at ``url``."""
    directory.mkdir(parents=True, exist_ok=True)
    kubeconfig = write_kubeconfig(directory, "above", url)
    config = directory / "cacheproxy.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "resources": RESOURCES,
                "upstream": {"kubeconfig": str(kubeconfig)},
                "server": {"port": 0},
            }
        )
    )
    return config


@contextlib.asynccontextmanager
async def daemon_behind(url: str, directory: Path) -> AsyncIterator[Daemon]:
    """A synced cacheproxy whose upstream is the cacheproxy at ``url``."""
    config = load_config(_config_behind(directory, url), env={})
    daemon = Daemon(config, resolve_upstream(config.upstream))
    async with daemon:
        assert await daemon.wait_ready(GUARD), f"the daemon behind {url} did not sync"
        yield daemon


class Chain:
    """The API server → top → middle → (a relay) → bottom; the relay lets a new middle take the
    old one's place without the bottom's configuration changing."""

    def __init__(self, top: Daemon, middle: Daemon, relay: Relay, bottom: Daemon) -> None:
        self.top, self.middle, self.relay, self.bottom = top, middle, relay, bottom


@pytest.fixture
async def chain(cluster: Cluster, tmp_path: Path) -> AsyncIterator[Chain]:
    (tmp_path / "top").mkdir()
    async with (
        daemon_over(cluster, tmp_path / "top", resources=RESOURCES) as top,
        daemon_behind(top.url, tmp_path / "middle") as middle,
    ):
        port = int(httpx.URL(middle.url).port or 0)
        async with (
            Relay("127.0.0.1", port) as relay,
            daemon_behind(f"http://127.0.0.1:{relay.port}", tmp_path / "bottom") as bottom,
        ):
            yield Chain(top, middle, relay, bottom)


async def _equal_lists(
    top: httpx.AsyncClient, bottom: httpx.AsyncClient, path: str, params: Mapping[str, str]
) -> tuple[httpx.Response, httpx.Response]:
    """Both answers once the bottom holds what the top holds (the same items and RVs)."""
    deadline = asyncio.get_running_loop().time() + GUARD
    while True:
        up, down = await top.get(path, params=params), await bottom.get(path, params=params)
        assert up.status_code == down.status_code == 200, (path, up.text, down.text)
        if keyed(up.json()["items"]) == keyed(down.json()["items"]):
            return up, down
        assert asyncio.get_running_loop().time() < deadline, f"{path}: the bottom lags"
        await asyncio.sleep(0.05)


def _but_rv(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` without its list metadata's resourceVersion."""
    meta = {k: v for k, v in body["metadata"].items() if k != "resourceVersion"}
    return {**body, "metadata": meta}


async def test_the_bottom_answers_lists_gets_pages_and_tables_as_the_top(
    chain: Chain, upstream: httpx.AsyncClient
) -> None:
    async with (
        httpx.AsyncClient(base_url=chain.top.url, timeout=GUARD) as top,
        httpx.AsyncClient(base_url=chain.bottom.url, timeout=GUARD) as bottom,
    ):
        for path, params in [
            ("/api/v1/pods", {}),
            ("/api/v1/namespaces/ns-1/pods", {"labelSelector": "app in (app-0,app-2)"}),
            ("/api/v1/pods", {"fieldSelector": "spec.nodeName=node-3"}),
            ("/api/v1/pods", {"fieldSelector": "status.phase!=Running"}),
            ("/api/v1/configmaps", {"fieldSelector": "metadata.namespace=ns-0"}),
        ]:
            up, down = await _equal_lists(top, bottom, path, params)
            # The same body but for the list's RV: each tier's consistent read carries its own
            # (upstream's revision when it was confirmed), as two lists of the API server do.
            assert _but_rv(down.json()) == _but_rv(up.json()), (path, params)
            assert up.json()["items"], (path, params)  # the demo has some of each

        listed = (await top.get("/api/v1/namespaces/ns-2/pods")).json()["items"]
        name = listed[3]["metadata"]["name"]
        for path in (f"/api/v1/namespaces/ns-2/pods/{name}", "/api/v1/namespaces/ns-2/pods/nope"):
            up, down = await top.get(path), await bottom.get(path)
            assert (down.status_code, down.json()) == (up.status_code, up.json()), path

        # Pages: the same items in the same pages, each page's RV the list's.
        pages: list[list[Any]] = [[], []]
        for client, seen in zip((top, bottom), pages, strict=True):
            params = {"limit": "7"}
            while True:
                body = (await client.get("/api/v1/pods", params=params)).json()
                seen.append(keyed(body["items"]))
                token = body["metadata"].get("continue")
                if not token:
                    break
                params = {"limit": "7", "continue": token}
        assert pages[0] == pages[1] and len(pages[0]) > 3

        # Tables pass through: the bottom prints what the top prints.
        tables = [
            (await c.get("/api/v1/namespaces/ns-0/pods", headers={"Accept": TABLE})).json()
            for c in (top, bottom)
        ]
        up_doc, down_doc = tables
        assert down_doc["kind"] == up_doc["kind"] == "Table"
        assert down_doc["columnDefinitions"] == up_doc["columnDefinitions"]
        assert [r["cells"][:3] for r in down_doc["rows"]] == [
            r["cells"][:3] for r in up_doc["rows"]
        ]


async def _events(
    client: httpx.AsyncClient, path: str, params: Mapping[str, str], until: Any, *, within: float
) -> list[dict[str, Any]]:
    """A watch's events until ``until(events)`` holds, asked again as lines come and every
    :data:`RECHECK` seconds meanwhile (what it waits for may happen after the last line: a
    writer's last answer may come after its event went through every tier); at most
    ``within`` seconds without a line."""
    events: list[dict[str, Any]] = []
    async with client.stream("GET", path, params=params) as response:
        assert response.status_code == 200, await response.aread()
        lines = response.aiter_lines()
        loop = asyncio.get_running_loop()
        quiet_until = loop.time() + within
        reading: asyncio.Future[str] = asyncio.ensure_future(anext(lines))
        try:
            while not until(events):
                done, _ = await asyncio.wait({reading}, timeout=RECHECK)
                if not done:
                    if loop.time() > quiet_until:
                        raise TimeoutError(f"no watch event for {within} s; got {events}")
                    continue
                line = reading.result()
                reading = asyncio.ensure_future(anext(lines))
                quiet_until = loop.time() + within
                if line:
                    events.append(orjson.loads(line))
        finally:
            if not reading.done():
                # Closed under the pending read (which then ends with an error), not cancelled
                # inside httpx: a read cancelled mid-stream can leave its socket unclosed.
                await response.aclose()
            with contextlib.suppress(Exception):
                await reading
    return events


RECHECK = 0.2
"""Seconds between two looks at what a watch's reader waits for while no line comes."""


@pytest.mark.also_on(
    "1.32"
)  # 1.32's end bookmark carries the list blueprint, 1.28's and 1.36's not
async def test_the_bottom_keeps_the_watch_rules(
    chain: Chain, upstream: httpx.AsyncClient, cluster: Cluster
) -> None:
    namespace = await fresh_namespace(upstream, "tier")
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    first = await create(upstream, path, {"metadata": {"name": "one"}, "data": {"k": "1"}})
    async with httpx.AsyncClient(base_url=chain.bottom.url, timeout=GUARD) as bottom:
        await _equal_lists(upstream, bottom, path, {})

        # watch-list: the initial state, then the bookmark that ends it
        initial = await _events(
            bottom,
            path,
            {
                "watch": "1",
                "sendInitialEvents": "true",
                "resourceVersionMatch": "NotOlderThan",
                "allowWatchBookmarks": "true",
            },
            lambda events: bool(events) and events[-1]["type"] == "BOOKMARK",
            within=GUARD,
        )
        assert [e["type"] for e in initial] == ["ADDED", "BOOKMARK"]
        annotations = initial[-1]["object"]["metadata"].get("annotations", {})
        # As the API server at the top annotates it (1.32 and 1.33: with the list's blueprint).
        blueprint = CONFIGMAP_LIST_BLUEPRINT if (1, 32) <= cluster.assets.minor < (1, 34) else None
        assert annotations == end_annotations(blueprint)

        # resume: from the create's RV, the events after it, nothing before
        updated = await merge_patch(upstream, f"{path}/one", {"data": {"k": "2"}})
        resumed = await _events(
            bottom,
            path,
            {"watch": "1", "resourceVersion": str(rv_of(first))},
            lambda events: len(events) >= 1,
            within=GUARD,
        )
        assert [(e["type"], rv_of(e["object"])) for e in resumed] == [("MODIFIED", rv_of(updated))]

        # an RV older than every history in the chain: 410 Expired, as from the API server
        expired = await _events(
            bottom,
            path,
            {"watch": "1", "resourceVersion": "1"},
            lambda events: len(events) >= 1,
            within=GUARD,
        )
        assert expired[0]["type"] == "ERROR"
        assert (expired[0]["object"]["code"], expired[0]["object"]["reason"]) == (410, "Expired")


async def test_a_write_on_the_api_server_reaches_a_watcher_at_the_bottom(
    chain: Chain, upstream: httpx.AsyncClient
) -> None:
    namespace = await fresh_namespace(upstream, "tier")
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    async with httpx.AsyncClient(base_url=chain.bottom.url, timeout=GUARD) as bottom:
        await _equal_lists(upstream, bottom, path, {})
        rv = (await bottom.get(path)).json()["metadata"]["resourceVersion"]

        async def write() -> dict[str, Any]:
            await asyncio.sleep(0.3)  # the watch is open by then
            return await create(upstream, path, {"metadata": {"name": "from-the-top"}})

        writing = asyncio.create_task(write())
        events = await _events(
            bottom,
            path,
            {"watch": "1", "resourceVersion": rv},
            lambda events: len(events) >= 1,
            within=GUARD,
        )
        made = await writing
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "from-the-top")
    ]
    assert rv_of(events[0]["object"]) == rv_of(made)


async def test_the_middle_restarting_costs_the_bottoms_clients_nothing(
    chain: Chain, upstream: httpx.AsyncClient, tmp_path: Path
) -> None:
    namespace = await fresh_namespace(upstream, "tier")
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    writes = 60
    async with httpx.AsyncClient(base_url=chain.bottom.url, timeout=GUARD) as bottom:
        await _equal_lists(upstream, bottom, path, {})
        start_rv = (await bottom.get(path)).json()["metadata"]["resourceVersion"]
        last: dict[str, Any] = {}

        async def churn() -> None:
            for i in range(writes):
                name = f"cm-{i % 7}"
                if i < 7:
                    last[name] = await create(upstream, path, {"metadata": {"name": name}})
                else:
                    last[name] = await merge_patch(
                        upstream, f"{path}/{name}", {"data": {"i": str(i)}}
                    )
                await asyncio.sleep(0.05)

        stack = contextlib.AsyncExitStack()

        async def restart_middle() -> None:
            await asyncio.sleep(0.8)
            await chain.middle.stop()  # its history is gone with it
            middle = await stack.enter_async_context(
                daemon_behind(chain.top.url, tmp_path / "middle-2")
            )
            chain.relay.target = ("127.0.0.1", int(httpx.URL(middle.url).port or 0))
            chain.relay.cut()  # the bottom's connections to the old middle

        writing = asyncio.create_task(churn())
        restarting = asyncio.create_task(restart_middle())

        def caught_up(events: list[dict[str, Any]]) -> bool:
            final = {n: rv_of(o) for n, o in last.items()}
            seen = {
                e["object"]["metadata"]["name"]: rv_of(e["object"])
                for e in events
                if e["type"] != "BOOKMARK"  # a relist of the bottom's ends with one
            }
            return writing.done() and bool(final) and seen == final

        events = await _events(
            bottom,
            path,
            {"watch": "1", "resourceVersion": start_rv, "allowWatchBookmarks": "true"},
            caught_up,
            within=GUARD,
        )
        await restarting
        up, down = await upstream.get(path), await bottom.get(path)
        relists = (await bottom.get("/status")).json()["resources"]
        await stack.aclose()
    changes = [e for e in events if e["type"] != "BOOKMARK"]
    assert not [e for e in changes if e["type"] == "ERROR"], "the bottom's watcher got an error"
    rvs = [rv_of(e["object"]) for e in changes]
    assert rvs == sorted(rvs) and len(set(rvs)) == len(rvs), "out of order or repeated"
    # each object's last state arrived (writes made while the middle was away may come as one
    # change, as after any relist), and the bottom equals upstream
    assert {e["object"]["metadata"]["name"] for e in changes} == set(last)
    assert keyed(down.json()["items"]) == keyed(up.json()["items"])
    # the bottom did meet a middle without its history: it relisted, its watcher never did
    assert relists["configmaps"]["relists"] >= 1, relists
