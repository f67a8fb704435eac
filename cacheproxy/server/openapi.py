"""``/openapi/v2`` and ``/openapi/v3``: the upstream API server's OpenAPI documents, fetched on
demand and kept, so that ``kubectl explain`` through the cache prints what it prints against the
API server, and ``kubectl apply`` gets as far as its write (refused: :mod:`.refusals`) instead of
failing to download OpenAPI.

What is served, and how (kube-apiserver's ``kube-openapi`` handlers are the reference):

- ``/openapi/v2``: upstream's document as it is, in the representation asked for — JSON, or the
  protobuf kubectl 1.27 asks for (``application/com.github.proto-openapi.spec.v2@v1.0+protobuf``),
  which cannot be trimmed without its schema, so neither is;
- ``/openapi/v3``: upstream's index of group versions, trimmed to those of the resources the
  cache serves (discovery lists only those, so no client looks for another);
- ``/openapi/v3/{api/v1 | apis/G/V}?hash=H``: upstream's document of a served group version. The
  hash in the index's URLs is the document's ETag: a document asked for by its hash is kept as
  long as upstream names that hash (``Cache-Control: public, immutable``, as upstream says); an
  outdated hash is upstream's 301 to the current one.

Documents are fetched through an :class:`OpenApiSource` (the daemon's upstream client) when first
asked for, one fetch at a time per document, and re-checked after :data:`FRESH_SECONDS`
(conditionally, by ETag, where upstream gives one). While upstream cannot be reached the last
document is served; before there is one, a 503 with ``Retry-After``. A client's ``If-None-Match``
is answered with 304, and large documents are gzipped (once) for clients that accept it.
Nothing is fetched until a client asks: a daemon whose clients never explain holds nothing.
"""

from __future__ import annotations

import asyncio
import gzip
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Protocol

import orjson

from cacheproxy.errors import ApiError, CacheProxyError
from cacheproxy.kube import status
from cacheproxy.kube.resources import GroupVersion
from cacheproxy.serving import Request, Send

__all__ = ["FRESH_SECONDS", "Fetched", "OpenApiDocuments", "OpenApiSource"]

FRESH_SECONDS = 60.0
"""How long a document is served before upstream is asked whether it changed (new CRDs show
within this)."""
GZIP_ABOVE = 128 << 10
"""Bodies longer than this are gzipped for clients that accept it (the API server's threshold)."""
JSON = "application/json"
PROTOBUF = {
    "v2": "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
    "v3": "application/com.github.proto-openapi.spec.v3@v1.0+protobuf",
}


@dataclass(frozen=True, slots=True)
class Fetched:
    """One upstream answer: its code, body and the headers that matter here."""

    code: int
    body: bytes
    content_type: str = JSON
    etag: str = ""
    cache_control: str = ""
    location: str = ""


class OpenApiSource(Protocol):
    """Where the documents come from: ``GET target`` upstream with these ``Accept`` and
    ``If-None-Match`` headers (raise a :class:`~cacheproxy.errors.CacheProxyError` when upstream
    cannot be reached)."""

    async def fetch(self, target: str, *, accept: str, etag: str = "") -> Fetched: ...


@dataclass(slots=True)
class _KeptDocument:
    fetched: Fetched
    at: float
    gzipped: bytes | None = None


class OpenApiDocuments:
    """The OpenAPI paths of one server (see the module docstring)."""

    def __init__(
        self,
        source: OpenApiSource,
        *,
        served: Callable[[], Collection[GroupVersion]],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._source = source
        self._served = served
        self._clock = clock
        self._kept: dict[tuple[str, str], _KeptDocument] = {}
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}

    async def serve(self, req: Request, send: Send, parts: list[str]) -> None:
        """Answer ``GET /openapi/…`` (``parts``: the path split)."""
        version = parts[1] if len(parts) > 1 else ""
        if version not in PROTOBUF or (version == "v2" and len(parts) > 2):
            raise status.resource_not_found()
        accept = PROTOBUF[version] if "protobuf" in req.header("accept") else JSON
        path = "/" + "/".join(parts)
        if len(parts) == 2:
            fetched, kept = await self._document(path, accept)
            if version == "v3" and fetched.code == 200:
                fetched = self._trimmed_index(fetched)
            await self._send(req, send, fetched, kept)
            return
        if _group_version(parts[2:]) not in self._served():
            raise status.resource_not_found()
        fetched, kept = await self._document(path, accept, hash_=req.param("hash"))
        await self._send(req, send, fetched, kept)

    # ------------------------------------------------------------------ documents

    async def _document(
        self, path: str, accept: str, *, hash_: str = ""
    ) -> tuple[Fetched, _KeptDocument | None]:
        """The answer for ``path`` (and the kept document it is, if it is one)."""
        key = (path, accept)
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:  # one fetch at a time per document: the others wait for it
            kept = self._kept.get(key)
            now = self._clock()
            if kept is not None and (
                (hash_ and kept.fetched.etag == f'"{hash_}"')
                or (not hash_ and now - kept.at < FRESH_SECONDS)
            ):
                return kept.fetched, kept
            target = f"{path}?hash={hash_}" if hash_ else path
            revalidate = kept.fetched.etag if kept is not None and not hash_ else ""
            try:
                fetched = await self._source.fetch(target, accept=accept, etag=revalidate)
            except CacheProxyError as err:
                if kept is not None:
                    return kept.fetched, kept  # upstream away: the last document
                raise status.service_unavailable(
                    f"cacheproxy cannot fetch {path} from the API server: {_reason(err)}",
                    retry_after=1,
                ) from err
            if fetched.code == 304 and kept is not None:
                kept.at = now
                return kept.fetched, kept
            if fetched.code == 200:
                kept = self._kept[key] = _KeptDocument(fetched, now)
                return fetched, kept
            if kept is not None and fetched.code >= 500:
                return kept.fetched, kept
            return fetched, None  # a redirect to the current hash, a refusal: as upstream said

    def _trimmed_index(self, index: Fetched) -> Fetched:
        """The v3 index with only the group versions served."""
        try:
            doc = orjson.loads(index.body)
            paths = doc["paths"]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            return index
        served = {_index_key(gv) for gv in self._served()}
        doc["paths"] = {k: v for k, v in paths.items() if k in served}
        return Fetched(200, orjson.dumps(doc), index.content_type, "", index.cache_control)

    # ------------------------------------------------------------------ answers

    async def _send(
        self, req: Request, send: Send, fetched: Fetched, kept: _KeptDocument | None
    ) -> None:
        headers = [(b"content-type", (fetched.content_type or JSON).encode("latin-1"))]
        headers.append((b"cache-control", (fetched.cache_control or "no-cache, private").encode()))
        if fetched.etag:
            headers.append((b"etag", fetched.etag.encode("latin-1")))
        if fetched.location:
            headers.append((b"location", fetched.location.encode("latin-1")))
        headers.append((b"vary", b"Accept, Accept-Encoding"))
        code, body = fetched.code, fetched.body
        if fetched.etag and code == 200 and req.header("if-none-match") == fetched.etag:
            code, body = 304, b""
        elif len(body) > GZIP_ABOVE and "gzip" in req.header("accept-encoding"):
            if kept is not None and kept.fetched is fetched:
                if kept.gzipped is None:
                    kept.gzipped = gzip.compress(body, compresslevel=1)
                body = kept.gzipped
            else:
                body = gzip.compress(body, compresslevel=1)
            headers.append((b"content-encoding", b"gzip"))
        headers.append((b"content-length", b"%d" % len(body)))
        await send({"type": "http.response.start", "status": code, "headers": headers})
        req.started = True
        await send({"type": "http.response.body", "body": body})


def _group_version(parts: list[str]) -> GroupVersion | None:
    """``api/v1`` → core v1, ``apis/G/V`` → G/V; None for anything else."""
    if len(parts) == 2 and parts[0] == "api":
        return GroupVersion("", parts[1])
    if len(parts) == 3 and parts[0] == "apis":
        return GroupVersion(parts[1], parts[2])
    return None


def _index_key(gv: GroupVersion) -> str:
    return f"apis/{gv.group}/{gv.version}" if gv.group else f"api/{gv.version}"


def _reason(err: CacheProxyError) -> str:
    return err.message if isinstance(err, ApiError) else str(err)
