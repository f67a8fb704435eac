"""ListSplitter: any list body, cut into any chunks, gives exactly the items and the list that
parsing it whole gives — and hands each item out as soon as its bytes are complete."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cacheproxy.kube.liststream import ListSplitter, NotAList

# Strings that look like the structure the splitter searches for.
TRICKY = st.sampled_from(
    ['},{"metadata":', "},{", '"items":[', "]", "\\", '"', "}", "{", "\n", "é"]
)
TEXT = st.lists(st.one_of(TRICKY, st.text(max_size=8)), max_size=4).map("".join)
SCALAR = st.one_of(st.none(), st.booleans(), st.integers(-(2**53), 2**53), TEXT)


def values(first_key: str) -> st.SearchStrategy[Any]:
    # Nested arrays of objects that open with the items' own first key: false separators.
    return st.recursive(
        SCALAR,
        lambda children: st.one_of(
            st.lists(children, max_size=3),
            st.dictionaries(st.one_of(st.just(first_key), TEXT), children, max_size=3),
            st.lists(st.fixed_dictionaries({first_key: children}), max_size=3),
        ),
        max_leaves=12,
    )


@st.composite
def list_bodies(draw: st.DrawFn) -> tuple[bytes, dict[str, Any]]:
    first_key = draw(st.sampled_from(["metadata", "apiVersion", "name"]))
    item = st.fixed_dictionaries(
        {first_key: values(first_key)}, optional={"spec": values(first_key), "x": TEXT}
    )
    items = draw(st.lists(item, max_size=8))
    metadata = {"resourceVersion": str(draw(st.integers(1, 10**6)))}
    if draw(st.booleans()):
        metadata["continue"] = draw(TEXT)
    if draw(st.booleans()):  # the API server's order: metadata first
        doc = {"kind": "PodList", "apiVersion": "v1", "metadata": metadata, "items": items}
    else:
        doc = {"items": items, "kind": "ThingList", "metadata": metadata}
    option = orjson.OPT_INDENT_2 if draw(st.booleans()) else 0
    return orjson.dumps(doc, option=option), doc


def split(body: bytes, cuts: list[int]) -> tuple[list[dict[str, Any]], dict[str, Any], int]:
    splitter = ListSplitter()
    items: list[dict[str, Any]] = []
    early = 0
    previous = 0
    for cut in [*sorted(c % (len(body) + 1) for c in cuts), len(body)]:
        got = splitter.feed(body[previous:cut])
        early += len(got)
        items += got
        previous = cut
    last, shell = splitter.close()
    return items + last, shell, early


@settings(max_examples=400, deadline=None)
@given(list_bodies(), st.lists(st.integers(0, 10**6), max_size=12))
def test_any_list_in_any_chunks_splits_into_its_items_and_its_shell(
    case: tuple[bytes, dict[str, Any]], cuts: list[int]
) -> None:
    body, doc = case
    items, shell, _ = split(body, cuts)
    assert items == doc["items"]
    assert shell == {k: v for k, v in doc.items() if k != "items"}


def test_items_come_out_while_the_body_arrives_not_at_its_end() -> None:
    pods = [
        {"metadata": {"name": f"p{i}"}, "spec": {"containers": [{"name": "c"}]}} for i in range(100)
    ]
    body = orjson.dumps(
        {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "9"}, "items": pods}
    )
    splitter = ListSplitter()
    seen = []
    for i in range(0, len(body), 100):
        seen.append(len(splitter.feed(body[i : i + 100])))
    last, shell = splitter.close()
    assert sum(seen) == 99 and len(last) == 1  # all but the last before the end
    assert max(seen) <= 2  # an item as soon as it is complete
    assert shell == {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "9"}}


def test_the_buffer_holds_about_one_item_not_the_body() -> None:
    pods = [{"metadata": {"name": f"p{i}"}, "data": "x" * 1000} for i in range(1000)]
    body = orjson.dumps({"metadata": {}, "items": pods})
    splitter = ListSplitter()
    held = 0
    for i in range(0, len(body), 4096):
        splitter.feed(body[i : i + 4096])
        held = max(held, len(splitter._buf))
    assert held < 4096 + 2 * 1100


def test_an_empty_list_and_a_list_without_items() -> None:
    for body in (
        b'{"kind":"PodList","metadata":{},"items":[]}',
        b'{"kind":"PodList","metadata":{}}',
    ):
        splitter = ListSplitter()
        assert splitter.feed(body) == []
        items, shell = splitter.close()
        assert items == [] and shell == {"kind": "PodList", "metadata": {}}


@pytest.mark.parametrize(
    "body", [b"", b"[1,2]", b"not json", b'{"items":[1,2]}', b'{"items":[{"a":1}'], ids=repr
)
def test_what_is_not_a_list_of_objects_is_refused(body: bytes) -> None:
    splitter = ListSplitter()
    splitter.feed(body)
    with pytest.raises(NotAList):
        splitter.close()
