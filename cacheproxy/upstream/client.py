"""The HTTP client for the upstream API server, built from an :class:`UpstreamConfig`.

One ``httpx.AsyncClient`` per upstream, shared by every ListerWatcher; its owner (the daemon)
closes it. It carries:

- TLS as the config says: the CA bundle (or the system trust store), the client certificate,
  ``insecure-skip-tls-verify``, and ``tls-server-name`` (sent as SNI and verified against).
- HTTP/1.1 by default, each open watch on a connection of its own (lists reuse idle ones); the
  pool is unbounded: a cap would make the N+1st watch wait for a free connection. HTTP/2
  (``http2=True``, every request a stream on one connection, as client-go) is opt-in: httpcore
  1.0's HTTP/2 reader hands its lock from request to request in line, and a request whose frames
  another one read waits behind requests that block on the socket with nothing to read — events
  of a quiet watch wait for the next bytes on the connection (seconds, or minutes), a watch may
  not open, a paged list may not finish. Measured and explained in docs/configuration.md ("The
  upstream transport"). Against an HTTP/1.1-only server, or a plain ``http://`` URL, HTTP/1.1 is
  used either way.
- An :class:`httpx.Auth` that asks the :class:`TokenSource` for the bearer token on every
  request, so exec-plugin and in-cluster token rotation take effect without restarting.
- Timeouts: 10 s to connect (and to write a request); lists may go :data:`LIST_READ_TIMEOUT`
  seconds without receiving a byte; watches (:data:`WATCH_TIMEOUT`) have no read timeout — the
  server ends them at ``timeoutSeconds`` and the informer detects a stalled one.
- ``User-Agent: cacheproxy/<version>`` and ``Accept: application/json``.
- ``Accept-Encoding: gzip`` only when the server is far: the API server gzips every response
  over 128 KiB, which for a 70 MB list costs it about a second of CPU and us a tenth to undo —
  worth it on a slow link, a loss one hop away (in-cluster, loopback), where ``identity`` is
  asked for instead (client-go's ``DisableCompression``, offered for the same reason).
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

import httpx

from cacheproxy import __version__
from cacheproxy.errors import ConfigError
from cacheproxy.upstream.config import TokenSource, UpstreamConfig
from cacheproxy.upstream.connections import Connections
from cacheproxy.upstream.pooled import PooledTransport

__all__ = [
    "CONNECT_TIMEOUT",
    "LIST_READ_TIMEOUT",
    "LIST_TIMEOUT",
    "USER_AGENT",
    "WATCH_TIMEOUT",
    "BearerTokenAuth",
    "build_client",
    "connections_to",
    "ssl_context",
]

USER_AGENT = f"cacheproxy/{__version__}"
CONNECT_TIMEOUT = 10.0
LIST_READ_TIMEOUT = 60.0
"""Longest silence while a list response arrives (the API server may take seconds to start a
large uncached list; it never pauses long in the middle)."""
LIST_TIMEOUT = httpx.Timeout(
    connect=CONNECT_TIMEOUT, read=LIST_READ_TIMEOUT, write=CONNECT_TIMEOUT, pool=CONNECT_TIMEOUT
)
WATCH_TIMEOUT = httpx.Timeout(
    connect=CONNECT_TIMEOUT, read=None, write=CONNECT_TIMEOUT, pool=CONNECT_TIMEOUT
)


class BearerTokenAuth(httpx.Auth):
    """``Authorization: Bearer <token>`` with the token the source gives *now*; no header when it
    gives none (anonymous, or a client certificate does the authenticating)."""

    def __init__(self, tokens: TokenSource) -> None:
        self._tokens = tokens

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        token = await self._tokens.token()
        if token:
            request.headers["Authorization"] = f"Bearer {token}"
        yield request


def ssl_context(config: UpstreamConfig, *, client_cert: bool = True) -> ssl.SSLContext:
    """The client TLS context: verify with the CA (or the system store) unless told not to, and
    present the client certificate if there is one (and ``client_cert``: a forwarded request
    carries its caller's credentials, never the daemon's). httpx sets ALPN on it per
    connection."""
    try:
        ctx = ssl.create_default_context(
            cafile=str(config.ca_file) if config.ca_file and config.verify else None
        )
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"{config.source}: cannot load the CA {config.ca_file}: {exc}") from exc
    if not config.verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if config.client_cert is not None and client_cert:
        try:
            ctx.load_cert_chain(config.client_cert, config.client_key)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                f"{config.source}: cannot load the client certificate {config.client_cert} "
                f"(key {config.client_key}): {exc}"
            ) from exc
    return ctx


def build_client(
    config: UpstreamConfig, *, http2: bool = False, compression: bool | None = None
) -> httpx.AsyncClient:
    """An ``AsyncClient`` with ``base_url=config.server``; close it with ``aclose()``.

    ``http2``: offer HTTP/2 by ALPN (see the module docstring for why it is off by default).
    ``compression``: ask for gzip; None (auto) asks unless the server is nearby."""
    if compression is None:
        compression = not config.nearby
    context = ssl_context(config)
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=10)
    transport: dict[str, httpx.AsyncBaseTransport] = {}
    if not http2 and not config.proxy:
        # HTTP/1.1 straight to the server: through the forwarding connections (llhttp), httpx's
        # own transport only for protocol switches (cacheproxy.upstream.pooled).
        transport["transport"] = _pooled(config, context, limits)
    return _client(
        config,
        verify=context,
        http2=http2,
        auth=BearerTokenAuth(config.token_source),
        timeout=LIST_TIMEOUT,
        limits=limits,
        **transport,
        headers={
            "User-Agent": USER_AGENT,
            "Accept": "application/json",
            "Accept-Encoding": "gzip" if compression else "identity",
        },
    )


def connections_to(config: UpstreamConfig, context: ssl.SSLContext, **options: Any) -> Connections:
    """Keep-alive HTTP/1.1 connections to ``config``'s server (no proxy), TLS by ``context``
    when its URL says ``https``; ``options`` for :class:`Connections` (expiry, read-ahead)."""
    url = httpx.URL(config.server)
    tls = url.scheme == "https"
    return Connections(
        url.host,
        url.port or (443 if tls else 80),
        host_header=url.netloc,
        ssl_context=context if tls else None,
        server_hostname=config.tls_server_name or "",
        origin=f"{url.scheme}://{url.netloc.decode('ascii')}",
        connect_timeout=CONNECT_TIMEOUT,
        **options,
    )


def _pooled(
    config: UpstreamConfig, context: ssl.SSLContext, limits: httpx.Limits
) -> httpx.AsyncBaseTransport:
    # A list is decoded as it arrives: little of it may wait unread (httpcore read 64 KiB).
    connections = connections_to(config, context, read_high_water=64 * 1024)
    fallback = httpx.AsyncHTTPTransport(verify=context, limits=limits, trust_env=False)
    return PooledTransport(connections, fallback)


def _client(config: UpstreamConfig, **kwargs: Any) -> httpx.AsyncClient:
    """An ``AsyncClient`` for ``config``'s server, through its proxy, sending its TLS server
    name; ``kwargs`` say the rest."""
    hooks: dict[str, list[Callable[..., Any]]] = {}
    if config.tls_server_name:
        hooks["request"] = [_sni_hook(config.tls_server_name)]
    try:
        return httpx.AsyncClient(
            base_url=config.server,
            proxy=config.proxy,
            # Proxies were resolved into the config (with NO_PROXY); nothing else of the
            # environment (.netrc, SSL_CERT_FILE) may change how we talk to the API server.
            trust_env=False,
            event_hooks=hooks,
            **kwargs,
        )
    except ImportError as exc:  # a socks5:// proxy without socksio, h2 missing
        raise ConfigError(f"{config.source}: {exc}") from exc


def _sni_hook(name: str) -> Callable[[httpx.Request], Awaitable[None]]:
    async def set_sni(request: httpx.Request) -> None:
        # httpcore verifies the certificate against the SNI name when one is given.
        request.extensions["sni_hostname"] = name

    return set_sni
