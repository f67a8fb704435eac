"""Delegated authentication and authorization against the real API server: each request's token
is reviewed upstream (TokenReview) and each read authorized upstream (SubjectAccessReview), so a
user reads through the daemon exactly what RBAC lets it read directly — with the same codes and
the same Status bodies."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from cacheproxy.daemon.runtime import Daemon
from cacheproxy.envtest import Cluster
from tests.e2e.support import daemon_over

REQUESTS = [
    "/api/v1/namespaces/team-a/pods",
    "/api/v1/namespaces/team-a/configmaps?watch=1&timeoutSeconds=1",
    "/api/v1/namespaces/team-a/pods/nothing-here",
    "/api/v1/namespaces/ns-0/pods",
    "/api/v1/pods",
    "/api/v1/pods?watch=1&timeoutSeconds=1",
    "/api/v1/nodes",
    "/api/v1/nodes/node-1",
    "/apis/apps/v1/namespaces/team-a/deployments",
    "/apis/apps/v1/namespaces/ns-1/deployments",
    "/api/v1/namespaces/ns-1/configmaps?labelSelector=app%3Dapp-1",
]
USERS = ["reader", "nobody"]


@pytest.fixture
async def delegated(cluster: Cluster, tmp_path: Path) -> AsyncIterator[Daemon]:
    async with daemon_over(cluster, tmp_path, extra={"server.auth.mode": "delegated"}) as d:
        yield d


async def _pair(
    cluster: Cluster, daemon: Daemon, path: str, headers: dict[str, str]
) -> tuple[httpx.Response, httpx.Response]:
    async with (
        cluster.async_client(None, headers=headers) as up,
        httpx.AsyncClient(base_url=daemon.url, headers=headers, timeout=30) as down,
    ):
        return await up.get(path), await down.get(path)


@pytest.mark.parametrize("user", USERS)
@pytest.mark.parametrize("path", REQUESTS)
async def test_a_user_reads_through_the_daemon_what_rbac_lets_it_read_directly(
    cluster: Cluster, delegated: Daemon, user: str, path: str
) -> None:
    up, down = await _pair(cluster, delegated, path, cluster.users[user].headers)
    assert down.status_code == up.status_code, (down.text, up.text)
    if up.status_code == 403:
        assert down.json() == up.json()
    elif up.status_code == 200 and "watch" not in path:
        assert [i["metadata"]["name"] for i in down.json()["items"]] == [
            i["metadata"]["name"] for i in up.json()["items"]
        ]


async def test_the_reader_is_allowed_somewhere_and_denied_elsewhere(
    cluster: Cluster, delegated: Daemon
) -> None:
    # The two outcomes the table above compares both happen.
    headers = cluster.users["reader"].headers
    allowed, _ = await _pair(cluster, delegated, REQUESTS[0], headers)
    denied, _ = await _pair(cluster, delegated, "/api/v1/pods", headers)
    assert (allowed.status_code, denied.status_code) == (200, 403)


@pytest.mark.parametrize(
    "headers",
    [{"Authorization": "Bearer not-a-token"}, {}],
    ids=["bad token", "no token"],
)
async def test_unauthenticated_requests_get_the_api_servers_401(
    cluster: Cluster, delegated: Daemon, headers: dict[str, str]
) -> None:
    async with (
        httpx.AsyncClient(
            base_url=cluster.url, verify=cluster.ssl_context(), headers=headers
        ) as up,
        httpx.AsyncClient(base_url=delegated.url, headers=headers) as down,
    ):
        up_r, down_r = await up.get("/api/v1/pods"), await down.get("/api/v1/pods")
    if headers:
        assert down_r.status_code == up_r.status_code == 401
        assert down_r.json() == up_r.json()
    else:
        # The API server lets anonymous requests through to RBAC (which denies them, 403);
        # cacheproxy refuses them by default (server.auth.allowAnonymous enables the same).
        assert (up_r.status_code, down_r.status_code) == (403, 401)
        assert down_r.json()["reason"] == "Unauthorized"


@pytest.mark.parametrize("path", ["/api", "/apis", "/api/v1", "/version"])
async def test_discovery_is_open_to_any_authenticated_user_as_upstream(
    cluster: Cluster, delegated: Daemon, path: str
) -> None:
    up, down = await _pair(cluster, delegated, path, cluster.users["nobody"].headers)
    assert down.status_code == up.status_code == 200
