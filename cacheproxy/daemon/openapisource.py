"""Where the server's ``/openapi/…`` documents come from: the upstream, asked with the daemon's
own credentials (:class:`UpstreamOpenApi`)."""

from __future__ import annotations

import httpx

from cacheproxy.errors import TransportError
from cacheproxy.server.openapi import Fetched

__all__ = ["UpstreamOpenApi"]


class UpstreamOpenApi:
    """The server's :class:`~cacheproxy.server.openapi.OpenApiSource`: OpenAPI documents from the
    upstream, with the daemon's own credentials (the client's were checked by the server)."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self._client = client

    async def fetch(self, target: str, *, accept: str, etag: str = "") -> Fetched:
        headers = {"Accept": accept}
        if etag:
            headers["If-None-Match"] = etag
        try:
            response = await self._client.get(target, headers=headers)
        except httpx.HTTPError as exc:
            raise TransportError(f"GET {target}: {exc or type(exc).__name__}") from exc
        got = response.headers.get
        return Fetched(
            code=response.status_code,
            body=response.content,
            content_type=got("content-type", ""),
            etag=got("etag", ""),
            cache_control=got("cache-control", ""),
            location=got("location", ""),
        )
