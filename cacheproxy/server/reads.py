"""Serving get and list from the cache, and what both read of a request.

- get: one object, after waiting for a ``resourceVersion`` the cache has not reached (≤ 3 s);
- list: a page of the current state or of an older snapshot (:class:`~.resource.ServedResource`
  keeps the API server's resourceVersion and paging rules), its items written from the store's
  bytes with scatter/gather writes — never joined into one body — unless the answer is re-formed
  (a Table, or indented JSON for a person);
- the form of the answer: JSON as stored, or a ``meta.k8s.io`` Table when ``Accept`` asks for one
  (only Accepts with an ``as=`` parameter pay for parsing it);
- the :class:`~.query.Query` a list or watch selects with: namespace, label, field and index
  selectors, and the namespaces the user may read in the namespace-filtered mode.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import orjson

from cacheproxy.kube.labels import LabelSelector
from cacheproxy.kube.listoptions import ListOptions, parse_list_options
from cacheproxy.kube.request import check_accepts_json
from cacheproxy.kube.table import include_object, negotiate_table, table
from cacheproxy.server.admission import ServedRequest
from cacheproxy.server.options import ANSWERS
from cacheproxy.server.query import Query, parse_index_selector, validate_fields
from cacheproxy.server.resource import ServedResource
from cacheproxy.serving import Send, send_parts

__all__ = ["Form", "build_query", "negotiate", "serve_get", "serve_list"]


@dataclass(frozen=True, slots=True)
class Form:
    """How to answer a read: as stored (``table`` None) or as a Table of that version."""

    table: str | None = None
    include: str = "Metadata"
    """A Table's ``includeObject``."""


_AS_STORED = Form()


def negotiate(req: ServedRequest) -> Form:
    """The answer's form from ``Accept``; 406 when neither JSON nor a Table is acceptable."""
    accept = req.header("accept")
    # Fast path: no ``as=`` parameter, no Table (only kubectl-style Accepts pay for parsing).
    as_table = negotiate_table(accept) if "as=" in accept.lower() else None
    if as_table is None:
        check_accepts_json(accept)
        return _AS_STORED
    return Form(as_table, include_object(req.query))


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
    )


async def serve_get(
    req: ServedRequest,
    send: Send,
    res: ServedResource,
    *,
    namespace: str | None,
    name: str,
    form: Form,
) -> None:
    rv = req.param("resourceVersion")
    opts = parse_list_options({"resourceVersion": [rv]} if rv else {})
    if opts.rv:
        await res.wait_for(opts.rv)
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
        await ANSWERS.send(send, req, orjson.dumps(doc))
        return
    await ANSWERS.send(send, req, entry.raw)


async def serve_list(
    req: ServedRequest,
    send: Send,
    res: ServedResource,
    *,
    query: Query,
    opts: ListOptions,
    form: Form,
    max_page_size: int,
) -> None:
    if opts.limit > max_page_size:
        opts = dataclasses.replace(opts, limit=max_page_size)
    page = await res.list(query, opts)
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
        await ANSWERS.send(send, req, orjson.dumps(doc))
        return
    if req.pretty:
        await ANSWERS.send(send, req, page.body())
        return
    parts = page.parts()
    req.started = True  # past here a failure can only end the response
    await send_parts(send, parts, writer=req.writer)
