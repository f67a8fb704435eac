"""Writing answers: whole JSON bodies, bodies from stored parts, and every error as a Status.

- :class:`JsonAnswers`: how one server answers in JSON — whether every JSON answer is negotiated
  on ``Accept`` (406 naming what it serves), indentation for people (``?pretty=true``, curl,
  browsers), compression of large bodies;
- :func:`send_parts`: a 200 whose body is stored pieces written one after the other with
  scatter/gather writes — lists go out from the store's bytes without being joined;
- :func:`websocket_denial`: a websocket request refused with an HTTP answer (a Status);
- :func:`send_status` and :func:`send_error`: the one place an exception becomes a response: an
  :class:`~cacheproxy.errors.ApiError` is written as its ``metav1.Status`` (``Retry-After`` when
  it carries one, as the API server's ``ErrorNegotiated``; in protobuf to a client that accepts
  only that); anything else is logged and answered with a 500 Status, never a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import orjson

from cacheproxy.errors import ApiError
from cacheproxy.kube import status
from cacheproxy.kube.protobuf import PROTOBUF, accepts_only_protobuf, status_protobuf
from cacheproxy.kube.request import REPRESENTATIONS, check_accepts_json
from cacheproxy.kube.watchevents import event_line
from cacheproxy.serving.asgi import BodyPart, BodyWriter, Message, Request, Scope, Send
from cacheproxy.serving.compression import IDENTITY, Compression, send_gzipped

__all__ = [
    "JSON",
    "NO_CACHE",
    "JsonAnswers",
    "error_line",
    "indented",
    "send_body",
    "send_error",
    "send_groups",
    "send_parts",
    "send_status",
    "websocket_denial",
    "with_header",
]

JSON = b"application/json"
NO_CACHE = b"no-cache, private"
Headers = Sequence[tuple[bytes, bytes]]


async def send_body(
    send: Send, code: int, body: bytes, *, content_type: bytes = JSON, headers: Headers = ()
) -> None:
    """A whole response with a ``Content-Length`` (``headers`` added after the others)."""
    headers = [
        (b"content-type", content_type),
        (b"cache-control", NO_CACHE),
        (b"content-length", str(len(body)).encode()),
        *headers,
    ]
    await send({"type": "http.response.start", "status": code, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def indented(body: bytes, *, newline: bool = False) -> bytes:
    """``body`` (JSON) indented by two spaces, as ``?pretty=true`` answers are."""
    pretty = orjson.dumps(orjson.loads(body), option=orjson.OPT_INDENT_2)
    return pretty + b"\n" if newline else pretty


@dataclass(frozen=True, slots=True)
class JsonAnswers:
    """How one server answers in JSON."""

    representations: Sequence[str] = REPRESENTATIONS
    """What a 406 names as served."""
    negotiate: bool = False
    """Check ``Accept`` on every JSON answer (else only where the handler calls :meth:`check`)."""
    pretty_newline: bool = False
    """End an indented answer with a newline."""
    compress_above: int | None = None
    """Gzip bodies longer than this when the client accepts gzip (the API server: 128 KiB)."""

    def check(self, req: Request) -> None:
        """406 unless the client accepts JSON (Table and protobuf askers fall back to JSON)."""
        check_accepts_json(req.header("accept"), self.representations)

    async def send(
        self,
        send: Send,
        req: Request,
        body: bytes,
        *,
        code: int = 200,
        content_type: bytes = JSON,
        headers: Headers = (),
        cache_control: bytes = NO_CACHE,
        compression: Compression | None = None,
    ) -> None:
        """A whole answer: negotiated when JSON (and ``negotiate``), indented when the request
        wants it pretty, compressed when long — by ``compression`` when given (off the loop,
        chunked), else by ``compress_above``; ``headers`` go after ``Cache-Control``."""
        if self.negotiate and content_type == JSON:
            self.check(req)
        if req.pretty:
            body = indented(body, newline=self.pretty_newline)
        out = [(b"content-type", content_type), (b"cache-control", cache_control)]
        if headers:
            out.extend(headers)
        if compression is not None and compression.wanted(
            req.header("accept-encoding"), len(body), loopback=req.loopback
        ):
            req.started = True
            await send_gzipped(
                send, [body], out, compression=compression, writer=req.writer, code=code
            )
            return
        limit = None if compression is not None else self.compress_above
        if limit is not None and len(body) > limit and "gzip" in req.header("accept-encoding"):
            body = gzip.compress(body, compresslevel=1)
            out += [(b"content-encoding", b"gzip"), (b"vary", b"Accept-Encoding")]
        out.append((b"content-length", b"%d" % len(body)))
        await send({"type": "http.response.start", "status": code, "headers": out})
        req.started = True
        await send({"type": "http.response.body", "body": body})


async def send_groups(
    send: Send,
    groups: Iterator[Sequence[BodyPart]],
    *,
    writer: BodyWriter | None = None,
    content_type: bytes = JSON,
) -> None:
    """A 200 whose body is ``groups`` of parts, each made only once the one before is on its
    way (the transport's flow control waits between them): a body whose parts are made as it
    is written (a compressed store's list) is never held whole. Chunked, as the API server
    sends a long list: its length is never computed. Each group is made in a worker thread
    while the one before is written (``groups`` must allow that); once the client is gone (or
    for a HEAD), no more are made."""
    headers = [(b"content-type", content_type), (b"cache-control", NO_CACHE)]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    made = asyncio.ensure_future(asyncio.to_thread(next, groups, None))
    while (parts := await made) is not None:
        made = asyncio.ensure_future(asyncio.to_thread(next, groups, None))
        if writer is not None:
            if not await writer.write_chunk(parts):
                await made  # the group being made; no more after it: nobody reads them
                break
        else:
            await send({"type": "http.response.body", "body": b"".join(parts), "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def send_parts(
    send: Send,
    parts: Sequence[BodyPart],
    *,
    writer: BodyWriter | None = None,
    content_type: bytes = JSON,
    chunk_bytes: int = 128 << 10,
    compression: Compression = IDENTITY,
    accept_encoding: str = "",
    loopback: bool = False,
) -> None:
    """A 200 whose body is ``parts`` one after the other, with a ``Content-Length`` — or gzipped
    and chunked when ``compression`` wants it for a client that sent this ``accept_encoding``
    (from a ``loopback`` address or not)
    (:func:`~.compression.send_gzipped`: compressed in a worker thread, piece by piece).

    With ``writer`` (the server's :data:`~cacheproxy.serving.asgi.BODY_WRITER`) all parts go to
    the transport at once: it holds references, not copies, and writes them with ``writev`` as
    the socket takes them (measured on loopback: a 2.5 MB list in ~1 000 parts went out faster
    than the same bytes joined, and than in groups with a drain between). Otherwise through
    ``send``, joined into pieces of ~``chunk_bytes`` (the one copy of each byte)."""
    length = sum(map(len, parts))
    headers = [(b"content-type", content_type), (b"cache-control", NO_CACHE)]
    if compression.wanted(accept_encoding, length, loopback=loopback):
        await send_gzipped(send, parts, headers, compression=compression, writer=writer)
        return
    headers.append((b"content-length", str(length).encode()))
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    if writer is not None:
        await writer.write(parts, length)
    else:
        batch: list[BodyPart] = []
        size = 0
        for part in parts:
            batch.append(part)
            size += len(part)
            if size >= chunk_bytes:
                await send(
                    {"type": "http.response.body", "body": b"".join(batch), "more_body": True}
                )
                batch.clear()
                size = 0
        if batch:
            await send({"type": "http.response.body", "body": b"".join(batch), "more_body": True})
    # uvicorn's last message waits until the transport drained (its flow control).
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def send_status(send: Send, err: ApiError, *, started: bool, protobuf: bool = False) -> None:
    """An error as its ``metav1.Status`` (``Retry-After`` when it carries one, as the API
    server's ``ErrorNegotiated``), in protobuf for a client that accepts nothing else. Once a
    response has started, all that is left is to end it."""
    if started:
        with contextlib.suppress(Exception):
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        return
    body = status_protobuf(err.status) if protobuf else orjson.dumps(err.status)
    headers = [
        (b"content-type", PROTOBUF.encode() if protobuf else JSON),
        (b"cache-control", NO_CACHE),
        (b"content-length", str(len(body)).encode()),
    ]
    if err.retry_after:
        headers.append((b"retry-after", str(err.retry_after).encode()))
    await send({"type": "http.response.start", "status": err.code, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def error_line(err: ApiError) -> bytes:
    """An error inside a started watch: one ``ERROR`` event carrying its Status (cacher.go)."""
    return event_line("ERROR", orjson.dumps(err.status))


async def send_error(req: Request, send: Send, exc: Exception, *, logger: logging.Logger) -> None:
    """Answer what a handler raised: an :class:`~cacheproxy.errors.ApiError` as its Status (see
    :func:`send_status`); anything else is logged with its traceback and answered as a 500
    Status. Called from the application's ``except`` (a handler that succeeds pays nothing)."""
    protobuf = accepts_only_protobuf(req.header("accept"))
    if isinstance(exc, ApiError):
        await send_status(send, exc, started=req.started, protobuf=protobuf)
        return
    logger.error("unexpected error serving %s %s", req.method, req.path, exc_info=exc)
    internal = status.internal_error("unexpected server error")
    await send_status(send, internal, started=req.started, protobuf=protobuf)


def with_header(send: Send, name: bytes, value: bytes) -> Send:
    """``send`` adding one header to the response's start."""

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", ()), (name, value)]}
        await send(message)

    return sending


DENIAL_EXTENSION = "websocket.http.response"
"""The ASGI extension under which a server lets an app refuse a websocket with any response."""


def websocket_denial(scope: Scope, send: Send) -> Send:
    """``send`` for a websocket request (ASGI ``websocket`` scope) refused with an HTTP answer:
    the answer's ``http.response.*`` messages go out as the denial response
    (``websocket.http.response.*``) when the server offers it — the client reads the Status as
    from any refused request — else as a close before accepting, which servers answer with a
    bare 403."""
    if DENIAL_EXTENSION in (scope.get("extensions") or {}):

        async def denying(message: Message) -> None:
            await send({**message, "type": "websocket." + message["type"]})

        return denying
    closed = False

    async def closing(message: Message) -> None:
        nonlocal closed
        if not closed:
            closed = True
            await send({"type": "websocket.close", "code": 1008})

    return closing
