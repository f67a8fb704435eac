"""Real clients read gzipped lists through the daemon: kubectl (oldest and newest pinned) and the
official Python client ask for gzip, get it for a list past 128 KiB, and read the same pods the
simulator holds; the raw gzip body decompresses to exactly the identity answer, and watches stay
identity (as the API server's)."""

from __future__ import annotations

import asyncio
import gzip
import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from kubernetes import client as kube_client

from cacheproxy.daemon.config.model import CompressionSettings
from cacheproxy.daemon.runtime import Daemon
from cacheproxy.sim import SimServer, Simulator
from cacheproxy.sim.workload import DemoSpec, demo_objects
from tests.integration.clients import run_kubectl
from tests.integration.daemon_support import daemon_for
from tests.support import serving

PODS = 400
"""Enough demo pods for a list well past the API server's 128 KiB threshold."""


@pytest.fixture
def big_sim() -> Simulator:
    sim = Simulator()
    sim.load(demo_objects(DemoSpec(pods=PODS)))
    return sim


@pytest.fixture
async def big_server(big_sim: Simulator) -> AsyncIterator[SimServer]:
    async with serving(big_sim) as (server, _):
        yield server


@pytest.fixture
async def daemon(big_server: SimServer) -> AsyncIterator[Daemon]:
    async with daemon_for(big_server.url, compression=CompressionSettings(enabled=True)) as d:
        yield d


def sim_keys(sim: Simulator) -> list[tuple[str, str]]:
    return [
        (s.obj["metadata"]["namespace"], s.obj["metadata"]["name"])
        for s in sim.store.iter_range(sim.resource("pods"), None)
    ]


def keys(doc: dict[str, Any]) -> list[tuple[str, str]]:
    return [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in doc["items"]]


async def _raw(daemon: Daemon, path: str, encoding: str) -> tuple[httpx.Headers, bytes]:
    """A GET's headers and body as they came over the wire (not decoded)."""
    async with (
        httpx.AsyncClient(base_url=daemon.url, timeout=10) as c,
        c.stream("GET", path, headers={"Accept-Encoding": encoding}) as response,
    ):
        assert response.status_code == 200
        return response.headers, b"".join([chunk async for chunk in response.aiter_raw()])


async def test_the_wire_body_is_the_identity_list_gzipped(daemon: Daemon) -> None:
    plain_headers, plain = await _raw(daemon, "/api/v1/pods", "identity")
    assert "content-encoding" not in plain_headers
    assert int(plain_headers["content-length"]) == len(plain) > 128 * 1024
    headers, body = await _raw(daemon, "/api/v1/pods", "gzip")
    assert headers["content-encoding"] == "gzip"
    assert headers["vary"] == "Accept-Encoding"
    assert headers["transfer-encoding"] == "chunked" and "content-length" not in headers
    assert gzip.decompress(body) == plain
    assert len(body) * 4 < len(plain)
    small_headers, small = await _raw(daemon, "/api/v1/pods?limit=5", "gzip")
    assert "content-encoding" not in small_headers and len(orjson.loads(small)["items"]) == 5


async def test_a_watch_stays_identity_when_gzip_is_accepted(daemon: Daemon) -> None:
    async with (
        httpx.AsyncClient(base_url=daemon.url, timeout=10) as c,
        c.stream(
            "GET",
            "/api/v1/pods?watch=1&resourceVersion=0&timeoutSeconds=1",
            headers={"Accept-Encoding": "gzip"},
        ) as response,
    ):
        assert "content-encoding" not in response.headers
        first = await anext(response.aiter_raw())
        assert first.startswith(b'{"type":"ADDED"')


@pytest.mark.kubectl
async def test_kubectl_reads_the_gzipped_list(
    kubectl: str, daemon: Daemon, big_sim: Simulator, tmp_path: Path
) -> None:
    code, out, err = await run_kubectl(
        kubectl, daemon.url, tmp_path, "get", "pods", "-A", "-o", "json", "-v=8"
    )
    assert code == 0, err
    assert keys(orjson.loads(out)) == sim_keys(big_sim)
    # Go's transport asks for gzip on its own and, decoding it, drops Content-Encoding from
    # what kubectl logs: the list's Vary says it was compressed.
    pods_answer = err[err.index(daemon.url + "/api/v1/pods") :]
    assert "Vary: Accept-Encoding" in pods_answer[: pods_answer.index("Response Body")]
    code, out, err = await run_kubectl(kubectl, daemon.url, tmp_path, "get", "pods", "-A")
    assert code == 0, err
    assert len(out.splitlines()) == PODS + 1  # a Table, gzipped too: header and a row per pod


@pytest.fixture
def core_v1(daemon: Daemon) -> Iterator[kube_client.CoreV1Api]:
    config = kube_client.Configuration()
    config.host = daemon.url
    with kube_client.ApiClient(config) as api_client:
        api_client.set_default_header("Accept-Encoding", "gzip")
        yield kube_client.CoreV1Api(api_client)


async def test_the_python_client_reads_the_gzipped_list(
    core_v1: kube_client.CoreV1Api, big_sim: Simulator
) -> None:
    pods = await asyncio.to_thread(core_v1.list_pod_for_all_namespaces)
    assert [(p.metadata.namespace, p.metadata.name) for p in pods.items] == sim_keys(big_sim)

    def read_raw() -> tuple[str, bytes]:
        """The list unparsed: urllib3 decodes the gzip it got (read here, off the loop that
        serves it)."""
        response = core_v1.list_pod_for_all_namespaces(_preload_content=False)
        return response.headers["Content-Encoding"], response.data

    encoding, data = await asyncio.to_thread(read_raw)
    assert encoding == "gzip"
    assert keys(orjson.loads(data)) == sim_keys(big_sim)


async def test_a_head_of_a_gzipped_list_ends_cleanly_with_no_body(
    daemon: Daemon, caplog: pytest.LogCaptureFixture
) -> None:
    async with httpx.AsyncClient(base_url=daemon.url, timeout=10) as c:
        head = await c.head("/api/v1/pods", headers={"Accept-Encoding": "gzip"})
        assert head.status_code == 200
        assert head.headers["content-encoding"] == "gzip" and head.content == b""
        # On the same connection: answered once the HEAD's handler is done.
        response = await c.get("/api/v1/pods?limit=5")
    assert response.status_code == 200 and len(response.json()["items"]) == 5
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
