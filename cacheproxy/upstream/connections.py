"""Keep-alive HTTP/1.1 connections to one server, for requests forwarded as their callers sent
them: a request's head and body written as given, its answer's head parsed and its body handed
on as it arrives (transfer coding undone, content coding kept).

Forwarding is on the path of every request the cache does not answer, and the general clients
cost more than the rest of the hop together: per forwarded GET on loopback, httpx's transport
(httpcore, h11, anyio) took 1.3 ms of CPU and aiohttp's client 0.5 ms, where this takes 0.1 ms —
an asyncio protocol whose answers llhttp (``httptools``, the parser uvicorn serves with) reads.
What it leaves out is what forwarding does not need: redirects, cookies, decoding, proxies and
protocol switches (those requests go through httpx: :mod:`cacheproxy.upstream.client`).

- **One exchange per connection at a time**; an idle connection goes back to the pool (most
  recently used first) and is dropped after :data:`KEEPALIVE_EXPIRY` seconds or when the server
  closes it. A connection the answer said not to keep, or whose answer was not read to its end,
  is closed.
- **A request on a kept connection the server had closed** (its close crossing our request) is
  sent again on a new one when its method is idempotent (RFC 9110 §9.2.2) and no byte of an
  answer came; otherwise it fails, as any broken exchange, with a :class:`TransportError`.
- **Back-pressure**: a body that arrives faster than it is taken stops the socket being read past
  :data:`READ_HIGH_WATER` bytes waiting.
- **Interim answers** (``100 Continue``, ``103 Early Hints``) are skipped; ``HEAD`` answers and
  1xx/204/304 have no body.
- Connecting (TCP and TLS) and writing the request are bounded by ``connect_timeout``
  (:class:`UpstreamTimeout`); how long an answer may take is the caller's to bound.
- **Closing** (:meth:`Connections.aclose`) closes every connection, busy ones too, and returns
  once their sockets are closed: a TLS connection's orderly close waits for the server's
  answer, so one not closed within :data:`CLOSE_GRACE` seconds is aborted (nothing is left
  for the garbage collector, or for an event loop that stops next).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ssl
import time
from collections.abc import AsyncIterator, Sequence
from typing import Final

import httptools

from cacheproxy.errors import TransportError, UpstreamTimeout

__all__ = ["KEEPALIVE_EXPIRY", "READ_HIGH_WATER", "Answer", "Connections"]

KEEPALIVE_EXPIRY: Final = 60.0
"""Seconds an idle connection is kept by default (the API server keeps them 90 s: ours closes
first)."""

MAX_IDLE: Final = 100
"""Idle connections kept at most; more are closed as they come back."""

CLOSE_GRACE: Final = 1.0
"""Seconds :meth:`Connections.aclose` waits for connections to close before aborting them."""

READ_HIGH_WATER: Final = 1 << 20
"""Bytes of an answer's body waiting to be taken before the socket is no longer read."""

_IDEMPOTENT: Final = frozenset({b"GET", b"HEAD", b"PUT", b"DELETE", b"OPTIONS", b"TRACE"})
_BODY_EXPECTED: Final = frozenset({b"POST", b"PUT", b"PATCH"})
"""Methods whose requests say ``Content-Length: 0`` when they carry nothing."""


class Answer:
    """An answer's head (``code``, ``headers`` as the server sent them) and its body, read by
    :meth:`body`; :meth:`aclose` gives the connection back (or closes it if the body was not read
    to its end)."""

    __slots__ = ("_connection", "code", "headers")

    network_stream: None = None
    """Never a switched connection (upgrades are not offered here)."""

    def __init__(self, connection: _Connection) -> None:
        self._connection = connection
        self.code = connection.code
        self.headers = connection.headers

    async def body(self) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive; a :class:`TransportError` if the connection breaks
        before its end."""
        connection = self._connection
        while True:
            if connection.chunks:
                chunk = b"".join(connection.chunks)
                connection.take()
                yield chunk
            elif connection.complete:
                return
            elif connection.failure is not None:
                raise connection.failure
            else:
                await connection.wait()

    def socket_info(self, name: str) -> object:
        """The connection's socket address (``sockname``), its peer's (``peername``), its
        ``ssl_object`` or ``socket``, as asyncio's transports name them; None when gone."""
        transport = self._connection._transport
        return transport.get_extra_info(name) if transport is not None else None

    async def next_chunk(self) -> tuple[bytes, bool]:
        """The body's next bytes (as many as have arrived; b"" only at its end) and whether
        they are its last: a relay then ends the answer with them. A
        :class:`TransportError` if the connection breaks before its end."""
        connection = self._connection
        while True:
            if connection.chunks:
                chunk = b"".join(connection.chunks)
                connection.take()
                return chunk, connection.complete
            if connection.complete:
                return b"", True
            if connection.failure is not None:
                raise connection.failure
            await connection.wait()

    async def aclose(self) -> None:
        self._connection.release()


class Connections:
    """Connections to ``host:port`` (TLS with ``ssl_context`` unless None, verified against
    ``server_hostname``), requests sent with ``Host: host_header``. Close with :meth:`aclose`."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        host_header: bytes,
        ssl_context: ssl.SSLContext | None = None,
        server_hostname: str = "",
        origin: str = "",
        connect_timeout: float = 10.0,
        keepalive_expiry: float = KEEPALIVE_EXPIRY,
        read_high_water: int = READ_HIGH_WATER,
    ) -> None:
        self._host = host
        self._port = port
        self._ssl = ssl_context
        self._server_hostname = (server_hostname or host) if ssl_context is not None else None
        self._host_line = b"host: " + host_header + b"\r\n"
        self.origin = origin or f"{host}:{port}"
        """How messages name the server (``https://10.0.0.1:6443``)."""
        self.connect_timeout = connect_timeout
        self.keepalive_expiry = keepalive_expiry
        self.read_high_water = read_high_water
        """Bytes of an answer's body waiting to be taken before its socket is no longer read."""
        self._idle: collections.deque[_Connection] = collections.deque()
        self._open: set[_Connection] = set()
        """Every connection made and not lost yet, idle or busy."""
        self._closed = False

    @property
    def idle(self) -> int:
        return len(self._idle)

    async def send(
        self, method: bytes, target: bytes, headers: Sequence[tuple[bytes, bytes]], body: bytes
    ) -> Answer:
        """Send a request (``target``: path and query, as bytes) and wait for its answer's head.
        ``headers`` go as given, with ``Host`` and the body's ``Content-Length`` added."""
        head = [method, b" ", target, b" HTTP/1.1\r\n", self._host_line]
        for name, value in headers:
            head += (name, b": ", value, b"\r\n")
        if body or method in _BODY_EXPECTED:
            head += (b"content-length: ", str(len(body)).encode(), b"\r\n")
        head.append(b"\r\n")
        request = b"".join(head) + body if len(body) < 65536 else b"".join(head)
        rest = b"" if len(body) < 65536 else body
        connection = self._kept()
        if connection is not None:
            try:
                return await connection.exchange(method, request, rest, self.connect_timeout)
            except _NotAnswered:
                if method not in _IDEMPOTENT:
                    raise TransportError(
                        f"{self.origin} closed a kept-alive connection as this request was "
                        f"sent (not sent again: {method.decode()} may not be idempotent)"
                    ) from None
        connection = await self._connect()
        try:
            return await connection.exchange(method, request, rest, self.connect_timeout)
        except _NotAnswered:
            raise TransportError(f"{self.origin} closed the connection without answering") from None

    def _kept(self) -> _Connection | None:
        now = time.monotonic()
        idle = self._idle
        while idle:
            connection = idle.pop()
            if connection.usable(now - self.keepalive_expiry):
                return connection
            connection.close()
        return None

    async def _connect(self) -> _Connection:
        if self._closed:
            raise TransportError(f"the connections to {self.origin} are closed")
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.connect_timeout):
                _, connection = await loop.create_connection(
                    lambda: _Connection(self),
                    self._host,
                    self._port,
                    ssl=self._ssl,
                    server_hostname=self._server_hostname,
                )
        except TimeoutError:
            raise UpstreamTimeout(
                f"timed out connecting to {self.origin} after {self.connect_timeout:g} s"
            ) from None
        except ssl.SSLCertVerificationError as exc:
            raise TransportError(
                f"TLS handshake with {self.origin} failed: certificate verify failed: "
                f"{exc.verify_message}"
            ) from exc
        except ssl.SSLError as exc:
            raise TransportError(f"TLS with {self.origin} failed: {exc.reason or exc}") from exc
        except ConnectionRefusedError as exc:
            raise TransportError(
                f"connection to {self.origin} refused (is the API server running?)",
                connection_refused=True,
            ) from exc
        except OSError as exc:
            raise TransportError(f"cannot connect to {self.origin}: {exc.strerror or exc}") from exc
        return connection

    def _keep(self, connection: _Connection) -> None:
        if self._closed or len(self._idle) >= MAX_IDLE:
            connection.close()
        else:
            self._idle.append(connection)

    def _forget(self, connection: _Connection) -> None:
        self._open.discard(connection)
        with contextlib.suppress(ValueError):
            self._idle.remove(connection)

    async def aclose(self) -> None:
        """Close every connection (see the module) and refuse new ones."""
        self._closed = True
        self._idle.clear()
        connections = list(self._open)
        for connection in connections:
            connection.close()
        lost = [c.lost_future for c in connections if not c.lost_future.done()]
        if lost:
            await asyncio.wait(lost, timeout=CLOSE_GRACE)
        late = [c for c in connections if not c.lost_future.done()]
        for connection in late:
            connection.abort()
        if late:
            await asyncio.wait([c.lost_future for c in late], timeout=CLOSE_GRACE)


class _NotAnswered(Exception):
    """The connection closed before any byte of an answer came."""


class _Connection(asyncio.Protocol):
    """One connection, one exchange at a time; llhttp's callbacks fill in the answer."""

    def __init__(self, pool: Connections) -> None:
        self._pool = pool
        self._parser = httptools.HttpResponseParser(self)
        self._transport: asyncio.Transport | None = None
        self._head: asyncio.Future[None] | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._drained: asyncio.Future[None] | None = None
        self._head_only = False
        self._interim = False
        self._received = False
        self._paused = False
        self._reuse = True
        self.code = 0
        self.headers: list[tuple[bytes, bytes]] = []
        self.chunks: list[bytes] = []
        self.waiting = 0
        self.complete = False
        self.failure: TransportError | None = None
        self.idle_since = 0.0
        self.lost = False
        self.lost_future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        """Done once the connection is lost (its socket closed)."""

    # ------------------------------------------------------------------ the exchange

    def usable(self, fresh_after: float) -> bool:
        transport = self._transport
        return (
            not self.lost
            and transport is not None
            and not transport.is_closing()
            and self.idle_since >= fresh_after
        )

    async def exchange(
        self, method: bytes, request: bytes, rest: bytes, write_timeout: float
    ) -> Answer:
        transport = self._transport
        assert transport is not None
        self._head_only = method == b"HEAD"
        self._interim = self._received = self.complete = False
        self.code = 0
        self.headers = []
        self.failure = None
        head = self._head = asyncio.get_running_loop().create_future()
        try:
            transport.write(request)
            if rest:
                transport.write(rest)
                await self._written(seconds=write_timeout)
            await head
        except BaseException:
            self.close()
            raise
        finally:
            self._head = None
        return Answer(self)

    async def _written(self, *, seconds: float) -> None:
        if self._drained is None:
            return
        try:
            async with asyncio.timeout(seconds):
                await self._drained
        except TimeoutError:
            raise UpstreamTimeout(
                f"{self._pool.origin} did not take the request's body within {seconds:g} s"
            ) from None

    def take(self) -> None:
        self.chunks = []
        self.waiting = 0
        if self._paused and self._transport is not None:
            self._paused = False
            self._transport.resume_reading()

    async def wait(self) -> None:
        waiter = self._waiter = asyncio.get_running_loop().create_future()
        try:
            await waiter
        except BaseException:
            self.close()
            raise
        finally:
            self._waiter = None

    def release(self) -> None:
        """The answer is done with: keep the connection if its answer was read to the end."""
        if self.complete and self._reuse and not self.lost:
            self.idle_since = time.monotonic()
            self.chunks = []
            self._pool._keep(self)
        else:
            self.close()

    def close(self) -> None:
        self._reuse = False
        if self._transport is not None:
            self._transport.close()

    def abort(self) -> None:
        """Close at once, without TLS's orderly close."""
        self._reuse = False
        if self._transport is not None:
            self._transport.abort()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _fail(self, failure: TransportError) -> None:
        self._reuse = False
        head = self._head
        if head is not None and not head.done():
            head.set_exception(failure)
            return
        if not self.complete:
            self.failure = failure
            self._wake()

    # ------------------------------------------------------------------ asyncio's callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # a stream's (uvloop's too)
        self._pool._open.add(self)

    def data_received(self, data: bytes) -> None:
        self._received = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(TransportError(f"{self._pool.origin}'s answer is not HTTP/1.1: {exc}"))
            self.close()

    def eof_received(self) -> bool | None:
        return None  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self._reuse = False
        self._pool._forget(self)
        if not self.lost_future.done():
            self.lost_future.set_result(None)
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        head = self._head
        if head is not None and not head.done() and not self._received:
            head.set_exception(_NotAnswered())
            return
        if self.code and not self.complete and not self._length_known():
            self._done()  # an answer delimited by the connection's end
            return
        why = f": {exc}" if exc else ""
        self._fail(TransportError(f"{self._pool.origin} closed the connection mid-answer{why}"))

    def pause_writing(self) -> None:
        self._drained = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        self._drained = None

    # ------------------------------------------------------------------ llhttp's callbacks

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        code = self._parser.get_status_code()
        if 100 <= code < 200:
            self._interim = True  # 100 Continue, 103 Early Hints: the answer follows
            self.headers = []
            return
        self.code = code
        if not self._parser.should_keep_alive():
            self._reuse = False
        head = self._head
        if head is not None and not head.done():
            head.set_result(None)
        if self._head_only:
            # No body follows, whatever Content-Length says; llhttp would wait for one.
            self._reuse = False
            self._done()

    def on_body(self, body: bytes) -> None:
        if self.complete:
            return
        self.chunks.append(body)
        self.waiting += len(body)
        if (
            self.waiting > self._pool.read_high_water
            and not self._paused
            and self._transport is not None
        ):
            self._paused = True
            self._transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        if self._interim:
            self._interim = False
            return
        self._done()

    def _done(self) -> None:
        self.complete = True
        self._wake()

    def _length_known(self) -> bool:
        for name, value in self.headers:
            lower = name.lower()
            if lower == b"content-length" or (
                lower == b"transfer-encoding" and b"chunked" in value.lower()
            ):
                return True
        return False
