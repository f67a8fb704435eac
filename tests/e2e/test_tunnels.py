"""Connection upgrades through the daemon to a real API server: a websocket watch of a resource
the daemon does not cache (the API server serves watches over websockets too, as older clients
and client-node's ``watch`` over a websocket ask for them) switches through the daemon, carries
the caller's identity, and delivers upstream's events."""

from __future__ import annotations

import asyncio
import json
import ssl

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus
from websockets.typing import Origin

from cacheproxy.daemon.runtime import Daemon
from cacheproxy.envtest import Cluster
from tests.e2e.support import create, fresh_namespace

pytestmark = pytest.mark.every_server

ORIGIN = Origin("http://localhost")
"""The API server's websocket handshake refuses a request without an ``Origin`` (403)."""


async def test_a_websocket_watch_of_an_uncached_resource_switches_through_the_daemon(
    daemon: Daemon, upstream: httpx.AsyncClient, cluster: Cluster
) -> None:
    ns = await fresh_namespace(upstream, "ws")
    url = daemon.url.replace("http://", "ws://")
    path = f"/api/v1/namespaces/{ns}/secrets?watch=true"
    admin = cluster.users["admin"]
    async with connect(
        url + path, additional_headers=admin.headers, origin=ORIGIN, open_timeout=30, max_size=None
    ) as ws:
        for i in range(3):
            await create(
                upstream,
                f"/api/v1/namespaces/{ns}/secrets",
                {"metadata": {"name": f"s-{i}"}, "stringData": {"k": str(i)}},
            )
        names: list[str] = []
        while len(names) < 3:
            event = json.loads(await asyncio.wait_for(ws.recv(), 30))
            assert event["type"] == "ADDED"
            names.append(event["object"]["metadata"]["name"])
    assert names == ["s-0", "s-1", "s-2"]


async def test_a_websocket_watch_the_caller_may_not_make_is_upstreams_refusal(
    daemon: Daemon, cluster: Cluster
) -> None:
    url = daemon.url.replace("http://", "ws://") + "/api/v1/secrets?watch=true"
    outcomes = []
    for target in (url, cluster.url.replace("https://", "wss://") + "/api/v1/secrets?watch=true"):
        context = ssl.create_default_context(cafile=str(cluster.ca_file))
        with pytest.raises(InvalidStatus) as refused:
            async with connect(
                target,
                additional_headers=cluster.users["nobody"].headers,
                origin=ORIGIN,
                open_timeout=30,
                ssl=context if target.startswith("wss") else None,
            ):
                pass
        response = refused.value.response
        outcomes.append((response.status_code, json.loads(response.body)))
    through, direct = outcomes
    assert through == direct
    assert through[0] == 403
