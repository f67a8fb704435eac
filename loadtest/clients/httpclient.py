"""The benchmark's HTTP/1.1 client: keep-alive connections that read whole responses cheaply.

A general client (httpx, aiohttp) spends more CPU per response than the servers under test spend
on small ones, and copies big bodies around; this one is an ``asyncio.Protocol`` that parses the
status line and headers, then only counts body bytes (``Content-Length`` or chunked framing),
keeping the first :data:`HEAD_BYTES` of the body (where a list's ``metadata.continue`` is) and,
when asked, the whole body. A response's time is taken in ``data_received`` when its last byte
arrives. :class:`ChunkedDecoder` and :class:`LineSplitter` are shared with the watch clients and
the bare broadcaster. :func:`open_connection` also speaks TLS (``ssl=``, for the real API server)
and sends extra headers on every request (``headers=``, e.g. its bearer token).
"""

from __future__ import annotations

import asyncio
import ssl as _ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import cast

__all__ = [
    "HEAD_BYTES",
    "ChunkedDecoder",
    "Connection",
    "LineSplitter",
    "RequestReader",
    "Response",
    "continue_token",
    "fetch",
    "open_connection",
]

HEAD_BYTES = 4096


@dataclass(slots=True)
class Response:
    status: int
    length: int
    """Body bytes received (after chunked decoding)."""
    seconds: float
    """From writing the request to the last byte of the response."""
    head: bytes
    """The first :data:`HEAD_BYTES` of the body."""
    body: bytes | None = None
    """The whole body, when it was asked for."""


class ChunkedDecoder:
    """Incremental ``Transfer-Encoding: chunked`` decoder: ``feed`` calls ``on_data(data, start,
    end)`` for each payload range of ``data`` (no copy) and returns True after the last chunk."""

    __slots__ = ("_need", "_pending", "_trailer", "on_data")

    def __init__(self, on_data: Callable[[bytes, int, int], None]) -> None:
        self.on_data = on_data
        self._need = 0  # > 0: payload bytes left in this chunk; < 0: CRLF bytes left after it
        self._pending = b""  # an incomplete size line carried to the next feed
        self._trailer = False

    def feed(self, data: bytes) -> bool:
        if self._pending:
            data = self._pending + data
            self._pending = b""
        pos, end = 0, len(data)
        while pos < end:
            need = self._need
            if need > 0:
                take = min(need, end - pos)
                self.on_data(data, pos, pos + take)
                pos += take
                self._need = need - take or -2  # then the CRLF after the payload
                continue
            if need < 0:
                skip = min(-need, end - pos)
                pos += skip
                self._need = need + skip
                continue
            eol = data.find(b"\r\n", pos)
            if eol < 0:
                self._pending = data[pos:]
                return False
            if self._trailer:  # after the last chunk: trailers until an empty line
                if eol == pos:
                    self._trailer = False
                    return True
                pos = eol + 2
                continue
            size = int(data[pos:eol].split(b";", 1)[0], 16)
            pos = eol + 2
            if size == 0:
                self._trailer = True
            else:
                self._need = size
        return False


class LineSplitter:
    """Calls ``on_line(buf, start, end)`` for each complete line fed (newline excluded); only
    a line split across two feeds is copied."""

    __slots__ = ("_partial", "on_line")

    def __init__(self, on_line: Callable[[bytes, int, int], None]) -> None:
        self.on_line = on_line
        self._partial = b""

    def feed(self, data: bytes, start: int, end: int) -> None:
        pos = start
        find, on_line = data.find, self.on_line
        while True:
            nl = find(b"\n", pos, end)
            if nl < 0:
                if pos < end:
                    self._partial += data[pos:end]
                return
            if self._partial:
                line = self._partial + data[pos:nl]
                self._partial = b""
                on_line(line, 0, len(line))
            else:
                on_line(data, pos, nl)
            pos = nl + 1


class RequestReader(asyncio.Protocol):
    """The server side of the bare servers (floor, broadcaster): each request head (up to its
    empty line; they send no bodies) goes to ``on_request(head)``."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            head, self.buffer = self.buffer[:end], self.buffer[end + 4 :]
            self.on_request(head)

    def on_request(self, head: bytes) -> None:
        raise NotImplementedError


class Connection(asyncio.Protocol):
    """One keep-alive connection; one request at a time (``await request(...)``); ``headers``
    are sent with every request."""

    def __init__(self, *, headers: Mapping[str, str] | None = None) -> None:
        self.transport: asyncio.Transport | None = None
        self._extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        self._waiter: asyncio.Future[Response] | None = None
        self._closed = asyncio.get_running_loop().create_future()
        self._reset(keep_body=False)

    def _reset(self, *, keep_body: bool) -> None:
        self._buf = b""
        self._status = 0
        self._in_body = False
        self._remaining = -1  # Content-Length left; -1 = chunked
        self._chunked: ChunkedDecoder | None = None
        self._length = 0
        self._head = bytearray()
        self._keep: list[bytes] | None = [] if keep_body else None
        self._started = 0.0

    # ------------------------------------------------------------------ protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._closed.done():
            self._closed.set_result(None)
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(ConnectionError(f"connection lost: {exc}"))

    def data_received(self, data: bytes) -> None:
        if not self._in_body:
            self._buf += data
            end = self._buf.find(b"\r\n\r\n")
            if end < 0:
                return
            self._parse_head(self._buf[:end])
            data, self._buf = self._buf[end + 4 :], b""
            self._in_body = True
        if self._chunked is not None:
            if self._chunked.feed(data):
                self._finish()
        else:
            self._take(data, 0, len(data))
            self._remaining -= len(data)
            if self._remaining <= 0:
                self._finish()

    def _parse_head(self, head: bytes) -> None:
        lines = head.split(b"\r\n")
        self._status = int(lines[0].split(b" ", 2)[1])
        self._remaining = 0
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                self._remaining = int(value)
            elif name == b"transfer-encoding" and b"chunked" in value.lower():
                self._chunked = ChunkedDecoder(self._take)

    def _take(self, data: bytes, start: int, end: int) -> None:
        self._length += end - start
        if len(self._head) < HEAD_BYTES:
            self._head += data[start : min(end, start + HEAD_BYTES - len(self._head))]
        if self._keep is not None:
            self._keep.append(data[start:end])

    def _finish(self) -> None:
        elapsed = time.perf_counter() - self._started
        response = Response(
            status=self._status,
            length=self._length,
            seconds=elapsed,
            head=bytes(self._head),
            body=b"".join(self._keep) if self._keep is not None else None,
        )
        waiter = self._waiter
        self._waiter = None
        self._reset(keep_body=False)
        if waiter is not None and not waiter.done():
            waiter.set_result(response)

    # ------------------------------------------------------------------ API

    async def request(
        self,
        target: str,
        *,
        method: str = "GET",
        body: bytes = b"",
        content_type: str = "application/json",
        keep_body: bool = False,
    ) -> Response:
        assert self.transport is not None
        assert self._waiter is None
        self._reset(keep_body=keep_body)
        head = (
            f"{method} {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json\r\n"
            + self._extra
        )
        if body or method in ("POST", "PUT", "PATCH"):
            head += f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
        waiter: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        self._waiter = waiter
        self._started = time.perf_counter()
        self.transport.write(head.encode("latin-1") + b"\r\n" + body)
        return await waiter

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    async def closed(self) -> None:
        await self._closed


async def open_connection(
    url: str,
    *,
    ssl: _ssl.SSLContext | None = None,
    headers: Mapping[str, str] | None = None,
) -> Connection:
    """A connection to ``http://host:port``, or ``https://host:port`` with ``ssl`` (the path
    part of ``url`` is ignored); ``headers`` go with every request."""
    scheme, _, rest = url.rpartition("://")
    if scheme == "https" and ssl is None:
        raise ValueError(f"{url}: an https URL needs an SSL context")
    host, _, port = rest.split("/", 1)[0].rpartition(":")
    _, protocol = await asyncio.get_running_loop().create_connection(
        lambda: Connection(headers=headers), host, int(port), ssl=ssl
    )
    return protocol


async def fetch(
    url: str,
    target: str,
    *,
    ssl: _ssl.SSLContext | None = None,
    headers: Mapping[str, str] | None = None,
) -> tuple[int, bytes]:
    """One request on a new connection: (status, body)."""
    conn = await open_connection(url, ssl=ssl, headers=headers)
    try:
        response = await conn.request(target, keep_body=True)
    finally:
        conn.close()
    return response.status, response.body or b""


def continue_token(head: bytes) -> str:
    """``metadata.continue`` of a list whose metadata comes first (every server here writes
    ``kind``, ``apiVersion``, ``metadata``, then ``items``); "" on the last page."""
    items = head.find(b'"items"')
    at = head.find(b'"continue":"')
    if at < 0 or (0 <= items < at):
        return ""
    start = at + len(b'"continue":"')
    return head[start : head.index(b'"', start)].decode()
