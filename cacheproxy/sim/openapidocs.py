"""The simulator's OpenAPI: ``/openapi/v3`` (the index and one document per group version) and
``/openapi/v2``, so that ``kubectl explain`` and ``kubectl apply`` work against the simulator
(and through a cacheproxy in front of it) as against an API server.

The v3 documents are kube-apiserver v1.28.7's, v1.32's and v1.36's own (:data:`RELEASES`: the source and
the file of each), trimmed to the built-in resources the simulator serves — their paths, and
every schema those reach — and kept beside this module (gzipped JSON, each schema once however
many group versions use it); a simulator serves the release its ``gitVersion`` prints Tables as
(1.32 from 1.32 on, 1.36 from 1.36 on). ``tests/e2e/test_openapi.py`` checks each against its real API server's and
rewrites the file when ``CACHEPROXY_WRITE_OPENAPI=1`` is set (:func:`trim` is the one trimming).

Served as kube-openapi serves them: the index lists ``/openapi/v3/<gv>?hash=<H>`` where H is the
upper-case hex SHA-512 of the document, which is also its ETag; a document asked for by its hash
is ``public, immutable``, by another hash a 301 to the current one. The index's Content-Type is
``text/plain``, as the API server's (it sets none).

Known differences from the API server: a version between two releases is described as the
older one; custom resources and the index entries that are not group versions
(``/version``, ``.well-known``…) are not described; ``/openapi/v2`` is an empty document
(``swagger`` and ``info`` only, in JSON or in the protobuf kubectl 1.27 asks for) — enough for
kubectl, which explains and validates with v3 and patches built-in kinds from its own types.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
from collections.abc import Collection, Mapping
from importlib import resources
from typing import Any, NamedTuple

import orjson

from cacheproxy.kube import status
from cacheproxy.kube.resources import GroupVersion
from cacheproxy.kube.versions import KUBE_1_36, NEWEST, OLDEST, KubeVersion
from cacheproxy.serving import Request, Send

__all__ = ["RELEASES", "Release", "SimOpenApi", "release_of", "trim"]


class Release(NamedTuple):
    """One stored set of documents: the API server they were read from, and their file."""

    source: str
    data: str


RELEASES = {
    OLDEST: Release("kube-apiserver v1.28.7", "openapi-v3-1.28.json.gz"),
    NEWEST: Release("kube-apiserver v1.32", "openapi-v3-1.32.json.gz"),
    KUBE_1_36: Release("kube-apiserver v1.36.2 (OpenShift's fork)", "openapi-v3-1.36.json.gz"),
}
V2_PROTOBUF = b"application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
JSON = b"application/json"
_SCHEMAS = "#/components/schemas/"

Json = dict[str, Any]


# ---------------------------------------------------------------------------- trimming


def _refs(node: Any, found: set[str]) -> None:
    """The schema names ``node`` refers to (a CRD schema's property named ``$ref`` is no ref)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                if value.startswith(_SCHEMAS):
                    found.add(value.removeprefix(_SCHEMAS))
            else:
                _refs(value, found)
    elif isinstance(node, list):
        for value in node:
            _refs(value, found)


def _serves(path: str, plurals: Collection[str], prefix: int) -> bool:
    """Whether an OpenAPI path is one of ``plurals``'s (``prefix``: segments of the group
    version: 2 for ``/api/v1``, 3 for ``/apis/g/v``)."""
    rest = path.strip("/").split("/")[prefix:]
    if rest[:1] == ["watch"]:
        rest = rest[1:]
    if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] in plurals:
        return True
    return bool(rest) and rest[0] in plurals


def release_of(version: KubeVersion) -> Release:
    """The stored documents a simulator answering as ``version`` serves."""
    return RELEASES[version.table_columns]


def trim(
    documents: Mapping[str, Json], served: Mapping[str, Collection[str]], *, source: str
) -> Json:
    """The stored form of ``documents`` (an API server's v3 documents by index key, ``api/v1``
    or ``apis/G/V``) keeping the paths of the ``served`` plurals of each and the schemas they
    reach, each schema stored once; ``source`` names the API server."""
    schemas: dict[str, Any] = {}
    kept: dict[str, Json] = {}
    openapi = "3.0.0"
    for key, plurals in served.items():
        doc = documents[key]
        openapi = doc.get("openapi", openapi)
        prefix = 2 if key.startswith("api/") else 3
        paths = {p: v for p, v in doc["paths"].items() if _serves(p, plurals, prefix)}
        available = doc["components"]["schemas"]
        todo: set[str] = set()
        _refs(paths, todo)
        reached: list[str] = []
        while todo:
            name = todo.pop()
            if name in reached or name not in available:
                continue
            reached.append(name)
            more: set[str] = set()
            _refs(available[name], more)
            todo |= more - set(reached)
        names = [n for n in available if n in set(reached)]  # the document's order
        for name in names:
            schemas[name] = available[name]
        components = {k: v for k, v in doc["components"].items() if k != "schemas"}
        kept[key] = {"paths": paths, "components": components, "schemas": names}
    return {"source": source, "openapi": openapi, "schemas": schemas, "documents": kept}


@functools.cache
def _stored(data: str) -> Json:
    raw = resources.files(__package__).joinpath(data).read_bytes()
    stored: Json = orjson.loads(gzip.decompress(raw))
    return stored


# ---------------------------------------------------------------------------- serving


def _field(number: int, value: bytes) -> bytes:
    """A length-delimited protobuf field."""
    out = bytearray([number << 3 | 2])
    size = len(value)
    while size >= 0x80:
        out.append(size & 0x7F | 0x80)
        size >>= 7
    out.append(size)
    return bytes(out) + value


def _index_key(gv: GroupVersion) -> str:
    return f"apis/{gv.group}/{gv.version}" if gv.group else f"api/{gv.version}"


class SimOpenApi:
    """The OpenAPI paths of one simulator reporting ``version`` (its ``gitVersion``)."""

    def __init__(self, version: str) -> None:
        self.version = version
        self.release = release_of(KubeVersion.parse(version) or NEWEST)
        self._documents: dict[str, tuple[bytes, str]] = {}

    def _document(self, key: str) -> tuple[bytes, str] | None:
        """The v3 document of index key ``key`` and its hash (None: not described)."""
        built = self._documents.get(key)
        if built is None:
            stored = _stored(self.release.data)
            kept = stored["documents"].get(key)
            if kept is None:
                return None
            schemas = stored["schemas"]
            doc = {
                "openapi": stored["openapi"],
                "info": {"title": "Kubernetes", "version": self.version},
                "paths": kept["paths"],
                "components": {
                    "schemas": {name: schemas[name] for name in kept["schemas"]},
                    **kept["components"],
                },
            }
            body = orjson.dumps(doc)
            built = self._documents[key] = (body, hashlib.sha512(body).hexdigest().upper())
        return built

    async def serve(
        self, req: Request, send: Send, parts: list[str], served: Collection[GroupVersion]
    ) -> None:
        """Answer ``GET /openapi/…`` for a simulator serving the group versions ``served``."""
        if parts == ["openapi", "v2"]:
            await self._v2(req, send)
            return
        if parts[:2] != ["openapi", "v3"]:
            raise status.resource_not_found()
        accept = req.header("accept")
        if "protobuf" in accept and "json" not in accept and "*/*" not in accept:
            raise status.not_acceptable(["application/json"])
        keys = [_index_key(gv) for gv in served]
        if len(parts) == 2:
            paths = {}
            for key in keys:
                found = self._document(key)
                if found is not None:
                    url = f"/openapi/v3/{key}?hash={found[1]}"
                    paths[key] = {"serverRelativeURL": url}
            body = orjson.dumps({"paths": paths})
            await _send(send, 200, body, [(b"content-type", b"text/plain; charset=utf-8")])
            return
        key = "/".join(parts[2:])
        found = self._document(key) if key in keys else None
        if found is None:
            raise status.resource_not_found()
        body, digest = found
        etag = f'"{digest}"'.encode()
        asked = req.param("hash")
        if asked and asked != digest:
            location = f"/openapi/v3/{key}?hash={digest}".encode()
            headers = [(b"content-type", JSON), (b"etag", etag), (b"location", location)]
            await _send(send, 301, b"", headers)
            return
        cache = b"public, immutable" if asked else b"no-cache, private"
        headers = [(b"content-type", JSON), (b"cache-control", cache), (b"etag", etag)]
        if req.header("if-none-match") == etag.decode():
            await _send(send, 304, b"", headers)
            return
        await _send(send, 200, body, headers)

    async def _v2(self, req: Request, send: Send) -> None:
        """An empty v2 document (see the module docstring), JSON or protobuf."""
        info = {"title": "Kubernetes", "version": self.version}
        if "protobuf" in req.header("accept"):
            body = _field(1, b"2.0") + _field(
                2, _field(1, info["title"].encode()) + _field(2, self.version.encode())
            )
            content_type = V2_PROTOBUF
        else:
            doc = {"swagger": "2.0", "info": info, "paths": {}, "definitions": {}}
            body, content_type = orjson.dumps(doc), JSON
        etag = f'"{hashlib.sha512(body).hexdigest().upper()}"'.encode()
        await _send(send, 200, body, [(b"content-type", content_type), (b"etag", etag)])


async def _send(send: Send, code: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    out = [*headers, (b"vary", b"Accept"), (b"content-length", b"%d" % len(body))]
    if not any(name == b"cache-control" for name, _ in headers):
        out.append((b"cache-control", b"no-cache, private"))
    await send({"type": "http.response.start", "status": code, "headers": out})
    await send({"type": "http.response.body", "body": body})
