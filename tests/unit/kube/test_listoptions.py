"""List and watch options decode and validate as the API server's do.

Decoding mirrors the generated ``url.Values`` → ``metav1.ListOptions`` conversion (a decode error
is a 400 carrying the ``strconv`` error alone, ``handlers/get.go``); validation mirrors
``ValidateListOptions`` with the WatchList feature on (a 422 ``ListOptions.meta.k8s.io "" is
invalid`` naming every violation, several ones in brackets); a named watch mirrors the
``hasName`` branch of ``handlers/get.go``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import orjson
import pytest

from cacheproxy.errors import ApiError
from cacheproxy.kube.fields import FieldRequirement
from cacheproxy.kube.labels import parse_label_selector
from cacheproxy.kube.listoptions import EXACT, NOT_OLDER_THAN, ListOptions, parse_list_options

RVM = "resourceVersionMatch"
NEED_RV = "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"
NO_CONTINUE = "Forbidden: resourceVersionMatch is forbidden when continue is provided"
EXACT_ZERO = 'Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"'
SIE_FOR_LIST = "Forbidden: sendInitialEvents is forbidden for list"
SIE_NEEDS_NOT_OLDER = (
    "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
)
RVM_NEEDS_SIE = (
    "Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"
)


def http_body(path: Path) -> bytes:
    _, sep, body = path.read_bytes().partition(b"\r\n\r\n")
    assert sep, f"{path.name} has no header/body separator"
    return body.strip()


def options(query: str, **kwargs: Any) -> ListOptions:
    return parse_list_options(parse_qs(query, keep_blank_values=True), **kwargs)


def rejection(query: str, **kwargs: Any) -> ApiError:
    with pytest.raises(ApiError) as info:
        options(query, **kwargs)
    return info.value


def forbidden(field: str, message: str) -> dict[str, str]:
    return {"reason": "FieldValueForbidden", "message": message, "field": field}


def not_supported(field: str, message: str) -> dict[str, str]:
    return {"reason": "FieldValueNotSupported", "message": message, "field": field}


def invalid_body(message: str, causes: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f'ListOptions.meta.k8s.io "" is invalid: {message}',
        "reason": "Invalid",
        "details": {"group": "meta.k8s.io", "kind": "ListOptions", "causes": causes},
        "code": 422,
    }


# --- decoding -----------------------------------------------------------------------------------


def test_an_empty_query_is_a_plain_list_of_everything() -> None:
    opts = options("")
    assert opts == ListOptions()
    assert opts.watch is False
    assert opts.limit == 0
    assert opts.timeout_seconds is None
    assert opts.send_initial_events is None
    assert opts.rv == 0


def test_kubectls_paginated_list_query_decodes_every_field() -> None:
    opts = options("labelSelector=app%3Dapp-3&limit=500&resourceVersion=10361")
    assert opts.label_selector == parse_label_selector("app=app-3")
    assert opts.limit == 500
    assert opts.resource_version == "10361"
    assert opts.rv == 10361
    assert opts.watch is False


def test_a_watch_list_query_decodes_every_field() -> None:
    opts = options(
        "watch=1&allowWatchBookmarks=true&sendInitialEvents=true"
        "&resourceVersionMatch=NotOlderThan&resourceVersion=0&timeoutSeconds=300"
    )
    assert opts.watch is True
    assert opts.allow_watch_bookmarks is True
    assert opts.send_initial_events is True
    assert opts.resource_version_match == NOT_OLDER_THAN
    assert opts.resource_version == "0"
    assert opts.timeout_seconds == 300


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("false", False),
        ("0", False),
        ("FALSE", False),
        ("False", False),
        ("true", True),
        ("1", True),
        ("", True),  # "any other value (including empty string) resolves to true"
        ("no", True),
        ("off", True),
        ("yes", True),
        ("00", True),
    ],
)
def test_a_boolean_is_false_only_for_false_and_zero(text: str, expected: bool) -> None:
    assert options(f"watch={text}").watch is expected
    assert options(f"allowWatchBookmarks={text}").allow_watch_bookmarks is expected
    watch_list = options(f"watch=1&sendInitialEvents={text}&resourceVersionMatch=NotOlderThan")
    assert watch_list.send_initial_events is expected


def test_an_absent_boolean_is_false_and_an_absent_send_initial_events_is_unset() -> None:
    opts = options("watch=1")
    assert opts.allow_watch_bookmarks is False
    assert opts.send_initial_events is None


def test_the_deprecated_watch_path_forces_a_watch_even_with_watch_false() -> None:
    assert options("", watch=True).watch is True
    assert options("watch=false", watch=True).watch is True


def test_the_first_value_of_a_repeated_parameter_wins() -> None:
    opts = parse_list_options({"limit": ["5", "7"], "watch": ["0", "1"]})
    assert opts.limit == 5
    assert opts.watch is False


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("limit=abc", 'strconv.ParseInt: parsing "abc": invalid syntax'),
        ("limit=1.5", 'strconv.ParseInt: parsing "1.5": invalid syntax'),
        ("limit=1_000", 'strconv.ParseInt: parsing "1_000": invalid syntax'),
        ("limit=%205", 'strconv.ParseInt: parsing " 5": invalid syntax'),
        ("limit=", 'strconv.ParseInt: parsing "": invalid syntax'),
        (
            "limit=99999999999999999999",
            'strconv.ParseInt: parsing "99999999999999999999": value out of range',
        ),
        ("timeoutSeconds=soon", 'strconv.ParseInt: parsing "soon": invalid syntax'),
        ("timeoutSeconds=30s", 'strconv.ParseInt: parsing "30s": invalid syntax'),
    ],
)
def test_an_integer_that_does_not_parse_is_a_400_with_the_strconv_error(
    query: str, message: str
) -> None:
    # get.go: DecodeParameters fails → errors.NewBadRequest(err.Error()); the conversion
    # (runtime.Convert_Slice_string_To_int64) returns strconv.ParseInt's error unwrapped.
    error = rejection(query)
    assert error.status == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": "BadRequest",
        "code": 400,
    }


def test_a_signed_integer_parses_as_go_parse_int_does() -> None:
    assert options("limit=%2B5").limit == 5
    assert options("timeoutSeconds=-1").timeout_seconds == -1


def test_an_unparseable_resource_version_is_a_400() -> None:
    error = rejection("resourceVersion=abc")
    assert error.code == 400
    assert error.message == (
        'resourceVersion: Invalid value: "abc": strconv.ParseUint: parsing "abc": invalid syntax'
    )


# --- validation: list ---------------------------------------------------------------------------


def test_rv_match_without_rv_is_the_samples_422_body(samples_dir: Path) -> None:
    raw = http_body(samples_dir / "protocol" / "err_rvmatch_without_rv.http")
    error = rejection("resourceVersionMatch=NotOlderThan&limit=2")
    assert error.status == orjson.loads(raw)
    assert orjson.dumps(error.status) == raw


@pytest.mark.parametrize(
    ("query", "cause"),
    [
        ("resourceVersionMatch=Exact", forbidden(RVM, NEED_RV)),
        ("resourceVersionMatch=Exact&resourceVersion=5&continue=tok", forbidden(RVM, NO_CONTINUE)),
        (
            "resourceVersionMatch=Newest&resourceVersion=5",
            not_supported(
                RVM, 'Unsupported value: "Newest": supported values: "Exact", "NotOlderThan", ""'
            ),
        ),
        ("resourceVersionMatch=Exact&resourceVersion=0", forbidden(RVM, EXACT_ZERO)),
        ("sendInitialEvents=true", forbidden("sendInitialEvents", SIE_FOR_LIST)),
        ("sendInitialEvents=false", forbidden("sendInitialEvents", SIE_FOR_LIST)),
        ("watch=false&sendInitialEvents=true", forbidden("sendInitialEvents", SIE_FOR_LIST)),
    ],
)
def test_each_contradictory_list_option_is_a_422_naming_it(
    query: str, cause: dict[str, str]
) -> None:
    error = rejection(query)
    assert error.status == invalid_body(f"{cause['field']}: {cause['message']}", [cause])


def test_several_list_violations_are_aggregated_in_brackets_in_validation_order() -> None:
    error = rejection("resourceVersionMatch=Newest&continue=tok&sendInitialEvents=1")
    unsupported = 'Unsupported value: "Newest": supported values: "Exact", "NotOlderThan", ""'
    assert error.status == invalid_body(
        f"[{RVM}: {NEED_RV}, {RVM}: {NO_CONTINUE}, {RVM}: {unsupported}, "
        f"sendInitialEvents: {SIE_FOR_LIST}]",
        [
            forbidden(RVM, NEED_RV),
            forbidden(RVM, NO_CONTINUE),
            not_supported(RVM, unsupported),
            forbidden("sendInitialEvents", SIE_FOR_LIST),
        ],
    )


def test_two_list_violations_are_aggregated_in_brackets() -> None:
    error = rejection("resourceVersionMatch=Exact&resourceVersion=0&continue=tok")
    assert error.message == (
        f'ListOptions.meta.k8s.io "" is invalid: [{RVM}: {NO_CONTINUE}, {RVM}: {EXACT_ZERO}]'
    )
    assert error.status["details"]["causes"] == [
        forbidden(RVM, NO_CONTINUE),
        forbidden(RVM, EXACT_ZERO),
    ]


@pytest.mark.parametrize(
    "query",
    [
        "resourceVersionMatch=Exact&resourceVersion=5",
        "resourceVersionMatch=NotOlderThan&resourceVersion=0",
        "resourceVersionMatch=NotOlderThan&resourceVersion=5&limit=2",
        "resourceVersion=5&continue=tok",  # RV + continue is the storage layer's 400, not a 422
        "limit=2&continue=tok",
    ],
)
def test_consistent_list_options_are_accepted(query: str) -> None:
    opts = options(query)
    assert opts.watch is False


def test_an_accepted_exact_list_keeps_its_match_and_rv() -> None:
    opts = options("resourceVersionMatch=Exact&resourceVersion=5&limit=2")
    assert (opts.resource_version_match, opts.resource_version, opts.limit) == (EXACT, "5", 2)


# --- validation: watch --------------------------------------------------------------------------


def test_send_initial_events_without_rv_match_is_the_samples_422_body(samples_dir: Path) -> None:
    raw = http_body(samples_dir / "protocol" / "err_sendInitialEvents_without_rvmatch.http")
    error = rejection("watch=1&sendInitialEvents=true&allowWatchBookmarks=true")
    assert error.status == orjson.loads(raw)
    assert orjson.dumps(error.status) == raw


def test_the_deprecated_watch_path_is_validated_as_a_watch(samples_dir: Path) -> None:
    raw = http_body(samples_dir / "protocol" / "err_sendInitialEvents_without_rvmatch.http")
    assert rejection("sendInitialEvents=true", watch=True).status == orjson.loads(raw)


@pytest.mark.parametrize(
    ("query", "cause"),
    [
        ("watch=1&sendInitialEvents=false", forbidden(RVM, SIE_NEEDS_NOT_OLDER)),
        ("watch=1&resourceVersionMatch=NotOlderThan", forbidden(RVM, RVM_NEEDS_SIE)),
        (
            "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&continue=tok",
            forbidden(RVM, NO_CONTINUE),
        ),
    ],
)
def test_each_contradictory_watch_option_is_a_422_naming_it(
    query: str, cause: dict[str, str]
) -> None:
    error = rejection(query)
    assert error.status == invalid_body(f"{cause['field']}: {cause['message']}", [cause])


def test_watch_list_with_an_exact_match_is_two_violations_in_brackets() -> None:
    error = rejection("watch=1&sendInitialEvents=true&resourceVersionMatch=Exact")
    unsupported = 'Unsupported value: "Exact": supported values: "NotOlderThan"'
    assert error.status == invalid_body(
        f"[{RVM}: {SIE_NEEDS_NOT_OLDER}, {RVM}: {unsupported}]",
        [forbidden(RVM, SIE_NEEDS_NOT_OLDER), not_supported(RVM, unsupported)],
    )


def test_a_watch_with_exact_match_and_continue_but_no_initial_events_is_three_violations() -> None:
    error = rejection("watch=1&resourceVersionMatch=Exact&continue=tok")
    unsupported = 'Unsupported value: "Exact": supported values: "NotOlderThan"'
    assert error.status == invalid_body(
        f"[{RVM}: {RVM_NEEDS_SIE}, {RVM}: {unsupported}, {RVM}: {NO_CONTINUE}]",
        [
            forbidden(RVM, RVM_NEEDS_SIE),
            not_supported(RVM, unsupported),
            forbidden(RVM, NO_CONTINUE),
        ],
    )


@pytest.mark.parametrize(
    "query",
    [
        "watch=1",
        "watch=1&resourceVersion=10361",
        "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan",
        "watch=1&sendInitialEvents=false&resourceVersionMatch=NotOlderThan&resourceVersion=5",
        "watch=1&resourceVersion=0&continue=tok",  # continue alone is ignored by a watch
    ],
)
def test_consistent_watch_options_are_accepted(query: str) -> None:
    assert options(query).watch is True


# --- named watches ------------------------------------------------------------------------------


def test_a_named_watch_selects_the_named_object() -> None:
    opts = options("watch=1&resourceVersion=5", name="web-0")
    assert opts.field_selector.requirements == (FieldRequirement("metadata.name", "=", "web-0"),)
    assert str(opts.field_selector) == "metadata.name=web-0"
    assert opts.watch is True


@pytest.mark.parametrize(
    "selector",
    ["metadata.name%3Dweb-0", "metadata.name%3D%3Dweb-0"],
)
def test_a_named_watch_accepts_a_selector_naming_the_same_object(selector: str) -> None:
    opts = options(f"watch=1&fieldSelector={selector}", name="web-0")
    assert set(opts.field_selector.requirements) == {
        FieldRequirement("metadata.name", "=", "web-0")
    }


def test_a_named_watch_keeps_other_terms_of_a_selector_that_names_the_object() -> None:
    opts = options(
        "watch=1&fieldSelector=metadata.name%3Dweb-0,status.phase%3DRunning", name="web-0"
    )
    assert set(opts.field_selector.requirements) == {
        FieldRequirement("metadata.name", "=", "web-0"),
        FieldRequirement("status.phase", "=", "Running"),
    }


@pytest.mark.parametrize(
    "selector",
    [
        "metadata.name%3Dweb-1",
        "metadata.name!%3Dweb-0",
        "metadata.name!%3Dweb-1",
        # get.go: a non-empty selector must RequiresExactMatch("metadata.name") == name; one that
        # does not mention metadata.name at all fails that test too.
        "status.phase%3DRunning",
    ],
)
def test_a_named_watch_with_a_selector_not_naming_the_object_is_a_400(selector: str) -> None:
    error = rejection(f"watch=1&fieldSelector={selector}", name="web-0")
    assert error.status == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "fieldSelector metadata.name doesn't match requested name",
        "reason": "BadRequest",
        "code": 400,
    }
