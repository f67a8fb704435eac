"""Discovery as both servers answer it: ``/api``, ``/apis``, ``/apis/{group}`` and a group
version's resource list, legacy or aggregated as the client's ``Accept`` negotiates.

The documents are :mod:`cacheproxy.kube.discovery`'s; what a server serves (its group versions,
the types in each, their verbs, and any entries it adds, such as the simulator's subresources) is
given by the server. Aggregated discovery may be answered as the API server does — public, with a
strong ETag and 304 on a match (``aggregated/etag.go``) — when the server asks for it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from cacheproxy.kube import discovery, status
from cacheproxy.kube.request import check_accepts_json
from cacheproxy.kube.resources import GroupVersion, ResourceType
from cacheproxy.kube.versions import NEWEST, KubeVersion
from cacheproxy.serving.asgi import Request, Send
from cacheproxy.serving.responses import JsonAnswers

__all__ = ["Discovery", "Document"]

Decorate = Callable[[dict[str, Any], Sequence[ResourceType]], dict[str, Any]]


def _as_is(doc: dict[str, Any], types: Sequence[ResourceType]) -> dict[str, Any]:
    return doc


@dataclass(frozen=True, slots=True)
class Document:
    """A discovery answer: the JSON body and its media type (aggregated or legacy)."""

    body: bytes
    content_type: bytes = b"application/json"
    aggregated: bool = False


@dataclass(frozen=True)
class Discovery:
    """What one server lists in discovery, and the documents that follow from it."""

    group_versions: Callable[[], list[GroupVersion]]
    types_in: Callable[[GroupVersion], Sequence[ResourceType]]
    verbs_for: discovery.VerbsFor
    decorate: Decorate = field(default=_as_is)
    """Entries the server adds to a document listing ``types`` (the simulator's subresources)."""
    answers: JsonAnswers = field(default_factory=JsonAnswers)
    """How the server answers in JSON (what a 406 names, pretty, compression)."""
    etag: bool = False
    """Answer aggregated discovery as cacheable (public, ETag, 304 on ``If-None-Match``)."""
    kube: Callable[[], KubeVersion] = field(default=lambda: NEWEST)
    """The kube-apiserver version answered as (which aggregated versions are served)."""

    def root(self, accept: str, *, core: bool, server_address: str) -> Document:
        """``/api`` (``core``) or ``/apis``; 406 unless JSON is acceptable."""
        gvs = [gv for gv in self.group_versions() if (gv.group == "") == core]
        version = discovery.negotiate_aggregated(accept, self.kube().aggregated_discovery_versions)
        if version is not None:
            doc = discovery.aggregated_discovery(
                gvs, self.types_in, self.verbs_for, version=version
            )
            doc = self.decorate(doc, [t for gv in gvs for t in self.types_in(gv)])
            ctype = discovery.aggregated_content_type(version).encode()
            return Document(orjson.dumps(doc), ctype, aggregated=True)
        check_accepts_json(accept, self.answers.representations)
        legacy = discovery.api_versions(server_address) if core else discovery.api_group_list(gvs)
        return Document(orjson.dumps(legacy))

    def group(self, name: str) -> Document:
        """``/apis/{group}``; 404 for a group not served."""
        versions = [gv.version for gv in self.group_versions() if gv.group == name]
        if not versions:
            raise status.resource_not_found()
        doc = {"kind": "APIGroup", "apiVersion": "v1", **discovery.api_group(name, versions)}
        return Document(orjson.dumps(doc))

    async def serve_groups(
        self, req: Request, send: Send, parts: Sequence[str], *, server_address: str
    ) -> bool:
        """Answer ``/api``, ``/apis`` or ``/apis/{group}`` (``parts``: the path split); False,
        with nothing sent, for any other path."""
        if parts in (["api"], ["apis"]):
            core = parts == ["api"]
            document = self.root(req.header("accept"), core=core, server_address=server_address)
        elif parts[:1] == ["apis"] and len(parts) == 2:
            document = self.group(parts[1])
        else:
            return False
        await self.send(req, send, document)
        return True

    def resources(self, gv: GroupVersion, types: Sequence[ResourceType]) -> Document:
        """``/api/v1`` or ``/apis/{group}/{version}``: ``types``, the group version's."""
        doc = discovery.api_resource_list(gv, types, self.verbs_for)
        return Document(orjson.dumps(self.decorate(doc, types)))

    async def send(self, req: Request, send: Send, document: Document) -> None:
        """Answer ``document``: as JSON, or aggregated (cacheable when ``etag``)."""
        if not (document.aggregated and self.etag):
            await self.answers.send(send, req, document.body, content_type=document.content_type)
            return
        # The upper-case hex SHA-512 of the document, as apiserver's aggregated/etag.go.
        etag = b'"%s"' % hashlib.sha512(document.body).hexdigest().upper().encode()
        if req.header("if-none-match") == etag.decode():
            headers = [(b"etag", etag), (b"cache-control", b"public"), (b"vary", b"Accept")]
            await send({"type": "http.response.start", "status": 304, "headers": headers})
            req.started = True
            await send({"type": "http.response.body", "body": b""})
            return
        await self.answers.send(
            send,
            req,
            document.body,
            content_type=document.content_type,
            cache_control=b"public",
            headers=[(b"etag", etag), (b"vary", b"Accept")],
        )
