"""apimachinery's validation rules and the way it words their failures.

The checks of ``k8s.io/apimachinery/pkg/util/validation`` the label selector grammar applies
(``IsQualifiedName`` for keys, ``IsValidLabelValue`` for values) with the wording of Kubernetes
v1.28, the version our protocol samples come from, and the formatting of their errors:
``field.Error.Error()`` (``<path>: Invalid value: "<value>": <detail>``), the aggregate of an
``ErrorList`` and Go's ``%q`` quoting of user input, which field selectors' messages use too.

Pure code, no I/O: these functions return messages; raising them is the caller's business.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = [
    "aggregate",
    "go_quote",
    "invalid",
    "label_value_errors",
    "qualified_name_errors",
]

_QNAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QNAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
_QNAME_MAX = 63
_LABEL_VALUE_FMT = f"({_QNAME_FMT})?"
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
    "or '.', and must start and end with an alphanumeric character"
)
_LABEL_VALUE_MAX = 63
_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + r"(\." + _DNS1123_LABEL_FMT + ")*"
_DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
    "'-' or '.', and must start and end with an alphanumeric character"
)
_DNS1123_SUBDOMAIN_MAX = 253

_QNAME_RE = re.compile(_QNAME_FMT)
_LABEL_VALUE_RE = re.compile(_LABEL_VALUE_FMT)
_DNS1123_SUBDOMAIN_RE = re.compile(_DNS1123_SUBDOMAIN_FMT)


def _byte_len(text: str) -> int:
    """Go measures strings in UTF-8 bytes."""
    return len(text.encode("utf-8", "surrogatepass"))


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    """``validation.RegexError`` (including its doubled space before each ``or``)."""
    shown = "".join(("" if i == 0 else " or ") + f"'{e}', " for i, e in enumerate(examples))
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def _max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


def qualified_name_errors(value: str) -> list[str]:
    """``validation.IsQualifiedName``: optional DNS-1123 subdomain prefix, ``/``, a name."""
    errors: list[str] = []
    parts = value.split("/")
    if len(parts) > 2:
        return [
            "a qualified name "
            + _regex_error(_QNAME_MSG, _QNAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            if _byte_len(prefix) > _DNS1123_SUBDOMAIN_MAX:
                errors.append("prefix part " + _max_len_error(_DNS1123_SUBDOMAIN_MAX))
            if _DNS1123_SUBDOMAIN_RE.fullmatch(prefix) is None:
                detail = _regex_error(_DNS1123_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN_FMT, "example.com")
                errors.append("prefix part " + detail)
    if not name:
        errors.append("name part must be non-empty")
    elif _byte_len(name) > _QNAME_MAX:
        errors.append("name part " + _max_len_error(_QNAME_MAX))
    if _QNAME_RE.fullmatch(name) is None:
        detail = _regex_error(_QNAME_MSG, _QNAME_FMT, "MyName", "my.name", "123-abc")
        errors.append("name part " + detail)
    return errors


def label_value_errors(value: str) -> list[str]:
    """``validation.IsValidLabelValue``: empty, or ≤63 characters of the qualified-name alphabet."""
    errors: list[str] = []
    if _byte_len(value) > _LABEL_VALUE_MAX:
        errors.append(_max_len_error(_LABEL_VALUE_MAX))
    if _LABEL_VALUE_RE.fullmatch(value) is None:
        examples = ("MyValue", "my_value", "12345")
        errors.append(_regex_error(_LABEL_VALUE_MSG, _LABEL_VALUE_FMT, *examples))
    return errors


_GO_ESCAPES = {"\a": r"\a", "\b": r"\b", "\f": r"\f", "\n": r"\n", "\r": r"\r", "\t": r"\t"}
_GO_ESCAPES |= {"\v": r"\v", "\\": r"\\", '"': r"\""}


def go_quote(text: str) -> str:
    """Go's ``%q`` / ``strconv.Quote``, used where apimachinery quotes user input in a message."""
    out = ['"']
    for ch in text:
        if ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)


def invalid(path: str, value: str, detail: str) -> str:
    """``field.Invalid(path, value, detail).Error()``."""
    return f"{path}: Invalid value: {go_quote(value)}: {detail}"


def aggregate(errors: Iterable[str]) -> str:
    """``ErrorList.ToAggregate().Error()``: one message as is, several deduplicated in ``[…]``."""
    unique = list(dict.fromkeys(errors))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"
