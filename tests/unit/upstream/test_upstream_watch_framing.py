"""How ApiListerWatcher frames and decodes a watch body, whatever the chunking.

The body is served by an in-process fake server (``httpx.MockTransport``, httpx's test seam):
it lets a test cut the stream at any byte, which a real server does only by chance.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Sequence

import httpx
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cacheproxy.errors import ApiError, TransportError
from cacheproxy.informer import WatchEvent, WatchRequest
from cacheproxy.kube import status
from cacheproxy.kube.resources import builtin
from cacheproxy.upstream import ApiListerWatcher

EVENTS = [
    {"type": "ADDED", "object": {"kind": "Pod", "metadata": {"name": "a", "resourceVersion": "5"}}},
    {
        "type": "MODIFIED",
        "object": {"kind": "Pod", "metadata": {"name": "a", "resourceVersion": "6"}, "x": "é" * 50},
    },
    {"type": "BOOKMARK", "object": {"kind": "Pod", "metadata": {"resourceVersion": "7"}}},
    {
        "type": "DELETED",
        "object": {"kind": "Pod", "metadata": {"name": "a", "resourceVersion": "8"}},
    },
]
BODY = b"".join(orjson.dumps(e) + b"\n" for e in EVENTS)


class Chunks(httpx.AsyncByteStream):
    def __init__(self, chunks: Sequence[bytes]) -> None:
        self.chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk


async def settle() -> None:
    """Let the event loop finalize httpx's byte-stream generators left suspended by a stream that
    was abandoned mid-body (a real connection's close yields to the loop; this fake's does not)."""
    for _ in range(10):
        await asyncio.sleep(0)


async def watch(chunks: Sequence[bytes], code: int = 200) -> list[WatchEvent]:
    """The events ApiListerWatcher yields for a response body sent as ``chunks``."""

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(code, stream=Chunks(chunks))

    try:
        async with httpx.AsyncClient(
            base_url="http://upstream", transport=httpx.MockTransport(handler)
        ) as client:
            lw = ApiListerWatcher(client, builtin("pods"))
            async with lw.watch(WatchRequest(resource_version="1", timeout_seconds=60)) as events:
                return [event async for event in events]
    finally:
        await settle()


def cut(body: bytes, points: list[int]) -> list[bytes]:
    edges = [0, *sorted(set(points)), len(body)]
    return [body[a:b] for a, b in itertools.pairwise(edges) if b > a]


@settings(max_examples=200, deadline=None)
@given(points=st.lists(st.integers(min_value=1, max_value=len(BODY) - 1), max_size=30))
async def test_events_are_the_same_however_the_body_is_chunked(points: list[int]) -> None:
    events = await watch(cut(BODY, points))
    assert [(e.type, e.object) for e in events] == [(e["type"], e["object"]) for e in EVENTS]


async def test_blank_lines_and_crlf_framing_are_tolerated() -> None:
    body = b"\n" + orjson.dumps(EVENTS[0]) + b"\r\n\r\n" + orjson.dumps(EVENTS[2]) + b"\n  \n"
    events = await watch([body])
    assert [e.type for e in events] == ["ADDED", "BOOKMARK"]


async def test_an_error_event_raises_its_status_and_ends_the_stream() -> None:
    gone = status.too_old_resource_version(1, 9).status
    body = BODY + orjson.dumps({"type": "ERROR", "object": gone}) + b"\n" + BODY
    with pytest.raises(ApiError) as caught:
        await watch([body])
    assert caught.value.status == gone


async def test_an_error_event_without_a_status_is_a_transport_error() -> None:
    body = orjson.dumps({"type": "ERROR", "object": {"kind": "Pod"}}) + b"\n"
    with pytest.raises(TransportError, match="not a watch event"):
        await watch([body])


@pytest.mark.parametrize(
    "line",
    [
        b'{"type":"EXPLODED","object":{}}',
        b'{"type":"ADDED","object":"a string"}',
        b"[1,2,3]",
    ],
)
async def test_json_that_is_not_a_watch_event_is_a_transport_error(line: bytes) -> None:
    with pytest.raises(TransportError, match="not a watch event"):
        await watch([line + b"\n"])


async def test_a_line_that_is_not_json_is_a_transport_error_quoting_it() -> None:
    with pytest.raises(TransportError, match=r"not JSON .*b'<html>oops'"):
        await watch([orjson.dumps(EVENTS[0]) + b"\n<html>oops\n"])


async def test_a_body_ending_mid_line_is_a_transport_error() -> None:
    with pytest.raises(TransportError, match="middle of an event"):
        await watch([BODY, b'{"type":"ADDED","obj'])


async def test_an_http_error_answer_is_raised_when_the_watch_opens() -> None:
    body = orjson.dumps(status.forbidden(user="u", verb="watch", resource="pods").status)
    with pytest.raises(ApiError) as caught:
        await watch([body], code=403)
    assert caught.value.code == 403 and caught.value.reason == "Forbidden"


async def test_a_watch_that_is_left_early_closes_cleanly() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=Chunks([BODY] * 100))

    async with httpx.AsyncClient(
        base_url="http://upstream", transport=httpx.MockTransport(handler)
    ) as client:
        lw = ApiListerWatcher(client, builtin("pods"))
        async with lw.watch(WatchRequest(resource_version="1", timeout_seconds=60)) as events:
            first = await anext(aiter(events))
        with pytest.raises(StopAsyncIteration):  # buffered events are not handed out any more
            await anext(aiter(events))
    await settle()
    assert first.type == "ADDED"
