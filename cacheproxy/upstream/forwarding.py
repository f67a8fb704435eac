"""Where requests forwarded as their callers sent them go: :class:`ForwardingTarget`, built by
:func:`build_forwarding_target` from the upstream config with **none of the daemon's
credentials**, and :class:`ImpersonatingTarget`, the daemon's own client for the callers it
forwards by impersonating them.

Each sends a request as given (method, path and query as bytes, headers, body) and gives an
answer with the same face — ``code``, ``headers`` as upstream sent them, ``network_stream``
(a switched connection's, else None), ``body()`` (its bytes as they arrive, transfer coding
undone, content coding kept) and ``aclose()`` — or raises :class:`TransportError`
(:class:`UpstreamTimeout` when it was time that ran out).

A :class:`ForwardingTarget` sends on its own keep-alive HTTP/1.1 connections
(:mod:`.connections`: a tenth of httpx's cost per request); requests that offer a protocol switch
(exec, attach, port-forward, websocket watches) and everything when a proxy stands in the way go
through an httpx transport, whose connections can be handed over once switched.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Final

import httpx

from cacheproxy.errors import ConfigError
from cacheproxy.upstream.apierrors import transport_error
from cacheproxy.upstream.client import CONNECT_TIMEOUT, connections_to, ssl_context
from cacheproxy.upstream.config import UpstreamConfig
from cacheproxy.upstream.connections import KEEPALIVE_EXPIRY, Answer, Connections

__all__ = ["ForwardingTarget", "ImpersonatingTarget", "build_forwarding_target"]

_TIMEOUT: Final = httpx.Timeout(
    None, connect=CONNECT_TIMEOUT, write=CONNECT_TIMEOUT, pool=CONNECT_TIMEOUT
).as_dict()
"""Per request: connecting and sending bounded; the answer's bytes may pause as long as they
like (a watch, ``logs -f``): a short request's whole exchange is bounded by its caller."""

Headers = Sequence[tuple[bytes, bytes]]


@dataclass(frozen=True, slots=True)
class ForwardingTarget:
    """Upstream's URL and what takes requests there as built: nothing added to or taken from a
    request or its answer (no credentials, default headers, cookies, redirects or decoding)."""

    base_url: httpx.URL
    transport: httpx.AsyncBaseTransport
    """For upgrades, and for every request when ``connections`` is None."""
    sni_hostname: str = ""
    """The TLS server name to send (``upstream.tlsServerName``; "": the URL's host)."""
    connections: Connections | None = None
    """Keep-alive HTTP/1.1 connections for every request but upgrades (None through a proxy)."""

    async def send(
        self, method: bytes, target: bytes, headers: Headers, body: bytes, *, upgrade: bool
    ) -> Answer | HttpxAnswer:
        """Send a request for ``target`` (path and query); its answer (see the module)."""
        if self.connections is not None and not upgrade:
            return await self.connections.send(method, target, headers, body)
        request = _request(self.base_url, method, target, headers, body)
        if self.sni_hostname:
            # httpcore verifies the certificate against the SNI name when one is given.
            request.extensions["sni_hostname"] = self.sni_hostname
        return await HttpxAnswer.of(request, self.transport.handle_async_request)

    async def aclose(self) -> None:
        if self.connections is not None:
            await self.connections.aclose()
        await self.transport.aclose()


@dataclass(frozen=True, slots=True)
class ImpersonatingTarget:
    """The daemon's own client (its credentials: the impersonation headers' authority)."""

    client: httpx.AsyncClient

    @property
    def base_url(self) -> httpx.URL:
        return self.client.base_url

    async def send(
        self, method: bytes, target: bytes, headers: Headers, body: bytes, *, upgrade: bool
    ) -> Answer | HttpxAnswer:
        request = _request(self.client.base_url, method, target, headers, body)
        client = self.client
        return await HttpxAnswer.of(request, lambda r: client.send(r, stream=True))


def build_forwarding_target(
    config: UpstreamConfig, *, idle_connection: float = KEEPALIVE_EXPIRY
) -> ForwardingTarget:
    """The :class:`ForwardingTarget` of ``config``'s server: the same trust, server name and
    proxy as :func:`~cacheproxy.upstream.build_client`, and no credentials of the daemon's (no
    client certificate, no token); its idle connections kept ``idle_connection`` seconds."""
    context = ssl_context(config, client_cert=False)
    try:
        transport = httpx.AsyncHTTPTransport(
            verify=context,
            http2=False,
            limits=httpx.Limits(
                max_connections=None,
                max_keepalive_connections=100,
                keepalive_expiry=idle_connection,
            ),
            proxy=config.proxy,
            trust_env=False,
        )
    except ImportError as exc:  # a socks5:// proxy without socksio
        raise ConfigError(f"{config.source}: {exc}") from exc
    url = httpx.URL(config.server)
    connections = None
    if not config.proxy:
        connections = connections_to(config, context, keepalive_expiry=idle_connection)
    return ForwardingTarget(url, transport, config.tls_server_name or "", connections)


def _request(
    base_url: httpx.URL, method: bytes, target: bytes, headers: Headers, body: bytes
) -> httpx.Request:
    return httpx.Request(
        method.decode("ascii"),
        base_url.copy_with(raw_path=target),
        headers=list(headers),
        content=body,
        extensions={"timeout": _TIMEOUT},
    )


class HttpxAnswer:
    """An httpx response with the face of a :class:`~.connections.Answer` (and a switched
    connection's stream, when it switched)."""

    __slots__ = ("_chunks", "_response", "code", "headers", "network_stream")

    def __init__(self, response: httpx.Response) -> None:
        self._response = response
        self._chunks: AsyncIterator[bytes] | None = None
        self.code = response.status_code
        self.headers = response.headers.raw
        self.network_stream = response.extensions.get("network_stream")

    @classmethod
    async def of(
        cls, request: httpx.Request, send: Callable[[httpx.Request], Awaitable[httpx.Response]]
    ) -> HttpxAnswer:
        try:
            return cls(await send(request))
        except httpx.HTTPError as exc:
            raise transport_error(exc) from exc

    async def body(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._response.aiter_raw():
                if chunk:
                    yield chunk
        except httpx.HTTPError as exc:
            raise transport_error(exc, during="the answer") from exc

    async def next_chunk(self) -> tuple[bytes, bool]:
        """As :meth:`.connections.Answer.next_chunk` (its end known only once asked past it)."""
        if self._chunks is None:
            self._chunks = self.body()
        try:
            return await anext(self._chunks), False
        except StopAsyncIteration:
            return b"", True

    async def aclose(self) -> None:
        await self._response.aclose()
