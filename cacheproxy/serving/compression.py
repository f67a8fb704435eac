"""Gzip-compressed answers for clients that accept them, compressed off the event loop.

kubectl, client-go and most clients send ``Accept-Encoding: gzip``; the API server gzips a
response whose body passes 128 KiB, at level 1 (``k8s.io/apiserver`` ``responsewriters``:
level 1 costs the least CPU for a ratio within 1.1 to 1.3 times of the higher levels), and
sends it with ``Content-Encoding: gzip`` and ``Vary: Accept-Encoding``. :class:`Compression` is that
rule, a server's setting; :func:`send_gzipped` writes a body of stored parts that way.

How the CPU is kept off the loop: the parts are fed to one ``zlib`` stream in a worker thread
(``zlib`` releases the GIL while it deflates), ~``chunk_bytes`` of input per hop, and each
piece of output goes out as one HTTP chunk as soon as it is made, while the next piece is being
compressed: the loop's share is handing each piece to the transport. The body is one gzip
member over the whole list, so the items' likeness to one another (a list's objects share most
of their keys and many values) is what compresses: a member per stored entry would be built
once, but measured on 2 000 of the benchmark's pods (~7 KB each) at level 1 the list shrinks
10.5 times as one member and 3 times as members per pod: 3.5 times the bytes on the wire
(``loadtest/results/2026-12-04-gzip``).

Watches stay identity: the API server does not compress them either (its watch handler writes
frames straight to the response), and a watch's events are small, each flushed on its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import zlib
from collections.abc import AsyncGenerator, Iterator, Sequence
from dataclasses import dataclass

from cacheproxy.serving.asgi import BodyPart, BodyWriter, Send

__all__ = [
    "API_SERVER_THRESHOLD",
    "IDENTITY",
    "Compression",
    "accepts_gzip",
    "gzip_chunks",
    "send_gzipped",
]

API_SERVER_THRESHOLD = 128 << 10
"""The API server compresses bodies longer than this (``defaultGzipThresholdBytes``)."""
Headers = Sequence[tuple[bytes, bytes]]
GZIP_WBITS = 16 + zlib.MAX_WBITS
"""A gzip member (header and CRC trailer) rather than a bare zlib stream."""


@dataclass(frozen=True, slots=True)
class Compression:
    """When and how a server gzips its answers."""

    enabled: bool | None = None
    """True: for every client that accepts gzip; False: never; None (auto): for those clients
    unless they are on this machine (loopback), where compressing costs far more time than the
    bytes it saves (a 10 000-pod list: ~1.4 s of deflate against ~15 ms sent as it is)."""
    min_bytes: int = API_SERVER_THRESHOLD
    """Bodies longer than this are compressed (for clients that accept gzip)."""
    level: int = 1
    """zlib's level (1: fastest, as the API server; 9: smallest)."""
    chunk_bytes: int = 1 << 20
    """Input compressed per hop to the worker thread (one HTTP chunk of output each)."""

    def offered(self, accept_encoding: str, *, loopback: bool = False) -> bool:
        """Whether a client that sent this ``Accept-Encoding`` (from a loopback address or not)
        gets bodies past ``min_bytes`` gzipped."""
        if self.enabled is False or (self.enabled is None and loopback):
            return False
        return accepts_gzip(accept_encoding)

    def wanted(self, accept_encoding: str, length: int, *, loopback: bool = False) -> bool:
        """Whether a body of ``length`` bytes goes out gzipped to a client that sent this
        ``Accept-Encoding`` (from a loopback address or not)."""
        return length > self.min_bytes and self.offered(accept_encoding, loopback=loopback)


IDENTITY = Compression(enabled=False)
"""Never compress."""


def accepts_gzip(header: str) -> bool:
    """Whether an ``Accept-Encoding`` (RFC 9110 §12.5.3) accepts gzip: a ``gzip`` (or
    ``x-gzip``) coding with a non-zero weight, else a ``*`` with one; ``gzip;q=0`` refuses
    even when ``*`` is accepted."""
    if not header:
        return False
    star: bool | None = None
    for element in header.split(","):
        coding, _, params = element.partition(";")
        coding = coding.strip().lower()
        if coding not in ("gzip", "x-gzip", "*"):
            continue
        accepted = _weight(params) > 0
        if coding == "*":
            star = accepted
        else:
            return accepted
    return bool(star)


def _weight(params: str) -> float:
    """The ``q`` of a coding's parameters (1 when absent; 0 when malformed, as refusing is
    the safe reading)."""
    for param in params.split(";"):
        name, _, value = param.partition("=")
        if name.strip().lower() == "q":
            try:
                q = float(value.strip())
            except ValueError:
                return 0.0
            return q if 0.0 <= q <= 1.0 else 0.0
    return 1.0


def _batches(parts: Sequence[BodyPart], size: int) -> list[list[BodyPart]]:
    """``parts`` in consecutive groups of at least ``size`` bytes (the last may be smaller)."""
    batches: list[list[BodyPart]] = []
    batch: list[BodyPart] = []
    total = 0
    for part in parts:
        batch.append(part)
        total += len(part)
        if total >= size:
            batches.append(batch)
            batch = []
            total = 0
    if batch or not batches:
        batches.append(batch)
    return batches


def _deflate(stream: zlib._Compress, batch: Sequence[BodyPart], last: bool) -> bytes:
    """One batch through the stream (in the worker thread: the join, a memcpy, is the only
    part that holds the GIL); the last one ends the gzip member."""
    out = stream.compress(b"".join(batch))
    return out + stream.flush() if last else out


async def gzip_chunks(
    body: Sequence[BodyPart] | Iterator[Sequence[BodyPart]], *, level: int, chunk_bytes: int
) -> AsyncGenerator[bytes]:
    """The gzip member of ``body`` as the pieces a worker thread makes of it, one batch of input
    each: the next batch is made and compressed while the caller writes a piece. ``body`` is
    parts (batches of ~``chunk_bytes``), or groups of parts made as they are asked for, in the
    worker thread (a compressed store's list: its plain bodies are never held whole). A piece
    may be empty (zlib kept what it was given)."""
    stream = zlib.compressobj(level, zlib.DEFLATED, GZIP_WBITS)
    batches = iter(_batches(body, chunk_bytes)) if isinstance(body, Sequence) else body

    def step() -> bytes | None:
        batch = next(batches, None)
        return None if batch is None else _deflate(stream, batch, False)

    pending = asyncio.ensure_future(asyncio.to_thread(step))
    try:
        while (out := await pending) is not None:
            pending = asyncio.ensure_future(asyncio.to_thread(step))
            yield out
        pending = asyncio.ensure_future(asyncio.to_thread(stream.flush))  # the member's end
        yield (await pending) or b""
    finally:
        # The caller stopped early (an error, a cancellation): the thread finishes its batch
        # (milliseconds), and what it made or raised is dropped.
        if not pending.done():
            await asyncio.wait([pending])
        if not pending.cancelled():
            pending.exception()


async def send_gzipped(
    send: Send,
    parts: Sequence[BodyPart] | Iterator[Sequence[BodyPart]],
    headers: Headers,
    *,
    compression: Compression,
    writer: BodyWriter | None = None,
    code: int = 200,
) -> None:
    """A response whose body is ``parts`` (or groups of parts made as they are asked for: see
    :func:`gzip_chunks`) gzipped, chunked (its length is known only once the
    last piece is made): ``headers`` (without a ``Content-Length``), then ``Content-Encoding``
    and ``Vary``; each piece one chunk through ``writer`` (or a body message through ``send``)
    as it comes out of the worker thread. No more pieces are made once ``writer`` wrote nothing
    (the client is gone, or the request was a HEAD) or ``send`` raised."""
    start = [*headers, (b"content-encoding", b"gzip"), (b"vary", b"Accept-Encoding")]
    await send({"type": "http.response.start", "status": code, "headers": start})
    pieces = gzip_chunks(parts, level=compression.level, chunk_bytes=compression.chunk_bytes)
    async with contextlib.aclosing(pieces):
        async for piece in pieces:
            if not piece:
                continue
            if writer is not None:
                if not await writer.write_chunk([piece]):
                    break
            else:
                await send({"type": "http.response.body", "body": piece, "more_body": True})
    # uvicorn's last message waits until the transport drained (its flow control).
    await send({"type": "http.response.body", "body": b"", "more_body": False})
