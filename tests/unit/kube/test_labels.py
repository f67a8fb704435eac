"""Label selectors parse, print, validate and match as apimachinery's ``labels`` package does."""

from __future__ import annotations

import pytest

from cacheproxy.errors import ApiError
from cacheproxy.kube.labels import (
    LabelSelector,
    Operator,
    Requirement,
    parse_label_selector,
    selector_from_match_labels,
)

QNAME_RULE = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
VALUE_RULE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
SUBDOMAIN_RULE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)


def rejection(text: str, *, validate: bool = True) -> str:
    """The message of the 400 the selector is rejected with."""
    with pytest.raises(ApiError) as info:
        parse_label_selector(text, validate=validate)
    assert info.value.code == 400
    assert info.value.reason == "BadRequest"
    return info.value.message


# --- grammar ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "requirement"),
    [
        ("app=web", Requirement("app", Operator.EQUALS, ("web",))),
        ("app==web", Requirement("app", Operator.DOUBLE_EQUALS, ("web",))),
        ("app!=web", Requirement("app", Operator.NOT_EQUALS, ("web",))),
        ("app in (b,a)", Requirement("app", Operator.IN, ("a", "b"))),
        ("app notin (a)", Requirement("app", Operator.NOT_IN, ("a",))),
        ("app", Requirement("app", Operator.EXISTS)),
        ("!app", Requirement("app", Operator.DOES_NOT_EXIST)),
        ("n>3", Requirement("n", Operator.GREATER_THAN, ("3",))),
        ("n<3", Requirement("n", Operator.LESS_THAN, ("3",))),
        ("app=", Requirement("app", Operator.EQUALS, ("",))),
        ("example.com/app=web", Requirement("example.com/app", Operator.EQUALS, ("web",))),
    ],
)
def test_every_operator_parses_into_its_requirement(text: str, requirement: Requirement) -> None:
    assert parse_label_selector(text) == LabelSelector((requirement,))


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("app in (b,a)", "app in (a,b)"),
        ("app==web", "app==web"),
        ("!app", "!app"),
        ("app", "app"),
        ("app!=x", "app!=x"),
        ("n>3", "n>3"),
        ("n<3", "n<3"),
        ("tier=a,app=b", "app=b,tier=a"),
        ("x in (foo,,baz),y,z notin ()", "x in (,baz,foo),y,z notin ()"),
    ],
)
def test_printing_gives_apimachinerys_canonical_string(text: str, canonical: str) -> None:
    assert str(parse_label_selector(text)) == canonical


def test_whitespace_of_every_kind_separates_tokens() -> None:
    spaced = parse_label_selector(" app \t=\r\nweb ,  tier in ( a , b ) ")
    assert str(spaced) == "app=web,tier in (a,b)"


def test_empty_parentheses_mean_the_set_holding_only_the_empty_string() -> None:
    selector = parse_label_selector("z notin ()")
    assert selector.requirements == (Requirement("z", Operator.NOT_IN, ("",)),)
    assert selector.matches({"z": "x"})
    assert not selector.matches({"z": ""})


def test_empty_values_inside_a_set_are_kept() -> None:
    assert parse_label_selector("x in (foo,,baz)").requirements[0].values == ("", "baz", "foo")
    assert parse_label_selector("x in (,foo)").requirements[0].values == ("", "foo")
    assert parse_label_selector("x in (foo,)").requirements[0].values == ("", "foo")
    assert parse_label_selector("x in (,)").requirements[0].values == ("",)


def test_in_and_notin_are_plain_identifiers_where_a_key_or_value_is_expected() -> None:
    selector = parse_label_selector("in in (in,notin),!notin")
    assert selector.requirements == (
        Requirement("in", Operator.IN, ("in", "notin")),
        Requirement("notin", Operator.DOES_NOT_EXIST),
    )


def test_the_empty_and_blank_selectors_select_everything() -> None:
    assert parse_label_selector("") == LabelSelector.EVERYTHING
    assert parse_label_selector("  \t ").empty
    assert LabelSelector.EVERYTHING.matches({})


def test_requirements_are_sorted_by_key_whatever_order_they_were_written_in() -> None:
    assert parse_label_selector("b=1,a=2") == parse_label_selector("a=2,b=1")
    assert [r.key for r in parse_label_selector("c,b=1,a=2").requirements] == ["a", "b", "c"]


def test_duplicate_values_collapse_as_in_a_set() -> None:
    assert parse_label_selector("a in (x,x,y)").requirements[0].values == ("x", "y")


def test_a_nul_byte_ends_an_identifier_as_it_does_in_gos_lexer() -> None:
    assert rejection("a=b\0junk") == "found 'junk', expected: ',' or 'end of string'"


# --- syntax errors ------------------------------------------------------------------------------


def test_a_second_equals_is_rejected_with_the_api_servers_exact_body() -> None:
    with pytest.raises(ApiError) as info:
        parse_label_selector("app=a=b")
    assert info.value.status == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "found '=', expected: ',' or 'end of string'",
        "reason": "BadRequest",
        "code": 400,
    }


def test_an_unterminated_set_is_rejected_with_the_api_servers_message() -> None:
    assert rejection("app in (") == (
        "unable to parse requirement: found '', expected: ',', ')' or identifier"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (",a", "found ',', expected: !, identifier, or 'end of string'"),
        ("a,", "found '', expected: identifier after ','"),
        ("a,=b", "found '=', expected: identifier after ','"),
        ("!", "unable to parse requirement: found '', expected: identifier"),
        ("!a=b", "found '=', expected: ',' or 'end of string'"),
        ("a b", "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"),
        ("a in b", "unable to parse requirement: found 'b' expected: '('"),
        ("a notin", "unable to parse requirement: found '' expected: '('"),
        ("a in (b c)", "unable to parse requirement: found 'c', expected: ',' or ')'"),
        ("a in (b,=)", "unable to parse requirement: found '=', expected: ',', or identifier"),
        ("a in (b", "unable to parse requirement: found '', expected: ',' or ')'"),
        ("a=(b)", "unable to parse requirement: found '(', expected: identifier"),
        ("a in ((b))", "unable to parse requirement: found '(', expected: ',', ')' or identifier"),
        # parseIdentifiersList consumes the second of ",," and then meets ")": upstream refuses.
        ("a in (,,)", "unable to parse requirement: found ')', expected: ',', or identifier"),
        ("a in (b,,)", "unable to parse requirement: found ')', expected: ',', or identifier"),
    ],
)
def test_syntax_errors_carry_apimachinerys_messages(text: str, message: str) -> None:
    assert rejection(text) == message


# --- validation ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "detail"),
    [
        ("-app", f"name part {QNAME_RULE}"),
        ("a" * 64, "name part must be no more than 63 characters"),
        ("/app", "prefix part must be non-empty"),
        ("example.com/", f"name part must be non-empty; name part {QNAME_RULE}"),
        ("Example.com/app", f"prefix part {SUBDOMAIN_RULE}"),
        (
            "a/b/c",
            f"a qualified name {QNAME_RULE} with an optional DNS subdomain prefix and '/' "
            "(e.g. 'example.com/MyName')",
        ),
    ],
)
def test_a_key_that_is_not_a_qualified_name_is_rejected(key: str, detail: str) -> None:
    # The parser validates keys with a nil field path, which Go prints as "<nil>".
    expected = f'unable to parse requirement: <nil>: Invalid value: "{key}": {detail}'
    assert rejection(f"{key}=x") == expected


def test_a_key_prefix_may_be_a_long_dns_subdomain() -> None:
    prefix = ".".join(["a" * 63] * 3) + "." + "b" * 61  # 253 characters
    assert parse_label_selector(f"{prefix}/app").requirements[0].key == f"{prefix}/app"
    message = rejection(f"{prefix}b/app")
    assert "prefix part must be no more than 253 characters" in message


def test_an_invalid_value_is_reported_at_its_index_and_key() -> None:
    assert rejection("app=-web") == (
        f'unable to parse requirement: values[0][app]: Invalid value: "-web": {VALUE_RULE}'
    )


def test_a_value_longer_than_63_characters_is_rejected() -> None:
    value = "v" * 64
    assert rejection(f"app={value}") == (
        f'unable to parse requirement: values[0][app]: Invalid value: "{value}": '
        "must be no more than 63 characters"
    )


def test_several_invalid_values_are_aggregated_in_brackets_in_sorted_order() -> None:
    assert rejection("app in (-b,-a)") == (
        "unable to parse requirement: ["
        f'values[0][app]: Invalid value: "-a": {VALUE_RULE}, '
        f'values[1][app]: Invalid value: "-b": {VALUE_RULE}]'
    )


def test_greater_than_needs_an_integer() -> None:
    assert rejection("n>x") == (
        "unable to parse requirement: values[0]: Invalid value: \"x\": for 'Gt', 'Lt' "
        "operators, the value must be an integer"
    )
    assert rejection("n<") == (
        "unable to parse requirement: values[0]: Invalid value: \"\": for 'Gt', 'Lt' "
        "operators, the value must be an integer"
    )


def test_a_negative_bound_fails_label_value_validation_as_upstream() -> None:
    assert rejection("n>-5") == (
        f'unable to parse requirement: values[0][n]: Invalid value: "-5": {VALUE_RULE}'
    )


def test_keys_and_values_are_quoted_as_go_quotes_them() -> None:
    message = rejection('a"b=x')
    assert message.startswith('unable to parse requirement: <nil>: Invalid value: "a\\"b": ')


def test_without_validation_any_key_and_value_are_accepted() -> None:
    text = "metadata.ownerReferences[*].uid=-x"
    assert "Invalid value" in rejection(text)
    selector = parse_label_selector(text, validate=False)
    assert selector.matches({"metadata.ownerReferences[*].uid": "-x"})


def test_without_validation_greater_than_still_needs_an_integer() -> None:
    assert "must be an integer" in rejection("n>x", validate=False)


# --- matching -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "labels", "expected"),
    [
        ("app=web", {"app": "web"}, True),
        ("app=web", {"app": "db"}, False),
        ("app=web", {}, False),
        ("app==web", {"app": "web"}, True),
        ("app!=web", {"app": "db"}, True),
        ("app!=web", {"app": "web"}, False),
        ("app!=web", {}, True),
        ("app in (a,b)", {"app": "b"}, True),
        ("app in (a,b)", {"app": "c"}, False),
        ("app in (a,b)", {}, False),
        ("app notin (a,b)", {"app": "c"}, True),
        ("app notin (a,b)", {"app": "a"}, False),
        ("app notin (a,b)", {}, True),
        ("app", {"app": ""}, True),
        ("app", {}, False),
        ("!app", {}, True),
        ("!app", {"app": ""}, False),
        ("app=", {"app": ""}, True),
        ("app=", {}, False),
        ("n>3", {"n": "4"}, True),
        ("n>3", {"n": "3"}, False),
        ("n>3", {"n": "+10"}, True),
        ("n>3", {"n": "x"}, False),
        ("n>3", {}, False),
        ("n<3", {"n": "-7"}, True),
        ("n<3", {"n": "03"}, False),
        ("n<3", {"n": "99999999999999999999"}, False),
        ("app=web,tier", {"app": "web", "tier": "x"}, True),
        ("app=web,tier", {"app": "web"}, False),
    ],
)
def test_matching_follows_requirement_matches(
    text: str, labels: dict[str, str], expected: bool
) -> None:
    assert parse_label_selector(text).matches(labels) is expected


def test_selector_from_match_labels_requires_every_pair() -> None:
    selector = selector_from_match_labels({"tier": "db", "app": "web"})
    assert str(selector) == "app=web,tier=db"
    assert selector.matches({"app": "web", "tier": "db", "extra": "x"})
    assert not selector.matches({"app": "web"})
    assert selector_from_match_labels({}) == LabelSelector.EVERYTHING


def test_requires_exact_match_reports_only_a_single_pinned_value() -> None:
    assert parse_label_selector("a=x,b").requires_exact_match("a") == "x"
    assert parse_label_selector("a in (x)").requires_exact_match("a") == "x"
    assert parse_label_selector("a in (x,y)").requires_exact_match("a") is None
    assert parse_label_selector("a!=x").requires_exact_match("a") is None
    assert parse_label_selector("b=x").requires_exact_match("a") is None


def test_requirement_values_are_normalised_to_a_sorted_set() -> None:
    assert Requirement("a", Operator.IN, ("b", "a", "b")).values == ("a", "b")
    assert Requirement("a", Operator("in"), ("x",)) == Requirement("a", Operator.IN, ("x",))
