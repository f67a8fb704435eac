"""The ASGI side both servers share: the message types, one parsed request, and what our server
protocol offers a response beyond ASGI (scatter/gather writes, flow control).

Raw ASGI on purpose: a framework costs several times more per request on the hot list, get and
watch paths (docs/design.md §6, the serving figures). :class:`Request` parses what every handler reads — method,
path, query, headers, ``?pretty`` — once; the app subclasses it for what only it needs.

The extensions under :data:`BODY_WRITER`, :data:`RESPONSE_FLOW` and :data:`UPGRADE` are offered
by the uvicorn adapter (:mod:`cacheproxy.serving.uvicorn_adapter`); under any other server they are absent and
handlers fall back to plain ``send`` messages.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any, Protocol
from urllib.parse import parse_qs

import orjson

from cacheproxy.kube import status
from cacheproxy.kube.request import wants_pretty

__all__ = [
    "BODY_WRITER",
    "RESPONSE_FLOW",
    "UPGRADE",
    "BodyPart",
    "BodyWriter",
    "Message",
    "Receive",
    "Request",
    "ResponseFlow",
    "Scope",
    "Send",
    "Tunnel",
    "Upgrade",
    "lifespan",
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
BodyPart = bytes | memoryview
"""A piece of a body as written: stored bytes, or a view of bytes decompressed together."""


class BodyWriter(Protocol):
    """Writes a started response's body from parts, without joining them: the transport hands
    them to ``writev`` as they are (nothing copied in Python)."""

    async def write(self, parts: Sequence[BodyPart], size: int) -> bool:
        """Parts of a body whose ``Content-Length`` was sent; ``size`` is their total length.
        False when nothing was written: the client is gone (or the request was a HEAD)."""

    async def write_chunk(self, parts: Sequence[BodyPart]) -> bool:
        """One chunk, made of ``parts``, of a response sent without a ``Content-Length``
        (``Transfer-Encoding: chunked``); the last message through ``send`` ends it. False when
        nothing was written: the client is gone (or the request was a HEAD)."""


BODY_WRITER = "cacheproxy.body_writer"
"""The ``scope["extensions"]`` key under which the server protocol offers a :class:`BodyWriter`
on plain-TCP connections."""


class ResponseFlow(Protocol):
    """Whether a response's client is taking its bytes, and a way to drop a client that is not."""

    async def writable(self, within: float) -> bool:
        """True once the connection takes more bytes (at once unless the client has fallen
        behind); False if it did not within ``within`` seconds."""
        ...

    def abort(self) -> None:
        """Drop the connection now, without waiting for what is buffered to be sent."""
        ...

    def close_after(self) -> None:
        """Close the connection once this response is complete (no next request on it)."""
        ...

    def on_disconnect(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` once if the connection is lost before this response completes
        (at once if it already was); what it returns stops that. Cheaper than a task waiting
        on ``receive`` for the ``http.disconnect``."""
        ...


RESPONSE_FLOW = "cacheproxy.response_flow"
"""The ``scope["extensions"]`` key under which the server protocol offers a
:class:`ResponseFlow` on every connection."""


class Tunnel(Protocol):
    """A connection taken over after a ``101 Switching Protocols``: bytes both ways."""

    async def receive(self) -> bytes:
        """The next bytes the client sent (as many as have arrived); ``b""`` once it closed."""
        ...

    async def send(self, data: bytes) -> None:
        """Bytes to the client, waiting while it is behind."""
        ...

    def close(self) -> None:
        """Close the connection (what was sent is flushed first)."""
        ...


class Upgrade(Protocol):
    """A request that offered to upgrade its connection (``Connection: Upgrade``) may be
    answered by switching protocols: after :meth:`accept` the connection is the handler's."""

    async def accept(self, status: int, headers: Sequence[tuple[bytes, bytes]]) -> Tunnel:
        """Send the response head (``101`` and its headers, as given) and take the connection
        over; the request's ``send`` and ``receive`` are done with."""
        ...


UPGRADE = "cacheproxy.upgrade"
"""The ``scope["extensions"]`` key under which the server protocol offers an :class:`Upgrade`
to a request that asked for one."""


class Request:
    """One HTTP request as the handlers read it. ``started`` turns true once the response's
    start was sent: from then on an error can only end the response, not answer it."""

    __slots__ = (
        "_disconnected",
        "_headers",
        "_receive",
        "flow",
        "method",
        "path",
        "peer_user",
        "pretty",
        "query",
        "scope",
        "started",
        "upgrade",
        "writer",
    )

    def __init__(self, scope: Scope, receive: Receive) -> None:
        self.scope = scope
        self._receive = receive
        extensions = scope.get("extensions") or {}
        tls = extensions.get("tls") or {}
        self.peer_user: tuple[str, tuple[str, ...]] | None = tls.get("peer_user")
        """``(CommonName, Organizations)`` of a verified client certificate, if one was shown."""
        self.writer: BodyWriter | None = extensions.get(BODY_WRITER)
        self.flow: ResponseFlow | None = extensions.get(RESPONSE_FLOW)
        self.upgrade: Upgrade | None = extensions.get(UPGRADE)
        """Offered when the request asked to upgrade its connection and the server can."""
        self.method: str = scope["method"]
        self.path: str = scope["path"]
        self.query: dict[str, list[str]] = parse_qs(
            scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True
        )
        self._headers: dict[str, str] = {
            k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]
        }
        self.pretty = wants_pretty(self.query, self.header("user-agent"))
        """Indented JSON: ``?pretty=true``, or a person's User-Agent (as the API server)."""
        self.started = False
        self._disconnected = False

    @property
    def receive(self) -> Receive:
        """The ASGI ``receive`` of the request, for handing it on whole to another app."""
        return self._receive

    @property
    def loopback(self) -> bool:
        """The client is on this machine: a loopback address, or a Unix socket (no address)."""
        client = self.scope.get("client")
        if not client:
            return True
        try:
            return ipaddress.ip_address(client[0]).is_loopback
        except ValueError:
            return False

    def header(self, name: str) -> str:
        """A header's value (``name`` in lower case); "" when absent."""
        return self._headers.get(name, "")

    def param(self, name: str) -> str:
        """The first value of a query parameter; "" when absent."""
        return (self.query.get(name) or [""])[0]

    async def body(self) -> bytes:
        """The whole request body (empty if the client went away first)."""
        chunks = []
        while True:
            message = await self._receive()
            if message["type"] == "http.disconnect":
                self._disconnected = True
                break
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        return b"".join(chunks)

    async def json(self) -> Any:
        """The body parsed as JSON; a 400 when it is not."""
        raw = await self.body()
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise status.bad_request(f"the request body is not valid JSON: {exc}") from None

    async def wait_disconnect(self) -> None:
        """Until the client goes away (a streaming response's cue to stop)."""
        if self._disconnected:
            return
        while True:
            message = await self._receive()
            if message["type"] == "http.disconnect":
                return


async def lifespan(receive: Receive, send: Send) -> None:
    """Answer the ASGI lifespan protocol (nothing to start or stop)."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
