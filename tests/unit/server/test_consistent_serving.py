"""Consistent reads through the server: lists, gets and watches with resourceVersion unset wait
until the cache has reached upstream's RV (or a listing confirmed it), other reads do not ask
upstream; the fallbacks' answers; the metrics."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from cacheproxy.errors import TransportError
from cacheproxy.informer import FakeListerWatcher, SharedInformer, Store
from cacheproxy.kube.keys import key_digest
from cacheproxy.kube.resources import builtin
from cacheproxy.server.app import CacheServer
from cacheproxy.server.consistent import ConsistencyOptions, ConsistentReads
from cacheproxy.server.resource import ServedResource
from cacheproxy.upstream import KeysListed


def pod(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "labels": labels}, "spec": {}}


async def no_sleep(_: float) -> None:
    await asyncio.sleep(0)


class Rig:
    """A served pods resource over a fake upstream whose probe answers ``ahead`` RVs past what
    it has sent (writes to other resources, or writes still on their way to the cache: those
    are ``unseen``, in upstream's listing and not yet sent)."""

    def __init__(self, options: ConsistencyOptions, *, listing: bool) -> None:
        self.lw = FakeListerWatcher(kind="Pod")
        self.ahead = 0
        self.probes = 0
        self.listings = 0
        self.unseen: set[str] = set()
        self.failure: BaseException | None = None
        self.informer = SharedInformer(
            self.lw, name="pods", store=Store(kind="Pod", api_version="v1"), sleep=no_sleep
        )
        self.reads = ConsistentReads(
            self.probe, options, list_keys=self.list_keys if listing else None, name="pods"
        )
        self.resource = ServedResource(builtin("pods"), self.informer, consistency=self.reads)
        self.server = CacheServer([self.resource], version={})

    async def probe(self) -> int:
        self.probes += 1
        if self.failure is not None:
            raise self.failure
        return self.lw.rv + self.ahead

    async def list_keys(self) -> KeysListed:
        self.listings += 1
        objects = self.lw.objects
        newest = max(int(o["metadata"]["resourceVersion"]) for o in objects.values())
        if self.unseen:
            newest = self.lw.rv + 1  # the RV their event will carry
        return KeysListed(self.lw.rv + self.ahead, key_digest(set(objects) | self.unseen), newest)


@contextlib.asynccontextmanager
async def served(
    *, listing: bool = False, **options: Any
) -> AsyncIterator[tuple[Rig, httpx.AsyncClient]]:
    options.setdefault("mode", "strict")
    rig = Rig(ConsistencyOptions(**options), listing=listing)
    rig.lw.emit("ADDED", pod("a", app="web"))
    task = asyncio.create_task(rig.informer.run(), name="informer-under-test")
    transport = httpx.ASGITransport(app=rig.server)
    try:
        await asyncio.wait_for(rig.informer.wait_for_sync(), 5)
        async with httpx.AsyncClient(transport=transport, base_url="http://cache") as client:
            yield rig, client
    finally:
        await rig.reads.close()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


PODS = "/api/v1/namespaces/default/pods"


async def test_a_list_with_rv_unset_waits_for_a_write_the_cache_has_not_seen() -> None:
    async with served(timeout=10.0) as (rig, client):
        rig.ahead = 1  # upstream committed a write; its event is still on the way
        answer = asyncio.create_task(client.get(PODS, params={"labelSelector": "app=web"}))
        await asyncio.sleep(0.1)
        assert not answer.done()
        rig.ahead = 0
        rig.lw.emit("ADDED", pod("b", app="web"))
        response = await answer
        assert response.status_code == 200
        assert "warning" not in response.headers
        body = response.json()
        assert [i["metadata"]["name"] for i in body["items"]] == ["a", "b"]
        assert body["metadata"]["resourceVersion"] == str(rig.lw.rv)


async def test_a_get_with_rv_unset_waits_too() -> None:
    async with served(timeout=10.0) as (rig, client):
        rig.ahead = 1
        answer = asyncio.create_task(client.get(f"{PODS}/b"))
        await asyncio.sleep(0.1)
        assert not answer.done()
        rig.ahead = 0
        rig.lw.emit("ADDED", pod("b"))
        response = await answer
        assert response.status_code == 200
        assert response.json()["metadata"]["name"] == "b"


async def test_a_watch_with_rv_unset_starts_with_a_write_the_cache_had_not_seen() -> None:
    async with served(timeout=10.0) as (rig, client):
        rig.ahead = 1
        params = {"watch": "1", "timeoutSeconds": "1"}
        answer = asyncio.create_task(client.get(PODS, params=params))
        await asyncio.sleep(0.1)
        assert not answer.done()
        rig.ahead = 0
        rig.lw.emit("ADDED", pod("b"))
        response = await answer
        assert response.status_code == 200
        events = [orjson.loads(line) for line in response.text.splitlines()]
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
            ("ADDED", "a"),
            ("ADDED", "b"),
        ]


async def test_a_quiet_resource_is_confirmed_by_a_listing_and_then_without_a_probe() -> None:
    async with served(listing=True, timeout=10.0, confirm_after=0.05) as (rig, client):
        rig.ahead = 40  # other resources were written: this one never gets there by itself
        for _ in range(3):
            response = await client.get(PODS)
            assert response.status_code == 200
            assert "warning" not in response.headers
            assert [i["metadata"]["name"] for i in response.json()["items"]] == ["a"]
            # Upstream's state at the listing's RV, which is the cache's: its RV is the cache's.
            assert response.json()["metadata"]["resourceVersion"] == str(rig.lw.rv)
        assert (rig.probes, rig.listings) == (1, 3)
        assert rig.reads.stats.confirmed == 3


async def test_an_rv_from_a_replica_ahead_is_answered_once_a_listing_confirms_the_cache() -> None:
    async with served(listing=True, timeout=10.0, confirm_after=0.05) as (rig, client):
        rig.ahead = 40  # another replica's bookmark said so; this one's cache never got there
        ahead = str(rig.lw.rv + 20)
        listed = await client.get(PODS, params={"resourceVersion": ahead})
        assert listed.status_code == 200
        assert [i["metadata"]["name"] for i in listed.json()["items"]] == ["a"]
        # A get is not confirmed by a listing: without pass-through it waits, then the 504.
        rig.resource.rv_wait = 0.2
        got = await client.get(f"{PODS}/a", params={"resourceVersion": ahead})
        assert got.status_code == 504
        # An RV beyond upstream's own cannot be confirmed: the API server's 504.
        rig.ahead = 0
        beyond = await client.get(PODS, params={"resourceVersion": str(rig.lw.rv + 100)})
        assert beyond.status_code == 504
        assert beyond.json()["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"


async def test_a_listing_that_shows_a_write_makes_the_read_wait_for_it() -> None:
    async with served(listing=True, timeout=10.0, confirm_after=0.05) as (rig, client):
        rig.ahead = 40
        rig.unseen = {"default/b"}  # created upstream, its event still on its way
        answer = asyncio.create_task(client.get(PODS))
        await asyncio.sleep(0.3)
        assert not answer.done()
        assert rig.listings == 1
        rig.unseen = set()
        rig.lw.emit("ADDED", pod("b"))
        response = await answer
        assert "warning" not in response.headers
        assert [i["metadata"]["name"] for i in response.json()["items"]] == ["a", "b"]


@pytest.mark.parametrize(
    "params",
    [
        {"resourceVersion": "0"},
        {"resourceVersion": "2"},
        {"resourceVersion": "2", "resourceVersionMatch": "Exact"},
        {"watch": "1", "resourceVersion": "0", "timeoutSeconds": "1"},
        {"watch": "1", "resourceVersion": "2", "timeoutSeconds": "1"},
    ],
)
async def test_other_reads_do_not_ask_upstream(params: dict[str, str]) -> None:
    async with served() as (rig, client):
        rig.ahead = 100
        response = await client.get(PODS, params=params)
        assert response.status_code == 200
        assert rig.probes == 0


async def test_invalid_requests_are_refused_before_asking_upstream() -> None:
    async with served() as (rig, client):
        response = await client.get(PODS, params={"labelSelector": "a in"})
        assert response.status_code == 400
        assert rig.probes == 0


async def test_a_timed_out_read_is_served_from_the_cache_with_a_warning() -> None:
    async with served(timeout=0.2) as (rig, client):
        rig.ahead = 5
        response = await client.get(PODS)
        assert response.status_code == 200
        assert response.headers["warning"] == (
            '299 - "not a consistent read: the cache is at resourceVersion 2, upstream at 7; '
            'served from the cache as it is"'
        )
        assert [i["metadata"]["name"] for i in response.json()["items"]] == ["a"]


async def test_a_timed_out_read_is_a_504_when_so_configured() -> None:
    async with served(timeout=0.2, on_timeout="error") as (rig, client):
        rig.failure = TransportError("connection refused")
        response = await client.get(f"{PODS}/a")
        assert response.status_code == 504
        assert response.headers["retry-after"] == "1"
        body = response.json()
        assert body["reason"] == "Timeout"
        assert "upstream could not be asked (connection refused)" in body["message"]


async def test_the_metrics_count_probes_waits_and_fallbacks() -> None:
    async with served(timeout=0.2) as (rig, client):
        assert (await client.get(PODS)).status_code == 200
        rig.ahead = 3
        assert "warning" in (await client.get(PODS)).headers
        text = (await client.get("/metrics")).text
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    pods = (("resource", "pods"),)
    assert samples["cacheproxy_consistent_probes_total", pods] == 2
    assert samples["cacheproxy_consistent_reads_total", pods] == 2
    assert samples["cacheproxy_consistent_waits_total", pods] == 1
    assert (
        samples["cacheproxy_consistent_fallbacks_total", (("reason", "cache_behind"), *pods)] == 1
    )
    assert samples["cacheproxy_consistent_wait_seconds_count", pods] == 2
    assert samples["cacheproxy_consistent_wait_seconds_sum", pods] >= 0.2


async def test_a_live_read_is_served_at_once_while_the_watch_is_live() -> None:
    async with served(mode="live", timeout=10.0) as (rig, client):
        rig.ahead = 40  # upstream moved on (other resources): a live read does not ask
        for path in (PODS, f"{PODS}/a"):
            response = await client.get(path)
            assert response.status_code == 200
            assert "warning" not in response.headers
        assert rig.probes == 0
        assert rig.reads.stats.live == 2


async def test_a_live_read_waits_for_a_write_through_the_daemon_then_serves() -> None:
    async with served(mode="live", timeout=10.0) as (rig, client):
        rig.reads.wrote(rig.lw.rv + 1)  # a write's answer; its event still on its way
        answer = asyncio.create_task(client.get(PODS))
        await asyncio.sleep(0.02)
        assert not answer.done()
        rig.lw.emit("ADDED", pod("b"))
        response = await answer
        assert [i["metadata"]["name"] for i in response.json()["items"]] == ["a", "b"]
        assert (rig.probes, rig.reads.stats.after_write) == (0, 1)


def deleted_status(name: str, uid: str | None = None) -> bytes:
    """A delete's answer when the object went at once: a Status, no resourceVersion."""
    details: dict[str, Any] = {"name": name, "kind": "pods"}
    if uid is not None:
        details["uid"] = uid
    doc = {"kind": "Status", "apiVersion": "v1", "status": "Success", "details": details}
    return orjson.dumps({**doc, "metadata": {}})


async def test_a_live_read_after_a_delete_through_the_daemon_waits_until_the_cache_lost_it() -> (
    None
):
    async with served(mode="live", timeout=10.0) as (rig, client):
        rig.resource.deleted("default", "a", deleted_status("a"))
        answers = [asyncio.create_task(client.get(path)) for path in (PODS, f"{PODS}/a")]
        rig.lw.emit("ADDED", pod("b"))  # another change first: not the delete
        await asyncio.sleep(0.05)
        assert not any(answer.done() for answer in answers)
        rig.lw.emit("DELETED", pod("a"))
        listed, got = await asyncio.gather(*answers)
        assert [i["metadata"]["name"] for i in listed.json()["items"]] == ["b"]
        assert got.status_code == 404
        assert rig.probes == 0
        # Seen: the next reads do not wait.
        assert (await client.get(f"{PODS}/b")).status_code == 200


async def test_a_delete_of_another_incarnation_or_one_not_seen_in_time_does_not_hold_reads() -> (
    None
):
    async with served(mode="live", timeout=10.0, after_write=0.1) as (rig, client):
        rig.lw.emit("MODIFIED", {**pod("a"), "metadata": {**pod("a")["metadata"], "uid": "u1"}})
        await rig.resource.wait_for(rig.lw.rv, within=5)
        # Upstream deleted a newer "a" (uid u2) the cache never held: nothing to wait for.
        rig.resource.deleted("default", "a", deleted_status("a", uid="u2"))
        response = await asyncio.wait_for(client.get(f"{PODS}/a"), 0.05)
        assert response.json()["metadata"]["uid"] == "u1"
        # Its own incarnation: waited for, but no longer than the write window.
        rig.resource.deleted("default", "a", deleted_status("a", uid="u1"))
        answer = asyncio.create_task(client.get(f"{PODS}/a"))
        await asyncio.sleep(0.02)
        assert not answer.done()
        response = await answer  # the window (0.1 s) ran out; the event never came
        assert response.status_code == 200


async def test_a_live_read_with_the_watch_down_is_proven() -> None:
    async with served(mode="live", timeout=10.0) as (rig, client):
        rig.informer.reflector.options.live_silence = 1e-6  # heard from too long ago
        rig.ahead = 1
        answer = asyncio.create_task(client.get(PODS))
        await asyncio.sleep(0.1)
        assert not answer.done()
        rig.ahead = 0
        rig.lw.emit("ADDED", pod("b"))
        response = await answer
        assert [i["metadata"]["name"] for i in response.json()["items"]] == ["a", "b"]
        assert rig.probes >= 1 and rig.reads.stats.live == 0
