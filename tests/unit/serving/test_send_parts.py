"""A response body written as parts: the same bytes, with the right length, both ways."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cacheproxy.serving import send_parts


async def _respond(parts: Sequence[bytes], *, direct: bool) -> tuple[list[dict[str, Any]], bytes]:
    messages: list[dict[str, Any]] = []
    written: list[bytes] = []

    async def send(message: dict[str, Any]) -> None:
        messages.append(message)

    class Writer:
        async def write(self, group: Sequence[bytes], size: int) -> None:
            assert size == sum(map(len, group))
            written.extend(group)

        async def write_chunk(self, group: Sequence[bytes]) -> bool:
            raise AssertionError("a list has a Content-Length")

    await send_parts(send, parts, writer=Writer() if direct else None, chunk_bytes=7)
    body = b"".join(written) + b"".join(m.get("body", b"") for m in messages[1:])
    return messages, body


@settings(max_examples=200, deadline=None)
@given(parts=st.lists(st.binary(max_size=20), max_size=30), direct=st.booleans())
def test_the_body_is_the_parts_in_order_with_their_length(parts: list[bytes], direct: bool) -> None:
    messages, body = asyncio.run(_respond(parts, direct=direct))
    start, *bodies = messages
    assert start["type"] == "http.response.start" and start["status"] == 200
    assert (b"content-length", str(len(b"".join(parts))).encode()) in start["headers"]
    assert body == b"".join(parts)
    assert bodies[-1] == {"type": "http.response.body", "body": b"", "more_body": False}
    assert all(m["more_body"] for m in bodies[:-1])
    if direct:
        assert len(bodies) == 1  # every part went to the writer, none through send
    else:
        # Joined into pieces of about chunk_bytes: no piece holds more than one part past it.
        assert all(len(m["body"]) < 7 + 20 for m in bodies[:-1])
