"""List and get through the daemon against the real API server: the same request to both, the same
items in the same order, the same codes and Status bodies.

What legitimately differs is compared by rule instead of by value: a list's resourceVersion (the
API server's is etcd's current revision at RV unset, the daemon's is its cache's; both must cover
every item), continue tokens (each server's own), and ``metadata.managedFields`` (dropped by the
daemon's default transform).
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.e2e.support import DEMO, converged, keyed, without_managed_fields

pytestmark = pytest.mark.every_server

PODS = "/api/v1/pods"

LABEL_SELECTORS = [
    "app=app-1",
    "app==",  # app equal to the empty value
    "app!=app-1",
    "app in (app-0,app-2)",
    "app notin (app-1),tier=frontend",
    "team",
    "!team",
    "version,app!=app-3",
]
FIELD_SELECTORS = [
    "spec.nodeName=node-2",
    "spec.nodeName!=node-0",
    "status.phase=Running",
    "status.phase!=Running",
    "metadata.namespace=ns-1",
    "metadata.name=does-not-exist",
    "spec.restartPolicy=Always,spec.schedulerName=default-scheduler",
]


def _rv(body: dict[str, Any]) -> int:
    return int(body["metadata"]["resourceVersion"])


def _item_rvs(body: dict[str, Any]) -> list[int]:
    return [int(i["metadata"]["resourceVersion"]) for i in body["items"]]


async def test_every_pod_as_the_api_server_lists_them(
    upstream: httpx.AsyncClient, proxy: httpx.AsyncClient
) -> None:
    up, down = await converged(upstream, proxy, PODS)
    assert len(up["items"]) == DEMO.pods
    assert (down["kind"], down["apiVersion"]) == (up["kind"], up["apiVersion"])
    # Whole objects, byte for byte in content, but for the fields the default transform drops.
    assert down["items"] == without_managed_fields(up)["items"]
    # Each answers at an RV that covers its items; the cache's is never ahead of upstream's.
    assert max(_item_rvs(down)) <= _rv(down) <= _rv(up)


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/namespaces/ns-1/pods",
        "/api/v1/namespaces/no-such-namespace/pods",
        "/api/v1/namespaces",
        "/api/v1/nodes",
        "/api/v1/configmaps",
        "/api/v1/namespaces/ns-0/services",
        "/apis/apps/v1/deployments",
        "/apis/apps/v1/namespaces/ns-2/replicasets",
        "/api/v1/events",
    ],
)
async def test_a_collection_lists_what_the_api_server_lists(
    upstream: httpx.AsyncClient, proxy: httpx.AsyncClient, path: str
) -> None:
    up, down = await converged(upstream, proxy, path)
    assert down["kind"] == up["kind"]
    assert down["items"] == without_managed_fields(up)["items"]


@pytest.mark.parametrize("selector", LABEL_SELECTORS)
async def test_a_label_selector_selects_what_the_api_server_selects(
    upstream: httpx.AsyncClient, proxy: httpx.AsyncClient, selector: str
) -> None:
    up, _ = await converged(upstream, proxy, PODS, params={"labelSelector": selector})
    if selector not in ("team", "!team", "app=="):  # every demo pod has a team and an app
        assert 0 < len(up["items"]) < DEMO.pods, "a selective query"


@pytest.mark.parametrize("selector", FIELD_SELECTORS)
async def test_a_field_selector_selects_what_the_api_server_selects(
    upstream: httpx.AsyncClient, proxy: httpx.AsyncClient, selector: str
) -> None:
    await converged(upstream, proxy, PODS, params={"fieldSelector": selector})


async def test_pages_walk_the_same_items_with_the_same_counts(
    upstream: httpx.AsyncClient, proxy: httpx.AsyncClient
) -> None:
    await converged(upstream, proxy, PODS)
    walks: list[list[dict[str, Any]]] = []
    for client in (upstream, proxy):
        pages: list[dict[str, Any]] = []
        params = {"limit": "7", "labelSelector": "tier!=cache"}
        while True:
            response = await client.get(PODS, params=params)
            assert response.status_code == 200, response.text
            pages.append(response.json())
            token = pages[-1]["metadata"].get("continue")
            if not token:
                break
            params = {"limit": "7", "labelSelector": "tier!=cache", "continue": token}
        walks.append(pages)
    up_pages, down_pages = walks
    assert [len(p["items"]) for p in down_pages] == [len(p["items"]) for p in up_pages]
    assert [keyed(p["items"]) for p in down_pages] == [keyed(p["items"]) for p in up_pages]
    # One snapshot: every page of a walk carries the first page's RV.
    assert len({_rv(p) for p in down_pages}) == 1
    # With a selector, neither tells how many remain.
    assert not any("remainingItemCount" in p["metadata"] for p in up_pages + down_pages)


async def test_remaining_item_count_without_selectors_is_the_api_servers(
    upstream: httpx.AsyncClient, proxy: httpx.AsyncClient
) -> None:
    await converged(upstream, proxy, PODS)
    up = (await upstream.get(PODS, params={"limit": "25"})).json()
    down = (await proxy.get(PODS, params={"limit": "25"})).json()
    assert keyed(down["items"]) == keyed(up["items"])
    assert down["metadata"]["remainingItemCount"] == up["metadata"]["remainingItemCount"]
    assert down["metadata"]["continue"] and up["metadata"]["continue"]


async def test_resource_version_0_is_any_state_and_honours_limit(
    upstream: httpx.AsyncClient, proxy: httpx.AsyncClient
) -> None:
    # Known difference: kube-apiserver 1.28 answers RV=0 from its watch cache ignoring `limit`
    # (the whole list); the daemon honours it. Walked to the end, both give every item.
    await converged(upstream, proxy, PODS)
    up = (await upstream.get(PODS, params={"resourceVersion": "0", "limit": "10"})).json()
    assert len(up["items"]) == DEMO.pods and not up["metadata"].get("continue")
    items: list[dict[str, Any]] = []
    params = {"resourceVersion": "0", "limit": "10"}
    while True:
        page = (await proxy.get(PODS, params=params)).json()
        assert len(page["items"]) <= 10
        items += page["items"]
        if not page["metadata"].get("continue"):
            break
        params = {"limit": "10", "continue": page["metadata"]["continue"]}
    assert keyed(items) == keyed(up["items"])


async def test_an_exact_list_at_the_current_rv_is_that_state(
    upstream: httpx.AsyncClient, proxy: httpx.AsyncClient
) -> None:
    _, down = await converged(upstream, proxy, PODS)
    rv = down["metadata"]["resourceVersion"]
    params = {"resourceVersion": rv, "resourceVersionMatch": "Exact"}
    up_exact = await upstream.get(PODS, params=params)
    down_exact = await proxy.get(PODS, params=params)
    assert up_exact.status_code == down_exact.status_code == 200
    assert keyed(down_exact.json()["items"]) == keyed(up_exact.json()["items"])
    assert down_exact.json()["metadata"]["resourceVersion"] == rv


async def test_not_older_than_an_rv_the_cache_has_is_served_at_once(
    upstream: httpx.AsyncClient, proxy: httpx.AsyncClient
) -> None:
    _, down = await converged(upstream, proxy, PODS)
    rv = down["metadata"]["resourceVersion"]
    params = {"resourceVersion": rv, "resourceVersionMatch": "NotOlderThan"}
    down_nto = await proxy.get(PODS, params=params)
    assert down_nto.status_code == 200
    # The daemon's consistent list carries etcd's revision when a listing confirmed its quiet
    # pods (other resources moved it): kube-apiserver 1.28's own watch cache has not reached
    # that revision and answers 504 after 3 s, etcd has it (Exact).
    exact = {"resourceVersion": rv, "resourceVersionMatch": "Exact"}
    up_exact = await upstream.get(PODS, params=exact)
    assert up_exact.status_code == 200
    assert int(down_nto.json()["metadata"]["resourceVersion"]) >= int(rv)
    assert keyed(down_nto.json()["items"]) == keyed(up_exact.json()["items"])


async def test_a_get_returns_the_api_servers_object(
    upstream: httpx.AsyncClient, proxy: httpx.AsyncClient
) -> None:
    up_list, _ = await converged(upstream, proxy, "/api/v1/namespaces/ns-0/pods")
    name = up_list["items"][3]["metadata"]["name"]
    path = f"/api/v1/namespaces/ns-0/pods/{name}"
    up = await upstream.get(path)
    down = await proxy.get(path)
    assert up.status_code == down.status_code == 200
    assert down.json() == without_managed_fields(up.json())
    assert down.headers["content-type"] == up.headers["content-type"] == "application/json"


async def test_a_cluster_scoped_get_returns_the_api_servers_object(
    upstream: httpx.AsyncClient, proxy: httpx.AsyncClient
) -> None:
    await converged(upstream, proxy, "/api/v1/nodes")
    up = await upstream.get("/api/v1/nodes/node-1")
    down = await proxy.get("/api/v1/nodes/node-1")
    assert up.status_code == down.status_code == 200
    assert down.json() == without_managed_fields(up.json())


STATUS_CASES = [
    ("/api/v1/namespaces/ns-0/pods/no-such-pod", {}),
    ("/api/v1/namespaces/no-such-namespace/pods/no-such-pod", {}),
    ("/api/v1/nodes/no-such-node", {}),
    (PODS, {"labelSelector": "app in (a"}),
    (PODS, {"labelSelector": "app in (a,"}),
    (PODS, {"fieldSelector": "spec.noSuchField=x"}),
    (PODS, {"fieldSelector": "spec.nodeName"}),
    (PODS, {"resourceVersionMatch": "Exact"}),
    (PODS, {"resourceVersionMatch": "Sometimes", "resourceVersion": "1"}),
    (PODS, {"continue": "not-a-token"}),
    (PODS, {"continue": "x", "resourceVersion": "5"}),
]


@pytest.mark.parametrize(("path", "params"), STATUS_CASES)
async def test_a_refused_request_gets_the_api_servers_status(
    upstream: httpx.AsyncClient,
    proxy: httpx.AsyncClient,
    path: str,
    params: dict[str, str],
) -> None:
    up = await upstream.get(path, params=params)
    down = await proxy.get(path, params=params)
    assert up.status_code >= 400, up.text
    assert down.status_code == up.status_code, (down.text, up.text)
    up_status, down_status = up.json(), down.json()
    for key in ("kind", "apiVersion", "status", "reason", "code"):
        assert down_status.get(key) == up_status.get(key), key
    # Known difference: an unsupported field's message goes on to name the supported ones.
    assert down_status["message"].startswith(up_status["message"])
    if down_status["message"] != up_status["message"]:
        assert up_status["message"].startswith("field label not supported: ")
        assert down_status["message"].startswith(f"{up_status['message']} (supported: ")
    assert down_status.get("details") == up_status.get("details")


async def test_watch_on_an_object_path_is_a_plain_get_as_on_the_api_server(
    upstream: httpx.AsyncClient, proxy: httpx.AsyncClient
) -> None:
    await converged(upstream, proxy, "/api/v1/nodes")
    up = await upstream.get("/api/v1/nodes/node-2", params={"watch": "1"})
    down = await proxy.get("/api/v1/nodes/node-2", params={"watch": "1"})
    assert down.status_code == up.status_code == 200
    assert down.json() == without_managed_fields(up.json())


@pytest.mark.parametrize("accept", ["application/xml", "text/plain", "application/vnd.nope"])
async def test_an_unservable_accept_header_gets_the_api_servers_406(
    upstream: httpx.AsyncClient, proxy: httpx.AsyncClient, accept: str
) -> None:
    up = await upstream.get(PODS, headers={"Accept": accept})
    down = await proxy.get(PODS, headers={"Accept": accept})
    assert down.status_code == up.status_code == 406
    up_status, down_status = up.json(), down.json()
    for key in ("kind", "apiVersion", "status", "reason", "code", "details"):
        assert down_status.get(key) == up_status.get(key), key
    # The same words, naming what each can send (JSON only here; protobuf and YAML there).
    head = "406: Not Acceptable\n\nAvailable representations: "
    assert up_status["message"].startswith(head)
    assert down_status["message"] == head + "application/json, application/json;stream=watch"
