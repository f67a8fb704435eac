"""Serving get and list from the cache, and what both read of a request.

- get: one object, after waiting for a ``resourceVersion`` the cache has not reached (≤ 3 s);
- list: a page of the current state or of an older snapshot (:class:`~.resource.ServedResource`
  keeps the API server's resourceVersion and paging rules), its items written from the store's
  bytes with scatter/gather writes — never joined into one body — unless the answer is re-formed
  (a Table, or indented JSON for a person);
- the form of the answer: JSON as stored, a ``meta.k8s.io`` Table, or ``PartialObjectMetadata``
  (``…List`` for lists) when ``Accept`` asks for one (only Accepts with an ``as=`` parameter pay
  for parsing it; :mod:`cacheproxy.kube.negotiation`);
- the :class:`~.query.Query` a list or watch selects with: namespace, label, field, index and
  shard selectors, and the namespaces the user may read in the namespace-filtered mode. A list
  served with a ``shardSelector`` echoes it in ``metadata.shardInfo`` (KEP-5866,
  :mod:`cacheproxy.kube.sharding`).
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass

import orjson

from cacheproxy.informer.store import Entry
from cacheproxy.kube import status
from cacheproxy.kube.labels import LabelSelector
from cacheproxy.kube.listoptions import ListOptions
from cacheproxy.kube.negotiation import negotiate_answer
from cacheproxy.kube.partial import Reform, list_meta, partial_list_head
from cacheproxy.kube.request import REPRESENTATIONS, check_accepts_json
from cacheproxy.kube.sharding import parse_shard_selector
from cacheproxy.kube.table import include_object, table
from cacheproxy.server.admission import ServedRequest
from cacheproxy.server.options import JSON_ANSWERS
from cacheproxy.server.query import Query, parse_index_selector, validate_fields
from cacheproxy.server.resource import GROUP_ITEMS, ServedList, ServedResource
from cacheproxy.serving import JSON, NO_CACHE, BodyPart, Send, send_groups, send_parts
from cacheproxy.serving.compression import IDENTITY, Compression, send_gzipped

__all__ = ["ResponseForm", "build_query", "negotiate", "serve_get", "serve_list"]

METADATA_BATCH = 500
"""PartialObjectMetadata items encoded between two yields to the event loop (each is parsed)."""


@dataclass(frozen=True, slots=True)
class ResponseForm:
    """How to answer a read: as stored, as a Table of version ``table``, or each object
    re-encoded (``reform``: as ``PartialObjectMetadata``, without managedFields)."""

    table: str | None = None
    include: str = "Metadata"
    """A Table's ``includeObject``."""
    reform: Reform | None = None


_AS_STORED = ResponseForm()


def negotiate(
    req: ServedRequest, *, verb: str | None = None, keeps_managed_fields: bool = False
) -> ResponseForm:
    """The answer's form from ``Accept`` for a ``verb`` (get, list, watch; the request's own when
    None); 406 when neither JSON, a Table nor metadata is acceptable. ``drop`` of managedFields
    costs a re-encoding only where they are kept (``keeps_managed_fields``): elsewhere the
    stored objects have none."""
    accept = req.header("accept")
    # Fast path: no ``as=`` or ``drop=`` parameter, plain JSON (only kubectl-style and
    # metadata-only Accepts pay for parsing).
    lowered = accept.lower()
    if "as=" not in lowered and "drop=" not in lowered:
        check_accepts_json(accept)
        return _AS_STORED
    answer = negotiate_answer(accept, verb=verb or req.verb)
    if answer is None:
        check_accepts_json(accept)  # the 406 of a client that takes no JSON at all
        raise status.not_acceptable(REPRESENTATIONS)
    if answer.kind == "table":
        return ResponseForm(answer.version, include_object(req.query))
    drop = answer.drop_managed_fields and keeps_managed_fields
    if answer.kind == "metadata":
        return ResponseForm(reform=Reform(answer.api_version, drop))
    return ResponseForm(reform=Reform(drop_managed_fields=True)) if drop else _AS_STORED


def build_query(
    req: ServedRequest, res: ServedResource, namespace: str | None, opts: ListOptions
) -> Query:
    """What a list or watch of ``res`` selects (400 for selectors the resource cannot answer)."""
    fields = validate_fields(res.rtype, opts.field_selector, res.index_paths)
    index_text = req.param("indexSelector")
    index = (
        parse_index_selector(index_text, res.index_paths)
        if index_text
        else LabelSelector.EVERYTHING
    )
    return Query(
        namespace=namespace,
        labels=opts.label_selector,
        fields=fields,
        index=index,
        namespaces=req.namespaces,
        shard=parse_shard_selector(req.param("shardSelector")),
    )


async def serve_get(
    req: ServedRequest,
    send: Send,
    res: ServedResource,
    *,
    namespace: str | None,
    name: str,
    form: ResponseForm,
    compression: Compression = IDENTITY,
) -> None:
    """A get, from the cache's current state (:func:`.readexec.decide` chose it); gzipped as
    ``compression`` says (an object passes the API server's 128 KiB rarely)."""
    entry = res.get(namespace, name)
    if form.table:
        obj = entry.object()
        doc = table(
            res.table_printer(),
            [obj],
            version=form.table,
            include=form.include,
            resource_version=str(obj.get("metadata", {}).get("resourceVersion", "")),
        )
        await JSON_ANSWERS.send(send, req, orjson.dumps(doc), compression=compression)
        return
    if form.reform is not None:
        await JSON_ANSWERS.send(send, req, form.reform.encode(entry.raw), compression=compression)
        return
    await JSON_ANSWERS.send(send, req, entry.raw, compression=compression)


async def serve_list(
    req: ServedRequest,
    send: Send,
    res: ServedResource,
    *,
    query: Query,
    opts: ListOptions,
    form: ResponseForm,
    max_page_size: int,
    at: int | None = None,
    compression: Compression = IDENTITY,
) -> None:
    """A list (one page), from the cache's current state or ``at`` an older RV's (as
    :func:`.readexec.decide` chose); gzipped as ``compression`` says for a client that accepts
    it (in a worker thread, streamed as it is made: :mod:`cacheproxy.serving.compression`)."""
    if opts.limit > max_page_size:
        opts = dataclasses.replace(opts, limit=max_page_size)
    page = res.list(query, opts, at=at)
    if form.table:
        doc = table(
            res.table_printer(),
            [e.object() for e in page.items],
            version=form.table,
            include=form.include,
            resource_version=str(page.resource_version),
            continue_token=page.continue_token,
            remaining=page.remaining,
        )
        await JSON_ANSWERS.send(send, req, orjson.dumps(doc), compression=compression)
        return
    plain_form = form.reform is None and query.shard is None
    if plain_form and not req.pretty and len(page.items) > GROUP_ITEMS and page.packed:
        # Made group by group as it is sent (gzipped or not): never held whole. Its length (a
        # pass over every item) only for a client offered gzip.
        accept, loopback = req.header("accept-encoding"), req.loopback
        req.started = True  # past here a failure can only end the response
        if compression.offered(accept, loopback=loopback) and compression.wanted(
            accept, page.length(), loopback=loopback
        ):
            headers = [(b"content-type", JSON), (b"cache-control", NO_CACHE)]
            await send_gzipped(
                send, page.groups(), headers, compression=compression, writer=req.writer
            )
        else:
            await send_groups(send, page.groups(), writer=req.writer)
        return
    parts = page.parts() if plain_form else await _reformed_parts(page, form, query)
    if req.pretty:
        await JSON_ANSWERS.send(send, req, b"".join(parts), compression=compression)
        return
    req.started = True  # past here a failure can only end the response
    await send_parts(
        send,
        parts,
        writer=req.writer,
        compression=compression,
        accept_encoding=req.header("accept-encoding"),
        loopback=req.loopback,
    )


async def _reformed_parts(page: ServedList, form: ResponseForm, query: Query) -> list[BodyPart]:
    """A page's body with what the stored list does not say: its items re-encoded (a
    ``PartialObjectMetadataList``, managedFields dropped; in batches, yielding to the loop
    between them), and the ``shardInfo`` of a sharded list (KEP-5866) in its metadata (the head
    built with it: the items' bytes are written as stored)."""
    meta = list_meta(
        page.resource_version,
        continue_token=page.continue_token,
        remaining=page.remaining,
        shard_selector=query.shard.source if query.shard is not None else "",
    )
    reform = form.reform
    if reform is None:
        return page.parts(meta)
    if reform.metadata is not None:
        parts: list[BodyPart] = [partial_list_head(reform.metadata, meta)]
        item_of = _whole
    else:
        parts = [page.head(meta)]
        item_of = _typed_item if page.rtype.builtin else _whole
    items = page.items
    for start in range(0, len(items), METADATA_BATCH):
        if start:
            parts.append(b",")
            await asyncio.sleep(0)
        batch = items[start : start + METADATA_BATCH]
        parts.append(b",".join(reform.encode(item_of(e)) for e in batch))
    parts.append(b"]}")
    return parts


def _whole(entry: Entry) -> bytes:
    return entry.raw


def _typed_item(entry: Entry) -> bytes:
    """A typed list's item of a built-in kind: the object without kind and apiVersion."""
    return b"{" + entry.body
