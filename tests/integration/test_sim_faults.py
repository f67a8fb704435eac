"""Fault injection: from Python and over the HTTP control path, as clients see it."""

from __future__ import annotations

import asyncio

import httpx
import orjson

from cacheproxy.sim import SimServer, Simulator


async def _lines(response: httpx.Response) -> list[bytes]:
    out = []
    async for chunk in response.aiter_bytes():
        out.append(chunk)
    return b"".join(out).splitlines()


async def test_injected_429_carries_retry_after_then_requests_succeed_again(
    client: httpx.AsyncClient, sim: Simulator
) -> None:
    r = await client.post(
        "/_sim/fail", json={"verb": "list", "code": 429, "count": 1, "retryAfter": 3}
    )
    assert r.status_code == 200
    r = await client.get("/api/v1/pods")
    assert r.status_code == 429
    assert r.headers["retry-after"] == "3"
    assert r.json()["reason"] == "TooManyRequests"
    assert r.json()["details"] == {"retryAfterSeconds": 3}
    assert (await client.get("/api/v1/pods")).status_code == 200


async def test_injected_500_on_get(client: httpx.AsyncClient, sim: Simulator) -> None:
    sim.faults.fail_next("get", 500)
    r = await client.get("/api/v1/namespaces/default")
    assert r.status_code == 500
    assert r.json()["reason"] == "InternalError"
    assert (await client.get("/api/v1/namespaces/default")).status_code == 200


async def test_injected_watch_410_is_an_in_stream_error_event(
    client: httpx.AsyncClient, sim: Simulator
) -> None:
    sim.faults.fail_next("watch", 410)
    async with client.stream("GET", f"/api/v1/pods?watch=1&resourceVersion={sim.store.rv}") as r:
        assert r.status_code == 200
        lines = await _lines(r)
    assert len(lines) == 1
    event = orjson.loads(lines[0])
    assert event["type"] == "ERROR"
    assert event["object"]["code"] == 410 and event["object"]["reason"] == "Expired"


async def test_compaction_makes_an_old_resource_version_too_old(
    client: httpx.AsyncClient, sim: Simulator
) -> None:
    old_rv = sim.store.rv
    sim.store.create(
        sim.resource("configmaps"), {"metadata": {"name": "a", "namespace": "default"}}
    )
    assert (await client.post("/_sim/compact")).status_code == 200
    async with client.stream("GET", f"/api/v1/configmaps?watch=1&resourceVersion={old_rv}") as r:
        lines = await _lines(r)
    event = orjson.loads(lines[0])
    assert event["type"] == "ERROR"
    assert event["object"]["message"].startswith(f"too old resource version: {old_rv} (")


async def _wait_for_watchers(sim: Simulator, n: int) -> None:
    for _ in range(500):
        if sum(1 for _ in sim.store.watchers()) >= n:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the watch was never registered")


async def test_end_watches_closes_open_streams(client: httpx.AsyncClient, sim: Simulator) -> None:
    async with client.stream("GET", f"/api/v1/pods?watch=1&resourceVersion={sim.store.rv}") as r:
        await _wait_for_watchers(sim, 1)
        ended = (await client.post("/_sim/end-watches")).json()["ended"]
        assert ended == 1
        lines = await asyncio.wait_for(_lines(r), timeout=5)
    assert lines == []


async def test_garbage_and_truncated_stream_faults(
    client: httpx.AsyncClient, sim: Simulator
) -> None:
    cms = sim.resource("configmaps")
    await client.post("/_sim/stream-fault", json={"fault": "garbage"})
    async with client.stream("GET", "/api/v1/configmaps?watch=1") as r:
        await _wait_for_watchers(sim, 1)
        sim.store.create(cms, {"metadata": {"name": "g", "namespace": "default"}})
        it = r.aiter_lines()
        try:
            first = await asyncio.wait_for(it.__anext__(), timeout=5)
            second = await asyncio.wait_for(it.__anext__(), timeout=5)
        finally:
            await it.aclose()
    assert first == "{this is not json"
    assert orjson.loads(second)["object"]["metadata"]["name"] == "g"

    sim.faults.next_watch_stream("truncate")
    async with client.stream("GET", "/api/v1/configmaps?watch=1") as r:
        body = b""
        try:
            async for chunk in r.aiter_bytes():
                body += chunk
        except httpx.RemoteProtocolError:
            pass  # a cut stream may also surface as an incomplete chunked body
    assert body and not body.endswith(b"\n")
    try:
        orjson.loads(body)
    except orjson.JSONDecodeError:
        pass
    else:
        raise AssertionError("a truncated line must not parse")


async def test_silent_watch_sends_nothing_until_its_timeout(
    client: httpx.AsyncClient, sim: Simulator
) -> None:
    sim.faults.next_watch_stream("silent")
    async with client.stream(
        "GET", "/api/v1/namespaces?watch=1&timeoutSeconds=1&allowWatchBookmarks=true"
    ) as r:
        sim.store.create(
            sim.resource("configmaps"), {"metadata": {"name": "s", "namespace": "default"}}
        )
        lines = await asyncio.wait_for(_lines(r), timeout=10)
    assert lines == []


async def test_latency_delays_every_api_request(client: httpx.AsyncClient, sim: Simulator) -> None:
    await client.post("/_sim/latency", json={"seconds": 0.2})
    loop = asyncio.get_running_loop()
    start = loop.time()
    assert (await client.get("/api/v1/namespaces")).status_code == 200
    assert loop.time() - start >= 0.2  # a lower bound: the fault took effect
    await client.post("/_sim/clear")
    assert sim.faults.latency == 0


async def test_restart_drops_connections_keeps_objects_and_loses_history(
    sim_server: SimServer,
) -> None:
    sim = sim_server.sim
    cms = sim.resource("configmaps")
    sim.store.create(cms, {"metadata": {"name": "before", "namespace": "default"}})
    before_rv = sim.store.rv
    port = sim_server.port
    async with httpx.AsyncClient(base_url=sim_server.url, timeout=10) as c:
        async with c.stream("GET", f"/api/v1/configmaps?watch=1&resourceVersion={before_rv}") as r:
            await _wait_for_watchers(sim, 1)
            await c.post("/_sim/restart")
            lines = await asyncio.wait_for(_lines(r), timeout=10)
        assert lines == []
    for _ in range(200):
        if sim_server.restarts == 1 and sim_server.started:
            break
        await asyncio.sleep(0.02)
    assert sim_server.port == port
    async with httpx.AsyncClient(base_url=sim_server.url, timeout=10) as c:
        r = await c.get("/api/v1/namespaces/default/configmaps/before")
        assert r.status_code == 200
        async with c.stream(
            "GET", f"/api/v1/configmaps?watch=1&resourceVersion={before_rv - 1}"
        ) as r:
            lines = await _lines(r)
    assert orjson.loads(lines[0])["object"]["code"] == 410


async def test_stats_count_requests_by_verb_and_resource(client: httpx.AsyncClient) -> None:
    await client.get("/api/v1/pods")
    await client.get("/api/v1/namespaces/default")
    stats = (await client.get("/_sim/stats")).json()
    assert stats["requests"]["list"] == 1
    assert stats["requests"]["list pods"] == 1
    assert stats["requests"]["get namespaces"] == 1


async def test_a_watch_from_a_future_resource_version_times_out_with_504() -> None:
    from cacheproxy.sim import SimConfig

    sim = Simulator(config=SimConfig(rv_wait=0.2))
    async with SimServer(sim) as server, httpx.AsyncClient(base_url=server.url) as c:
        r = await c.get(f"/api/v1/pods?watch=1&resourceVersion={sim.store.rv + 100}")
    assert r.status_code == 504
    assert r.headers["retry-after"] == "1"
    assert r.json()["details"]["causes"] == [
        {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
    ]


async def test_a_watch_from_a_future_resource_version_starts_once_it_is_reached(
    client: httpx.AsyncClient, sim: Simulator
) -> None:
    cms = sim.resource("configmaps")
    target = sim.store.rv + 1

    async def write_soon() -> None:
        await asyncio.sleep(0.1)
        sim.store.create(cms, {"metadata": {"name": "first", "namespace": "default"}})
        await asyncio.sleep(0.1)
        sim.store.create(cms, {"metadata": {"name": "second", "namespace": "default"}})

    writer = asyncio.create_task(write_soon())
    async with client.stream("GET", f"/api/v1/configmaps?watch=1&resourceVersion={target}") as r:
        assert r.status_code == 200
        it = r.aiter_lines()
        try:
            event = orjson.loads(await asyncio.wait_for(it.__anext__(), timeout=5))
        finally:
            await it.aclose()
    await writer
    # Events strictly after the requested RV: "first" is at the RV itself.
    assert event["object"]["metadata"]["name"] == "second"
