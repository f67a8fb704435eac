"""The probe of upstream's current resourceVersion: one ``limit=1`` list of the cached
collection's path, without selectors; its RV as an int; failures in the error tree. The listing
of a collection's keys: the cached collection's path with its selectors, asked as metadata."""

from __future__ import annotations

import httpx
import orjson
import pytest

from cacheproxy.errors import ApiError, TransportError
from cacheproxy.kube import status
from cacheproxy.kube.keys import key_digest
from cacheproxy.kube.resources import builtin
from cacheproxy.upstream import CollectionKeys, KeysListed, ObjectVersions, ResourceVersionProbe


def client(answer: httpx.Response, seen: list[httpx.Request]) -> httpx.AsyncClient:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return answer

    return httpx.AsyncClient(base_url="http://upstream", transport=httpx.MockTransport(handler))


def a_list(rv: object) -> httpx.Response:
    body = {"kind": "PartialObjectMetadataList", "metadata": {"resourceVersion": rv}, "items": []}
    return httpx.Response(200, content=orjson.dumps(body))


async def test_the_probe_is_a_limit_1_list_of_the_collection() -> None:
    seen: list[httpx.Request] = []
    async with client(a_list("4711"), seen) as c:
        probe = ResourceVersionProbe(c, builtin("apps/v1/deployments"), namespace="team")
        assert await probe() == 4711
    (request,) = seen
    assert request.url.path == "/apis/apps/v1/namespaces/team/deployments"
    assert dict(request.url.params) == {"limit": "1"}


async def test_an_error_answer_is_raised_as_the_api_error() -> None:
    forbidden = status.forbidden(verb="list", resource="pods", namespace="", user="cacheproxy")
    answer = httpx.Response(403, content=orjson.dumps(forbidden.status))
    async with client(answer, []) as c:
        with pytest.raises(ApiError) as caught:
            await ResourceVersionProbe(c, builtin("pods"))()
    assert caught.value.code == 403


@pytest.mark.parametrize("rv", ["", None, "abc", 12])
async def test_a_list_without_a_decimal_rv_is_a_transport_error(rv: object) -> None:
    async with client(a_list(rv), []) as c:
        with pytest.raises(TransportError, match="the list has no resourceVersion"):
            await ResourceVersionProbe(c, builtin("pods"))()


async def test_the_probe_is_bounded_by_the_consistent_reads_timeout() -> None:
    seen: list[httpx.Request] = []
    async with client(a_list("1"), seen) as c:
        await ResourceVersionProbe(c, builtin("pods"), seconds=2.5)()
    assert seen[0].extensions["timeout"] == {"connect": 2.5, "read": 2.5, "write": 2.5, "pool": 2.5}


def metadata(namespace: str | None, name: str, rv: str) -> dict[str, object]:
    meta = {"name": name, "resourceVersion": rv}
    if namespace:
        meta["namespace"] = namespace
    return {"metadata": meta}


async def test_the_listing_lists_the_cached_collection_as_metadata() -> None:
    seen: list[httpx.Request] = []
    body = {
        "kind": "PartialObjectMetadataList",
        "metadata": {"resourceVersion": "900"},
        "items": [metadata("team", "b", "12"), metadata("team", "a", "870")],
    }
    answer = httpx.Response(200, content=orjson.dumps(body))
    async with client(answer, seen) as c:
        keys = CollectionKeys(
            c, builtin("pods"), namespace="team", label_selector="app=web", field_selector=""
        )
        assert await keys() == KeysListed(900, key_digest(["team/a", "team/b"]), 870)
    (request,) = seen
    assert request.url.path == "/api/v1/namespaces/team/pods"
    assert dict(request.url.params) == {"labelSelector": "app=web"}
    assert request.headers["accept"].startswith(
        "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
    )


async def test_a_cluster_scoped_listing_keys_by_name_and_an_empty_one_is_newest_0() -> None:
    listed = {"metadata": {"resourceVersion": "5"}, "items": [metadata(None, "n1", "4")]}
    async with client(httpx.Response(200, content=orjson.dumps(listed)), []) as c:
        assert await CollectionKeys(c, builtin("namespaces"))() == KeysListed(
            5, key_digest(["n1"]), 4
        )
    empty = {"metadata": {"resourceVersion": "5"}, "items": None}
    async with client(httpx.Response(200, content=orjson.dumps(empty)), []) as c:
        assert await CollectionKeys(c, builtin("namespaces"))() == KeysListed(5, key_digest([]), 0)


@pytest.mark.parametrize(
    "body",
    [
        {"metadata": {}, "items": []},
        {"metadata": {"resourceVersion": "5"}, "items": [{"metadata": {"name": "x"}}]},
        {"metadata": {"resourceVersion": "5"}, "items": [{"metadata": {"namespace": "n"}}]},
        [],
    ],
)
async def test_a_listing_that_is_no_list_of_named_versioned_objects_is_a_transport_error(
    body: object,
) -> None:
    async with client(httpx.Response(200, content=orjson.dumps(body)), []) as c:
        with pytest.raises(TransportError, match="not a list of objects"):
            await CollectionKeys(c, builtin("pods"))()


async def test_an_objects_version_is_a_get_of_its_metadata() -> None:
    seen: list[httpx.Request] = []
    answer = httpx.Response(200, content=orjson.dumps(metadata("team", "web", "77")))
    async with client(answer, seen) as c:
        assert await ObjectVersions(c, builtin("pods"))("team", "web") == 77
        assert await ObjectVersions(c, builtin("namespaces"))(None, "team") == 77
    assert [r.url.path for r in seen] == [
        "/api/v1/namespaces/team/pods/web",
        "/api/v1/namespaces/team",
    ]
    assert (
        seen[0]
        .headers["accept"]
        .startswith("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1")
    )


async def test_a_missing_object_is_the_api_servers_404() -> None:
    missing = status.not_found(resource="pods", name="gone")
    answer = httpx.Response(404, content=orjson.dumps(missing.status))
    async with client(answer, []) as c:
        with pytest.raises(ApiError) as caught:
            await ObjectVersions(c, builtin("pods"))("team", "gone")
    assert caught.value.code == 404
