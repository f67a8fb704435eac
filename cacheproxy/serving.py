"""Serving an ASGI application with uvicorn on a socket we bind ourselves.

Shared by the simulator and the daemon (both sit above this module; it imports only ``errors``).
Binding first means port 0 works (the kernel picks a free port, which tests read back)
and a restart can listen again on the same port. Signals are left to whoever owns the process.
Also the ASGI response helpers both servers write with.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import socket
import ssl
from collections import deque
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Mapping,
    MutableMapping,
    Sequence,
)
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar, cast

import orjson
import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from cacheproxy.errors import ApiError, ListenError
from cacheproxy.tasks import cancel_and_wait

log = logging.getLogger("cacheproxy.serving")

__all__ = [
    "BODY_WRITER",
    "RESPONSE_FLOW",
    "BodyWriter",
    "CertificateReloader",
    "LiveWatch",
    "Mailbox",
    "ResponseFlow",
    "ServingProtocol",
    "UvicornRunner",
    "bind",
    "file_stamp",
    "live_lines",
    "send_body",
    "send_parts",
    "send_status",
    "serving_protocol",
    "user_from_peer_cert",
]


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio turns Nagle off (TCP_NODELAY) on accepted connections only
    # when the listening socket says TCP; with proto 0 every multi-part response on a kept-alive
    # connection waited ~40 ms for a delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        reason = {
            errno.EADDRINUSE: "the address is already in use (another process listens there)",
            errno.EACCES: "permission denied (ports below 1024 need privileges)",
            errno.EADDRNOTAVAIL: "no interface of this machine has that address",
        }.get(exc.errno or 0, exc.strerror or str(exc))
        raise ListenError(host, port, reason) from exc
    sock.listen(1024)
    sock.setblocking(False)
    return sock


async def _serve(server: uvicorn.Server, sock: socket.socket) -> None:
    """``uvicorn.Server.serve`` without its signal capture."""
    config = server.config
    if not config.loaded:
        config.load()
    server.lifespan = config.lifespan_class(config)
    await server.startup(sockets=[sock])
    if server.should_exit:
        return
    await server.main_loop()
    await server.shutdown(sockets=[sock])


class UvicornRunner:
    """One uvicorn server in the running loop: ``start()`` binds and serves, ``stop()`` stops
    listening first, then lets open requests finish (up to the config's graceful timeout)."""

    def __init__(self, config: uvicorn.Config, *, host: str, port: int, name: str) -> None:
        self.config = config
        self.host = host
        self.port = port
        self.name = name
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self._server is not None and self._server.started

    async def start(self) -> None:
        sock = bind(self.host, self.port)
        self.port = sock.getsockname()[1]
        server = uvicorn.Server(self.config)
        self._server = server
        self._task = asyncio.create_task(_serve(server, sock), name=f"{self.name}-{self.port}")
        while not server.started:
            if self._task.done():
                self._task.result()  # raise the startup error
                raise RuntimeError(f"{self.name} exited during startup")
            await asyncio.sleep(0.01)

    def stop_listening(self) -> None:
        if self._server is not None:
            for listener in self._server.servers:
                listener.close()

    async def stop(self) -> None:
        self.stop_listening()
        if self._server is not None:
            # Close idle kept-alive connections now, and the others once their response is
            # done, rather than at uvicorn's next shutdown poll (up to 0.1 s later): a client
            # that re-requests at once must find the server gone, not half there.
            for connection in list(self._server.server_state.connections):
                connection.shutdown()
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._server = None
        self._task = None


# ---------------------------------------------------------------------- ASGI responses

Message = MutableMapping[str, Any]
Send = Callable[[Message], Awaitable[None]]
JSON = b"application/json"


async def send_body(send: Send, code: int, body: bytes, *, content_type: bytes = JSON) -> None:
    """A whole response with a ``Content-Length``."""
    headers = [
        (b"content-type", content_type),
        (b"cache-control", b"no-cache, private"),
        (b"content-length", str(len(body)).encode()),
    ]
    await send({"type": "http.response.start", "status": code, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class BodyWriter(Protocol):
    """Writes a started response's body from parts, without joining them: the transport hands
    them to ``writev`` as they are (nothing copied in Python)."""

    async def write(self, parts: Sequence[bytes], size: int) -> None:
        """Parts of a body whose ``Content-Length`` was sent; ``size`` is their total length."""

    async def write_chunk(self, parts: Sequence[bytes]) -> None:
        """One chunk, made of ``parts``, of a response sent without a ``Content-Length``
        (``Transfer-Encoding: chunked``); the last message through ``send`` ends it."""


BODY_WRITER = "cacheproxy.body_writer"
"""The ``scope["extensions"]`` key under which :class:`ServingProtocol` offers a
:class:`BodyWriter` on plain-TCP connections."""


class ResponseFlow(Protocol):
    """Whether a response's client is taking its bytes, and a way to drop a client that is not."""

    async def writable(self, within: float) -> bool:
        """True once the connection takes more bytes (at once unless the client has fallen
        behind); False if it did not within ``within`` seconds."""
        ...

    def abort(self) -> None:
        """Drop the connection now, without waiting for what is buffered to be sent."""
        ...


RESPONSE_FLOW = "cacheproxy.response_flow"
"""The ``scope["extensions"]`` key under which :class:`ServingProtocol` offers a
:class:`ResponseFlow` on every connection."""


async def send_parts(
    send: Send,
    parts: Sequence[bytes],
    *,
    writer: BodyWriter | None = None,
    content_type: bytes = JSON,
    chunk_bytes: int = 128 << 10,
) -> None:
    """A 200 whose body is ``parts`` one after the other, with a ``Content-Length``.

    With ``writer`` (the server's :data:`BODY_WRITER`) all parts go to the transport at
    once: it holds references, not copies, and writes them with ``writev`` as the socket takes
    them (measured on loopback: a 2.5 MB list in ~1 000 parts went out faster than the same
    bytes joined, and than in groups with a drain between). Otherwise through ``send``,
    joined into pieces of ~``chunk_bytes`` (the one copy of each byte)."""
    length = sum(map(len, parts))
    headers = [
        (b"content-type", content_type),
        (b"cache-control", b"no-cache, private"),
        (b"content-length", str(length).encode()),
    ]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    if writer is not None:
        await writer.write(parts, length)
    else:
        batch: list[bytes] = []
        size = 0
        for part in parts:
            batch.append(part)
            size += len(part)
            if size >= chunk_bytes:
                await send(
                    {"type": "http.response.body", "body": b"".join(batch), "more_body": True}
                )
                batch.clear()
                size = 0
        if batch:
            await send({"type": "http.response.body", "body": b"".join(batch), "more_body": True})
    # uvicorn's last message waits until the transport drained (its flow control).
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def send_status(send: Send, err: ApiError, *, started: bool) -> None:
    """An error as its ``metav1.Status`` (``Retry-After`` when it carries one, as the API
    server's ``ErrorNegotiated``). Once a response has started, all that is left is to end it."""
    if started:
        with contextlib.suppress(Exception):
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        return
    body = orjson.dumps(err.status)
    headers = [
        (b"content-type", JSON),
        (b"cache-control", b"no-cache, private"),
        (b"content-length", str(len(body)).encode()),
    ]
    if err.retry_after:
        headers.append((b"retry-after", str(err.retry_after).encode()))
    await send({"type": "http.response.start", "status": err.code, "headers": headers})
    await send({"type": "http.response.body", "body": body})


# ---------------------------------------------------------------------- watch streams

DEADLINE_BOOKMARK_MARGIN = 2.0
"""The API server sends a bookmark this long before a watch's deadline, so the client can resume
close to "now" (``cacheWatcher.nextBookmarkTime``)."""


ItemT = TypeVar("ItemT")


class Mailbox(Generic[ItemT]):
    """A watch's bounded buffer: ``put`` never waits; a full mailbox closes itself (the watcher
    is too slow, DESIGN §7), and ``wait`` returns when something arrives or it was closed."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._items: deque[ItemT] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self.closed = False
        self.close_reason = ""

    def put(self, item: ItemT) -> bool:
        """Queue ``item``; False (and closed) when it was closed or is full."""
        if self.closed:
            return False
        if len(self._items) >= self.capacity:
            self.close("too slow: buffer full")
            return False
        self._items.append(item)
        self._wake()
        return True

    def close(self, reason: str = "closed") -> None:
        if not self.closed:
            self.closed = True
            self.close_reason = reason
        self._wake()

    def drain(self) -> list[ItemT]:
        items = list(self._items)
        self._items.clear()
        return items

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self, seconds: float) -> None:
        """Until something is queued, the mailbox closes, or ``seconds`` pass.

        One future and one timer per wait, no task: with a thousand watchers woken for every
        event, ``asyncio.wait_for`` (a task per call) cost more than writing the event."""
        if self._items or self.closed:
            return
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        timer = loop.call_later(max(seconds, 0.0), _resolve, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            self._waiter = None


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class LiveWatch(Protocol):
    """A watch being served: pending lines, a way to wait for more, and whether it ended."""

    closed: bool

    async def wait(self, seconds: float) -> None: ...

    def take(self) -> list[bytes]: ...


async def live_lines(
    watch: LiveWatch,
    *,
    deadline: float,
    bookmark: Callable[[], bytes | None] | None,
    bookmark_interval: float,
    clock: Callable[[], float],
) -> AsyncIterator[list[bytes]]:
    """A watch's live part: its pending lines as they come (each batch as the list of lines, to
    be written without joining) and, when ``bookmark`` is given (the client asked), a bookmark
    about every ``bookmark_interval`` while nothing else is sent and one shortly before
    ``deadline`` — when ``bookmark()`` has one to give (None: nothing new to tell). Ends at the
    deadline, or once the watch is closed and drained."""
    next_bookmark = clock() + bookmark_interval
    deadline_bookmark_sent = False
    while True:
        now = clock()
        if now >= deadline:
            return
        wake_at = deadline
        if bookmark is not None:
            if not deadline_bookmark_sent:
                wake_at = min(wake_at, deadline - DEADLINE_BOOKMARK_MARGIN)
            wake_at = min(wake_at, next_bookmark)
        await watch.wait(wake_at - now)
        lines = watch.take()
        if lines:
            yield lines
        if watch.closed:
            return
        now = clock()
        if bookmark is not None and not lines:
            due_deadline = not deadline_bookmark_sent and now >= deadline - DEADLINE_BOOKMARK_MARGIN
            if now >= next_bookmark or due_deadline:
                line = bookmark()
                if line is not None:
                    yield [line]
                next_bookmark = now + bookmark_interval
                deadline_bookmark_sent = deadline_bookmark_sent or due_deadline


class ServingProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with what both servers need on top:

    - the TLS client certificate's user for the app, as
      ``scope["extensions"]["tls"]["peer_user"]`` = ``(CommonName, Organizations)`` (ASGI has no
      standard field for it); only a certificate that verified against the client CA counts;
    - a deadline for a request's headers (``header_timeout`` seconds from the connection, or from
      the first byte of the next request on a kept-alive connection): a client that sends them
      slowly or not at all is disconnected instead of holding a connection forever (uvicorn
      itself only times out idle kept-alive connections).

    Use :func:`serving_protocol` for other settings.
    """

    header_timeout: float = 10.0
    on_header_timeout: Callable[[], None] | None = None
    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_header_timer()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm_header_timer()

    def on_headers_complete(self) -> None:
        self._disarm_header_timer()
        ssl_object = self.transport.get_extra_info("ssl_object")
        if ssl_object is not None:
            peer = user_from_peer_cert(ssl_object.getpeercert())
            if peer is not None:
                self.scope.setdefault("extensions", {})["tls"] = {"peer_user": peer}
        super().on_headers_complete()
        cycle = self.cycle
        if cycle is not None and cycle.scope is self.scope:
            extensions = cast(dict[str, object], self.scope.setdefault("extensions", {}))
            extensions[RESPONSE_FLOW] = _Flow(cycle)
        # Not for TLS: its transport would encrypt every part at once into its own buffer.
        if ssl_object is None and cycle is not None and cycle.scope is self.scope:
            extensions = cast(dict[str, object], self.scope.setdefault("extensions", {}))
            extensions[BODY_WRITER] = _BodyWriter(cycle)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_timer()
        super().connection_lost(exc)

    def _arm_header_timer(self) -> None:
        self._disarm_header_timer()
        self._header_timer = self.loop.call_later(self.header_timeout, self._headers_too_slow)

    def _disarm_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if not self.transport.is_closing():
            log.debug("closing a connection that sent no complete request headers in time")
            if self.on_header_timeout is not None:
                self.on_header_timeout()
            self.transport.close()


class _Flow:
    """:class:`ResponseFlow` for one uvicorn request: its flow control (paused while the
    transport's buffer is above its high-water mark) and its transport."""

    __slots__ = ("_cycle",)

    def __init__(self, cycle: RequestResponseCycle) -> None:
        self._cycle = cycle

    async def writable(self, within: float) -> bool:
        cycle = self._cycle
        if not cycle.flow.write_paused or cycle.disconnected:
            return True
        try:
            async with asyncio.timeout(within):
                await cycle.flow.drain()
        except TimeoutError:
            return False
        return True

    def abort(self) -> None:
        # uvicorn then sees the connection lost: the cycle is disconnected, sends are no-ops.
        self._cycle.transport.abort()


class _BodyWriter:
    """:class:`BodyWriter` for one uvicorn request: parts go to the transport's ``writelines``
    (uvloop hands them to ``writev`` as they are), with uvicorn's own flow control and its
    bookkeeping of the ``Content-Length`` or the chunked encoding it chose."""

    __slots__ = ("_cycle",)

    def __init__(self, cycle: RequestResponseCycle) -> None:
        self._cycle = cycle

    async def _ready(self, *, chunked: bool) -> bool:
        """Whether to write now (after waiting while the client is behind)."""
        cycle = self._cycle
        if cycle.flow.write_paused and not cycle.disconnected:
            await cycle.flow.drain()
        if cycle.disconnected:
            return False
        if not cycle.response_started or cycle.response_complete:
            raise RuntimeError("body parts need a started, unfinished response")
        if bool(cycle.chunked_encoding) != chunked:
            raise RuntimeError("the response's framing is not the one written")
        return cycle.scope["method"] != "HEAD"

    async def write(self, parts: Sequence[bytes], size: int) -> None:
        if not await self._ready(chunked=False):
            return
        cycle = self._cycle
        if size > cycle.expected_content_length:
            raise RuntimeError("Response content longer than Content-Length")
        cycle.expected_content_length -= size
        cycle.transport.writelines(parts)

    async def write_chunk(self, parts: Sequence[bytes]) -> None:
        size = sum(map(len, parts))
        if not size or not await self._ready(chunked=True):
            return
        # One writelines: each write would be a send() of its own while the socket has room.
        self._cycle.transport.writelines([b"%x\r\n" % size, *parts, b"\r\n"])


def serving_protocol(
    *, header_timeout: float, on_header_timeout: Callable[[], None] | None = None
) -> type[ServingProtocol]:
    """:class:`ServingProtocol` with these settings (uvicorn takes a protocol class)."""
    return type(
        "ServingProtocol",
        (ServingProtocol,),
        {
            "header_timeout": header_timeout,
            "on_header_timeout": staticmethod(on_header_timeout) if on_header_timeout else None,
        },
    )


def user_from_peer_cert(cert: Mapping[str, Any] | None) -> tuple[str, tuple[str, ...]] | None:
    """``(CommonName, Organizations)`` of a verified peer certificate, or None.

    ``cert`` is ``SSLObject.getpeercert()``, which is empty or None unless the peer presented a
    certificate that verified against the CA. As in the x509 authenticator, a certificate with no
    CommonName authenticates nobody; if several CNs are present the last wins (Go's
    ``pkix.Name.CommonName``).
    """
    if not cert:
        return None
    common_name = ""
    organizations: list[str] = []
    for rdn in cert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                common_name = value
            elif key == "organizationName":
                organizations.append(value)
    if not common_name:
        return None
    return common_name, tuple(organizations)


def file_stamp(*paths: Path) -> tuple[float, ...] | None:
    """When ``paths`` were last modified, or None if one cannot be read: compare stamps to notice
    a file rewritten or replaced in place (a rotated Secret, an updated ConfigMap)."""
    try:
        return tuple(path.stat().st_mtime for path in paths)
    except OSError:
        return None


class CertificateReloader:
    """Re-reads a serving certificate and key into a live ``SSLContext`` when either file
    changes on disk (cert-manager and kubelet rotate mounted secrets in place). Handshakes after
    the reload use the new pair; open connections keep theirs. A pair that does not load (caught
    half-written, or a key that does not match) is logged and retried at the next check."""

    def __init__(
        self, context: ssl.SSLContext, cert_file: Path, key_file: Path, *, interval: float = 2.0
    ) -> None:
        self.context, self.cert_file, self.key_file = context, cert_file, key_file
        self.interval = interval
        self.reloads = 0
        self._seen = file_stamp(cert_file, key_file)
        self._task: asyncio.Task[None] | None = None

    def check(self) -> bool:
        """Reload if the files changed since the last successful load; whether it did."""
        stamp = file_stamp(self.cert_file, self.key_file)
        if stamp is None or stamp == self._seen:
            return False
        try:
            self.context.load_cert_chain(self.cert_file, self.key_file)
        except (OSError, ssl.SSLError) as err:
            log.warning("keeping the current serving certificate: %s", err)
            return False
        self._seen = stamp
        self.reloads += 1
        log.info("reloaded the serving certificate from %s", self.cert_file)
        return True

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="certificate-reloader")

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            self.check()

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None
