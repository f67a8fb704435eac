"""Lists and gets gzipped for clients that accept it: whatever the page, selector and form of the
answer (as stored, a Table, metadata only, pretty, a shard), the gzipped body decompresses to
exactly the identity answer; small answers and clients that do not accept gzip get the identity
bytes, unchanged."""

from __future__ import annotations

import asyncio
import gzip
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cacheproxy.kube.listoptions import parse_list_options
from cacheproxy.server.admission import ServedRequest
from cacheproxy.server.reads import build_query, negotiate, serve_get, serve_list
from cacheproxy.serving import Message
from cacheproxy.serving.compression import IDENTITY, Compression
from tests.unit.server.test_metadata_and_shards import LOWER, METADATA, METADATA_LIST, Rig

TABLE = "application/json;as=Table;g=meta.k8s.io;v=v1,application/json"
ALWAYS = Compression(enabled=True, min_bytes=0, chunk_bytes=300)
"""Every body compressed, in many small batches."""
FORMS: dict[str, tuple[str, dict[str, str]]] = {
    "stored": ("", {}),
    "table": (TABLE, {}),
    "metadata": (METADATA_LIST, {}),
    "pretty": ("", {"pretty": "true"}),
    "shard": ("", {"shardSelector": LOWER}),
}


def rig_of(n: int) -> Rig:
    rig = Rig()
    for i in range(n):
        rig.put(f"p{i:03d}", labels={"app": "a" if i % 3 else "b"})
    return rig


def _request(
    rig: Rig, accept: str, encoding: str, verb: str, params: dict[str, str]
) -> ServedRequest:
    req = rig.request(accept, verb=verb, **params)
    if encoding:
        req._headers["accept-encoding"] = encoding
    return req


async def answer(
    rig: Rig,
    compression: Compression,
    *,
    encoding: str = "gzip",
    accept: str = "",
    verb: str = "list",
    **params: str,
) -> tuple[dict[bytes, bytes], bytes]:
    """A list's (or get's) response headers and body as sent."""
    req = _request(rig, accept, encoding, verb, params)
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    if verb == "get":
        await serve_get(
            req,
            send,
            rig.res,
            namespace="default",
            name="p001",
            form=negotiate(req),
            compression=compression,
        )
    else:
        opts = parse_list_options(req.query)
        await serve_list(
            req,
            send,
            rig.res,
            query=build_query(req, rig.res, None, opts),
            opts=opts,
            form=negotiate(req),
            max_page_size=500,
            compression=compression,
        )
    return dict(sent[0]["headers"]), b"".join(m.get("body", b"") for m in sent[1:])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(0, 40),
    form=st.sampled_from(sorted(FORMS)),
    limit=st.integers(0, 45),
    selector=st.sampled_from(["", "app=a", "app!=a", "app in (b)"]),
    second_page=st.booleans(),
)
def test_a_gzipped_list_is_exactly_the_identity_list_compressed(
    n: int, form: str, limit: int, selector: str, second_page: bool
) -> None:
    async def check() -> None:
        rig = rig_of(n)
        accept, params = FORMS[form]
        params = dict(params)
        if limit:
            params["limit"] = str(limit)
        if selector:
            params["labelSelector"] = selector
        if second_page and limit:
            _, first = await answer(rig, IDENTITY, accept=accept, **params)
            token = _continue_of(first)
            if token:
                params["continue"] = token
        plain_headers, plain = await answer(rig, IDENTITY, accept=accept, **params)
        headers, body = await answer(rig, ALWAYS, accept=accept, **params)
        assert b"content-encoding" not in plain_headers
        assert headers[b"content-encoding"] == b"gzip"
        assert headers[b"vary"] == b"Accept-Encoding"
        assert b"content-length" not in headers
        assert gzip.decompress(body) == plain

    asyncio.run(check())


def _continue_of(body: bytes) -> str:
    doc: dict[str, Any] = orjson.loads(body)
    return str(doc["metadata"].get("continue", ""))


async def test_a_list_under_the_threshold_or_not_accepting_gzip_is_the_identity_bytes() -> None:
    rig = rig_of(30)
    _, plain = await answer(rig, IDENTITY)
    size = len(plain)
    for compression, encoding in (
        (Compression(enabled=True, min_bytes=size), "gzip"),  # not longer than the threshold
        (Compression(enabled=True, min_bytes=0), ""),
        (Compression(enabled=True, min_bytes=0), "gzip;q=0"),
        (Compression(enabled=True, min_bytes=0), "br, deflate"),
        (Compression(enabled=False, min_bytes=0), "gzip"),
    ):
        headers, body = await answer(rig, compression, encoding=encoding)
        assert b"content-encoding" not in headers, (compression, encoding)
        assert headers[b"content-length"] == str(size).encode()
        assert body == plain
    headers, body = await answer(
        rig, Compression(enabled=True, min_bytes=size - 1), encoding="deflate, *"
    )
    assert headers[b"content-encoding"] == b"gzip"
    assert gzip.decompress(body) == plain


async def test_a_large_get_is_gzipped_as_a_list_is() -> None:
    rig = rig_of(3)
    for accept, params in (("", {}), (METADATA, {}), (TABLE, {}), ("", {"pretty": "true"})):
        _, plain = await answer(rig, IDENTITY, verb="get", accept=accept, **params)
        headers, body = await answer(rig, ALWAYS, verb="get", accept=accept, **params)
        assert headers[b"content-encoding"] == b"gzip", accept
        assert gzip.decompress(body) == plain
        small, same = await answer(
            rig, Compression(enabled=True), verb="get", accept=accept, **params
        )
        assert b"content-encoding" not in small and same == plain
