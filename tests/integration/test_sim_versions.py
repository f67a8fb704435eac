"""The simulator's version switches (:class:`SimConfig`), each against the behaviour it models:
per-resource watch caches and what etcd serves instead, progress notifications, the late
watch-list end bookmark, RV 0 lists without ``limit``, resources without a watch cache, the
``WatchList`` gate, watches from future RVs, and etcd-like compaction.

``tests/e2e/test_differential.py`` checks the same against a real kube-apiserver 1.28; these
tests pin each switch on its own, without one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from typing import Any

import httpx
import pytest

from cacheproxy.sim import SimConfig, SimServer, Simulator
from tests.support import serving

Json = dict[str, Any]
PODS = "/api/v1/namespaces/default/pods"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
EVENTS = "/api/v1/namespaces/default/events"
WATCH_LIST = {
    "watch": "1",
    "sendInitialEvents": "true",
    "resourceVersionMatch": "NotOlderThan",
    "allowWatchBookmarks": "true",
}


@contextlib.asynccontextmanager
async def simulator(**switches: Any) -> AsyncIterator[tuple[Simulator, httpx.AsyncClient]]:
    """A served simulator with ``switches`` (and short waits), holding two pods and an event."""
    sim = Simulator(config=SimConfig(rv_wait=0.2, **switches))
    sim.load(
        [
            ("pods", {"metadata": {"name": "a", "namespace": "default"}, "spec": {}}),
            ("pods", {"metadata": {"name": "b", "namespace": "default"}, "spec": {}}),
            ("events", {"metadata": {"name": "e", "namespace": "default"}, "reason": "R"}),
        ]
    )
    async with serving(sim) as (_, client):
        yield sim, client


def write_configmap(sim: Simulator, name: str = "other") -> int:
    """A write of another resource; the storage's RV after it."""
    configmaps = sim.resource("configmaps")
    if sim.store.get(configmaps, "default", name) is None:
        sim.store.create(configmaps, {"metadata": {"name": name, "namespace": "default"}})
    else:
        obj = sim.store.get(configmaps, "default", name)
        assert obj is not None
        sim.store.update(configmaps, {**obj, "data": {"n": str(sim.store.rv)}})
    return sim.store.rv


def rv_of(body: Json) -> int:
    return int(body["metadata"]["resourceVersion"])


async def events_of(
    client: httpx.AsyncClient, path: str, params: dict[str, str], *, count: int = 100
) -> list[Json]:
    """A watch's events until ``count`` came or the stream ended (pass ``timeoutSeconds``)."""
    events: list[Json] = []
    async with client.stream("GET", path, params=params) as response:
        assert response.status_code == 200, await response.aread()
        async with aclosing(response.aiter_lines()) as lines:
            async for line in lines:
                if line.strip():
                    events.append(json.loads(line))
                if len(events) >= count:
                    break
    return events


async def eventually(condition: Callable[[], bool]) -> None:
    """Until ``condition`` holds (the simulator's timers run on the event loop's clock)."""
    async with asyncio.timeout(10):
        while not condition():  # noqa: ASYNC110 - the store has no change notification to await
            await asyncio.sleep(0.01)


def kinds(events: list[Json]) -> list[str]:
    return [e["type"] for e in events]


# ---------------------------------------------------------------------------- per-resource caches


async def test_one_rv_for_every_cache_by_default() -> None:
    async with simulator() as (sim, client):
        latest = write_configmap(sim)
        body = (await client.get(PODS, params={"resourceVersion": "0"})).json()
        assert rv_of(body) == latest
        ok = await client.get(PODS, params={"resourceVersion": str(latest)})
        assert ok.status_code == 200


async def test_a_list_at_rv_0_carries_its_own_caches_rv_and_rv_unset_the_storages() -> None:
    async with simulator(per_resource_cache=True) as (sim, client):
        pods_rv = sim.store.cache_rv(sim.resource("pods"))
        latest = write_configmap(sim)
        assert pods_rv < latest
        assert rv_of((await client.get(PODS, params={"resourceVersion": "0"})).json()) == pods_rv
        assert rv_of((await client.get(PODS)).json()) == latest
        assert (
            rv_of((await client.get(CONFIGMAPS, params={"resourceVersion": "0"})).json()) == latest
        )


async def test_a_read_at_a_newer_rv_waits_for_its_cache_then_504s() -> None:
    async with simulator(per_resource_cache=True, consistent_list_from_cache=False) as (
        sim,
        client,
    ):
        pods_rv = sim.store.cache_rv(sim.resource("pods"))
        latest = write_configmap(sim)
        for path in (PODS, f"{PODS}/a"):
            response = await client.get(path, params={"resourceVersion": str(latest)})
            assert response.status_code == 504
            assert response.headers["retry-after"] == "1"
            assert response.json()["message"] == (
                f"Timeout: Too large resource version: {latest}, current: {pods_rv}"
            )


async def test_with_consistent_lists_from_cache_a_waiting_read_makes_its_cache_catch_up() -> None:
    # 1.31+: the cache asks etcd for progress while a read waits, so an RV another resource's
    # write made is reached without a write of its own; a list with RV unset is the cache's,
    # caught up first. An RV etcd has not reached still waits, then 504s.
    async with simulator(per_resource_cache=True) as (sim, client):
        pods = sim.resource("pods")
        latest = write_configmap(sim)
        assert sim.store.cache_rv(pods) < latest
        for path in (PODS, f"{PODS}/a"):
            response = await client.get(path, params={"resourceVersion": str(latest)})
            assert response.status_code == 200
        assert sim.store.cache_rv(pods) == latest
        newer = write_configmap(sim)
        listed = await client.get(PODS)
        assert rv_of(listed.json()) == newer == sim.store.cache_rv(pods)
        future = await client.get(PODS, params={"resourceVersion": str(newer + 5)})
        assert future.status_code == 504


async def test_a_progress_notification_lets_every_cache_serve_the_latest_rv() -> None:
    async with simulator(per_resource_cache=True) as (sim, client):
        latest = write_configmap(sim)
        sim.progress_notify()
        response = await client.get(PODS, params={"resourceVersion": str(latest)})
        assert response.status_code == 200
        assert rv_of(response.json()) == latest


async def test_progress_notifications_come_every_interval() -> None:
    sim = Simulator(config=SimConfig(per_resource_cache=True, progress_notify_interval=0.01))
    pods = sim.resource("pods")
    latest = write_configmap(sim)
    assert sim.store.cache_rv(pods) < latest
    maintenance = asyncio.create_task(sim.maintain(), name="test-maintenance")
    try:
        await eventually(lambda: sim.store.cache_rv(pods) >= latest)
    finally:
        maintenance.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await maintenance


async def test_exact_reads_are_etcds_at_the_storages_rv() -> None:
    async with simulator(per_resource_cache=True) as (sim, client):
        latest = write_configmap(sim)
        exact = await client.get(
            PODS, params={"resourceVersion": str(latest), "resourceVersionMatch": "Exact"}
        )
        assert exact.status_code == 200 and rv_of(exact.json()) == latest
        paged = await client.get(PODS, params={"resourceVersion": str(latest), "limit": "1"})
        assert paged.status_code == 200 and rv_of(paged.json()) == latest
        future = str(latest + 10)
        too_new = await client.get(
            PODS, params={"resourceVersion": future, "resourceVersionMatch": "Exact"}
        )
        assert too_new.status_code == 500
        assert too_new.json()["message"] == (
            "etcdserver: mvcc: required revision is a future revision"
        )
        assert "reason" not in too_new.json()
        not_older = await client.get(
            PODS,
            params={
                "resourceVersion": future,
                "resourceVersionMatch": "NotOlderThan",
                "limit": "1",
            },
        )
        assert not_older.status_code == 504
        assert "retry-after" not in not_older.headers
        assert "retryAfterSeconds" not in not_older.json()["details"]


async def test_bookmarks_come_only_once_the_caches_rv_moved_past_the_watchs() -> None:
    switches = {"watch_list": False, "bookmark_interval": 0.05}
    async with simulator(per_resource_cache=True, **switches) as (sim, client):
        write_configmap(sim)  # the storage moves on; the pods' cache does not
        params = {"watch": "1", "resourceVersion": "0", "allowWatchBookmarks": "true"}
        quiet = await events_of(client, PODS, {**params, "timeoutSeconds": "1"})
        assert kinds(quiet) == ["ADDED", "ADDED"]
        sim.progress_notify()
        started = await events_of(client, PODS, {**params, "timeoutSeconds": "1"})
        assert kinds(started) == ["ADDED", "ADDED"], "it starts at the cache's new RV"
        since = {**params, "resourceVersion": "1", "timeoutSeconds": "1"}
        older = await events_of(client, "/api/v1/namespaces/kube-system/pods", since)
        assert set(kinds(older)) == {"BOOKMARK"}, "a watch from before the cache's RV gets them"
    async with simulator(**switches) as (sim, client):
        params = {"watch": "1", "resourceVersion": "0", "allowWatchBookmarks": "true"}
        default = await events_of(client, PODS, {**params, "timeoutSeconds": "2"}, count=3)
        assert kinds(default) == ["ADDED", "ADDED", "BOOKMARK"]


# ---------------------------------------------------------------------------- watch-list


async def test_a_late_end_bookmark_waits_for_a_write_of_its_resource() -> None:
    async with simulator(
        per_resource_cache=True, late_initial_events_end=True, git_version="v1.28.7"
    ) as (sim, client):
        latest = write_configmap(sim)
        events: list[Json] = []
        params = {**WATCH_LIST, "timeoutSeconds": "10"}
        async with (
            client.stream("GET", PODS, params=params) as response,
            aclosing(response.aiter_lines()) as lines,
        ):
            for _ in range(2):
                events.append(json.loads(await anext(lines)))
            assert kinds(events) == ["ADDED", "ADDED"]
            assert sim.store.cache_rv(sim.resource("pods")) < latest
            pods = sim.resource("pods")
            sim.store.create(sim.resource("namespaces"), {"metadata": {"name": "elsewhere"}})
            sim.store.create(pods, {"metadata": {"name": "c", "namespace": "elsewhere"}})
            end = json.loads(await anext(lines))
        assert end["type"] == "BOOKMARK"
        assert end["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
        assert rv_of(end["object"]) == sim.store.rv


async def test_a_late_end_bookmark_comes_with_a_progress_notification() -> None:
    async with simulator(per_resource_cache=True, late_initial_events_end=True) as (sim, client):
        latest = write_configmap(sim)
        params = {**WATCH_LIST, "timeoutSeconds": "10"}
        async with (
            client.stream("GET", PODS, params=params) as response,
            aclosing(response.aiter_lines()) as lines,
        ):
            assert [json.loads(await anext(lines))["type"] for _ in range(2)] == ["ADDED"] * 2
            sim.progress_notify()
            end = json.loads(await anext(lines))
        assert end["type"] == "BOOKMARK" and rv_of(end["object"]) == latest


async def test_a_watch_list_at_rv_0_ends_at_once_at_the_caches_rv() -> None:
    async with simulator(per_resource_cache=True, late_initial_events_end=True) as (sim, client):
        write_configmap(sim)
        pods_rv = sim.store.cache_rv(sim.resource("pods"))
        events = await events_of(client, PODS, {**WATCH_LIST, "resourceVersion": "0"}, count=3)
        assert kinds(events) == ["ADDED", "ADDED", "BOOKMARK"]
        assert rv_of(events[-1]["object"]) == pods_rv


async def test_without_the_late_bookmark_the_cache_catches_up_first() -> None:
    async with simulator(per_resource_cache=True) as (sim, client):
        latest = write_configmap(sim)
        events = await events_of(client, PODS, WATCH_LIST, count=3)
        assert kinds(events) == ["ADDED", "ADDED", "BOOKMARK"]
        assert rv_of(events[-1]["object"]) == latest


async def test_with_the_watch_list_gate_off_a_watch_list_is_a_422() -> None:
    async with simulator(watch_list=False) as (_, client):
        response = await client.get(PODS, params={"watch": "1", "sendInitialEvents": "true"})
    assert response.status_code == 422
    causes = response.json()["details"]["causes"]
    assert [(c["field"], c["message"]) for c in causes] == [
        (
            "resourceVersionMatch",
            "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ),
        (
            "sendInitialEvents",
            "Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature "
            "gate is enabled",
        ),
    ]


@pytest.mark.parametrize("watch_list", [True, False])
async def test_a_legacy_watch_with_bookmarks_is_a_watch_list_when_the_gate_is_on(
    watch_list: bool,
) -> None:
    async with simulator(watch_list=watch_list, bookmark_interval=60) as (_, client):
        params = {"watch": "1", "resourceVersion": "0", "allowWatchBookmarks": "true"}
        events = await events_of(client, PODS, {**params, "timeoutSeconds": "1"}, count=3)
        plain = await events_of(client, PODS, {"watch": "1", "timeoutSeconds": "1"}, count=3)
    ends = [e for e in events if (e["object"]["metadata"].get("annotations") or {})]
    assert len(ends) == (1 if watch_list else 0)
    assert kinds(plain) == ["ADDED", "ADDED"]


# ---------------------------------------------------------------------------- limits, futures


async def test_a_list_at_rv_0_ignores_limit_when_the_switch_says_so() -> None:
    async with simulator(rv0_list_ignores_limit=True, uncached_resources=frozenset({"events"})) as (
        sim,
        client,
    ):
        whole = (await client.get(PODS, params={"resourceVersion": "0", "limit": "1"})).json()
        assert len(whole["items"]) == 2 and "continue" not in whole["metadata"]
        paged = (await client.get(PODS, params={"limit": "1"})).json()
        assert len(paged["items"]) == 1 and paged["metadata"]["continue"]
        sim.store.create(
            sim.resource("events"), {"metadata": {"name": "f", "namespace": "default"}}
        )
        events = (await client.get(EVENTS, params={"resourceVersion": "0", "limit": "1"})).json()
        assert len(events["items"]) == 1, "etcd honours limit"


async def test_a_watch_from_a_future_rv_starts_at_once_without_the_wait() -> None:
    async with simulator(future_watch_waits=False) as (sim, client):
        target = sim.store.rv + 2
        params = {"watch": "1", "resourceVersion": str(target), "timeoutSeconds": "5"}
        async with (
            client.stream("GET", CONFIGMAPS, params=params) as response,
            aclosing(response.aiter_lines()) as lines,
        ):
            assert response.status_code == 200
            for _ in range(3):
                write_configmap(sim, f"cm-{sim.store.rv}")
            event = json.loads(await anext(lines))
        assert rv_of(event["object"]) == target + 1, "events at or before its RV are not sent"


async def test_a_pod_has_no_generation_when_the_switch_says_so() -> None:
    async with simulator(pod_generation=False) as (_, client):
        pod = (await client.post(PODS, json={"metadata": {"name": "g"}, "spec": {}})).json()
    assert "generation" not in pod["metadata"]


# ---------------------------------------------------------------------------- uncached resources


async def test_a_watch_list_of_a_resource_without_a_watch_cache_is_served_from_storage() -> None:
    # 1.32: etcd serves it, its objects then the end bookmark (at the storage's RV).
    async with simulator(uncached_resources=frozenset({"events"})) as (sim, client):
        events = await events_of(client, EVENTS, WATCH_LIST, count=2)
        assert kinds(events) == ["ADDED", "BOOKMARK"]
        annotations = events[1]["object"]["metadata"]["annotations"]
        assert annotations["k8s.io/initial-events-end"] == "true"
        assert rv_of(events[1]["object"]) == sim.store.rv


async def test_a_resource_without_a_watch_cache_is_served_as_etcd_serves_it() -> None:
    async with simulator(
        uncached_resources=frozenset({"events"}), watch_list_from_storage=False
    ) as (sim, client):
        refused = await client.get(EVENTS, params=WATCH_LIST)
        assert refused.status_code == 422
        assert refused.json()["message"] == (
            'events "" is invalid: sendInitialEvents: Forbidden: for watch is unsupported by an '
            "etcd cluster"
        )
        assert refused.json()["details"]["kind"] == "events"
        future = await client.get(EVENTS, params={"resourceVersion": str(sim.store.rv + 5)})
        assert future.status_code == 504 and "retry-after" not in future.headers
        old = sim.store.rv
        write_configmap(sim)
        sim.compact_storage()
        events = await events_of(client, EVENTS, {"watch": "1", "resourceVersion": str(old - 1)})
        assert [(e["type"], e["object"]["message"]) for e in events] == [
            ("ERROR", "The resourceVersion for the provided watch is too old.")
        ]
        now = str(sim.store.rv)
        params = {"watch": "1", "resourceVersion": now, "allowWatchBookmarks": "true"}
        quiet = await events_of(client, EVENTS, {**params, "timeoutSeconds": "1"})
        assert quiet == [], "etcd's watches send no bookmarks"
        cached = await events_of(client, PODS, {**params, "timeoutSeconds": "1"})
        assert kinds(cached) == ["BOOKMARK"]


# ---------------------------------------------------------------------------- compaction


async def test_storage_compaction_expires_exact_lists_and_tokens_but_not_cached_watches() -> None:
    async with simulator() as (sim, client):
        first = (await client.get(PODS, params={"limit": "1"})).json()
        old = rv_of(first)
        write_configmap(sim)
        sim.compact_storage()
        exact = await client.get(
            PODS, params={"resourceVersion": str(old), "resourceVersionMatch": "Exact"}
        )
        assert (exact.status_code, exact.json()["message"]) == (
            410,
            "The resourceVersion for the provided list is too old.",
        )
        token = await client.get(
            PODS, params={"limit": "1", "continue": first["metadata"]["continue"]}
        )
        assert token.status_code == 410
        assert token.json()["metadata"]["continue"]
        watch = await events_of(
            client, PODS, {"watch": "1", "resourceVersion": str(old), "timeoutSeconds": "1"}
        )
        assert watch == []


async def test_with_list_from_cache_snapshot_a_compacted_rv_in_the_caches_history_is_served() -> (
    None
):
    # As 1.36 answered the differential test's compaction probes: 200 from its cache's
    # snapshots, each page's continue key rooted; older than the cache's history, etcd's 410.
    switches = {
        "per_resource_cache": True,
        "list_from_cache_snapshot": True,
        "git_version": "v1.36.2",
    }
    async with simulator(**switches) as (sim, client):
        first = (await client.get(PODS, params={"limit": "1"})).json()
        old = rv_of(first)
        assert first["metadata"]["continue"]
        sim.store.update(
            sim.resource("pods"),
            {
                **first["items"][0],
                "metadata": {**first["items"][0]["metadata"], "labels": {"x": "1"}},
            },
        )
        sim.compact_storage()
        exact = await client.get(
            PODS, params={"resourceVersion": str(old), "resourceVersionMatch": "Exact"}
        )
        assert exact.status_code == 200 and rv_of(exact.json()) == old
        assert "labels" not in exact.json()["items"][0]["metadata"]  # the state at that RV
        page = await client.get(
            PODS, params={"limit": "1", "continue": first["metadata"]["continue"]}
        )
        assert page.status_code == 200 and rv_of(page.json()) == old
        assert [i["metadata"]["name"] for i in page.json()["items"]] == ["b"]
        sim.compact()  # the caches' history too
        gone = await client.get(
            PODS, params={"limit": "1", "continue": first["metadata"]["continue"]}
        )
        assert gone.status_code == 410


async def test_compaction_every_interval_reaches_the_rv_of_the_round_before() -> None:
    sim = Simulator(config=SimConfig(compaction_interval=0.01))
    start = sim.store.rv
    write_configmap(sim)
    maintenance = asyncio.create_task(sim.maintain(), name="test-maintenance")
    try:
        await eventually(lambda: sim.store.compacted_rv > start)
    finally:
        maintenance.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await maintenance
    assert sim.store.compacted_rv <= sim.store.rv


async def test_a_restart_loses_the_watch_caches_history_but_not_the_storages() -> None:
    sim = Simulator()
    sim.load([("pods", {"metadata": {"name": "a", "namespace": "default"}, "spec": {}})])
    async with SimServer(sim) as server, httpx.AsyncClient(base_url=server.url) as client:
        old = sim.store.rv
        write_configmap(sim)
        await server.restart()
        exact = await client.get(
            PODS, params={"resourceVersion": str(old), "resourceVersionMatch": "Exact"}
        )
        assert exact.status_code == 200 and rv_of(exact.json()) == old
        events = await events_of(client, PODS, {"watch": "1", "resourceVersion": str(old)})
    assert [e["object"]["message"] for e in events] == [
        f"too old resource version: {old} ({sim.store.rv})"
    ]


def test_the_1_28_profile_sets_every_switch_as_that_version() -> None:
    config = SimConfig.kube_1_28(watch_list=True)
    assert config.git_version == "v1.28.7"
    assert config.watch_list and config.per_resource_cache and config.late_initial_events_end
    assert config.rv0_list_ignores_limit and config.uncached_resources == {"events"}
    assert not config.future_watch_waits and not config.pod_generation
    assert config.compaction_interval == 300.0
    assert not SimConfig.kube_1_28().watch_list


async def test_the_control_path_compacts_the_storage_and_notifies_progress() -> None:
    async with simulator(per_resource_cache=True) as (sim, client):
        latest = write_configmap(sim)
        assert (await client.post("/_sim/progress-notify")).status_code == 200
        assert sim.store.cache_rv(sim.resource("pods")) == latest
        response = await client.post("/_sim/compact-storage", json={"resourceVersion": latest - 1})
        assert response.status_code == 200
        assert sim.store.compacted_rv == latest - 1
        bad = await client.post("/_sim/compact-storage", json={"resourceVersion": "x"})
        assert bad.status_code == 400
