"""Gzipped lists against the real API server: asked for gzip, the API server and the daemon both
compress a list past 128 KiB, and the two bodies decompress to the same items (the daemon's
without ``managedFields``, its default transform); small answers (a page, the same list as
metadata only) are identity from both. The daemon here compresses for every client
(``server.compression.enabled: true``); by default (``auto``) it answers its loopback clients —
a sidecar's program — as they are, which a last test shows."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from cacheproxy.envtest import Cluster
from tests.e2e.support import (
    converged,
    create,
    daemon_over,
    fresh_namespace,
    without_managed_fields,
)

pytestmark = pytest.mark.every_server

CONFIGMAPS = 40
PAYLOAD = "x" * 6000
"""40 ConfigMaps of ~6 KB each: a list of ~250 KB, past the threshold on both sides."""
METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"


async def raw_get(
    client: httpx.AsyncClient, path: str, *, accept: str = "application/json", limit: str = ""
) -> tuple[httpx.Headers, bytes]:
    """``GET path`` asking for gzip: the headers and the body as they came over the wire."""
    params = {"limit": limit} if limit else {}
    headers = {"Accept-Encoding": "gzip", "Accept": accept}
    async with client.stream("GET", path, params=params, headers=headers) as response:
        assert response.status_code == 200
        return response.headers, b"".join([chunk async for chunk in response.aiter_raw()])


def decoded(headers: httpx.Headers, body: bytes, *, gzipped: bool = True) -> dict[str, Any]:
    assert headers.get("content-encoding") == ("gzip" if gzipped else None)
    doc: dict[str, Any] = orjson.loads(gzip.decompress(body) if gzipped else body)
    return doc


@pytest.fixture
async def gzipping(cluster: Cluster, tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    """A daemon that gzips for every client, loopback ones included."""
    extra = {"server.compression.enabled": True}
    async with (
        daemon_over(cluster, tmp_path, extra=extra) as daemon,
        httpx.AsyncClient(base_url=daemon.url, timeout=30) as client,
    ):
        yield client


async def test_our_gzip_list_decompresses_to_the_items_of_the_api_servers(
    upstream: httpx.AsyncClient, gzipping: httpx.AsyncClient, proxy: httpx.AsyncClient
) -> None:
    default = proxy
    proxy = gzipping
    namespace = await fresh_namespace(upstream, "gzip")
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    await asyncio.gather(
        *(
            create(upstream, path, {"metadata": {"name": f"cm-{i:02d}"}, "data": {"d": PAYLOAD}})
            for i in range(CONFIGMAPS)
        )
    )
    up, down = await converged(upstream, proxy, path)
    assert len(down["items"]) == len(up["items"]) == CONFIGMAPS

    theirs = decoded(*await raw_get(upstream, path))
    ours = decoded(*await raw_get(proxy, path))
    assert ours["items"] == without_managed_fields(theirs)["items"]
    assert (ours["kind"], ours["apiVersion"]) == (theirs["kind"], theirs["apiVersion"])
    full_items = ours["items"]

    headers, _ = await raw_get(proxy, path)
    assert headers["vary"] == "Accept-Encoding"

    # The metadata of the same list is small: identity from both.
    theirs = decoded(*await raw_get(upstream, path, accept=METADATA_LIST), gzipped=False)
    ours = decoded(*await raw_get(proxy, path, accept=METADATA_LIST), gzipped=False)
    assert ours["kind"] == theirs["kind"] == "PartialObjectMetadataList"
    assert ours["items"] == without_managed_fields(theirs)["items"]

    # A page under the threshold: identity from both.
    for client in (upstream, proxy):
        headers, body = await raw_get(client, path, limit="2")
        assert "content-encoding" not in headers
        assert len(orjson.loads(body)["items"]) == 2

    # The default daemon (compression auto) answers a loopback client as it is.
    headers, body = await raw_get(default, path)
    assert "content-encoding" not in headers
    assert orjson.loads(body)["items"] == full_items
