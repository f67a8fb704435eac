"""Gzipped answers: who accepts them (``Accept-Encoding``), when a body is compressed, and that
what goes out — chunked, piece by piece, made in a worker thread — is one gzip member of
exactly the identity body."""

from __future__ import annotations

import asyncio
import gzip
import random
import threading
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cacheproxy.serving import JsonAnswers, Request, send_parts
from cacheproxy.serving import compression as compression_module
from cacheproxy.serving.compression import Compression, accepts_gzip


@pytest.mark.parametrize(
    ("header", "accepted"),
    [
        ("gzip", True),
        ("gzip, deflate", True),
        ("deflate, gzip;q=0.5", True),
        ("GZip", True),
        ("x-gzip", True),
        ("*", True),
        ("br, *;q=0.1", True),
        ("gzip ; q=1.0", True),
        ("", False),
        ("identity", False),
        ("deflate, br", False),
        ("gzip;q=0", False),
        ("gzip;q=0.000", False),
        ("gzip;q=0, *", False),  # named and refused: the wildcard does not bring it back
        ("*;q=0", False),
        ("gzip;q=nope", False),
        ("gzipped", False),
    ],
)
def test_accept_encoding_is_parsed_with_its_weights(header: str, accepted: bool) -> None:
    assert accepts_gzip(header) is accepted


def test_a_body_is_compressed_only_past_the_threshold_when_accepted_and_enabled() -> None:
    on = Compression(enabled=True, min_bytes=100)
    assert on.wanted("gzip", 101)
    assert not on.wanted("gzip", 100)
    assert not on.wanted("identity", 10_000)
    assert not Compression(enabled=False, min_bytes=100).wanted("gzip", 10_000)
    assert Compression().min_bytes == 128 * 1024 and Compression().level == 1


class Writer:
    """The server's body writer, recording what each call wrote."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.whole: list[bytes] = []
        """Written with a Content-Length (identity bodies)."""

    async def write(self, parts: Sequence[bytes], size: int) -> None:
        self.whole.extend(parts)

    async def write_chunk(self, parts: Sequence[bytes]) -> bool:
        self.chunks.append(b"".join(parts))
        return True


async def _respond(
    parts: Sequence[bytes], compression: Compression, *, direct: bool, accept: str = "gzip"
) -> tuple[dict[str, bytes], list[bytes], list[dict[str, Any]]]:
    """(the response's headers, its body pieces, the body messages through ``send``)."""
    messages: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        messages.append(message)

    writer = Writer()
    await send_parts(
        send,
        parts,
        writer=writer if direct else None,
        compression=compression,
        accept_encoding=accept,
    )
    start, *bodies = messages
    assert bodies[-1] == {"type": "http.response.body", "body": b"", "more_body": False}
    pieces = writer.chunks + writer.whole if direct else [m["body"] for m in bodies[:-1]]
    return dict(start["headers"]), pieces, bodies


@settings(max_examples=100, deadline=None)
@given(
    parts=st.lists(st.binary(max_size=300), max_size=40),
    chunk_bytes=st.integers(1, 2000),
    level=st.integers(1, 9),
    direct=st.booleans(),
)
def test_a_gzipped_body_decompresses_to_exactly_the_parts(
    parts: list[bytes], chunk_bytes: int, level: int, direct: bool
) -> None:
    on = Compression(enabled=True, min_bytes=0, level=level, chunk_bytes=chunk_bytes)
    body = b"".join(parts)
    headers, pieces, _ = asyncio.run(_respond(parts, on, direct=direct, accept="gzip"))
    if not body:  # nothing past the threshold of 0
        assert headers[b"content-length"] == b"0"
        return
    assert headers[b"content-encoding"] == b"gzip"
    assert headers[b"vary"] == b"Accept-Encoding"
    assert b"content-length" not in headers  # chunked: the length is known at the end only
    assert all(pieces)  # no empty chunk (an empty one would end a chunked body)
    assert gzip.decompress(b"".join(pieces)) == body


@pytest.mark.parametrize("accept", ["", "identity", "gzip;q=0"])
async def test_without_gzip_accepted_the_body_is_the_parts_as_they_are(accept: str) -> None:
    parts = [b'{"items":[', b"x" * 5000, b"]}"]
    headers, _, bodies = await _respond(
        parts, Compression(enabled=True, min_bytes=0), direct=False, accept=accept
    )
    assert b"content-encoding" not in headers
    assert headers[b"content-length"] == b"5012"
    assert b"".join(m["body"] for m in bodies) == b"".join(parts)


async def test_the_body_is_compressed_in_a_worker_thread_and_sent_as_it_is_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each batch is deflated away from the loop's thread, and written before the next batch's
    output exists: the body streams rather than being compressed whole first."""
    deflating: list[int] = []
    events: list[str] = []
    deflate = compression_module._deflate

    def recording(stream: Any, batch: list[bytes], last: bool) -> bytes:
        deflating.append(threading.get_ident())
        events.append("deflated")
        return deflate(stream, batch, last)

    monkeypatch.setattr(compression_module, "_deflate", recording)

    class Recording(Writer):
        async def write_chunk(self, parts: Sequence[bytes]) -> bool:
            events.append("written")
            return await super().write_chunk(parts)

    writer = Recording()
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    # Incompressible input: every batch makes output at once.
    parts = [bytes(range(256)) * 400 for _ in range(8)]  # 8 parts of 100 KiB
    on = Compression(enabled=True, min_bytes=0, chunk_bytes=200_000)
    await send_parts(send, parts, writer=writer, compression=on, accept_encoding="gzip")
    assert gzip.decompress(b"".join(writer.chunks)) == b"".join(parts)
    assert len(deflating) == 4
    assert threading.get_ident() not in deflating
    assert events.index("written") < len(events) - 2  # the first piece out before the last


@pytest.fixture
def deflated(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size of each batch the worker thread compresses, as it compresses them."""
    batches: list[int] = []
    deflate = compression_module._deflate

    def counting(stream: Any, batch: list[bytes], last: bool) -> bytes:
        batches.append(sum(map(len, batch)))
        return deflate(stream, batch, last)

    monkeypatch.setattr(compression_module, "_deflate", counting)
    return batches


class Leaving(Writer):
    """A body writer whose client takes ``reads`` chunks, then is gone."""

    def __init__(self, reads: int) -> None:
        super().__init__()
        self.reads = reads

    async def write_chunk(self, parts: Sequence[bytes]) -> bool:
        if self.reads == 0:
            return False
        self.reads -= 1
        return await super().write_chunk(parts)


_INCOMPRESSIBLE = [random.Random(0).randbytes(100_000) for _ in range(20)]
"""20 batches of ``chunk_bytes=100_000``, each making a piece of output at once."""


@pytest.mark.parametrize("reads", [0, 1])
async def test_no_more_pieces_are_made_once_the_client_is_gone(
    reads: int, deflated: list[int]
) -> None:
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    writer = Leaving(reads)
    on = Compression(enabled=True, min_bytes=0, chunk_bytes=100_000)
    await send_parts(send, _INCOMPRESSIBLE, writer=writer, compression=on, accept_encoding="gzip")
    assert len(writer.chunks) == reads
    assert len(deflated) == reads + 2  # the pieces written, the one refused, the one being made
    assert sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}


async def test_no_more_pieces_are_made_once_send_raises(deflated: list[int]) -> None:
    bodies: list[bytes] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            if bodies:
                raise ConnectionResetError
            bodies.append(message["body"])

    on = Compression(enabled=True, min_bytes=0, chunk_bytes=100_000)
    with pytest.raises(ConnectionResetError):
        await send_parts(send, _INCOMPRESSIBLE, compression=on, accept_encoding="gzip")
    assert len(deflated) == 3  # the piece sent, the one send raised on, the one being made


async def test_whole_json_answers_are_gzipped_by_the_given_compression() -> None:
    answers = JsonAnswers()
    body = b'{"kind":"Pod","data":"%s"}' % (b"y" * 3000)
    for accept, compressed in (("gzip", True), ("", False)):
        sent: list[dict[str, Any]] = []

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)  # noqa: B023

        req = Request(
            {
                "type": "http",
                "method": "GET",
                "path": "/",
                "headers": [(b"accept-encoding", accept.encode())],
            },
            _no_receive,
        )
        await answers.send(send, req, body, compression=Compression(enabled=True, min_bytes=1000))
        headers = dict(sent[0]["headers"])
        out = b"".join(m.get("body", b"") for m in sent[1:])
        if compressed:
            assert headers[b"content-encoding"] == b"gzip"
            assert b"content-length" not in headers
            assert gzip.decompress(out) == body
        else:
            assert b"content-encoding" not in headers
            assert out == body


async def _no_receive() -> dict[str, Any]:
    raise AssertionError("nothing is read")


def test_auto_compresses_for_distant_clients_only() -> None:
    auto = Compression(min_bytes=100)
    assert auto.enabled is None  # the default
    assert auto.wanted("gzip", 10_000)
    assert not auto.wanted("gzip", 10_000, loopback=True)
    assert Compression(enabled=True, min_bytes=100).wanted("gzip", 10_000, loopback=True)
    assert not Compression(enabled=False, min_bytes=100).wanted("gzip", 10_000)


@pytest.mark.parametrize(
    ("client", "loopback"),
    [
        (("127.0.0.1", 5000), True),
        (("::1", 5000), True),
        (("10.1.2.3", 5000), False),
        (("fd00::5", 5000), False),
        (None, True),  # a Unix socket
    ],
)
def test_a_request_knows_whether_its_client_is_on_this_machine(
    client: tuple[str, int] | None, loopback: bool
) -> None:
    from cacheproxy.serving.asgi import Request

    scope = {"type": "http", "method": "GET", "path": "/", "headers": [], "client": client}

    async def receive() -> dict[str, object]:
        return {"type": "http.disconnect"}

    assert Request(scope, receive).loopback is loopback


@pytest.mark.parametrize("reads", [1, 100])
async def test_groups_are_made_in_the_worker_as_the_gzip_stream_needs_them(reads: int) -> None:
    """A body given as groups (a compressed store's list) is made one group at a time in the
    worker thread, never ahead of what is sent, and gzips to the groups joined."""
    made: list[int] = []

    def groups() -> Any:
        for i, part in enumerate(_INCOMPRESSIBLE):
            assert threading.current_thread() is not threading.main_thread(), "made on the loop"
            made.append(i)
            yield [part[:50_000], memoryview(part)[50_000:]]

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    writer = Leaving(reads)
    on = Compression(enabled=True, min_bytes=0)
    await compression_module.send_gzipped(send, groups(), [], compression=on, writer=writer)
    if reads >= len(_INCOMPRESSIBLE):
        assert gzip.decompress(b"".join(writer.chunks)) == b"".join(_INCOMPRESSIBLE)
        assert made == list(range(len(_INCOMPRESSIBLE)))
    else:
        assert made == list(range(reads + 2))  # written, refused, and the one being made
    assert sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}
