"""HTTP/2 vs HTTP/1.1: how many connections the upstream client opens for concurrent watches.

kube-apiserver offers ``h2`` by ALPN; our simulator's server (uvicorn) does not. To see the HTTP/2
side, the simulator's ASGI app is served by Hypercorn (an HTTP/2-capable ASGI server) over TLS.
Which connection a response came on is read from httpx's ``network_stream`` extension: the
client-side address of the socket.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import hypercorn.asyncio as hypercorn_asyncio
import hypercorn.config as hypercorn_config
import pytest

from cacheproxy.informer import WatchRequest
from cacheproxy.kube.resources import builtin
from cacheproxy.sim import SimServer, Simulator
from cacheproxy.sim.testpki import TestPKI, generate_pki
from cacheproxy.upstream import ApiListerWatcher, UpstreamConfig, build_client, list_all

RESOURCES = ("pods", "configmaps", "nodes")


class Connections:
    """Records, for every response, its HTTP version and the local address of its socket."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, object]] = []

    async def __call__(self, response: httpx.Response) -> None:
        stream = response.extensions["network_stream"]
        self.seen.append((response.http_version, stream.get_extra_info("client_addr")))

    @property
    def versions(self) -> set[str]:
        return {version for version, _ in self.seen}

    @property
    def sockets(self) -> set[object]:
        return {addr for _, addr in self.seen}


@pytest.fixture
def pki(tmp_path: Path) -> TestPKI:
    return generate_pki(tmp_path / "pki")


@pytest.fixture
async def h2_server_url(demo_sim: Simulator, pki: TestPKI) -> AsyncIterator[str]:
    """The simulator behind Hypercorn, offering h2 and http/1.1 by ALPN, on a socket bound to
    port 0 (handed over as ``fd://``, so no other process can take the port in between)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    url = f"https://127.0.0.1:{sock.getsockname()[1]}"
    config = hypercorn_config.Config()
    config.bind = [f"fd://{sock.detach()}"]  # Hypercorn owns (and closes) the socket now
    config.certfile = str(pki.server_cert)
    config.keyfile = str(pki.server_key)
    config.alpn_protocols = ["h2", "http/1.1"]
    config.loglevel = "WARNING"
    config.graceful_timeout = 1
    stop = asyncio.Event()
    server = asyncio.create_task(
        hypercorn_asyncio.serve(demo_sim, config, shutdown_trigger=stop.wait), name="hypercorn"
    )
    try:
        yield url  # the socket listens already: connections queue until Hypercorn accepts
    finally:
        demo_sim.end_watches()
        stop.set()
        await server


async def open_watches_and_list(client: httpx.AsyncClient, connections: Connections) -> int:
    """Three watches open at once, then a paged list; returns the number of listed nodes."""
    client.event_hooks["response"].append(connections)
    lws = [ApiListerWatcher(client, builtin(name)) for name in RESOURCES]
    request = WatchRequest(resource_version="0", timeout_seconds=30)
    async with lws[0].watch(request), lws[1].watch(request), lws[2].watch(request):
        listed = await list_all(lws[2], resource_version="0", page_size=2)
    return len(listed.items)


async def test_over_http2_concurrent_watches_and_lists_share_one_connection(
    h2_server_url: str, pki: TestPKI
) -> None:
    connections = Connections()
    config = UpstreamConfig(server=h2_server_url, ca_file=pki.ca_cert)
    async with build_client(config, http2=True) as client:
        nodes = await open_watches_and_list(client, connections)
    assert nodes == 5
    assert len(connections.seen) == 3 + 3  # three watches, three pages
    assert connections.versions == {"HTTP/2"}
    assert len(connections.sockets) == 1


async def test_by_default_http11_even_when_the_server_offers_http2(
    h2_server_url: str, pki: TestPKI
) -> None:
    # HTTP/2 is opt-in (upstream.http2): httpcore's HTTP/2 client delays events of quiet streams
    # while another stream waits to read (see cacheproxy/upstream/client.py).
    connections = Connections()
    async with build_client(UpstreamConfig(server=h2_server_url, ca_file=pki.ca_cert)) as client:
        nodes = await open_watches_and_list(client, connections)
    assert nodes == 5
    assert connections.versions == {"HTTP/1.1"}
    assert len({addr for _, addr in connections.seen[:3]}) == 3


async def test_over_http11_each_open_watch_holds_its_own_connection(
    demo_sim: Simulator, pki: TestPKI
) -> None:
    connections = Connections()
    async with (
        SimServer(demo_sim, pki=pki) as server,
        build_client(UpstreamConfig(server=server.url, ca_file=pki.ca_cert)) as client,
    ):
        nodes = await open_watches_and_list(client, connections)
    assert nodes == 5
    assert connections.versions == {"HTTP/1.1"}
    # Three watches, each on its own socket; the pages reuse one more (or a freed one).
    assert len(connections.sockets) >= 3
    watch_sockets = {addr for _, addr in connections.seen[:3]}
    assert len(watch_sockets) == 3
