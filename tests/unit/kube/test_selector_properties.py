"""Invariants of label and field selectors, checked on generated input.

* printing then parsing gives back the same selector;
* a parsed selector matches exactly what a small, independent reference evaluator says;
* field-selector value escaping round-trips for any text;
* any input either parses into a selector that round-trips or is a 400 — never a crash.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TypeVar

from hypothesis import given, settings
from hypothesis import strategies as st

from cacheproxy.errors import ApiError
from cacheproxy.kube.fields import (
    FieldRequirement,
    FieldSelector,
    escape_value,
    parse_field_selector,
    unescape_value,
)
from cacheproxy.kube.labels import LabelSelector, Operator, Requirement, parse_label_selector

EXAMPLES = settings(max_examples=200, deadline=None)
T = TypeVar("T")

# --- generators ---------------------------------------------------------------------------------

_ALNUM = "abcXYZ019"
_inner = st.text(alphabet=_ALNUM + "-_.", max_size=6)
label_names = st.builds(
    lambda a, mid, b: a + mid + b, st.sampled_from(_ALNUM), _inner, st.sampled_from(_ALNUM)
) | st.sampled_from(_ALNUM)
dns_labels = st.text(alphabet="abc019", min_size=1, max_size=5)
prefixes = st.lists(dns_labels, min_size=1, max_size=3).map(".".join)
label_keys = (
    label_names
    | st.builds(lambda p, n: f"{p}/{n}", prefixes, label_names)
    | st.sampled_from(["in", "notin"])
)
label_values = st.just("") | label_names | st.sampled_from(["in", "notin"])
integers = st.integers(min_value=0, max_value=10**6).map(str) | st.sampled_from(["007", "0"])


@st.composite
def requirements(draw: st.DrawFn) -> Requirement:
    key = draw(label_keys)
    op = draw(st.sampled_from(list(Operator)))
    if op in (Operator.EXISTS, Operator.DOES_NOT_EXIST):
        values: list[str] = []
    elif op in (Operator.IN, Operator.NOT_IN):
        values = draw(st.lists(label_values, min_size=1, max_size=4))
    elif op in (Operator.GREATER_THAN, Operator.LESS_THAN):
        values = [draw(integers)]
    else:
        values = [draw(label_values)]
    return Requirement(key, op, tuple(values))


label_selectors = st.lists(requirements(), max_size=5).map(lambda rs: LabelSelector(tuple(rs)))

field_names = st.text(alphabet="abXY01._/[]*- !", min_size=1, max_size=12).filter(
    lambda f: not f.endswith("!")
)
field_requirements = st.builds(
    FieldRequirement, field_names, st.sampled_from(["=", "==", "!="]), st.text(max_size=10)
)
field_selectors = st.lists(field_requirements, max_size=5).map(lambda rs: FieldSelector(tuple(rs)))


# --- (a) printing then parsing is the identity --------------------------------------------------


@EXAMPLES
@given(label_selectors)
def test_a_printed_label_selector_parses_back_to_itself(selector: LabelSelector) -> None:
    assert parse_label_selector(str(selector)) == selector


@EXAMPLES
@given(field_selectors)
def test_a_printed_field_selector_parses_back_to_itself(selector: FieldSelector) -> None:
    assert parse_field_selector(str(selector)) == selector


# --- (b) matching agrees with a reference evaluator ---------------------------------------------

KEYS = ["a", "b", "c"]
VALUES = ["", "x", "y", "0", "1", "5", "10", "+5", "007"]


def _as_int(text: str) -> int | None:
    return int(text) if re.fullmatch(r"[+-]?[0-9]+", text) else None


def reference_label_match(terms: list[tuple[str, str, list[str]]], labels: dict[str, str]) -> bool:
    """What each term means in words, evaluated directly on the generated description."""
    for key, op, values in terms:
        have = labels.get(key)
        if op in ("=", "==", "in"):
            ok = have is not None and have in values
        elif op in ("!=", "notin"):
            ok = have is None or have not in values
        elif op == "exists":
            ok = have is not None
        elif op == "!":
            ok = have is None
        else:
            bound = int(values[0])
            number = None if have is None else _as_int(have)
            ok = number is not None and (number > bound if op == ">" else number < bound)
        if not ok:
            return False
    return True


def label_term_text(key: str, op: str, values: list[str], space: str) -> str:
    if op == "exists":
        return key
    if op == "!":
        return f"!{space}{key}"
    if op in ("in", "notin"):
        return f"{key} {op}{space}({space}{(space + ',' + space).join(values)}{space})"
    return f"{key}{space}{op}{space}{values[0]}"


@st.composite
def label_terms(draw: st.DrawFn) -> tuple[str, str, list[str]]:
    key = draw(st.sampled_from(KEYS))
    op = draw(st.sampled_from(["=", "==", "!=", "in", "notin", "exists", "!", ">", "<"]))
    if op in ("exists", "!"):
        return key, op, []
    if op in (">", "<"):
        return key, op, [draw(st.sampled_from(["0", "1", "5", "10"]))]
    pool = [v for v in VALUES if v != "+5"]  # "+5" is not a valid label value
    if op in ("in", "notin"):
        # Unique values: upstream rejects a set ending in two empty values, e.g. "(,,)".
        values = st.lists(st.sampled_from(pool), min_size=1, max_size=3, unique=True)
        return key, op, draw(values)
    return key, op, [draw(st.sampled_from(pool))]


label_maps = st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=3)


@EXAMPLES
@given(
    st.lists(label_terms(), max_size=4),
    label_maps,
    st.sampled_from(["", " ", " \t"]),
)
def test_label_matching_agrees_with_the_reference(
    terms: list[tuple[str, str, list[str]]], labels: dict[str, str], space: str
) -> None:
    text = ",".join(label_term_text(k, op, vs, space) for k, op, vs in terms)
    assert parse_label_selector(text).matches(labels) is reference_label_match(terms, labels)


FIELD_VALUES = ["", "x", "a,b", "a=b", "c\\d", "Running"]


def reference_field_match(terms: list[tuple[str, str, str]], fields: dict[str, str]) -> bool:
    return all((fields.get(f, "") == v) is (op != "!=") for f, op, v in terms)


def manual_escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


@EXAMPLES
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["spec.nodeName", "status.phase"]),
            st.sampled_from(["=", "==", "!="]),
            st.sampled_from(FIELD_VALUES),
        ),
        max_size=4,
    ),
    st.dictionaries(
        st.sampled_from(["spec.nodeName", "status.phase"]), st.sampled_from(FIELD_VALUES)
    ),
)
def test_field_matching_agrees_with_the_reference(
    terms: list[tuple[str, str, str]], fields: dict[str, str]
) -> None:
    text = ",".join(f"{f}{op}{manual_escape(v)}" for f, op, v in terms)
    assert parse_field_selector(text).matches(fields) is reference_field_match(terms, fields)


# --- (c) escaping ------------------------------------------------------------------------------


@EXAMPLES
@given(st.text())
def test_unescaping_an_escaped_value_gives_it_back(value: str) -> None:
    assert unescape_value(escape_value(value)) == value


@EXAMPLES
@given(st.text())
def test_an_escaped_value_stays_one_term_of_a_selector(value: str) -> None:
    selector = parse_field_selector("f=" + escape_value(value))
    assert selector.requirements == (FieldRequirement("f", "=", value),)


# --- robustness -------------------------------------------------------------------------------


def parse_or_none(parse: Callable[[str], T], text: str) -> T | None:
    """The parsed selector, or None when the text is rejected with a 400 (anything else raises)."""
    try:
        return parse(text)
    except ApiError as exc:
        if exc.code != 400:
            raise
        return None


@EXAMPLES
@given(st.text(alphabet="ab1-./=!(),<> \tin\0", max_size=20))
def test_any_label_selector_text_is_a_400_or_round_trips(text: str) -> None:
    selector = parse_or_none(parse_label_selector, text)
    if selector is not None:
        assert parse_label_selector(str(selector)) == selector


@EXAMPLES
@given(st.text(alphabet="ab=!,\\ .", max_size=20))
def test_any_field_selector_text_is_a_400_or_round_trips(text: str) -> None:
    selector = parse_or_none(parse_field_selector, text)
    if selector is not None:
        assert parse_field_selector(str(selector)) == selector
