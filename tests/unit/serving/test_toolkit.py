"""The ASGI toolkit both servers answer with: one parsed request, JSON answers and their
negotiation, every error as a Status, and discovery documents."""

from __future__ import annotations

import asyncio
import gzip
import logging
from typing import Any

import orjson
import pytest

from cacheproxy.errors import ApiError
from cacheproxy.kube import status
from cacheproxy.kube.resources import BUILTIN_RESOURCES, GroupVersion, ResourceRegistry
from cacheproxy.serving import (
    BODY_WRITER,
    RESPONSE_FLOW,
    Discovery,
    JsonAnswers,
    Message,
    Request,
    lifespan,
    send_error,
    send_status,
)

AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


class Sent(list[dict[str, Any]]):
    async def __call__(self, message: Message) -> None:
        self.append(dict(message))

    @property
    def code(self) -> int:
        return int(self[0]["status"])

    @property
    def headers(self) -> dict[bytes, bytes]:
        return dict(self[0]["headers"])

    @property
    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self[1:])


def request(
    path: str = "/x",
    *,
    query: bytes = b"",
    headers: dict[str, str] | None = None,
    messages: list[dict[str, Any]] | None = None,
    extensions: dict[str, Any] | None = None,
) -> Request:
    pending = list(messages or [{"type": "http.disconnect"}])

    async def receive() -> dict[str, Any]:
        return pending.pop(0) if pending else {"type": "http.disconnect"}

    scope: dict[str, Any] = {
        "type": "http",
        "method": "GET",
        "path": path,
        "query_string": query,
        "headers": [(k.encode(), v.encode()) for k, v in (headers or {}).items()],
    }
    if extensions is not None:
        scope["extensions"] = extensions
    return Request(scope, receive)


# ---------------------------------------------------------------------------- the request


def test_a_request_is_parsed_once_for_every_handler() -> None:
    req = request(
        "/api/v1/pods",
        query=b"labelSelector=app%3Dweb&watch=&limit=5",
        headers={"Accept": "application/json", "User-Agent": "kubectl/v1.28"},
    )
    assert req.method == "GET" and req.path == "/api/v1/pods"
    assert req.query == {"labelSelector": ["app=web"], "watch": [""], "limit": ["5"]}
    assert req.param("limit") == "5" and req.param("continue") == ""
    assert req.header("accept") == "application/json" and req.header("x-missing") == ""
    assert not req.pretty and not req.started
    assert req.writer is None and req.flow is None and req.peer_user is None


@pytest.mark.parametrize(
    ("query", "agent", "pretty"),
    [
        (b"", "curl/8.0", True),
        (b"", "Mozilla/5.0 (X11)", True),
        (b"", "kubectl/v1.28", False),
        (b"pretty=true", "kubectl/v1.28", True),
        (b"pretty=false", "curl/8.0", False),
    ],
)
def test_people_get_indented_json_as_from_the_api_server(
    query: bytes, agent: str, pretty: bool
) -> None:
    assert request(query=query, headers={"user-agent": agent}).pretty is pretty


def test_what_the_server_protocol_offers_is_read_from_the_extensions() -> None:
    writer, flow = object(), object()
    req = request(
        extensions={
            BODY_WRITER: writer,
            RESPONSE_FLOW: flow,
            "tls": {"peer_user": ("jane", ("devs",))},
        }
    )
    assert req.writer is writer and req.flow is flow and req.peer_user == ("jane", ("devs",))


async def test_a_body_comes_whole_and_bad_json_is_a_400() -> None:
    messages = [
        {"type": "http.request", "body": b'{"a":', "more_body": True},
        {"type": "http.request", "body": b" 1}", "more_body": False},
    ]
    assert await request(messages=messages).json() == {"a": 1}
    with pytest.raises(ApiError) as caught:
        await request(messages=[{"type": "http.request", "body": b"{nope"}]).json()
    assert caught.value.code == 400


async def test_a_client_gone_while_sending_its_body_is_seen_as_gone() -> None:
    req = request(messages=[{"type": "http.disconnect"}])
    assert await req.body() == b""
    await asyncio.wait_for(req.wait_disconnect(), 1)


# ---------------------------------------------------------------------------- JSON answers


async def test_a_json_answer_has_its_length_and_is_not_cached() -> None:
    sent, req = Sent(), request()
    await JsonAnswers().send(sent, req, b'{"a":1}', code=201)
    assert sent.code == 201 and sent.body == b'{"a":1}' and req.started
    assert [name for name, _ in sent[0]["headers"]] == [
        b"content-type",
        b"cache-control",
        b"content-length",
    ]
    assert sent.headers[b"cache-control"] == b"no-cache, private"
    assert sent.headers[b"content-length"] == b"7"


async def test_a_person_gets_it_indented_with_the_servers_final_newline() -> None:
    for newline in (False, True):
        sent = Sent()
        await JsonAnswers(pretty_newline=newline).send(sent, request(query=b"pretty=1"), b'{"a":1}')
        assert sent.body == b'{\n  "a": 1\n}' + (b"\n" if newline else b"")


async def test_negotiated_answers_refuse_clients_that_accept_no_json() -> None:
    answers = JsonAnswers(representations=("application/json", "application/yaml"), negotiate=True)
    with pytest.raises(ApiError) as caught:
        await answers.send(Sent(), request(headers={"accept": "application/yaml"}), b"{}")
    assert caught.value.code == 406
    assert "application/json, application/yaml" in caught.value.message
    # Not a JSON answer: not negotiated. Without negotiate: the handler's call.
    await answers.send(Sent(), request(headers={"accept": "text/x"}), b"{}", content_type=b"x/y")
    await JsonAnswers().send(Sent(), request(headers={"accept": "application/yaml"}), b"{}")


async def test_a_large_answer_is_compressed_only_for_clients_that_accept_gzip() -> None:
    answers, body = JsonAnswers(compress_above=100), orjson.dumps({"x": "y" * 200})
    sent = Sent()
    await answers.send(sent, request(headers={"accept-encoding": "gzip, deflate"}), body)
    assert sent.headers[b"content-encoding"] == b"gzip"
    assert gzip.decompress(sent.body) == body
    assert int(sent.headers[b"content-length"]) == len(sent.body)
    plain = Sent()
    await answers.send(plain, request(), body)
    assert b"content-encoding" not in plain.headers and plain.body == body


# ---------------------------------------------------------------------------- errors


async def test_an_error_is_its_status_with_retry_after_when_it_carries_one() -> None:
    sent = Sent()
    await send_status(sent, status.too_many_requests("busy", retry_after=3), started=False)
    assert sent.code == 429 and sent.headers[b"retry-after"] == b"3"
    assert orjson.loads(sent.body)["reason"] == "TooManyRequests"


async def test_an_error_after_the_response_started_only_ends_it() -> None:
    sent = Sent()
    await send_status(sent, status.bad_request("late"), started=True)
    assert sent == [{"type": "http.response.body", "body": b"", "more_body": False}]


async def test_an_unexpected_exception_is_a_500_status_and_a_log_line_never_a_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sent, req = Sent(), request("/boom")
    try:
        raise RuntimeError("a bug")
    except RuntimeError as exc:
        with caplog.at_level(logging.ERROR):
            await send_error(req, sent, exc, logger=logging.getLogger("test"))
    assert sent.code == 500 and b"a bug" not in sent.body and b"Traceback" not in sent.body
    assert orjson.loads(sent.body)["reason"] == "InternalError"
    assert "GET /boom" in caplog.text and "a bug" in caplog.text


async def test_an_api_error_is_answered_as_it_is() -> None:
    sent = Sent()
    await send_error(request(), sent, status.resource_not_found(), logger=logging.getLogger("t"))
    assert sent.code == 404


# ---------------------------------------------------------------------------- discovery


def _discovery(**kwargs: Any) -> Discovery:
    registry = ResourceRegistry(BUILTIN_RESOURCES)
    return Discovery(
        group_versions=registry.group_versions,
        types_in=registry.in_group_version,
        verbs_for=lambda rtype: ["get", "list", "watch"],
        **kwargs,
    )


def test_the_roots_are_legacy_or_aggregated_as_accept_asks() -> None:
    discovery = _discovery()
    legacy = discovery.root("application/json", core=True, server_address="10.0.0.1:443")
    assert not legacy.aggregated and orjson.loads(legacy.body)["kind"] == "APIVersions"
    groups = orjson.loads(discovery.root("", core=False, server_address="").body)
    assert groups["kind"] == "APIGroupList" and all(g["name"] for g in groups["groups"])
    aggregated = discovery.root(f"{AGGREGATED},application/json", core=False, server_address="")
    assert aggregated.aggregated and aggregated.content_type == AGGREGATED.encode()
    assert orjson.loads(aggregated.body)["kind"] == "APIGroupDiscoveryList"
    with pytest.raises(ApiError) as caught:
        discovery.root("application/yaml", core=True, server_address="")
    assert caught.value.code == 406


def test_groups_and_resource_lists_of_what_is_served() -> None:
    seen: list[int] = []

    def decorate(doc: dict[str, Any], types: Any) -> dict[str, Any]:
        seen.append(len(types))
        return {**doc, "decorated": True}

    discovery = _discovery(decorate=decorate)
    assert orjson.loads(discovery.group("apps").body)["preferredVersion"]["version"] == "v1"
    with pytest.raises(ApiError) as caught:
        discovery.group("nope.example.com")
    assert caught.value.code == 404
    apps = GroupVersion("apps", "v1")
    types = ResourceRegistry(BUILTIN_RESOURCES).in_group_version(apps)
    doc = orjson.loads(discovery.resources(apps, types).body)
    assert doc["kind"] == "APIResourceList" and doc["decorated"] and seen == [len(types)]


async def test_aggregated_discovery_is_cacheable_when_asked_with_an_etag_and_304() -> None:
    discovery = _discovery(etag=True)
    document = discovery.root(AGGREGATED, core=True, server_address="")
    first = Sent()
    await discovery.send(request(), first, document)
    etag = first.headers[b"etag"]
    assert first.code == 200 and first.headers[b"cache-control"] == b"public"
    again = Sent()
    await discovery.send(request(headers={"if-none-match": etag.decode()}), again, document)
    assert again.code == 304 and again.body == b""
    plain = Sent()
    await _discovery().send(request(), plain, document)
    assert b"etag" not in plain.headers and plain.headers[b"cache-control"] == b"no-cache, private"


async def test_the_group_paths_are_answered_and_any_other_path_is_left_alone() -> None:
    discovery = _discovery()
    answered: dict[str, Any] = {}
    for path in ("/api", "/apis", "/apis/apps"):
        sent = Sent()
        parts = path.strip("/").split("/")
        assert await discovery.serve_groups(
            request(path), sent, parts, server_address="10.0.0.1:443"
        )
        answered[path] = orjson.loads(sent.body)
    assert answered["/api"]["serverAddressByClientCIDRs"][0]["serverAddress"] == "10.0.0.1:443"
    assert answered["/apis"]["kind"] == "APIGroupList"
    assert answered["/apis/apps"]["kind"] == "APIGroup"
    for parts in ([], ["version"], ["api", "v1"], ["apis", "apps", "v1"]):
        sent = Sent()
        assert not await discovery.serve_groups(request(), sent, parts, server_address="")
        assert sent == []


async def test_lifespan_starts_and_stops() -> None:
    messages = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
    sent = Sent()

    async def receive() -> dict[str, Any]:
        return messages.pop(0)

    await lifespan(receive, sent)
    assert [m["type"] for m in sent] == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
