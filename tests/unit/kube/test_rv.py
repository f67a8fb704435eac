"""Resource versions parse as the API server's uint64s; continue tokens are its exact format.

The token format and every rejection message mirror ``k8s.io/apiserver/pkg/storage``
(``EncodeContinue``/``DecodeContinue`` and its ``Err…`` values), wrapped by the cacher as
``invalid continue token: <err>`` in a 400 BadRequest. The one real token is
``k8s-samples/protocol/podlist_limit2_continue_token.txt``.
"""

from __future__ import annotations

import base64
import functools
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cacheproxy.errors import ApiError
from cacheproxy.kube.rv import (
    ContinueToken,
    decode_continue,
    encode_continue,
    format_resource_version,
    parse_resource_version,
)
from cacheproxy.kube.versions import KUBE_1_36, OLDEST

MAX_UINT64 = 2**64 - 1
TOKEN_PREFIX = "invalid continue token: continue key is not valid"


def http_body(path: Path) -> bytes:
    _, sep, body = path.read_bytes().partition(b"\r\n\r\n")
    assert sep, f"{path.name} has no header/body separator"
    return body.strip()


def bad_request(action: Any, *args: Any) -> str:
    with pytest.raises(ApiError) as info:
        action(*args)
    assert info.value.code == 400
    assert info.value.reason == "BadRequest"
    assert info.value.status["metadata"] == {}
    assert "details" not in info.value.status
    return info.value.message


def token_of(payload: bytes) -> str:
    """A token as Go's ``base64.RawURLEncoding`` writes it: URL alphabet, no padding."""
    return base64.urlsafe_b64encode(payload).rstrip(b"=").decode("ascii")


# --- resource versions ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("0", 0),
        ("1", 1),
        ("10361", 10361),
        ("007", 7),  # strconv.ParseUint accepts leading zeros
        (str(MAX_UINT64), MAX_UINT64),
    ],
)
def test_a_resource_version_parses_as_an_unsigned_64_bit_integer(text: str, expected: int) -> None:
    assert parse_resource_version(text) == expected


def test_a_resource_version_formats_as_its_decimal_text() -> None:
    assert format_resource_version(10361) == "10361"
    assert format_resource_version(0) == "0"
    assert parse_resource_version(format_resource_version(MAX_UINT64)) == MAX_UINT64


def test_a_non_numeric_resource_version_is_a_400_worded_like_the_sample(samples_dir: Path) -> None:
    # The message is the API server's (field.Invalid around strconv's error). Its code is not:
    # the API server still answers 500 without a reason (the 1.28 sample; kubernetes#139485, with
    # the fix kubernetes#139525 proposing 400). We answer 400 BadRequest, the client error it is.
    sample = orjson.loads(http_body(samples_dir / "protocol" / "err_invalid_resourceversion.http"))
    assert bad_request(parse_resource_version, "abc") == sample["message"]
    assert sample["message"] == (
        'resourceVersion: Invalid value: "abc": strconv.ParseUint: parsing "abc": invalid syntax'
    )


def test_1_36_words_an_rv_that_is_not_a_number_after_invalid_resource_version() -> None:
    # As kube-apiserver 1.36 answered a list at resourceVersion=abc.
    assert bad_request(functools.partial(parse_resource_version, kube=KUBE_1_36), "abc") == (
        'invalid resource version: resourceVersion: Invalid value: "abc": strconv.ParseUint: '
        'parsing "abc": invalid syntax'
    )


@pytest.mark.parametrize(
    "text",
    ["x5", "5x", "+5", " 5", "5 ", "0x10", "1_000", "1.5", "\u0661\u0662", "-1", "-0"],
)
def test_junk_signs_and_non_ascii_digits_are_invalid_syntax(text: str) -> None:
    assert bad_request(parse_resource_version, text) == (
        f'resourceVersion: Invalid value: "{text}": strconv.ParseUint: parsing "{text}": '
        "invalid syntax"
    )


@pytest.mark.parametrize("text", [str(MAX_UINT64 + 1), "99999999999999999999999"])
def test_a_resource_version_beyond_uint64_is_out_of_range(text: str) -> None:
    assert bad_request(parse_resource_version, text) == (
        f'resourceVersion: Invalid value: "{text}": strconv.ParseUint: parsing "{text}": '
        "value out of range"
    )


def test_the_field_named_in_a_resource_version_error_can_be_chosen() -> None:
    assert bad_request(lambda: parse_resource_version("x", field="resourceVersionMatch")) == (
        'resourceVersionMatch: Invalid value: "x": strconv.ParseUint: parsing "x": invalid syntax'
    )


# --- continue tokens: the real one ------------------------------------------------------------


def real_token(samples_dir: Path) -> tuple[str, bytes]:
    lines = (samples_dir / "protocol" / "podlist_limit2_continue_token.txt").read_text().split("\n")
    return lines[0].strip(), lines[1].strip().encode()


def test_the_real_continue_token_decodes_to_its_snapshot_and_start_key(samples_dir: Path) -> None:
    token, _ = real_token(samples_dir)
    assert decode_continue(token) == ContinueToken(
        resource_version=10361, start_key="ns-0/app-0-backend-294dc88af5-8cfcm\x00"
    )


def test_the_real_continue_token_is_encoded_byte_for_byte(samples_dir: Path) -> None:
    token, decoded_json = real_token(samples_dir)
    ours = encode_continue(10361, "ns-0/app-0-backend-294dc88af5-8cfcm\x00")
    assert ours == token
    assert base64.urlsafe_b64decode(ours + "=" * (-len(ours) % 4)) == decoded_json
    assert decoded_json == (
        b'{"v":"meta.k8s.io/v1","rv":10361,"start":"ns-0/app-0-backend-294dc88af5-8cfcm\\u0000"}'
    )


def test_the_inconsistent_token_from_the_expired_sample_decodes_with_rv_minus_one(
    samples_dir: Path,
) -> None:
    sample = orjson.loads(http_body(samples_dir / "protocol" / "err_expired_continue_token.http"))
    token = sample["metadata"]["continue"]
    assert decode_continue(token) == ContinueToken(
        resource_version=-1, start_key="ns-0/app-0-backend-294dc88af5-8cfcm\x00"
    )
    assert encode_continue(-1, "ns-0/app-0-backend-294dc88af5-8cfcm\x00") == token


def test_a_token_uses_the_url_alphabet_without_padding() -> None:
    # Standard base64 of this payload is "…iJ+fn4/Pz4+In0=": it has "+", "/" and padding.
    token = encode_continue(1, "~~~??>>")
    assert token == "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MSwic3RhcnQiOiJ-fn4_Pz4-In0"
    assert decode_continue(token) == ContinueToken(1, "~~~??>>")


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        # A token from a newer server may carry the remaining count ("rc"); it is ignored.
        (
            b'{"v":"meta.k8s.io/v1","rv":5,"start":"ns/a\\u0000","rc":3}',
            ContinueToken(5, "ns/a\x00"),
        ),
        # DecodeContinue's own table: "root path" and a leading slash are valid start keys.
        (b'{"v":"meta.k8s.io/v1","rv":1,"start":"/"}', ContinueToken(1, "/")),
        (b'{"v":"meta.k8s.io/v1","rv":1,"start":"/ns/a"}', ContinueToken(1, "/ns/a")),
        (b'{"v":"meta.k8s.io/v1","rv":1,"start":"key"}', ContinueToken(1, "key")),
    ],
)
def test_tokens_the_api_server_accepts_are_accepted(
    payload: bytes, expected: ContinueToken
) -> None:
    assert decode_continue(token_of(payload)) == expected


# --- continue tokens: forged or damaged -------------------------------------------------------


def test_a_token_that_is_not_json_is_worded_like_the_sample(samples_dir: Path) -> None:
    # "garbage" is valid unpadded base64 whose first byte is 0x81: the (1.28) sample's message.
    sample = orjson.loads(http_body(samples_dir / "protocol" / "err_invalid_continue_token.http"))
    assert (
        bad_request(functools.partial(decode_continue, kube=OLDEST), "garbage")
        == (sample["message"])
    )
    assert sample["message"] == (
        f"{TOKEN_PREFIX}: invalid character '\\x81' looking for beginning of value"
    )
    # 1.32 quotes the byte as a rune.
    assert bad_request(decode_continue, "garbage") == (
        f"{TOKEN_PREFIX}: invalid character '\\u0081' looking for beginning of value"
    )


def test_a_token_starting_with_a_printable_non_json_character_names_it() -> None:
    assert bad_request(decode_continue, token_of(b"hello")) == (
        f"{TOKEN_PREFIX}: invalid character 'h' looking for beginning of value"
    )


def test_a_truncated_json_token_is_an_unexpected_end_of_input() -> None:
    # encoding/json checks the whole input first: a cut-off object is "unexpected end of JSON input".
    assert bad_request(decode_continue, token_of(b'{"v":"meta.k8s.io/v1","rv":5')) == (
        f"{TOKEN_PREFIX}: unexpected end of JSON input"
    )


@pytest.mark.parametrize(
    ("token", "offset"),
    [
        ("ab!d", 2),  # a character outside the alphabet
        ("ab+d", 2),  # the standard alphabet's "+" is not in RawURLEncoding's
        ("ab/d", 2),
        ("e30=", 3),  # RawURLEncoding has no padding: "=" is illegal
        ("abcde", 4),  # a lone trailing character cannot encode a byte
        ("a", 0),
    ],
)
def test_a_token_that_is_not_raw_url_base64_is_illegal_base64_at_its_offset(
    token: str, offset: int
) -> None:
    # Go's base64.CorruptInputError: "illegal base64 data at input byte N".
    assert bad_request(decode_continue, token) == (
        f"{TOKEN_PREFIX}: illegal base64 data at input byte {offset}"
    )


@pytest.mark.parametrize(
    ("version", "shown"),
    [("meta.k8s.io/v2", "meta.k8s.io/v2"), ("v1", "v1"), ("", "")],
)
def test_a_token_of_another_version_is_not_recognized(version: str, shown: str) -> None:
    payload = orjson.dumps({"v": version, "rv": 5, "start": "ns/a\x00"})
    # fmt.Errorf("%w %v", ErrUnrecognizedEncodedVersion, c.APIVersion)
    assert bad_request(decode_continue, token_of(payload)) == (
        f"{TOKEN_PREFIX}: server does not recognize this encoded version {shown}"
    )


def test_a_token_with_rv_zero_has_an_incorrect_start_resource_version() -> None:
    payload = b'{"v":"meta.k8s.io/v1","rv":0,"start":"ns/a\\u0000"}'
    assert bad_request(decode_continue, token_of(payload)) == (
        f"{TOKEN_PREFIX}: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"
    )


def test_a_token_without_an_rv_has_an_incorrect_start_resource_version() -> None:
    payload = b'{"v":"meta.k8s.io/v1","start":"ns/a\\u0000"}'
    assert bad_request(decode_continue, token_of(payload)) == (
        f"{TOKEN_PREFIX}: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"
    )


@pytest.mark.parametrize(
    "payload",
    [
        b'{"v":"meta.k8s.io/v1","rv":5,"start":""}',
        b'{"v":"meta.k8s.io/v1","rv":5}',
    ],
)
def test_a_token_with_an_empty_start_key_is_rejected(payload: bytes) -> None:
    assert bad_request(decode_continue, token_of(payload)) == (
        f"{TOKEN_PREFIX}: encoded start key empty (version meta.k8s.io/v1)"
    )


@pytest.mark.parametrize(
    "start",
    ["../key", "./key", "./../key", "key/../..", "ns//a", "ns/a/", "ns/./a"],
)
def test_a_start_key_that_is_not_a_clean_path_is_rejected_naming_the_key(start: str) -> None:
    # DecodeContinue: path.Clean("/" + key) must equal "/" + key (path traversal defence);
    # otherwise fmt.Errorf("%w: %v", ErrGenericInvalidKey, c.StartKey).
    payload = orjson.dumps({"v": "meta.k8s.io/v1", "rv": 5, "start": start})
    assert bad_request(decode_continue, token_of(payload)) == f"{TOKEN_PREFIX}: {start}"


# --- continue tokens: round trip ------------------------------------------------------------------

_segment = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="/"),
    min_size=1,
    max_size=12,
).filter(lambda s: s not in (".", ".."))
start_keys = st.builds(
    lambda parts, nul: "/".join(parts) + ("\x00" if nul else ""),
    st.lists(_segment, min_size=1, max_size=2),
    st.booleans(),
)
token_rvs = st.integers(min_value=1, max_value=2**63 - 1) | st.just(-1)


@settings(max_examples=300, deadline=None)
@given(rv=token_rvs, start=start_keys)
def test_any_token_we_encode_decodes_to_the_same_snapshot_and_key(rv: int, start: str) -> None:
    token = encode_continue(rv, start)
    assert decode_continue(token) == ContinueToken(resource_version=rv, start_key=start)
    payload = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    assert orjson.loads(payload) == {"v": "meta.k8s.io/v1", "rv": rv, "start": start}
    assert list(orjson.loads(payload)) == ["v", "rv", "start"]
