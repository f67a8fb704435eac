"""Refusals of what a read-only cache cannot serve, at the ASGI level: a websocket scope is
answered with the server's denial response (or a close where there is none), a write never
reaches authorization, and reads are not refused."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest

from cacheproxy.informer import FakeListerWatcher, SharedInformer, Store
from cacheproxy.kube.attributes import UserInfo
from cacheproxy.kube.request import parse_api_path, split_path
from cacheproxy.kube.resources import builtin
from cacheproxy.server.access import AccessControl
from cacheproxy.server.app import CacheServer
from cacheproxy.server.refusals import refusal
from cacheproxy.server.resource import ServedResource
from cacheproxy.serving import Message, Request

API_SERVER = "https://10.0.0.1:443"


def _scope(kind: str, path: str, *, extensions: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "type": kind,
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": [(b"host", b"cache"), (b"upgrade", b"websocket"), (b"connection", b"Upgrade")],
        "extensions": extensions or {},
    }


async def _run(app: CacheServer, scope: dict[str, Any]) -> list[Message]:
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "websocket.connect"}

    async def send(message: Message) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return sent


async def test_a_websocket_is_refused_with_the_denial_response() -> None:
    app = CacheServer([], version={}, api_server=API_SERVER)
    scope = _scope("websocket", "/api/v1/pods", extensions={"websocket.http.response": {}})
    sent = await _run(app, scope)
    assert [m["type"] for m in sent] == [
        "websocket.http.response.start",
        "websocket.http.response.body",
    ]
    assert sent[0]["status"] == 501
    body = orjson.loads(sent[1]["body"])
    assert body["reason"] == "NotImplemented"
    assert body["message"].endswith(f"Send this request to the API server at {API_SERVER}.")


async def test_a_websocket_is_closed_where_the_server_offers_no_denial_response() -> None:
    app = CacheServer([], version={})
    sent = await _run(app, _scope("websocket", "/api/v1/namespaces/a/pods/b/exec"))
    assert sent == [{"type": "websocket.close", "code": 1008}]


class _Refusing:
    """Access control that knows every user and denies everything (counts reviews)."""

    def __init__(self) -> None:
        self.reviews = 0

    async def review_token(self, token: str) -> UserInfo | None:
        return UserInfo("someone", ())

    async def review_access(self, user: UserInfo, attrs: object) -> bool:
        self.reviews += 1
        return False


async def test_a_write_is_refused_after_authentication_without_an_access_review() -> None:
    reviewer = _Refusing()
    access = AccessControl(tokens=reviewer, reviewer=reviewer)
    app = CacheServer([], version={}, access=access)
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/api/v1/namespaces/a/pods",
        "raw_path": b"/api/v1/namespaces/a/pods",
        "query_string": b"",
        "headers": [(b"authorization", b"Bearer t"), (b"content-length", b"2")],
    }
    sent = await _run(app, scope)
    assert sent[0]["status"] == 405
    assert reviewer.reviews == 0
    anonymous = await _run(app, {**scope, "headers": [(b"content-length", b"2")]})
    assert anonymous[0]["status"] == 401


def _request(method: str, path: str, **headers: str) -> Request:
    raw = [(k.encode(), v.encode()) for k, v in headers.items()]
    scope = {"type": "http", "method": method, "path": path, "query_string": b"", "headers": raw}

    async def receive() -> Message:
        return {"type": "http.request"}

    return Request(scope, receive)


@pytest.mark.parametrize(
    ("method", "path", "headers"),
    [
        ("GET", "/api/v1/pods", {}),
        ("HEAD", "/api/v1/namespaces/a/pods/b", {}),
        ("GET", "/api/v1/namespaces/a/pods/b/status", {}),
        ("GET", "/api/v1/pods", {"upgrade": "h2c", "connection": "Upgrade"}),
        ("GET", "/status", {}),
    ],
)
def test_reads_are_not_refused(method: str, path: str, headers: dict[str, str]) -> None:
    req = _request(method, path, **headers)
    assert refusal(req, parse_api_path(split_path(path)), None, api_server="") is None


def test_the_message_says_so_when_the_api_servers_url_is_unknown() -> None:
    req = _request("DELETE", "/api/v1/namespaces/a/pods/b")
    refused = refusal(req, parse_api_path(split_path(req.path)), "delete", api_server="")
    assert refused is not None
    assert refused.code == 405
    assert refused.message == (
        "cacheproxy is a read-only cache of the Kubernetes API: it does not delete pods "
        "(DELETE). Send this request to the API server directly."
    )


async def test_a_resource_not_cached_is_a_404_saying_how_to_serve_it_when_nothing_passes() -> None:
    lw = FakeListerWatcher(kind="Pod")
    informer = SharedInformer(lw, name="pods", store=Store(kind="Pod", api_version="v1"))
    pods = ServedResource(builtin("pods"), informer)
    app = CacheServer([pods], version={}, api_server=API_SERVER)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://cache") as client:
        for path, entry in (
            ("/api/v1/namespaces/a/services", '"- resource: services"'),
            ("/apis/apps/v1/deployments", '"- resource: apps/v1/deployments"'),
            ("/apis/example.com/v1/widgets/w", '"- resource: example.com/v1/widgets"'),
        ):
            response = await client.get(path)
            assert response.status_code == 404, path
            body = response.json()
            assert body["reason"] == "NotFound"
            message = body["message"]
            assert message.startswith("the server could not find the requested resource: ")
            assert "(it caches pods)" in message
            assert entry in message
            assert (
                f"passthrough.enabled: true to send what it does not cache to the API server at {API_SERVER}"
                in (message)
            )
        # A served resource's path in the wrong scope is the API server's own 404.
        response = await client.get("/api/v1/pods/p")
        assert response.status_code == 404
        assert response.json()["message"] == "the server could not find the requested resource"
