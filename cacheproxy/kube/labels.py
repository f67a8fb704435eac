"""Label selectors: the ``labelSelector`` grammar, its canonical form, validation and matching.

This module owns everything the API server does with a ``labelSelector`` query parameter, so that
the proxy answers a selector exactly as the upstream would: the same accepted syntax, the same
400 message for a rejected one, the same canonical ``String()`` form and the same matching rules.

It mirrors ``k8s.io/apimachinery/pkg/labels/selector.go`` (lexer, parser, ``Requirement``,
``internalSelector``) and the label rules of ``k8s.io/apimachinery/pkg/util/validation``
(``IsQualifiedName``, ``IsValidLabelValue``) with the wording of Kubernetes v1.28, the version
our protocol samples come from. Field-error strings are formatted as ``field.Error.Error()``
formats them (``<path>: Invalid value: "<value>": <detail>``).

Pure code, no I/O. Errors are raised as ``status.bad_request`` (the API server answers an invalid
selector with 400 BadRequest and the parser's message, unwrapped).
"""

from __future__ import annotations

import enum
import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import ClassVar

from cacheproxy.kube import status

__all__ = [
    "LabelSelector",
    "Operator",
    "Requirement",
    "parse_label_selector",
    "selector_from_match_labels",
]


class Operator(enum.StrEnum):
    """``selection.Operator``: the values are apimachinery's own spellings."""

    EQUALS = "="
    DOUBLE_EQUALS = "=="
    NOT_EQUALS = "!="
    IN = "in"
    NOT_IN = "notin"
    EXISTS = "exists"
    DOES_NOT_EXIST = "!"
    GREATER_THAN = "gt"
    LESS_THAN = "lt"


# How ``Requirement.String()`` writes each binary operator between key and values.
_INFIX: dict[Operator, str] = {
    Operator.EQUALS: "=",
    Operator.DOUBLE_EQUALS: "==",
    Operator.NOT_EQUALS: "!=",
    Operator.IN: " in ",
    Operator.NOT_IN: " notin ",
    Operator.GREATER_THAN: ">",
    Operator.LESS_THAN: "<",
}

# The order apimachinery lists binary operators in ``parseOperator``'s error message.
_BINARY_OPERATORS = "in, notin, =, ==, !=, gt, lt"

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
_INT_RE = re.compile(r"[+-]?[0-9]+")


def _parse_int64(text: str) -> int | None:
    """``strconv.ParseInt(text, 10, 64)``: optional sign, ASCII digits, int64 range."""
    if _INT_RE.fullmatch(text) is None:
        return None
    value = int(text)
    return value if _INT64_MIN <= value <= _INT64_MAX else None


@dataclass(frozen=True, slots=True)
class Requirement:
    """One term of a label selector: ``key <operator> values``.

    ``values`` is kept sorted and without duplicates, as the parser builds it (a ``sets.String``
    turned into a sorted list), so equal requirements compare equal whatever order the values were
    written in. Construction does not validate the key or values (like apimachinery's
    ``SelectorFromValidatedSet``); :func:`parse_label_selector` does.
    """

    key: str
    operator: Operator
    values: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "operator", Operator(self.operator))
        object.__setattr__(self, "values", tuple(sorted(set(self.values))))

    def matches(self, labels: Mapping[str, str]) -> bool:
        """``Requirement.Matches``: ``!=`` and ``notin`` also match objects lacking the key."""
        op = self.operator
        if op in (Operator.IN, Operator.EQUALS, Operator.DOUBLE_EQUALS):
            return self.key in labels and labels[self.key] in self.values
        if op in (Operator.NOT_IN, Operator.NOT_EQUALS):
            return self.key not in labels or labels[self.key] not in self.values
        if op is Operator.EXISTS:
            return self.key in labels
        if op is Operator.DOES_NOT_EXIST:
            return self.key not in labels
        # Gt/Lt: the key must be present and both sides must be int64 integers.
        if self.key not in labels or len(self.values) != 1:
            return False
        have = _parse_int64(labels[self.key])
        want = _parse_int64(self.values[0])
        if have is None or want is None:
            return False
        return have > want if op is Operator.GREATER_THAN else have < want

    def __str__(self) -> str:
        """``Requirement.String()``: ``app in (a,b)``, ``!app``, ``app``, ``app!=x``, ``n>3``."""
        if self.operator is Operator.DOES_NOT_EXIST:
            return f"!{self.key}"
        if self.operator is Operator.EXISTS:
            return self.key
        joined = ",".join(self.values)
        if self.operator in (Operator.IN, Operator.NOT_IN):
            joined = f"({joined})"
        return f"{self.key}{_INFIX[self.operator]}{joined}"


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A conjunction of requirements; the empty selector matches everything.

    Requirements are kept in apimachinery's canonical order (stably sorted by key, as ``parse``
    and ``Selector.Add`` sort them), so ``str()`` gives the API server's canonical form and two
    selectors that differ only in the order they were written compare equal.
    """

    requirements: tuple[Requirement, ...] = ()

    EVERYTHING: ClassVar[LabelSelector]

    def __post_init__(self) -> None:
        ordered = tuple(sorted(self.requirements, key=lambda r: r.key))
        object.__setattr__(self, "requirements", ordered)

    @property
    def empty(self) -> bool:
        """True when the selector does not restrict anything (``Selector.Empty``)."""
        return not self.requirements

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels) for r in self.requirements)

    def requires_exact_match(self, key: str) -> str | None:
        """``RequiresExactMatch``: the one value ``key`` must have, if the selector pins it."""
        for r in self.requirements:
            if r.key == key:
                exact = (Operator.EQUALS, Operator.DOUBLE_EQUALS, Operator.IN)
                if r.operator in exact and len(r.values) == 1:
                    return r.values[0]
                return None
        return None

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


LabelSelector.EVERYTHING = LabelSelector()


def selector_from_match_labels(labels: Mapping[str, str]) -> LabelSelector:
    """``SelectorFromSet``: ``key=value`` for every entry, without validation."""
    return LabelSelector(tuple(Requirement(k, Operator.EQUALS, (v,)) for k, v in labels.items()))


# ------------------------------------------------------------------------------------------------
# Validation (k8s.io/apimachinery/pkg/util/validation, v1.28 wording)

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


def _qualified_name_errors(value: str) -> list[str]:
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


def _label_value_errors(value: str) -> list[str]:
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
    """Go's ``%q`` / ``strconv.Quote``, used where apimachinery quotes user input in a message.

    Shared with :mod:`cacheproxy.kube.fields`; not part of this module's public surface.
    """
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


def _invalid(path: str, value: str, detail: str) -> str:
    """``field.Invalid(path, value, detail).Error()``."""
    return f"{path}: Invalid value: {go_quote(value)}: {detail}"


def _aggregate(errors: Iterable[str]) -> str:
    """``ErrorList.ToAggregate().Error()``: one message as is, several deduplicated in ``[…]``."""
    unique = list(dict.fromkeys(errors))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


# ------------------------------------------------------------------------------------------------
# Lexer and parser (labels.Lexer / labels.Parser)


class _Tok(enum.Enum):
    ERROR = enum.auto()
    END = enum.auto()
    CLOSE_PAREN = enum.auto()
    COMMA = enum.auto()
    NOT = enum.auto()
    DOUBLE_EQUALS = enum.auto()
    EQUALS = enum.auto()
    GREATER = enum.auto()
    IDENT = enum.auto()
    IN = enum.auto()
    LESS = enum.auto()
    NOT_EQUALS = enum.auto()
    NOT_IN = enum.auto()
    OPEN_PAREN = enum.auto()


_LITERALS: dict[str, _Tok] = {
    ")": _Tok.CLOSE_PAREN,
    ",": _Tok.COMMA,
    "!": _Tok.NOT,
    "==": _Tok.DOUBLE_EQUALS,
    "=": _Tok.EQUALS,
    ">": _Tok.GREATER,
    "in": _Tok.IN,
    "<": _Tok.LESS,
    "!=": _Tok.NOT_EQUALS,
    "notin": _Tok.NOT_IN,
    "(": _Tok.OPEN_PAREN,
}
_SPECIAL = frozenset("=!(),><")
_WHITESPACE = frozenset(" \t\r\n")
_NUL = "\0"

_OPERATOR_TOKENS: dict[_Tok, Operator] = {
    _Tok.IN: Operator.IN,
    _Tok.EQUALS: Operator.EQUALS,
    _Tok.DOUBLE_EQUALS: Operator.DOUBLE_EQUALS,
    _Tok.GREATER: Operator.GREATER_THAN,
    _Tok.LESS: Operator.LESS_THAN,
    _Tok.NOT_IN: Operator.NOT_IN,
    _Tok.NOT_EQUALS: Operator.NOT_EQUALS,
}


class _SyntaxError(Exception):
    """A parse failure; its text is the API server's message."""


def _scan(text: str) -> list[tuple[_Tok, str]]:
    """Tokenize like ``Lexer.Lex`` until the end token.

    Go's lexer reads bytes and returns 0 at the end, so a NUL in the input behaves as the end
    would at that point (it ends an identifier or the whole input); we keep that quirk.
    """
    pos = 0
    items: list[tuple[_Tok, str]] = []

    def read() -> str:
        nonlocal pos
        if pos < len(text):
            pos += 1
            return text[pos - 1]
        return _NUL

    def scan_special() -> tuple[_Tok, str]:
        nonlocal pos
        buffer = ""
        last: tuple[_Tok, str] | None = None
        while (ch := read()) != _NUL:
            if ch not in _SPECIAL:
                pos -= 1
                break
            buffer += ch
            if buffer in _LITERALS:
                last = (_LITERALS[buffer], buffer)
            elif last is not None:
                pos -= 1
                break
        if last is None:  # unreachable with today's literals; kept as Go words it
            return _Tok.ERROR, f"error expected: keyword found '{buffer}'"
        return last

    def scan_identifier() -> tuple[_Tok, str]:
        nonlocal pos
        chars: list[str] = []
        while (ch := read()) != _NUL:
            if ch in _SPECIAL or ch in _WHITESPACE:
                pos -= 1
                break
            chars.append(ch)
        word = "".join(chars)
        return _LITERALS.get(word, _Tok.IDENT), word

    while True:
        ch = read()
        while ch in _WHITESPACE:
            ch = read()
        if ch == _NUL:
            items.append((_Tok.END, ""))
            return items
        pos -= 1
        items.append(scan_special() if ch in _SPECIAL else scan_identifier())


class _Parser:
    """``labels.Parser``: recursive descent over the scanned tokens.

    In the *values* context the keywords ``in``/``notin`` are plain identifiers, which is how
    ``in in (in)`` parses; only the operator position reads them as keywords.
    """

    def __init__(self, text: str, *, validate: bool) -> None:
        self._items = _scan(text)
        self._position = 0
        self._validate = validate

    def _lookahead(self, *, values: bool = True) -> tuple[_Tok, str]:
        tok, lit = self._items[min(self._position, len(self._items) - 1)]
        if values and tok in (_Tok.IN, _Tok.NOT_IN):
            tok = _Tok.IDENT
        return tok, lit

    def _consume(self, *, values: bool = True) -> tuple[_Tok, str]:
        item = self._lookahead(values=values)
        self._position += 1
        return item

    def parse(self) -> list[Requirement]:
        requirements: list[Requirement] = []
        while True:
            tok, lit = self._lookahead()
            if tok is _Tok.END:
                return requirements
            if tok not in (_Tok.IDENT, _Tok.NOT):
                raise _SyntaxError(f"found '{lit}', expected: !, identifier, or 'end of string'")
            try:
                requirements.append(self._parse_requirement())
            except _SyntaxError as exc:
                raise _SyntaxError(f"unable to parse requirement: {exc}") from None
            tok, lit = self._consume()
            if tok is _Tok.END:
                return requirements
            if tok is not _Tok.COMMA:
                raise _SyntaxError(f"found '{lit}', expected: ',' or 'end of string'")
            tok, lit = self._lookahead()
            if tok not in (_Tok.IDENT, _Tok.NOT):
                raise _SyntaxError(f"found '{lit}', expected: identifier after ','")

    def _parse_requirement(self) -> Requirement:
        key, operator = self._parse_key_and_infer_operator()
        if operator is not None:  # Exists or DoesNotExist
            return Requirement(key, operator)
        operator = self._parse_operator()
        if operator in (Operator.IN, Operator.NOT_IN):
            values = self._parse_values()
        else:
            values = self._parse_exact_value()
        self._check_values(key, operator, values)
        return Requirement(key, operator, tuple(values))

    def _parse_key_and_infer_operator(self) -> tuple[str, Operator | None]:
        operator: Operator | None = None
        tok, literal = self._consume()
        if tok is _Tok.NOT:
            operator = Operator.DOES_NOT_EXIST
            tok, literal = self._consume()
        if tok is not _Tok.IDENT:
            raise _SyntaxError(f"found '{literal}', expected: identifier")
        if self._validate and (errors := _qualified_name_errors(literal)):
            # The parser validates the key with a nil field path, hence Go's "<nil>".
            raise _SyntaxError(_invalid("<nil>", literal, "; ".join(errors)))
        if self._lookahead()[0] in (_Tok.END, _Tok.COMMA) and operator is None:
            operator = Operator.EXISTS
        return literal, operator

    def _parse_operator(self) -> Operator:
        tok, lit = self._consume(values=False)
        operator = _OPERATOR_TOKENS.get(tok)
        if operator is None:
            raise _SyntaxError(f"found '{lit}', expected: {_BINARY_OPERATORS}")
        return operator

    def _parse_values(self) -> list[str]:
        tok, lit = self._consume()
        if tok is not _Tok.OPEN_PAREN:
            raise _SyntaxError(f"found '{lit}' expected: '('")
        tok, lit = self._lookahead()
        if tok is _Tok.CLOSE_PAREN:  # "()" is the set {""}
            self._consume()
            return [""]
        if tok not in (_Tok.IDENT, _Tok.COMMA):
            raise _SyntaxError(f"found '{lit}', expected: ',', ')' or identifier")
        values = self._parse_identifiers_list()
        if self._consume()[0] is not _Tok.CLOSE_PAREN:  # unreachable, as in Go
            raise _SyntaxError(f"found '{lit}', expected: ')'")
        return values

    def _parse_identifiers_list(self) -> list[str]:
        """A possibly empty list of possibly empty identifiers: ``(a,,b)``, ``(,a)``, ``(a,)``."""
        values: set[str] = set()
        while True:
            tok, lit = self._consume()
            if tok is _Tok.IDENT:
                values.add(lit)
                tok2, lit2 = self._lookahead()
                if tok2 is _Tok.CLOSE_PAREN:
                    return sorted(values)
                if tok2 is not _Tok.COMMA:
                    raise _SyntaxError(f"found '{lit2}', expected: ',' or ')'")
            elif tok is _Tok.COMMA:
                if not values:
                    values.add("")  # "(,"
                tok2, _ = self._lookahead()
                if tok2 is _Tok.CLOSE_PAREN:
                    values.add("")  # ",)"
                    return sorted(values)
                if tok2 is _Tok.COMMA:
                    self._consume()
                    values.add("")  # ",,"
            else:
                raise _SyntaxError(f"found '{lit}', expected: ',', or identifier")

    def _parse_exact_value(self) -> list[str]:
        if self._lookahead()[0] in (_Tok.END, _Tok.COMMA):
            return [""]
        tok, lit = self._consume()
        if tok is not _Tok.IDENT:
            raise _SyntaxError(f"found '{lit}', expected: identifier")
        return [lit]

    def _check_values(self, key: str, operator: Operator, values: list[str]) -> None:
        """The value checks of ``NewRequirement``, in its order, aggregated as it aggregates.

        The Gt/Lt integer check belongs to the operator and always runs; ``validate=False``
        only skips the label-value format rules.
        """
        errors: list[str] = []
        if operator in (Operator.GREATER_THAN, Operator.LESS_THAN):
            detail = "for 'Gt', 'Lt' operators, the value must be an integer"
            errors += [
                _invalid(f"values[{i}]", v, detail)
                for i, v in enumerate(values)
                if _parse_int64(v) is None
            ]
        if self._validate:
            for i, v in enumerate(values):
                if value_errors := _label_value_errors(v):
                    errors.append(_invalid(f"values[{i}][{key}]", v, "; ".join(value_errors)))
        if errors:
            raise _SyntaxError(_aggregate(errors))


def parse_label_selector(text: str, *, validate: bool = True) -> LabelSelector:
    """Parse a ``labelSelector`` as ``labels.Parse`` does; the empty string selects everything.

    Raises the API server's 400 (``status.bad_request``) for a syntax error and, when
    ``validate`` is true, for a key that is not a qualified name or a value that is not a valid
    label value. ``validate=False`` accepts any key and value, for selectors over index paths
    such as ``metadata.ownerReferences[*].uid``.
    """
    if not text:
        return LabelSelector.EVERYTHING
    try:
        return _parse_cached(text, validate)
    except _SyntaxError as exc:
        raise status.bad_request(str(exc)) from None


@functools.lru_cache(maxsize=1024)
def _parse_cached(text: str, validate: bool) -> LabelSelector:
    """Selectors repeat (the same few in every request of a controller): each distinct one is
    parsed once. Only successes are kept; a selector that fails fails each time."""
    requirements = _Parser(text, validate=validate).parse()
    return LabelSelector(tuple(requirements)) if requirements else LabelSelector.EVERYTHING
