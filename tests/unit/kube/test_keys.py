"""Object keys are ``namespace/name`` or ``name`` and sort in the API server's listing order.

The API server lists one resource in etcd key order (``/registry/<resource>/<ns>/<name>``); with
the common prefix removed, that is plain string order of our keys. A page that ends with key K
continues at ``K + "\\x00"`` (the continue token's start key), which sorts after K and before
every other key greater than K.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cacheproxy.kube.keys import object_key, object_namespace_name, split_key

EXAMPLES = settings(max_examples=200, deadline=None)

# DNS-1123 labels and subdomains: what namespaces and names are made of.
_label = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?", fullmatch=True)
names = st.lists(_label, min_size=1, max_size=3).map(".".join)
namespaces = _label


def test_a_namespaced_key_is_namespace_slash_name() -> None:
    assert object_key("ns-1", "web-0") == "ns-1/web-0"


@pytest.mark.parametrize("namespace", [None, ""])
def test_a_cluster_scoped_key_is_the_name_alone(namespace: str | None) -> None:
    assert object_key(namespace, "node-1") == "node-1"


def test_a_key_splits_back_into_namespace_and_name() -> None:
    assert split_key("ns-1/web-0") == ("ns-1", "web-0")
    assert split_key("node-1") == ("", "node-1")


def test_an_objects_namespace_and_name_come_from_its_metadata() -> None:
    pod = {"metadata": {"namespace": "ns-1", "name": "web-0", "uid": "u"}}
    assert object_namespace_name(pod) == ("ns-1", "web-0")
    assert object_namespace_name({"metadata": {"name": "node-1"}}) == ("", "node-1")


@pytest.mark.parametrize(
    "obj",
    [{}, {"metadata": None}, {"metadata": {}}, {"metadata": {"namespace": None, "name": None}}],
)
def test_an_object_without_metadata_has_empty_namespace_and_name(obj: dict[str, object]) -> None:
    assert object_namespace_name(obj) == ("", "")


def test_keys_sort_like_the_api_servers_etcd_keys() -> None:
    pairs = [("ns-1", "b"), ("ns", "z"), ("ns-1", "a"), ("ns", "a-1"), ("ns", "a"), ("a", "x")]
    keys = sorted(object_key(ns, name) for ns, name in pairs)
    etcd = sorted(f"/registry/pods/{ns}/{name}" for ns, name in pairs)
    assert keys == ["a/x", "ns-1/a", "ns-1/b", "ns/a", "ns/a-1", "ns/z"]
    assert [e.removeprefix("/registry/pods/") for e in etcd] == keys


@EXAMPLES
@given(namespace=namespaces, name=names)
def test_split_key_inverts_object_key(namespace: str, name: str) -> None:
    assert split_key(object_key(namespace, name)) == (namespace, name)
    assert split_key(object_key(None, name)) == ("", name)


@EXAMPLES
@given(st.lists(st.tuples(namespaces, names), min_size=2, max_size=20, unique=True))
def test_the_continue_start_after_a_key_sorts_before_every_greater_key(
    pairs: list[tuple[str, str]],
) -> None:
    keys = sorted(object_key(ns, name) for ns, name in pairs)
    for i, key in enumerate(keys):
        start = key + "\x00"
        assert key < start
        assert all(start < later for later in keys[i + 1 :])
        assert [k for k in keys if k >= start] == keys[i + 1 :]
