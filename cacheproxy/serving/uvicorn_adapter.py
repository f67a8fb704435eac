"""Everything that reaches into uvicorn beyond its public ``Config``: one module, one contract.

What we need that uvicorn does not offer publicly:

- serving on a socket we bound ourselves, without uvicorn's signal capture, and stopping in
  order (stop listening, close idle kept-alive connections, let open requests finish):
  :class:`UvicornRunner` drives ``uvicorn.Server``'s startup / main loop / shutdown steps;
- a server protocol (:class:`ServingProtocol`, a subclass of uvicorn's httptools protocol) that
  offers responses what ASGI has no words for — the TLS client certificate's user, a deadline
  for request headers, scatter/gather body writes (:data:`~cacheproxy.serving.asgi.BODY_WRITER`)
  and the connection's flow control (:data:`~cacheproxy.serving.asgi.RESPONSE_FLOW`), both over
  uvicorn's ``RequestResponseCycle``; and connection upgrades
  (:data:`~cacheproxy.serving.asgi.UPGRADE`): uvicorn runs without a websocket protocol, so an
  upgrade request reaches the app as plain HTTP, and the app may answer it ``101`` and take the
  connection over (a tunnel: websocket or SPDY bytes both ways, whatever they carry).

Checked against the uvicorn versions ``pyproject.toml`` pins. :data:`RELIED_ON` names every
internal used here; ``tests/integration/test_uvicorn_contract.py`` checks them against the
installed uvicorn and drives a request through the protocol, so a uvicorn that changes them fails
there, not in production. Widen the pin only after those tests pass.
"""

from __future__ import annotations

import asyncio
import contextlib
import http
import logging
import socket
from collections.abc import Callable, Iterable, Sequence
from typing import cast

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from cacheproxy.serving.asgi import BODY_WRITER, RESPONSE_FLOW, UPGRADE, BodyPart
from cacheproxy.serving.listen import bind
from cacheproxy.serving.tls import user_from_peer_cert

__all__ = ["RELIED_ON", "ServingProtocol", "UvicornRunner", "serving_protocol"]

log = logging.getLogger("cacheproxy.serving")

RELIED_ON: dict[str, tuple[str, ...]] = {
    "uvicorn.Config": ("loaded", "load", "lifespan_class"),
    "uvicorn.Server": (
        "config",
        "started",
        "should_exit",
        "server_state",
        "lifespan",
        "servers",
        "startup",
        "main_loop",
        "shutdown",
    ),
    "uvicorn.server.ServerState": ("connections",),
    "HttpToolsProtocol": (
        "connection_made",
        "on_message_begin",
        "on_headers_complete",
        "connection_lost",
        "data_received",
        "on_response_complete",
        "_unsupported_upgrade_warning",
        "parser",
        "flow",
        "shutdown",
        "transport",
        "loop",
        "scope",
        "cycle",
    ),
    "RequestResponseCycle": (
        "scope",
        "transport",
        "flow",
        "disconnected",
        "response_started",
        "response_complete",
        "chunked_encoding",
        "expected_content_length",
        "keep_alive",
    ),
    "FlowControl": ("write_paused", "drain", "pause_reading", "resume_reading"),
}
"""The uvicorn internals this module uses, by owner: attributes and methods (the contract test
checks each against the installed uvicorn)."""


# ---------------------------------------------------------------------- serving


async def _serve(server: uvicorn.Server, sock: socket.socket, started: asyncio.Event) -> None:
    """``uvicorn.Server.serve`` without its signal capture; ``started`` is set once it serves."""
    config = server.config
    if not config.loaded:
        config.load()
    server.lifespan = config.lifespan_class(config)
    await server.startup(sockets=[sock])
    if server.should_exit:
        return
    if server.started:
        started.set()
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
        started = asyncio.Event()
        task = self._task = asyncio.create_task(
            _serve(server, sock, started), name=f"{self.name}-{self.port}"
        )
        waiting = asyncio.ensure_future(started.wait())
        try:
            await asyncio.wait((task, waiting), return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiting.cancel()
        if not started.is_set():
            task.result()  # raise the startup error
            raise RuntimeError(f"{self.name} exited during startup")

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


# ---------------------------------------------------------------------- the protocol


class ServingProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with what both servers need on top:

    - the TLS client certificate's user for the app, as
      ``scope["extensions"]["tls"]["peer_user"]`` = ``(CommonName, Organizations)`` (ASGI has no
      standard field for it); only a certificate that verified against the client CA counts;
    - a deadline for a request's headers (``header_timeout`` seconds from the connection, or from
      the first byte of the next request on a kept-alive connection): a client that sends them
      slowly or not at all is disconnected instead of holding a connection forever (uvicorn
      itself only times out idle kept-alive connections);
    - the response's :class:`~cacheproxy.serving.asgi.ResponseFlow` on every connection, and a
      :class:`~cacheproxy.serving.asgi.BodyWriter` on plain-TCP ones;
    - connection upgrades (websocket and SPDY from ``kubectl exec``/``attach``/``port-forward``):
      the request goes on as plain HTTP, without uvicorn's warning, with an
      :class:`~cacheproxy.serving.asgi.Upgrade` in its extensions; the app either answers it
      as any request (the connection is closed after: the parser is past the offer) or accepts
      it with ``101`` and gets the connection's bytes both ways. A client sends nothing after
      an upgrade offer before the server's answer (RFC 6455 §4.1; SPDY likewise); bytes that
      arrive early are kept for the tunnel.

    Use :func:`serving_protocol` for other settings.
    """

    header_timeout: float = 10.0
    on_header_timeout: Callable[[], None] | None = None
    _header_timer: asyncio.TimerHandle | None = None
    _upgrade_offered = False
    """The parser stopped at an upgrade offer: what follows is not HTTP."""
    _early: bytearray | None = None
    """Bytes that came after an upgrade offer, before the answer."""
    _tunnel: _Tunnel | None = None
    _on_lost: list[Callable[[], None]]
    """What :meth:`_Flow.on_disconnect` asked to be called when the connection is lost."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._on_lost = []
        coalescing = _Coalescing(transport, asyncio.get_running_loop())
        super().connection_made(cast(asyncio.Transport, coalescing))
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
            extensions[RESPONSE_FLOW] = _Flow(self, cycle)
            # Not for TLS: its transport would encrypt every part at once into its own buffer.
            if ssl_object is None:
                extensions[BODY_WRITER] = _BodyWriter(cycle)
            if self.parser.should_upgrade():
                extensions[UPGRADE] = _Upgrade(self, cycle)

    def data_received(self, data: bytes) -> None:
        if self._tunnel is not None:
            self._tunnel.feed(data)
        elif self._upgrade_offered:
            if self._early is None:
                self._early = bytearray()
            self._early += data
        else:
            super().data_received(data)

    def on_response_complete(self) -> None:
        if self._upgrade_offered and self._tunnel is None:
            # Answered without switching: what follows the offer cannot be parsed as HTTP.
            self.transport.close()
            return
        super().on_response_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_timer()
        if self._tunnel is not None:
            self._tunnel.feed_eof()
        super().connection_lost(exc)
        lost, self._on_lost = self._on_lost, []
        for callback in lost:
            callback()

    def _unsupported_upgrade_warning(self) -> None:
        self._upgrade_offered = True

    def _take_over(self, cycle: RequestResponseCycle) -> _Tunnel:
        tunnel = _Tunnel(self, cycle)
        early, self._early = self._early, None
        self._tunnel = tunnel
        if early:
            tunnel.feed(bytes(early))
        return tunnel

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


class _Coalescing:
    """A connection's transport whose small writes within one turn of the event loop go out
    together at its end, in one ``writelines`` (one ``writev``): a response's head and body,
    which uvicorn writes apart, then cost one system call and one segment instead of two, on
    both ends. Once :data:`COALESCE_BYTES` are held they go at once (a large body keeps the
    transport's flow control as it was); closing or aborting first hands over what is held.
    Everything else is the transport's own."""

    __slots__ = ("_held", "_held_bytes", "_loop", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: list[bytes] = []
        self._held_bytes = 0

    def write(self, data: bytes) -> None:
        if data:
            self.writelines((data,))

    def writelines(self, parts: Iterable[bytes]) -> None:
        if not isinstance(parts, list | tuple):
            parts = list(parts)
        if not self._held:
            self._loop.call_soon(self._flush)
        self._held.extend(parts)
        self._held_bytes += sum(map(len, parts))
        if self._held_bytes >= COALESCE_BYTES:
            self._flush()

    def _flush(self) -> None:
        held, self._held, self._held_bytes = self._held, [], 0
        if held and not self._transport.is_closing():
            self._transport.writelines(held)

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def abort(self) -> None:
        self._flush()  # as far as the socket takes it now, as without holding back
        self._transport.abort()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def get_extra_info(self, name: str, default: object = None) -> object:
        return self._transport.get_extra_info(name, default)

    def pause_reading(self) -> None:
        self._transport.pause_reading()

    def resume_reading(self) -> None:
        self._transport.resume_reading()

    def __getattr__(self, name: str) -> object:
        return getattr(self._transport, name)


COALESCE_BYTES = 64 * 1024
"""Bytes a connection holds back at most to send them with the next ones of the same turn."""


class _Flow:
    """:class:`~cacheproxy.serving.asgi.ResponseFlow` for one uvicorn request: its flow control
    (paused while the transport's buffer is above its high-water mark) and its transport."""

    __slots__ = ("_cycle", "_protocol")

    def __init__(self, protocol: ServingProtocol, cycle: RequestResponseCycle) -> None:
        self._protocol = protocol
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

    def close_after(self) -> None:
        # uvicorn closes the transport when a response of a cycle not kept alive completes.
        self._cycle.keep_alive = False

    def on_disconnect(self, callback: Callable[[], None]) -> Callable[[], None]:
        if self._cycle.disconnected:
            callback()
            return _nothing
        waiting = self._protocol._on_lost
        waiting.append(callback)

        def stop() -> None:
            with contextlib.suppress(ValueError):
                waiting.remove(callback)

        return stop


def _nothing() -> None:
    pass


class _Upgrade:
    """:class:`~cacheproxy.serving.asgi.Upgrade` for one uvicorn request."""

    __slots__ = ("_cycle", "_protocol")

    def __init__(self, protocol: ServingProtocol, cycle: RequestResponseCycle) -> None:
        self._protocol = protocol
        self._cycle = cycle

    async def accept(self, status: int, headers: Sequence[tuple[bytes, bytes]]) -> _Tunnel:
        cycle = self._cycle
        if cycle.response_started:
            raise RuntimeError("the response has started: the connection cannot switch")
        if not self._protocol._upgrade_offered:
            raise RuntimeError("the request's upgrade offer has not been read")
        # uvicorn is done with this request: no response of its own, no next request.
        cycle.response_started = cycle.response_complete = True
        cycle.keep_alive = False
        tunnel = self._protocol._take_over(cycle)
        head = [_status_line(status)]
        head += [b"%s: %s\r\n" % (name, value) for name, value in headers]
        head.append(b"\r\n")
        if not cycle.disconnected:
            cycle.transport.write(b"".join(head))
        return tunnel


def _status_line(status: int) -> bytes:
    try:
        phrase = http.HTTPStatus(status).phrase.encode()
    except ValueError:
        phrase = b""
    return b"HTTP/1.1 %d %s\r\n" % (status, phrase)


class _Tunnel:
    """:class:`~cacheproxy.serving.asgi.Tunnel` over a uvicorn connection: what the client
    sends is buffered up to :data:`TUNNEL_BUFFER` bytes (then reading pauses until it is
    taken); writes wait while the transport's buffer is above its high-water mark."""

    __slots__ = ("_buffer", "_closed", "_cycle", "_protocol", "_ready")

    def __init__(self, protocol: ServingProtocol, cycle: RequestResponseCycle) -> None:
        self._protocol = protocol
        self._cycle = cycle
        self._buffer = bytearray()
        self._closed = False
        self._ready = asyncio.Event()

    def feed(self, data: bytes) -> None:
        self._buffer += data
        self._ready.set()
        if len(self._buffer) > TUNNEL_BUFFER:
            self._protocol.flow.pause_reading()

    def feed_eof(self) -> None:
        self._closed = True
        self._ready.set()

    async def receive(self) -> bytes:
        while not self._buffer and not self._closed:
            self._ready.clear()
            await self._ready.wait()
        data = bytes(self._buffer)
        self._buffer.clear()
        if not self._closed:
            self._protocol.flow.resume_reading()
        return data

    async def send(self, data: bytes) -> None:
        transport = self._cycle.transport
        if self._closed or transport.is_closing():
            return
        transport.write(data)
        flow = self._cycle.flow
        if flow.write_paused:
            await flow.drain()

    def close(self) -> None:
        self._closed = True
        self._ready.set()
        self._cycle.transport.close()


TUNNEL_BUFFER = 256 * 1024
"""How much a tunnel's client may send ahead of its reader before reading pauses."""


class _BodyWriter:
    """:class:`~cacheproxy.serving.asgi.BodyWriter` for one uvicorn request: parts go to the
    transport's ``writelines`` (uvloop hands them to ``writev`` as they are), with uvicorn's own
    flow control and its bookkeeping of the ``Content-Length`` or the chunked encoding it chose."""

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
        if cycle.scope["method"] == "HEAD":  # no body; uvicorn chooses no chunked framing for one
            return False
        if bool(cycle.chunked_encoding) != chunked:
            raise RuntimeError("the response's framing is not the one written")
        return True

    async def write(self, parts: Sequence[BodyPart], size: int) -> bool:
        if not await self._ready(chunked=False):
            return False
        cycle = self._cycle
        if size > cycle.expected_content_length:
            raise RuntimeError("Response content longer than Content-Length")
        cycle.expected_content_length -= size
        cycle.transport.writelines(parts)
        return True

    async def write_chunk(self, parts: Sequence[BodyPart]) -> bool:
        if not await self._ready(chunked=True):
            return False
        if size := sum(map(len, parts)):  # an empty chunk would end the body
            # One writelines: each write would be a send() of its own while the socket has room.
            self._cycle.transport.writelines([b"%x\r\n" % size, *parts, b"\r\n"])
        return True


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
