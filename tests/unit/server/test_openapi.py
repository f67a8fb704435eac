"""The server's OpenAPI documents over a fake upstream (virtual time): fetched once however many
ask at once, kept and re-checked by ETag after a while, the last one served while upstream is
away, the v3 index trimmed to the served group versions, a document asked for by its hash kept
as long as that hash is current, conditional requests and gzip."""

from __future__ import annotations

import asyncio
import gzip
import logging

import httpx
import orjson
import pytest

from cacheproxy.errors import TransportError
from cacheproxy.kube.request import split_path
from cacheproxy.kube.resources import GroupVersion
from cacheproxy.server.openapi import FRESH_SECONDS, Fetched, OpenApiDocuments
from cacheproxy.serving import Receive, Request, Scope, Send, send_error

INDEX = {
    "paths": {
        "api/v1": {"serverRelativeURL": "/openapi/v3/api/v1?hash=AAA"},
        "apis/apps/v1": {"serverRelativeURL": "/openapi/v3/apis/apps/v1?hash=BBB"},
        "apis/rbac.authorization.k8s.io/v1": {"serverRelativeURL": "/openapi/v3/apis/rbac?hash=C"},
        "version": {"serverRelativeURL": "/openapi/v3/version?hash=D"},
    }
}


class FakeUpstream:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str]] = []
        self.down = False
        self.v2 = b'{"swagger":"2.0"}'
        self.v2_etag = '"V2"'
        self.gate: asyncio.Event | None = None

    async def fetch(self, target: str, *, accept: str, etag: str = "") -> Fetched:
        self.calls.append((target, accept, etag))
        if self.gate is not None:
            await self.gate.wait()
        if self.down:
            raise TransportError("connection refused")
        if target == "/openapi/v2":
            if etag == self.v2_etag:
                return Fetched(304, b"", etag=self.v2_etag)
            return Fetched(200, self.v2, accept, self.v2_etag)
        if target == "/openapi/v3":
            return Fetched(200, orjson.dumps(INDEX), "text/plain; charset=utf-8")
        if target == "/openapi/v3/api/v1?hash=AAA":
            return Fetched(200, b'{"core":1}', "application/json", '"AAA"', "public, immutable")
        if target.startswith("/openapi/v3/api/v1?hash="):
            where = "/openapi/v3/api/v1?hash=AAA"
            return Fetched(301, b"", "application/json", '"AAA"', "no-cache, private", where)
        return Fetched(404, b'{"kind":"Status","code":404}', "application/json")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class App:
    """An ASGI app answering /openapi/… from the documents (for httpx's ASGI transport)."""

    def __init__(self, docs: OpenApiDocuments) -> None:
        self.docs = docs

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        req = Request(scope, receive)
        try:
            await self.docs.serve(req, send, split_path(scope["path"]))
        except Exception as exc:
            await send_error(req, send, exc, logger=logging.getLogger(__name__))


@pytest.fixture
def upstream() -> FakeUpstream:
    return FakeUpstream()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def client(upstream: FakeUpstream, clock: Clock) -> httpx.AsyncClient:
    served = [GroupVersion("", "v1"), GroupVersion("apps", "v1")]
    docs = OpenApiDocuments(upstream, served=lambda: served, clock=clock)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=App(docs)), base_url="http://c")


async def test_concurrent_askers_share_one_fetch(
    client: httpx.AsyncClient, upstream: FakeUpstream
) -> None:
    upstream.gate = asyncio.Event()
    asking = [asyncio.create_task(client.get("/openapi/v2")) for _ in range(5)]
    await asyncio.sleep(0.01)
    upstream.gate.set()
    answers = await asyncio.gather(*asking)
    assert {a.content for a in answers} == {upstream.v2}
    assert len(upstream.calls) == 1


async def test_a_document_is_kept_then_rechecked_by_its_etag(
    client: httpx.AsyncClient, upstream: FakeUpstream, clock: Clock
) -> None:
    assert (await client.get("/openapi/v2")).content == upstream.v2
    clock.now += FRESH_SECONDS - 1
    assert (await client.get("/openapi/v2")).content == upstream.v2
    assert len(upstream.calls) == 1
    clock.now += 2
    again = await client.get("/openapi/v2")
    assert again.status_code == 200
    assert again.content == upstream.v2
    assert upstream.calls[-1] == ("/openapi/v2", "application/json", '"V2"')


async def test_json_and_protobuf_are_kept_apart(
    client: httpx.AsyncClient, upstream: FakeUpstream
) -> None:
    await client.get("/openapi/v2", headers={"Accept": "application/json"})
    proto = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
    await client.get("/openapi/v2", headers={"Accept": proto})
    assert [c[1] for c in upstream.calls] == ["application/json", proto]


async def test_the_last_document_is_served_while_upstream_is_away(
    client: httpx.AsyncClient, upstream: FakeUpstream, clock: Clock
) -> None:
    await client.get("/openapi/v2")
    upstream.down = True
    clock.now += FRESH_SECONDS * 10
    kept = await client.get("/openapi/v2")
    assert kept.status_code == 200
    assert kept.content == upstream.v2


async def test_without_a_document_an_unreachable_upstream_is_a_503(
    client: httpx.AsyncClient, upstream: FakeUpstream
) -> None:
    upstream.down = True
    response = await client.get("/openapi/v2")
    assert response.status_code == 503
    assert response.headers["retry-after"] == "1"
    body = response.json()
    assert body["reason"] == "ServiceUnavailable"
    assert "cannot fetch /openapi/v2 from the API server: connection refused" in body["message"]


async def test_the_index_lists_only_the_served_group_versions(client: httpx.AsyncClient) -> None:
    response = await client.get("/openapi/v3")
    assert response.status_code == 200
    assert response.json() == {
        "paths": {k: v for k, v in INDEX["paths"].items() if k in ("api/v1", "apis/apps/v1")}
    }


async def test_a_document_asked_for_by_its_hash_is_kept(
    client: httpx.AsyncClient, upstream: FakeUpstream, clock: Clock
) -> None:
    first = await client.get("/openapi/v3/api/v1", params={"hash": "AAA"})
    assert first.status_code == 200
    assert first.headers["cache-control"] == "public, immutable"
    clock.now += FRESH_SECONDS * 100
    assert (await client.get("/openapi/v3/api/v1", params={"hash": "AAA"})).status_code == 200
    assert len(upstream.calls) == 1
    stale = await client.get("/openapi/v3/api/v1", params={"hash": "OLD"})
    assert stale.status_code == 301
    assert stale.headers["location"] == "/openapi/v3/api/v1?hash=AAA"


async def test_a_group_version_not_served_is_not_fetched(
    client: httpx.AsyncClient, upstream: FakeUpstream
) -> None:
    response = await client.get("/openapi/v3/apis/rbac.authorization.k8s.io/v1")
    assert response.status_code == 404
    assert response.json()["kind"] == "Status"
    assert upstream.calls == []


async def test_if_none_match_is_a_304(client: httpx.AsyncClient) -> None:
    first = await client.get("/openapi/v2")
    again = await client.get("/openapi/v2", headers={"If-None-Match": first.headers["etag"]})
    assert again.status_code == 304
    assert again.content == b""


async def test_large_documents_are_gzipped_for_who_accepts_it(
    client: httpx.AsyncClient, upstream: FakeUpstream
) -> None:
    upstream.v2 = orjson.dumps(
        {"swagger": "2.0", "definitions": {f"d{i}": {} for i in range(20000)}}
    )
    raw = await client.get("/openapi/v2", headers={"Accept-Encoding": "identity"})
    assert "content-encoding" not in raw.headers
    zipped = await client.get("/openapi/v2", headers={"Accept-Encoding": "gzip"})
    assert zipped.headers["content-encoding"] == "gzip"
    assert zipped.content == upstream.v2  # httpx decoded it
    assert int(zipped.headers["content-length"]) == len(gzip.compress(upstream.v2, 1))
