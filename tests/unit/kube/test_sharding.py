"""``shardSelector`` (KEP-5866): the hash, the grammar kube-apiserver accepts, what it refuses and
how, and that N shards tiling the hash space partition any collection exactly."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cacheproxy.errors import ApiError
from cacheproxy.kube.sharding import HASH_SPACE, ShardSelector, fnv1a64, parse_shard_selector


def shard_selectors(n: int, field: str = "object.metadata.uid") -> list[ShardSelector]:
    """N selectors tiling the hash space as the KEP's examples do (the last ends at 2^64)."""
    width = (HASH_SPACE - 1) // n
    selectors = []
    for i in range(n):
        end = "0x10000000000000000" if i == n - 1 else f"0x{(i + 1) * width:016x}"
        text = f"shardRange({field}, '0x{i * width:016x}', '{end}')"
        selector = parse_shard_selector(text)
        assert selector is not None
        selectors.append(selector)
    return selectors


def test_the_hash_is_64_bit_fnv_1a_of_the_utf8_bytes() -> None:
    # The reference vectors of FNV-1a 64.
    assert fnv1a64("") == 0xCBF29CE484222325
    assert fnv1a64("a") == 0xAF63DC4C8601EC8C
    assert fnv1a64("foobar") == 0x85944171F73967E8


def test_a_range_selects_what_hashes_into_it_start_inclusive_end_exclusive() -> None:
    uid = "2a9c1b7e-0001-4f3a-9c1d-000000000001"
    h = fnv1a64(uid)
    at = parse_shard_selector(f"shardRange(object.metadata.uid, '0x{h:016x}', '0x{h + 1:016x}')")
    below = parse_shard_selector(
        f"shardRange(object.metadata.uid, '0x0000000000000000', '0x{h:016x}')"
    )
    assert at is not None and below is not None
    assert at.matches(uid=uid, namespace="x")
    assert not below.matches(uid=uid, namespace="x")


def test_ranges_joined_by_or_select_the_union_and_are_written_back_canonically() -> None:
    text = (
        "( shardRange(object.metadata.namespace,'0x0000000000000000','0x4000000000000000') )||"
        ' shardRange( object.metadata.namespace , "0x8000000000000000", "0x10000000000000000" )'
    )
    selector = parse_shard_selector(text)
    assert selector is not None
    assert selector.canonical() == (
        "shardRange(object.metadata.namespace, '0x0000000000000000', '0x4000000000000000') || "
        "shardRange(object.metadata.namespace, '0x8000000000000000', '0x10000000000000000')"
    )
    for namespace in ("default", "kube-system", "ns-1", "ns-2", ""):
        h = fnv1a64(namespace)
        expected = h < 0x4000000000000000 or h >= 0x8000000000000000
        assert selector.matches(uid="ignored", namespace=namespace) is expected


def test_an_empty_selector_selects_everything() -> None:
    assert parse_shard_selector("") is None
    assert parse_shard_selector("   ") is None


FULL = "'0x0000000000000000', '0x8000000000000000'"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (
            f"shardRange(object.metadata.name, {FULL})",
            'unsupported field path "object.metadata.name"; supported: object.metadata.uid, '
            "object.metadata.namespace",
        ),
        (
            "shardRange(object.metadata.uid, '0x0', '0x8000000000000000')",
            'hexStart must be a 0x-prefixed 16-digit hex value, got "0x0" '
            '(did you mean "0x0000000000000000"?)',
        ),
        (
            "shardRange(object.metadata.uid, '0x0000000000000000', '8000000000000000')",
            "hexEnd must have '0x' prefix, got \"8000000000000000\"",
        ),
        (
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x')",
            "hexEnd: hex value is required after '0x'",
        ),
        (
            "shardRange(object.metadata.uid, '0x000000000000000A', '0x8000000000000000')",
            'hexStart: invalid hex character "A" in "0x000000000000000A"',
        ),
        (
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x20000000000000000')",
            "hexEnd: 17-digit hex value must be '0x10000000000000000' (2^64), "
            'got "0x20000000000000000"',
        ),
        (
            "shardRange(object.metadata.uid, '0x8000000000000000', '0x8000000000000000')",
            "shard range start 0x8000000000000000 must be less than end 0x8000000000000000",
        ),
        (
            "shardRange(object.metadata.uid, '0x0000000000000000')",
            "shardRange() requires exactly 3 arguments, got 2",
        ),
        (
            f"hashRange(object.metadata.uid, {FULL})",
            'unsupported function "hashRange"; only shardRange() and || are allowed',
        ),
        (
            f"shardRange(object.metadata.uid, {FULL}) && shardRange(object.metadata.uid, {FULL})",
            'unsupported function "_&&_"; only shardRange() and || are allowed',
        ),
        (
            f"shardRange(object.metadata.uid, {FULL}) || shardRange(object.metadata.namespace, {FULL})",
            'all shard ranges must use the same field, got "object.metadata.uid" and '
            '"object.metadata.namespace"',
        ),
    ],
)
def test_what_the_api_server_refuses_is_a_400_with_its_reason(text: str, reason: str) -> None:
    with pytest.raises(ApiError) as refused:
        parse_shard_selector(text)
    assert refused.value.code == 400
    assert refused.value.reason == "BadRequest"
    assert refused.value.message == f"invalid shard selector: {reason}"


@pytest.mark.parametrize(
    "text",
    [
        f"shardRange(object.metadata.uid, {FULL}",
        f"shardRange(object.metadata.uid, {FULL}) ||",
        f"shardRange(object.metadata.uid, {FULL}) extra",
        "shardRange(object.metadata.uid, '0x0000000000000000, '0x8000000000000000')",
        "42",
    ],
)
def test_a_syntax_error_is_a_400_too(text: str) -> None:
    with pytest.raises(ApiError) as refused:
        parse_shard_selector(text)
    assert refused.value.code == 400
    assert refused.value.message.startswith("invalid shard selector: ")


@given(
    uids=st.lists(st.uuids().map(str), max_size=60),
    namespaces=st.lists(st.from_regex(r"[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True)),
    n=st.integers(min_value=1, max_value=17),
)
def test_n_shards_partition_a_collection_exactly(
    uids: list[str], namespaces: list[str], n: int
) -> None:
    by_uid = shard_selectors(n)
    by_namespace = shard_selectors(n, "object.metadata.namespace")
    for uid in uids:
        assert sum(s.matches(uid=uid, namespace="x") for s in by_uid) == 1
    for namespace in namespaces:
        assert sum(s.matches(uid="x", namespace=namespace) for s in by_namespace) == 1


@given(
    cuts=st.lists(st.integers(min_value=1, max_value=HASH_SPACE - 1), unique=True, max_size=8),
    values=st.lists(st.text(max_size=40), max_size=40),
)
def test_ranges_cut_anywhere_partition_exactly(cuts: list[int], values: list[str]) -> None:
    bounds = [0, *sorted(cuts), HASH_SPACE]

    def hex_of(v: int) -> str:
        return "0x10000000000000000" if v == HASH_SPACE else f"0x{v:016x}"

    shards = [
        parse_shard_selector(f"shardRange(object.metadata.uid, '{hex_of(a)}', '{hex_of(b)}')")
        for a, b in itertools.pairwise(bounds)
    ]
    for value in values:
        assert sum(bool(s and s.matches(uid=value, namespace="")) for s in shards) == 1
