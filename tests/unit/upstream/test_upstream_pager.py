"""list_all: client-go's ListPager semantics over any ListerWatcher (here a fake one)."""

from __future__ import annotations

from typing import Any

import pytest

from cacheproxy.errors import ApiError
from cacheproxy.informer import (
    Decode,
    ListPage,
    ListRequest,
    ReflectorOptions,
    WatchRequest,
    WatchStream,
    as_parsed,
)
from cacheproxy.kube import status
from cacheproxy.upstream import list_all


class PagedLister:
    """A fake collection of ``size`` items, paged by ``limit``; ``fail`` maps a call number
    (0-based) to the error that call raises. Records every request."""

    def __init__(self, size: int, *, rv: str = "100", fail: dict[int, ApiError] | None = None):
        self.items = [{"metadata": {"name": f"o-{i:04d}"}} for i in range(size)]
        self.rv = rv
        self.fail = fail or {}
        self.requests: list[ListRequest] = []

    async def list(self, request: ListRequest, *, decode: Decode = as_parsed) -> ListPage:
        call = len(self.requests)
        self.requests.append(request)
        if call in self.fail:
            raise self.fail[call]
        start = int(request.continue_token or 0)
        end = len(self.items) if request.limit == 0 else min(start + request.limit, len(self.items))
        token = str(end) if end < len(self.items) else ""
        return ListPage([decode(i) for i in self.items[start:end]], self.rv, token)

    def watch(self, request: WatchRequest) -> WatchStream:
        raise NotImplementedError


def names(page: ListPage) -> list[Any]:
    return [i["metadata"]["name"] for i in page.items]


async def test_pages_are_followed_until_there_is_no_continue_token() -> None:
    lister = PagedLister(1234)
    page = await list_all(lister, resource_version="0")
    assert names(page) == names(ListPage(lister.items, ""))
    assert (page.resource_version, page.continue_token) == ("100", "")
    # The default page size is the informer's (one declaration): client-go's 500.
    assert ReflectorOptions().page_size == 500
    assert [(r.limit, r.continue_token, r.resource_version) for r in lister.requests] == [
        (500, "", "0"),
        (500, "500", ""),
        (500, "1000", ""),
    ]


async def test_later_pages_drop_the_resource_version_and_its_match() -> None:
    lister = PagedLister(3)
    await list_all(lister, resource_version="7", resource_version_match="NotOlderThan", page_size=1)
    first, *rest = lister.requests
    assert len(rest) == 2
    assert (first.resource_version, first.resource_version_match) == ("7", "NotOlderThan")
    assert all(r.resource_version == r.resource_version_match == "" for r in rest)


async def test_page_size_zero_is_one_unpaginated_request() -> None:
    lister = PagedLister(1234)
    page = await list_all(lister, resource_version="0", page_size=0)
    assert len(page.items) == 1234
    assert lister.requests == [ListRequest(resource_version="0")]


async def test_an_expired_continue_token_gives_one_full_list_at_the_original_rv() -> None:
    expired = status.expired(status.CONTINUE_EXPIRED_MESSAGE, continue_token="x")
    lister = PagedLister(1234, fail={2: expired})
    page = await list_all(lister, resource_version="42", resource_version_match="NotOlderThan")
    assert len(page.items) == 1234  # the full list replaces the pages gathered so far
    assert lister.requests[-1] == ListRequest(
        resource_version="42", resource_version_match="NotOlderThan"
    )
    assert len(lister.requests) == 4


async def test_an_expired_first_page_is_raised() -> None:
    lister = PagedLister(10, fail={0: status.expired("too old")})
    with pytest.raises(ApiError) as caught:
        await list_all(lister, resource_version="42")
    assert caught.value.code == 410
    assert len(lister.requests) == 1


@pytest.mark.parametrize(
    "error",
    [
        status.gone("gone"),  # 410 Gone is not IsResourceExpired: the pager does not fall back
        status.too_many_requests("busy"),
        status.internal_error("boom"),
    ],
)
async def test_other_errors_on_a_later_page_are_raised(error: ApiError) -> None:
    lister = PagedLister(1234, fail={1: error})
    with pytest.raises(ApiError) as caught:
        await list_all(lister, resource_version="0")
    assert caught.value is error
    assert len(lister.requests) == 2
