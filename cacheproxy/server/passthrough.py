"""Pass-through: every request the cache does not answer goes to the upstream API server as its
caller sent it, and the answer comes back as upstream gave it (docs/operations.md, "What passes
through").

What is forwarded — writes, subresources, resources that are not cached, non-resource paths,
discovery — is decided by the server (:mod:`.app`); this module forwards one request:

- **unchanged**: method, path and query as raw bytes, the body's bytes in any content type
  (JSON, protobuf, CBOR, YAML apply patches), every request header but the hop-by-hop ones
  (RFC 9110 §7.6.1) and ``Host``; ``X-Forwarded-For`` gains the caller's address;
- **as the caller**: on connections that hold none of the daemon's credentials
  (:func:`cacheproxy.upstream.build_forwarding_target`; no client around them: no cookies,
  redirects or decoding, and no cost of theirs), so the caller's own ``Authorization``
  (or none: anonymous) is all upstream sees. A caller the daemon authenticated by something
  upstream cannot check (a client certificate, a static token) is forwarded only by
  impersonation: the daemon's identity with ``Impersonate-User``/``-Group``/``-Uid``/
  ``-Extra-*`` of the verified user (the caller's own impersonation headers dropped);
- **streamed back**: status, headers (hop-by-hop ones and ``Date`` aside: the server writes its
  own) and body bytes as they arrive, still encoded as upstream encoded them, with the client's
  back-pressure; a client that goes away cancels the upstream request;
- **tunnelled**: a websocket or SPDY upgrade (``kubectl exec``/``attach``/``port-forward``, a
  websocket watch) is offered upstream again; if upstream switches (``101``), the client's
  connection switches too and bytes flow both ways until either side closes. Any other answer
  to the offer is relayed as any answer.

Bounded: a body larger than ``max_body_bytes`` is a 413 before anything is sent; short requests
in flight beyond ``max_in_flight`` and long-running ones (watch, log, exec, attach,
port-forward, proxy: the API server's own long-running set) beyond ``max_long_running`` get 429
with ``Retry-After``; a short request is given up after ``timeout`` seconds. Upstream
unreachable is a 503 Status naming it, a timeout a 504: never a hang, never a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gzip
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

import httpx
from prometheus_client import CollectorRegistry

from cacheproxy.errors import ApiError, TransportError, UpstreamTimeout
from cacheproxy.kube import status
from cacheproxy.kube.attributes import UserInfo
from cacheproxy.server.admission import ServedRequest
from cacheproxy.server.forwarded import PassThroughMetrics, ReadTally, UpstreamRead
from cacheproxy.server.proxying import (
    impersonation_headers,
    request_headers,
    response_headers,
    switching_headers,
    tunnelled_upgrade,
)
from cacheproxy.server.tunnel import pump
from cacheproxy.serving import Send

__all__ = [
    "LONG_RUNNING_SUBRESOURCES",
    "Forward",
    "PassThrough",
    "PassThroughOptions",
]

log = logging.getLogger(__name__)

LONG_RUNNING_SUBRESOURCES: Final = frozenset({"attach", "exec", "log", "portforward", "proxy"})
"""Subresources the API server counts as long-running (with the ``watch`` and ``proxy`` verbs):
its ``--max-requests-inflight`` does not count them, neither does ours."""

WRITE_VERBS: Final = frozenset({"create", "update", "patch", "delete", "deletecollection"})


@dataclass(frozen=True, slots=True)
class PassThroughOptions:
    max_in_flight: int = 400
    """Short forwarded requests (not long-running) at once; more get 429."""
    max_long_running: int = 10_000
    """Long-running forwarded requests (watches, logs, exec, attach, port-forward, proxy) at
    once; more get 429."""
    max_body_bytes: int = 4 * 1024 * 1024
    """A request body larger than this is refused (413) without forwarding it. The API server's
    own limit is 3 MiB for most requests: above it, its own answer comes back."""
    timeout: float = 65.0
    """Seconds a short request may take, answer included (the API server ends its own at 60 s
    with a 504 that then comes back as it is)."""
    impersonate: bool = False
    """Forward callers authenticated by a client certificate or a static token by impersonating
    them with the daemon's identity (which then needs RBAC ``impersonate``); without it they
    get 401."""
    idle_connection: float = 60.0
    """Seconds an upstream connection is kept idle for the next forwarded request (the API
    server closes its idle connections after 90 s)."""


@dataclass(frozen=True, slots=True)
class Forward:
    """What a forwarded request is, for its limits, metrics and the reads that follow it."""

    verb: str
    """Its Kubernetes verb (``get`` … ``deletecollection``), or the lower-cased method of a
    request that is not on a resource."""
    resource: str
    """``pods``, ``deployments.apps``, ``pods/log``; "" when not on a resource."""
    read: UpstreamRead | None = None
    """The resource a get, list or watch (no subresource) reads: tallied."""
    long_running: bool = False
    on_written: Callable[[bytes], Awaitable[bool | None]] | None = None
    """Given the body of a successful write's answer (a cached resource's object: its new
    resourceVersion tells the reads that follow what to wait for), before the answer is sent:
    the answer waits for it (until the cache holds the write, :mod:`.settling`; whether it got
    there, None when it was not held)."""
    query: bytes | None = None
    """The query string to send instead of the caller's (a read the cache passes on, asked as
    the most recent state: see :meth:`.CacheServer.forward_read`)."""
    fallback: Callable[[], Awaitable[None]] | None = None
    """Answers instead when upstream cannot be reached (the cache's own discovery)…"""
    fallback_when_refused: bool = False
    """…and when upstream refuses the caller (401 or 403): for callers that sent no
    credentials, whom the cache serves what upstream would not tell them."""


Headers = Sequence[tuple[bytes, bytes]]


class Reply(Protocol):
    """A forwarded request's answer: its head, a switched connection's stream (or None), its
    body's bytes as they arrive (content coding kept)."""

    @property
    def code(self) -> int: ...

    @property
    def headers(self) -> Headers: ...

    @property
    def network_stream(self) -> Any: ...

    def body(self) -> AsyncIterator[bytes]: ...

    async def next_chunk(self) -> tuple[bytes, bool]:
        """The body's next bytes and whether they are its last (b"", True at its end)."""
        ...

    async def aclose(self) -> None: ...


class Destination(Protocol):
    """Where forwarded requests go (:class:`cacheproxy.upstream.ForwardingTarget` is one): the
    server's URL, and how a request (method, path and query, headers, body, as bytes) is sent
    there as built, its answer's head awaited. Failing to, it raises :class:`TransportError`
    (:class:`UpstreamTimeout` when time ran out)."""

    @property
    def base_url(self) -> httpx.URL: ...

    async def send(
        self, method: bytes, target: bytes, headers: Headers, body: bytes, *, upgrade: bool
    ) -> Reply: ...


class PassThrough:
    """Forwards requests upstream (see the module). ``target`` holds no credentials;
    ``impersonating``, the daemon's own client's, is used only to impersonate a verified caller
    (None: such callers get 401)."""

    def __init__(
        self,
        target: Destination,
        *,
        options: PassThroughOptions | None = None,
        impersonating: Destination | None = None,
        registry: CollectorRegistry | None = None,
        api_server: str = "",
    ) -> None:
        self.options = options or PassThroughOptions()
        self._target = target
        self._impersonating = impersonating if self.options.impersonate else None
        self.api_server = api_server or str(target.base_url)
        self.metrics = PassThroughMetrics(registry)
        self.short = 0
        self.long_running = 0
        self._relaying: set[asyncio.Task[Any]] = set()
        """The tasks relaying long-running answers now (watches, logs, tunnels)."""
        self.ending = False
        """Shutting down: long-running requests were ended, new ones are refused."""
        self.reads = ReadTally()
        """Forwarded reads (get, list, watch) by resource: what is read but not cached."""
        base = target.base_url
        self._base_path = base.raw_path.rstrip(b"/")
        """A server URL's own path (``https://host/k8s/clusters/c-1``), kept before each
        request's."""

    def end_long_running(self) -> None:
        """End every long-running request now and refuse new ones (503, ``Retry-After: 1``):
        on shutdown, a forwarded watch ends as the API server ends its own (its client
        re-watches, elsewhere or from the restarted daemon), a log or a tunnel closes — none
        holds the process for the grace period."""
        self.ending = True
        for task in list(self._relaying):
            task.cancel()

    @property
    def impersonates(self) -> bool:
        return self._impersonating is not None

    async def forward(
        self, req: ServedRequest, send: Send, what: Forward, *, as_user: UserInfo | None = None
    ) -> None:
        """Forward ``req`` and relay upstream's answer through ``send``. ``as_user``: impersonate
        this verified caller (the daemon must have been given an impersonating client)."""
        began = time.perf_counter()
        code = "error"
        recording = _Recording(send)
        kind = "long_running" if what.long_running else "short"
        if what.long_running and self.ending:
            raise status.service_unavailable("the server is shutting down", retry_after=1)
        self._admit(what.long_running)
        self.metrics.in_flight_of[kind].inc()
        try:
            upgrade = tunnelled_upgrade(req.header("upgrade"), req.header("connection"))
            if upgrade and req.upgrade is None:
                raise _status(
                    501,
                    "NotImplemented",
                    f"this server cannot switch a connection's protocol ({upgrade}); "
                    f"send this request to the API server at {self.api_server}",
                )
            body = await self._body(req)
            destination, headers = self._prepare(req, as_user, upgrade)
            sending = functools.partial(
                destination.send,
                req.method.encode("ascii"),
                self._target_of(req, what.query),
                headers,
                body,
                upgrade=bool(upgrade),
            )
            await self._exchange(req, recording, sending, what)
        except _ClientGone:
            pass  # nobody to answer
        finally:
            self._release(what.long_running)
            self.metrics.in_flight_of[kind].dec()
            if recording.code:
                code = str(recording.code)
            self.metrics.observe(
                what.verb,
                what.resource,
                code,
                None if what.long_running else time.perf_counter() - began,
            )
            if what.read is not None:
                self.reads.add(what.read)

    # ------------------------------------------------------------------ the request

    def _admit(self, long_running: bool) -> None:
        options = self.options
        if long_running:
            if self.long_running >= options.max_long_running:
                raise status.too_many_requests(
                    "too many long-running requests forwarded to the API server "
                    f"(passthrough.maxLongRunning {options.max_long_running})"
                )
            self.long_running += 1
        else:
            if self.short >= options.max_in_flight:
                raise status.too_many_requests(
                    "too many requests forwarded to the API server at once "
                    f"(passthrough.maxInFlight {options.max_in_flight}), please try again later"
                )
            self.short += 1

    def _release(self, long_running: bool) -> None:
        if long_running:
            self.long_running -= 1
        else:
            self.short -= 1

    async def _body(self, req: ServedRequest) -> bytes:
        """The request's body, whole (bounded by ``max_body_bytes``: 413 past it)."""
        limit = self.options.max_body_bytes
        declared = req.header("content-length")
        if declared.isdigit() and int(declared) > limit:
            raise _too_large(limit)
        if not declared and not req.header("transfer-encoding"):
            return b""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await req.receive()
            if message["type"] == "http.disconnect":
                raise _ClientGone
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise _too_large(limit)
            chunks.append(chunk)
            if not message.get("more_body"):
                return b"".join(chunks)

    def _target_of(self, req: ServedRequest, query: bytes | None = None) -> bytes:
        """The request's path and query (or ``query``) as upstream gets them (after its URL's
        own path)."""
        scope = req.scope
        raw: bytes = scope.get("raw_path") or scope["path"].encode()
        if query is None:
            query = scope.get("query_string") or b""
        return self._base_path + raw + (b"?" + query if query else b"")

    def _prepare(
        self, req: ServedRequest, as_user: UserInfo | None, upgrade: str
    ) -> tuple[Destination, list[tuple[bytes, bytes]]]:
        """Where to send, and the headers to send."""
        client_addr = req.scope.get("client")
        headers = request_headers(
            req.scope["headers"],
            peer=str(client_addr[0]) if client_addr else "",
            impersonating=as_user is not None,
            upgrade=upgrade,
        )
        if as_user is None:
            return self._target, headers
        if self._impersonating is None:
            raise status.unauthorized(
                "this request would pass through to the API server, but its caller was "
                "authenticated by cacheproxy alone (a client certificate or a static token) "
                "and cacheproxy forwards only its callers' own bearer tokens: send a bearer "
                "token the API server accepts, or set passthrough.impersonate"
            )
        headers.extend(impersonation_headers(as_user))
        return self._impersonating, headers

    # ------------------------------------------------------------------ the answer

    async def _exchange(
        self,
        req: ServedRequest,
        send: _Recording,
        sending: Callable[[], Awaitable[Reply]],
        what: Forward,
    ) -> None:
        """Await the answer's head, relay the answer; cancelled when the client goes away.
        The relay runs in the request's own task (a task per request costs as much as the
        forwarding connection's work): the client's going away cancels it."""
        task = asyncio.current_task()
        assert task is not None
        left = False
        if what.long_running:
            self._relaying.add(task)

        def went() -> None:
            nonlocal left
            left = True
            task.cancel()

        stop_watching = _on_disconnect(req, went)
        try:
            async with asyncio.timeout(None if what.long_running else self.options.timeout):
                await self._relay(req, send, sending, what)
        except asyncio.CancelledError:
            if left:
                task.uncancel()  # the client went away: nobody to answer
            elif what.long_running and self.ending:
                task.uncancel()  # shutting down: end the answer (end_long_running)
                await self._end(req, send)
            else:
                raise
        except TimeoutError:
            if req.started:
                _abort(req)  # timed out in the middle of the answer: it cannot be finished
                return
            raise _status(
                504,
                "Timeout",
                f"the API server at {self.api_server} did not answer within "
                f"{self.options.timeout:g}s (passthrough.timeoutSeconds)",
            ) from None
        finally:
            self._relaying.discard(task)
            stop_watching()

    async def _end(self, req: ServedRequest, send: _Recording) -> None:
        """End a long-running answer on shutdown: a streamed one (a watch, a log) as finished,
        which its client takes as the server's normal end; one not begun with a 503; a switched
        connection (exec, attach, port-forward) closed."""
        if not req.started:
            raise status.service_unavailable("the server is shutting down", retry_after=1)
        if send.code == 101:
            _abort(req)
            return
        with contextlib.suppress(Exception):
            await send.body(b"", more=False)

    async def _relay(
        self,
        req: ServedRequest,
        send: _Recording,
        sending: Callable[[], Awaitable[Reply]],
        what: Forward,
    ) -> None:
        try:
            answer = await sending()
        except UpstreamTimeout as exc:
            if what.fallback is not None:
                await what.fallback()
                return
            raise _status(
                504,
                "Timeout",
                f"the API server at {self.api_server} did not answer in time ({exc})",
            ) from None
        except TransportError as exc:
            if what.fallback is not None:
                await what.fallback()
                return
            raise status.service_unavailable(
                f"cannot reach the API server at {self.api_server} to forward this request: {exc}"
            ) from None
        try:
            code = answer.code
            if what.fallback is not None and what.fallback_when_refused and code in (401, 403):
                await what.fallback()
                return
            stream = answer.network_stream
            if code == 101 and req.upgrade is not None and stream is not None:
                tunnel = await req.upgrade.accept(101, switching_headers(answer.headers))
                send.code = code
                req.started = True
                await pump(tunnel, stream)
                return
            headers = response_headers(answer.headers)
            if what.on_written is not None and 200 <= code < 300:
                # A write's answer (one object): read whole, for its resourceVersion.
                body = await _whole(answer)
                held = time.perf_counter()
                settled = await _notify(what.on_written, _decoded(body, headers))
                if settled is not None:
                    outcome = "settled" if settled else "timeout"
                    self.metrics.write_settle.labels(what.resource, outcome).observe(
                        time.perf_counter() - held
                    )
                await send.start(code, headers)
                req.started = True
                await send.body(body, more=False)
                return
            if what.long_running:
                # The head at once: a watch's client waits for it, not for the first event.
                await send.start(code, headers)
                req.started = True
                chunk, last = await answer.next_chunk()
            else:
                # The first bytes with the head, the last ones ending the answer: a short
                # answer (usually in one piece) goes out in one write.
                chunk, last = await answer.next_chunk()
                await send.start(code, headers)
                req.started = True
            while not last:
                await send.body(chunk, more=True)
                chunk, last = await answer.next_chunk()
            await send.body(chunk, more=False)
        except TransportError as exc:
            if not req.started:
                raise status.service_unavailable(
                    f"the API server at {self.api_server} broke off its answer: {exc}"
                ) from None
            log.debug("forwarded %s %s: upstream broke off: %s", req.method, req.path, exc)
            _abort(req)
        finally:
            await answer.aclose()


class _Recording:
    """``send`` for an answer's start and body, its code noted."""

    __slots__ = ("_send", "code")

    def __init__(self, send: Send) -> None:
        self._send = send
        self.code = 0

    async def start(self, code: int, headers: list[tuple[bytes, bytes]]) -> None:
        self.code = code
        await self._send({"type": "http.response.start", "status": code, "headers": headers})

    async def body(self, chunk: bytes, *, more: bool) -> None:
        await self._send({"type": "http.response.body", "body": chunk, "more_body": more})


async def _whole(answer: Reply) -> bytes:
    parts = []
    last = False
    while not last:
        chunk, last = await answer.next_chunk()
        parts.append(chunk)
    return b"".join(parts)


def _on_disconnect(req: ServedRequest, went: Callable[[], None]) -> Callable[[], None]:
    """Call ``went`` if ``req``'s client goes away; what it returns stops that. By the server's
    callback when it offers one, else by a task waiting for the ``http.disconnect``."""
    if req.flow is not None:
        return req.flow.on_disconnect(went)

    def waited(gone: asyncio.Future[None]) -> None:
        if not gone.cancelled():
            went()

    gone = asyncio.ensure_future(req.wait_disconnect())
    gone.add_done_callback(waited)

    def stop() -> None:
        gone.remove_done_callback(waited)
        gone.cancel()

    return stop


class _ClientGone(Exception):
    """The client went away while its request's body was read."""


def _status(code: int, reason: str, message: str) -> ApiError:
    return ApiError(status.status_body(code=code, reason=reason, message=message))


def _too_large(limit: int) -> ApiError:
    return _status(
        413,
        "RequestEntityTooLarge",
        f"Request entity too large: limit is {limit} (passthrough.maxBodyBytes)",
    )


async def _notify(
    on_written: Callable[[bytes], Awaitable[bool | None]], body: bytes
) -> bool | None:
    """Tell the cache of a write before its answer goes out; the answer goes out whatever
    happens here."""
    try:
        return await on_written(body)
    except Exception:  # pragma: no cover - defensive: the write is done upstream
        log.debug("pass-through: could not note a write", exc_info=True)
        return None


def _decoded(body: bytes, headers: Headers) -> bytes:
    """A write's answer as the object's bytes (relayed as upstream encoded it)."""
    encoding = next((v for n, v in headers if n == b"content-encoding"), b"")
    if encoding.strip().lower() == b"gzip":
        try:
            return gzip.decompress(body)
        except (OSError, EOFError):
            return b""
    return body


def _abort(req: ServedRequest) -> None:
    if req.flow is not None:
        req.flow.abort()
