"""The probe of upstream's current resourceVersion: one ``limit=1`` list of the cached
collection's path, without selectors; its RV as an int; failures in the error tree."""

from __future__ import annotations

import httpx
import orjson
import pytest

from cacheproxy.errors import ApiError, TransportError
from cacheproxy.kube import status
from cacheproxy.kube.resources import builtin
from cacheproxy.upstream import ResourceVersionProbe


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
