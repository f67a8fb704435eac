"""httpx's transport over the forwarding connections (:mod:`.connections`): the daemon's own
client (its lists, watches, reviews and discovery) keeps httpx's face — auth flow, default
headers, hooks, decoding, errors — while its bytes go through llhttp instead of httpcore, h11
and anyio, whose work per chunk of a watch stream cost more than the rest of an event's
ingestion (a watch event is usually one chunk).

- A request is sent as built (its ``Host`` and ``Content-Length`` are the connections' own); its
  answer's body arrives chunk by chunk as the server sends it, content coding kept for httpx to
  undo.
- Timeouts as httpx's: ``connect`` (and writing the request) by the connections, ``read`` per
  chunk here (none for a watch); the errors are httpx's own (``ConnectError``,
  ``ConnectTimeout``, ``ReadError``, ``ReadTimeout``), caused by what went wrong, so that
  :func:`~.apierrors.transport_error` words them as before.
- The ``network_stream`` extension tells the connection's addresses and TLS object (not a
  stream to take over: no answer here switches protocols).
- A request that offers a protocol switch (``Upgrade``) goes to ``fallback`` (httpx's own
  transport), which hands over the switched connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Final

import httpx

from cacheproxy.errors import TransportError, UpstreamTimeout
from cacheproxy.upstream.connections import Answer, Connections

__all__ = ["PooledTransport"]

_PIECE: Final = 64 * 1024
"""Bytes handed on at most at once, as httpcore read them: a list is decoded item by item as
it arrives, and what one piece holds is parsed at once (items take ~10x their bytes)."""

_SET_BY_CONNECTIONS: Final = frozenset({b"host", b"content-length", b"transfer-encoding"})


class PooledTransport(httpx.AsyncBaseTransport):
    """See the module. Closing it closes both ``connections`` and ``fallback``."""

    def __init__(self, connections: Connections, fallback: httpx.AsyncBaseTransport) -> None:
        self._connections = connections
        self._fallback = fallback

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if "upgrade" in request.headers:
            return await self._fallback.handle_async_request(request)
        body = await request.aread()
        headers = [(n, v) for n, v in request.headers.raw if n.lower() not in _SET_BY_CONNECTIONS]
        try:
            answer = await self._connections.send(
                request.method.encode("ascii"), request.url.raw_path, headers, body
            )
        except UpstreamTimeout as exc:
            raise httpx.ConnectTimeout(str(exc), request=request) from exc
        except TransportError as exc:
            raise httpx.ConnectError(str(exc), request=request) from exc
        timeouts = request.extensions.get("timeout") or {}
        return httpx.Response(
            answer.code,
            headers=answer.headers,
            stream=_Body(answer, request, timeouts.get("read")),
            extensions={"http_version": b"HTTP/1.1", "network_stream": _Socket(answer)},
        )

    async def aclose(self) -> None:
        await self._connections.aclose()
        await self._fallback.aclose()


class _Socket:
    """What httpx's ``network_stream`` extension tells of a connection (httpcore's names)."""

    __slots__ = ("_answer",)

    _NAMES: Final = {
        "client_addr": "sockname",
        "server_addr": "peername",
        "ssl_object": "ssl_object",
        "socket": "socket",
    }

    def __init__(self, answer: Answer) -> None:
        self._answer = answer

    def get_extra_info(self, info: str) -> object:
        name = self._NAMES.get(info)
        return self._answer.socket_info(name) if name is not None else None


class _Body(httpx.AsyncByteStream):
    """An answer's body as it arrives; each wait for the next bytes bounded by ``read``."""

    def __init__(self, answer: Answer, request: httpx.Request, read: float | None) -> None:
        self._answer = answer
        self._request = request
        self._read = read

    async def __aiter__(self) -> AsyncIterator[bytes]:
        answer, read = self._answer, self._read
        last = False
        while not last:
            try:
                if read is None:
                    chunk, last = await answer.next_chunk()
                else:
                    async with asyncio.timeout(read):
                        chunk, last = await answer.next_chunk()
            except TimeoutError:
                raise httpx.ReadTimeout(
                    f"nothing received for {read:g} s", request=self._request
                ) from None
            except TransportError as exc:
                raise httpx.ReadError(str(exc), request=self._request) from exc
            if len(chunk) <= _PIECE:
                if chunk:
                    yield chunk
                continue
            for at in range(0, len(chunk), _PIECE):
                yield chunk[at : at + _PIECE]

    async def aclose(self) -> None:
        await self._answer.aclose()
