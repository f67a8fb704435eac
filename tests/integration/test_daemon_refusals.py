"""With pass-through off, what a read-only cache cannot serve gets a Status that says so and names the API server:
writes, logs, exec, attach, port-forward, proxies and websocket upgrades, through real clients
(the pinned kubectl versions, a websocket client) in front of the simulator — and nothing is
logged for it, neither by the daemon nor by uvicorn."""

from __future__ import annotations

import logging
from pathlib import Path

import httpx
import pytest
import websockets

from cacheproxy.daemon.runtime import Daemon
from cacheproxy.sim import SimServer
from tests.integration.clients import run_kubectl

READ_ONLY = "cacheproxy is a read-only cache of the Kubernetes API"


@pytest.fixture
def daemon(read_only_daemon: Daemon) -> Daemon:
    """Every test here is of the read-only answers: pass-through off."""
    return read_only_daemon


@pytest.fixture
def no_log_lines(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """Every record from INFO up, to check that refusals log nothing (uvicorn's included)."""
    caplog.set_level(logging.INFO)
    return caplog


def _logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        f"{r.name} {r.levelname}: {r.getMessage()}"
        for r in caplog.records
        if r.levelno >= logging.WARNING or r.name.startswith("uvicorn")
    ]


async def _a_pod(proxy: httpx.AsyncClient) -> str:
    return str(
        (await proxy.get("/api/v1/namespaces/ns-0/pods")).json()["items"][0]["metadata"]["name"]
    )


COMMANDS = {
    "logs": ("logs", "-n", "ns-0", "{pod}"),
    "exec": ("exec", "-n", "ns-0", "{pod}", "--", "ls"),
    "attach": ("attach", "-n", "ns-0", "{pod}"),
    "port-forward": ("port-forward", "-n", "ns-0", "pod/{pod}", "0:80"),
    "delete": ("delete", "pod", "-n", "ns-0", "{pod}"),
    "label": ("label", "pod", "-n", "ns-0", "{pod}", "x=y"),
    "auth can-i": ("auth", "can-i", "list", "pods"),
}


@pytest.mark.kubectl
@pytest.mark.parametrize("command", COMMANDS)
async def test_kubectl_is_told_the_cache_is_read_only_and_where_to_go(
    kubectl: str,
    daemon: Daemon,
    demo_server: SimServer,
    proxy: httpx.AsyncClient,
    tmp_path: Path,
    no_log_lines: pytest.LogCaptureFixture,
    command: str,
) -> None:
    pod = await _a_pod(proxy)
    args = [a.format(pod=pod) for a in COMMANDS[command]]
    code, out, err = await run_kubectl(kubectl, daemon.url, tmp_path, *args)
    assert code != 0, out
    assert READ_ONLY in err, err
    assert f"Send this request to the API server at {demo_server.url}." in err, err
    assert _logged(no_log_lines) == []


@pytest.mark.parametrize(
    ("method", "path", "code", "reason", "says"),
    [
        ("POST", "/api/v1/namespaces/ns-0/pods", 405, "MethodNotAllowed", "not create pods (POST)"),
        ("PUT", "/api/v1/namespaces/ns-0/configmaps/x", 405, "MethodNotAllowed", "update"),
        (
            "DELETE",
            "/apis/apps/v1/namespaces/ns-0/deployments/x",
            405,
            "MethodNotAllowed",
            "delete deployments.apps",
        ),
        (
            "POST",
            "/api/v1/namespaces/ns-0/services",
            405,
            "MethodNotAllowed",
            "not create services",
        ),
        (
            "PATCH",
            "/api/v1/namespaces/ns-0/pods/x/status",
            405,
            "MethodNotAllowed",
            "patch pods/status",
        ),
        ("POST", "/status", 405, "MethodNotAllowed", "(POST)"),
        ("GET", "/api/v1/namespaces/ns-0/pods/x/log", 501, "NotImplemented", "pods/log"),
        (
            "GET",
            "/api/v1/namespaces/ns-0/services/x/proxy/healthz",
            501,
            "NotImplemented",
            "services/proxy",
        ),
        ("GET", "/api/v1/nodes/n/proxy/metrics", 501, "NotImplemented", "nodes/proxy"),
        (
            "POST",
            "/api/v1/namespaces/ns-0/pods/x/portforward",
            501,
            "NotImplemented",
            "pods/portforward",
        ),
        ("GET", "/nope", 404, "NotFound", "serves nothing at /nope"),
    ],
)
async def test_what_the_cache_cannot_serve_gets_a_status_saying_so(
    proxy: httpx.AsyncClient,
    demo_server: SimServer,
    no_log_lines: pytest.LogCaptureFixture,
    method: str,
    path: str,
    code: int,
    reason: str,
    says: str,
) -> None:
    response = await proxy.request(method, path, json={} if method != "GET" else None)
    assert response.status_code == code, response.text
    body = response.json()
    assert (body["kind"], body["status"], body["reason"], body["code"]) == (
        "Status",
        "Failure",
        reason,
        code,
    )
    assert READ_ONLY in body["message"]
    assert says in body["message"]
    if code != 404:
        assert body["message"].endswith(
            f"Send this request to the API server at {demo_server.url}."
        )
    assert _logged(no_log_lines) == []


async def test_a_refused_write_on_a_served_resource_is_counted_for_it(
    proxy: httpx.AsyncClient,
) -> None:
    assert (await proxy.delete("/api/v1/namespaces/ns-0/pods/x")).status_code == 405
    metrics = (await proxy.get("/metrics")).text
    assert 'cacheproxy_http_requests_total{code="405",resource="pods",verb="delete"} 1.0' in metrics


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("/api/v1/pods?watch=1", "does not upgrade connections (websocket) for pods"),
        ("/api/v1/namespaces/ns-0/pods/x/exec?command=ls", "not the pods/exec"),
    ],
)
async def test_a_websocket_gets_a_status_not_an_error(
    daemon: Daemon,
    proxy: httpx.AsyncClient,
    no_log_lines: pytest.LogCaptureFixture,
    path: str,
    says: str,
) -> None:
    url = daemon.url.replace("http://", "ws://") + path
    with pytest.raises(websockets.InvalidStatus) as refused:
        async with websockets.connect(url, open_timeout=10):
            pytest.fail("the websocket was accepted")
    response = refused.value.response
    assert response.status_code == 501
    assert response.headers["Connection"] == "close"
    body = httpx.Response(501, content=bytes(response.body)).json()
    assert body["reason"] == "NotImplemented"
    assert says in body["message"]
    # The connection is not reused; the server still answers others.
    assert (await proxy.get("/api/v1/pods?limit=1")).status_code == 200
    assert _logged(no_log_lines) == []


async def test_an_upgrade_http_lets_a_server_ignore_is_ignored(proxy: httpx.AsyncClient) -> None:
    headers = {"Connection": "Upgrade, HTTP2-Settings", "Upgrade": "h2c", "HTTP2-Settings": ""}
    response = await proxy.get("/api/v1/namespaces/ns-0/pods", headers=headers)
    assert response.status_code == 200
    assert response.json()["kind"] == "PodList"
