"""Every parser of client input fails only with a Status (``ApiError``), whatever the input."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cacheproxy.errors import ApiError
from cacheproxy.kube.discovery import negotiate_aggregated
from cacheproxy.kube.fields import parse_field_selector
from cacheproxy.kube.labels import parse_label_selector
from cacheproxy.kube.listoptions import parse_list_options
from cacheproxy.kube.request import check_accepts_json
from cacheproxy.kube.rv import decode_continue, parse_resource_version
from cacheproxy.kube.table import include_object, negotiate_table

SELECTOR_CHARS = st.sampled_from([*"abc=!,() in notin xyz.-_/\\0123456789\"'", "", "💥"])
selectorish = st.lists(SELECTOR_CHARS, max_size=40).map("".join) | st.text(max_size=60)
tokens = (
    st.fixed_dictionaries(
        {
            "v": st.sampled_from(["meta.k8s.io/v1", "x"]),
            "rv": st.integers(-(2**63), 2**64 - 1) | st.floats() | st.text(max_size=3),
            "start": st.text(max_size=20),
        }
    ).map(lambda d: base64.urlsafe_b64encode(orjson.dumps(d)).decode().rstrip("="))
    | st.text(max_size=60)
    | st.binary(max_size=60).map(lambda b: base64.urlsafe_b64encode(b).decode())
)
PARAMS = [
    "labelSelector", "fieldSelector", "limit", "continue", "resourceVersion", "resourceVersionMatch",
    "watch", "timeoutSeconds", "allowWatchBookmarks", "sendInitialEvents", "includeObject",
]  # fmt: skip
queries = st.dictionaries(
    st.sampled_from(PARAMS), st.lists(st.one_of(selectorish, tokens), min_size=1, max_size=2)
)


def only_status_errors(parse: Callable[[], Any]) -> None:
    try:
        parse()
    except ApiError as err:
        assert err.status["kind"] == "Status"
        assert 400 <= err.code < 500
        assert err.message


@settings(max_examples=500, deadline=None)
@given(text=selectorish)
def test_selectors(text: str) -> None:
    only_status_errors(lambda: parse_label_selector(text))
    only_status_errors(lambda: parse_field_selector(text))


@settings(max_examples=500, deadline=None)
@given(token=tokens)
def test_continue_tokens_and_resource_versions(token: str) -> None:
    only_status_errors(lambda: decode_continue(token))
    only_status_errors(lambda: parse_resource_version(token))


@settings(max_examples=500, deadline=None)
@given(query=queries, watch=st.booleans())
def test_list_options(query: dict[str, list[str]], watch: bool) -> None:
    only_status_errors(lambda: parse_list_options(query, watch=watch))
    only_status_errors(lambda: include_object(query))


@settings(max_examples=500, deadline=None)
@given(accept=st.text(max_size=80) | st.lists(st.sampled_from(["application/json", ";as=Table", ";v=v1", ";g=meta.k8s.io", ",", "*/*", ";q=0.5", "application/yaml"]), max_size=8).map("".join))  # fmt: skip
def test_accept_headers(accept: str) -> None:
    only_status_errors(lambda: negotiate_table(accept))
    only_status_errors(lambda: negotiate_aggregated(accept))
    only_status_errors(lambda: check_accepts_json(accept))


@pytest.mark.parametrize("parse", [parse_label_selector, parse_field_selector])
def test_a_known_bad_selector_is_a_400(parse: Callable[[str], Any]) -> None:
    with pytest.raises(ApiError) as err:
        parse("a in (")
    assert err.value.code == 400
