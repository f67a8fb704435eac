"""The ``labelSelector`` grammar: apimachinery's ``labels.Lexer`` and ``labels.Parser``.

It reads a selector into its requirements exactly as ``k8s.io/apimachinery/pkg/labels/selector.go``
does in Kubernetes v1.28: the same accepted syntax (``in in (in)``, ``(a,,b)``, a NUL ending the
input), the same checks in the same order and the same messages for what it rejects, which the
API server returns unwrapped in its 400. :func:`cacheproxy.kube.labels.parse_label_selector` is
the entry point; this module only raises :class:`SelectorSyntaxError` with that message.

Pure code, no I/O.
"""

from __future__ import annotations

import enum

from cacheproxy.kube.requirement import Operator, Requirement, parse_int64
from cacheproxy.kube.validation import (
    aggregate,
    invalid,
    label_value_errors,
    qualified_name_errors,
)

__all__ = [
    "SelectorSyntaxError",
    "parse_requirements",
]

# The order apimachinery lists binary operators in ``parseOperator``'s error message.
_BINARY_OPERATORS = "in, notin, =, ==, !=, gt, lt"


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


class SelectorSyntaxError(Exception):
    """A selector the grammar or its checks refuse; its text is the API server's message."""


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
                raise SelectorSyntaxError(
                    f"found '{lit}', expected: !, identifier, or 'end of string'"
                )
            try:
                requirements.append(self._parse_requirement())
            except SelectorSyntaxError as exc:
                raise SelectorSyntaxError(f"unable to parse requirement: {exc}") from None
            tok, lit = self._consume()
            if tok is _Tok.END:
                return requirements
            if tok is not _Tok.COMMA:
                raise SelectorSyntaxError(f"found '{lit}', expected: ',' or 'end of string'")
            tok, lit = self._lookahead()
            if tok not in (_Tok.IDENT, _Tok.NOT):
                raise SelectorSyntaxError(f"found '{lit}', expected: identifier after ','")

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
            raise SelectorSyntaxError(f"found '{literal}', expected: identifier")
        if self._validate and (errors := qualified_name_errors(literal)):
            # The parser validates the key with a nil field path, hence Go's "<nil>".
            raise SelectorSyntaxError(invalid("<nil>", literal, "; ".join(errors)))
        if self._lookahead()[0] in (_Tok.END, _Tok.COMMA) and operator is None:
            operator = Operator.EXISTS
        return literal, operator

    def _parse_operator(self) -> Operator:
        tok, lit = self._consume(values=False)
        operator = _OPERATOR_TOKENS.get(tok)
        if operator is None:
            raise SelectorSyntaxError(f"found '{lit}', expected: {_BINARY_OPERATORS}")
        return operator

    def _parse_values(self) -> list[str]:
        tok, lit = self._consume()
        if tok is not _Tok.OPEN_PAREN:
            raise SelectorSyntaxError(f"found '{lit}' expected: '('")
        tok, lit = self._lookahead()
        if tok is _Tok.CLOSE_PAREN:  # "()" is the set {""}
            self._consume()
            return [""]
        if tok not in (_Tok.IDENT, _Tok.COMMA):
            raise SelectorSyntaxError(f"found '{lit}', expected: ',', ')' or identifier")
        values = self._parse_identifiers_list()
        if self._consume()[0] is not _Tok.CLOSE_PAREN:  # unreachable, as in Go
            raise SelectorSyntaxError(f"found '{lit}', expected: ')'")
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
                    raise SelectorSyntaxError(f"found '{lit2}', expected: ',' or ')'")
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
                raise SelectorSyntaxError(f"found '{lit}', expected: ',', or identifier")

    def _parse_exact_value(self) -> list[str]:
        if self._lookahead()[0] in (_Tok.END, _Tok.COMMA):
            return [""]
        tok, lit = self._consume()
        if tok is not _Tok.IDENT:
            raise SelectorSyntaxError(f"found '{lit}', expected: identifier")
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
                invalid(f"values[{i}]", v, detail)
                for i, v in enumerate(values)
                if parse_int64(v) is None
            ]
        if self._validate:
            for i, v in enumerate(values):
                if value_errors := label_value_errors(v):
                    errors.append(invalid(f"values[{i}][{key}]", v, "; ".join(value_errors)))
        if errors:
            raise SelectorSyntaxError(aggregate(errors))


def parse_requirements(text: str, *, validate: bool) -> list[Requirement]:
    """The requirements of a non-empty ``labelSelector``, in the order they were written.

    Raises :class:`SelectorSyntaxError` for a syntax error and, when ``validate`` is true, for a
    key that is not a qualified name or a value that is not a valid label value.
    """
    return _Parser(text, validate=validate).parse()
