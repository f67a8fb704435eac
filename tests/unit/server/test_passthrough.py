"""Pass-through on its own, against a fake upstream (``httpx.MockTransport``) that records what
it was sent: what is forwarded, what comes back, whose identity, and the bounds."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest

from cacheproxy.errors import ApiError
from cacheproxy.kube.attributes import UserInfo
from cacheproxy.kube.protobuf import object_resource_version
from cacheproxy.server.admission import ServedRequest
from cacheproxy.server.forwarded import UpstreamRead
from cacheproxy.server.passthrough import Forward, PassThrough, PassThroughOptions
from cacheproxy.server.proxying import request_headers, response_headers
from cacheproxy.serving import Message
from cacheproxy.upstream import ForwardingTarget, ImpersonatingTarget
from tests.support import until

UPSTREAM = "https://api.example:6443"
SECRETS = UpstreamRead("", "v1", "secrets")


class Upstream:
    """A fake API server: records each request, answers with ``answer``."""

    def __init__(self) -> None:
        self.seen: list[httpx.Request] = []
        self.bodies: list[bytes] = []
        self.answer: Any = lambda request: httpx.Response(
            201,
            headers=[
                ("Content-Type", "application/json"),
                ("Audit-Id", "a-1"),
                ("Warning", '299 - "deprecated"'),
                ("Date", "Mon, 01 Jan 2024 00:00:00 GMT"),
                ("Connection", "keep-alive, X-Hop"),
                ("X-Hop", "hop"),
            ],
            content=b'{"kind":"ConfigMap","metadata":{"resourceVersion":"42"}}',
        )

    async def handle(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(request)
        self.bodies.append(await request.aread())
        answer = self.answer(request)
        if asyncio.iscoroutine(answer):
            answer = await answer
        assert isinstance(answer, httpx.Response)
        if answer.is_stream_consumed:
            # As a real transport gives it: a stream, read as it is relayed.
            content = answer.content

            async def stream() -> AsyncIterator[bytes]:
                yield content

            return httpx.Response(answer.status_code, headers=answer.headers.raw, content=stream())
        return answer

    def target(self) -> ForwardingTarget:
        """Where pass-through sends: this fake, through httpx's mock transport."""
        return ForwardingTarget(httpx.URL(UPSTREAM), httpx.MockTransport(self.handle))

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=UPSTREAM, transport=httpx.MockTransport(self.handle))


class Exchange:
    """One request through ``forward``, its answer's messages collected."""

    def __init__(
        self,
        method: str,
        path: str,
        *,
        query: bytes = b"",
        headers: list[tuple[bytes, bytes]] | None = None,
        body: bytes = b"",
        chunks: list[bytes] | None = None,
    ) -> None:
        headers = list(headers or [])
        if body:
            headers.append((b"content-length", str(len(body)).encode()))
        if chunks is not None:
            headers.append((b"transfer-encoding", b"chunked"))
        self.scope: dict[str, Any] = {
            "type": "http",
            "method": method,
            "path": path,
            "raw_path": path.encode(),
            "query_string": query,
            "headers": headers,
            "client": ("10.0.0.7", 5555),
        }
        parts = chunks if chunks is not None else [body]
        self._incoming: list[Message] = [
            {"type": "http.request", "body": part, "more_body": i < len(parts) - 1}
            for i, part in enumerate(parts)
        ]
        self.gone = asyncio.Event()
        self.sent: list[Message] = []

    async def receive(self) -> Message:
        if self._incoming:
            return self._incoming.pop(0)
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        self.sent.append(message)

    @property
    def request(self) -> ServedRequest:
        return ServedRequest(self.scope, self.receive)

    @property
    def status(self) -> int:
        return int(self.sent[0]["status"])

    @property
    def headers(self) -> dict[bytes, bytes]:
        return dict(self.sent[0]["headers"])

    @property
    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.sent[1:])


@pytest.fixture
def upstream() -> Upstream:
    return Upstream()


@pytest.fixture
def passthrough(upstream: Upstream) -> PassThrough:
    return PassThrough(upstream.target(), api_server=UPSTREAM)


WRITE = Forward(verb="create", resource="configmaps")


async def test_a_write_goes_upstream_unchanged_and_its_answer_comes_back(
    upstream: Upstream, passthrough: PassThrough
) -> None:
    body = b"\x6b\x38\x73\x00 protobuf bytes"
    exchange = Exchange(
        "POST",
        "/api/v1/namespaces/a%2Fb/configmaps",
        query=b"fieldManager=kubectl&dryRun=All",
        headers=[
            (b"content-type", b"application/vnd.kubernetes.protobuf"),
            (b"accept", b"application/vnd.kubernetes.protobuf, application/json"),
            (b"authorization", b"Bearer caller-token"),
            (b"user-agent", b"kubectl/v1.33.0"),
            (b"audit-id", b"caller-audit"),
            (b"host", b"127.0.0.1:8080"),
            (b"connection", b"keep-alive, x-private"),
            (b"x-private", b"p"),
            (b"keep-alive", b"timeout=5"),
        ],
        body=body,
    )
    await passthrough.forward(exchange.request, exchange.send, WRITE)
    [sent] = upstream.seen
    assert sent.method == "POST"
    assert (
        sent.url.raw_path == b"/api/v1/namespaces/a%2Fb/configmaps?fieldManager=kubectl&dryRun=All"
    )
    assert upstream.bodies == [body]
    assert sent.headers["content-type"] == "application/vnd.kubernetes.protobuf"
    assert sent.headers["accept"] == "application/vnd.kubernetes.protobuf, application/json"
    assert sent.headers["authorization"] == "Bearer caller-token"
    assert sent.headers["user-agent"] == "kubectl/v1.33.0"
    assert sent.headers["audit-id"] == "caller-audit"
    assert sent.headers["host"] == "api.example:6443"
    assert sent.headers["content-length"] == str(len(body))
    assert sent.headers["x-forwarded-for"] == "10.0.0.7"
    for hop in ("connection", "keep-alive", "x-private"):
        assert hop not in sent.headers
    assert exchange.status == 201
    assert exchange.body == b'{"kind":"ConfigMap","metadata":{"resourceVersion":"42"}}'
    headers = exchange.headers
    assert headers[b"audit-id"] == b"a-1"
    assert headers[b"warning"] == b'299 - "deprecated"'
    for dropped in (b"date", b"connection", b"x-hop"):
        assert dropped not in headers


async def test_a_caller_without_credentials_reaches_upstream_with_none(
    upstream: Upstream, passthrough: PassThrough
) -> None:
    exchange = Exchange("DELETE", "/api/v1/namespaces/default/pods/x")
    await passthrough.forward(exchange.request, exchange.send, WRITE)
    [sent] = upstream.seen
    assert "authorization" not in sent.headers
    assert upstream.bodies == [b""]


async def test_a_caller_only_the_daemon_can_vouch_for_is_impersonated_or_refused(
    upstream: Upstream,
) -> None:
    alice = UserInfo("alice", ("readers", "system:authenticated"), uid="u-1")
    headers = [(b"impersonate-user", b"root"), (b"impersonate-group", b"system:masters")]
    async with upstream.client() as daemons:
        refusing = PassThrough(
            upstream.target(), impersonating=ImpersonatingTarget(daemons)
        )  # impersonate is off
        exchange = Exchange("GET", "/api/v1/secrets", headers=headers)
        with pytest.raises(ApiError) as refused:
            await refusing.forward(exchange.request, exchange.send, WRITE, as_user=alice)
        assert refused.value.code == 401
        assert "passthrough.impersonate" in refused.value.message
        assert upstream.seen == []
        impersonating = PassThrough(
            upstream.target(),
            impersonating=ImpersonatingTarget(daemons),
            options=PassThroughOptions(impersonate=True),
        )
        exchange = Exchange(
            "GET", "/api/v1/secrets", headers=[*headers, (b"authorization", b"Bearer x")]
        )
        await impersonating.forward(exchange.request, exchange.send, WRITE, as_user=alice)
    [sent] = upstream.seen
    assert sent.headers.get_list("impersonate-user") == ["alice"]
    assert sent.headers.get_list("impersonate-group") == ["readers"]
    assert sent.headers.get_list("impersonate-uid") == ["u-1"]
    assert "authorization" not in sent.headers  # the daemon's client adds its own


async def test_a_body_over_the_limit_is_refused_before_anything_is_sent(
    upstream: Upstream,
) -> None:
    small = PassThrough(upstream.target(), options=PassThroughOptions(max_body_bytes=1024))
    declared = Exchange("POST", "/api/v1/namespaces/d/configmaps", body=b"x" * 1025)
    with pytest.raises(ApiError) as refused:
        await small.forward(declared.request, declared.send, WRITE)
    assert (refused.value.code, refused.value.reason) == (413, "RequestEntityTooLarge")
    streamed = Exchange("POST", "/api/v1/namespaces/d/configmaps", chunks=[b"x" * 600] * 2)
    with pytest.raises(ApiError) as refused:
        await small.forward(streamed.request, streamed.send, WRITE)
    assert refused.value.code == 413
    chunked = Exchange("POST", "/api/v1/namespaces/d/configmaps", chunks=[b"ab", b"cd"])
    await small.forward(chunked.request, chunked.send, WRITE)
    assert upstream.bodies == [b"abcd"]
    assert small.short == 0


async def test_upstream_unreachable_is_a_503_naming_it(upstream: Upstream) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    upstream.answer = refuse
    passthrough = PassThrough(upstream.target(), api_server=UPSTREAM)
    exchange = Exchange("POST", "/api/v1/namespaces/d/configmaps", body=b"{}")
    with pytest.raises(ApiError) as failed:
        await passthrough.forward(exchange.request, exchange.send, WRITE)
    assert failed.value.code == 503
    assert f"cannot reach the API server at {UPSTREAM}" in failed.value.message
    assert "connection refused" in failed.value.message
    assert exchange.sent == []


async def test_a_slow_upstream_is_a_504_after_the_timeout(upstream: Upstream) -> None:
    async def hang(request: httpx.Request) -> httpx.Response:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    upstream.answer = hang
    passthrough = PassThrough(upstream.target(), options=PassThroughOptions(timeout=0.05))
    exchange = Exchange("GET", "/api/v1/secrets")
    with pytest.raises(ApiError) as failed:
        await passthrough.forward(exchange.request, exchange.send, Forward("list", "secrets"))
    assert (failed.value.code, failed.value.reason) == (504, "Timeout")
    assert "passthrough.timeoutSeconds" in failed.value.message
    assert passthrough.short == 0


async def test_a_long_running_answer_streams_until_the_client_goes_away(
    upstream: Upstream,
) -> None:
    more = asyncio.Event()
    closed = asyncio.Event()

    async def events() -> AsyncIterator[bytes]:
        try:
            yield b'{"type":"ADDED"}\n'
            await more.wait()
            yield b'{"type":"MODIFIED"}\n'
            await asyncio.Event().wait()
        finally:
            closed.set()

    upstream.answer = lambda request: httpx.Response(
        200, headers={"Content-Type": "application/json;stream=watch"}, content=events()
    )
    passthrough = PassThrough(upstream.target(), options=PassThroughOptions(timeout=0.01))
    exchange = Exchange("GET", "/api/v1/secrets", query=b"watch=1")
    watch = Forward("watch", "secrets", read=SECRETS, long_running=True)
    forwarding = asyncio.create_task(passthrough.forward(exchange.request, exchange.send, watch))
    await until(lambda: len(exchange.sent) >= 2, "the first event is relayed")
    assert passthrough.long_running == 1 and passthrough.short == 0
    more.set()
    await until(lambda: len(exchange.sent) >= 3, "the second event is relayed")
    assert exchange.body == b'{"type":"ADDED"}\n{"type":"MODIFIED"}\n'
    exchange.gone.set()  # the client goes away: the upstream request ends
    await asyncio.wait_for(forwarding, 5)
    await asyncio.wait_for(closed.wait(), 5)
    assert passthrough.long_running == 0
    assert passthrough.reads.top() == [(SECRETS, 1, 1)]


async def test_limits_refuse_with_429_and_long_running_requests_count_apart(
    upstream: Upstream,
) -> None:
    passthrough = PassThrough(
        upstream.target(), options=PassThroughOptions(max_in_flight=1, max_long_running=1)
    )
    passthrough.short = 1
    exchange = Exchange("GET", "/api/v1/secrets")
    with pytest.raises(ApiError) as refused:
        await passthrough.forward(exchange.request, exchange.send, Forward("list", "secrets"))
    assert refused.value.code == 429 and refused.value.retry_after == 1
    watch = Forward("watch", "secrets", read=SECRETS, long_running=True)
    exchange = Exchange("GET", "/api/v1/secrets", query=b"watch=1")
    await passthrough.forward(exchange.request, exchange.send, watch)
    assert exchange.status == 201
    passthrough.long_running = 1
    with pytest.raises(ApiError) as refused:
        await passthrough.forward(exchange.request, exchange.send, watch)
    assert "passthrough.maxLongRunning" in refused.value.message


async def test_a_successful_write_tells_its_answer_and_a_failed_one_does_not(
    upstream: Upstream, passthrough: PassThrough
) -> None:
    noted: list[bytes] = []
    write = Forward("update", "configmaps", on_written=noted.append)
    exchange = Exchange("PUT", "/api/v1/namespaces/d/configmaps/x", body=b"{}")
    await passthrough.forward(exchange.request, exchange.send, write)
    assert noted == [exchange.body]
    upstream.answer = lambda request: httpx.Response(409, json={"kind": "Status", "code": 409})
    exchange = Exchange("PUT", "/api/v1/namespaces/d/configmaps/x", body=b"{}")
    await passthrough.forward(exchange.request, exchange.send, write)
    assert exchange.status == 409
    assert len(noted) == 1


async def test_a_fallback_answers_when_upstream_refuses_an_anonymous_caller(
    upstream: Upstream, passthrough: PassThrough
) -> None:
    upstream.answer = lambda request: httpx.Response(403, json={"kind": "Status", "code": 403})
    answered: list[str] = []

    async def local() -> None:
        answered.append("local")

    exchange = Exchange("GET", "/apis")
    discovery = Forward("get", "", fallback=local, fallback_when_refused=True)
    await passthrough.forward(exchange.request, exchange.send, discovery)
    assert answered == ["local"] and exchange.sent == []
    # A caller with credentials gets upstream's answer to it.
    exchange = Exchange("GET", "/apis")
    await passthrough.forward(exchange.request, exchange.send, Forward("get", "", fallback=local))
    assert exchange.status == 403 and answered == ["local"]


def test_hop_by_hop_headers_and_forwarded_for() -> None:
    raw = [
        (b"Connection", b"Upgrade, X-Mine"),
        (b"X-Mine", b"1"),
        (b"TE", b"trailers"),
        (b"X-Forwarded-For", b"192.0.2.1"),
        (b"Accept-Encoding", b"gzip"),
    ]
    assert request_headers(raw, peer="10.1.1.1") == [
        (b"Accept-Encoding", b"gzip"),
        (b"x-forwarded-for", b"192.0.2.1, 10.1.1.1"),
    ]
    assert response_headers(
        [(b"content-encoding", b"gzip"), (b"transfer-encoding", b"chunked"), (b"server", b"x")]
    ) == [(b"content-encoding", b"gzip")]


def test_a_protobuf_objects_resource_version_is_read_from_its_metadata() -> None:
    def field(number: int, value: bytes) -> bytes:
        return bytes([number << 3 | 2, len(value)]) + value

    meta = field(1, b"cm") + field(3, b"default") + field(6, b"12345") + bytes([7 << 3, 3])
    obj = field(1, meta) + field(2, field(1, b"data"))
    envelope = b"k8s\x00" + field(1, field(1, b"v1") + field(2, b"ConfigMap")) + field(2, obj)
    assert object_resource_version(envelope) == "12345"
    assert object_resource_version(orjson.dumps({"metadata": {}})) is None
    assert object_resource_version(b"k8s\x00\x12\x7f") is None  # truncated
