"""``shardSelector``: server-side sharded list and watch (KEP-5866, alpha in Kubernetes 1.36).

N replicas of a controller each list and watch one range of a 64-bit hash space, so each gets
only its part of the collection. The grammar is the API server's subset of CEL::

    shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')
    shardRange(object.metadata.uid, '0x0000000000000000', '0x4000000000000000') ||
        shardRange(object.metadata.uid, '0x8000000000000000', '0xc000000000000000')

- the field is ``object.metadata.uid`` or ``object.metadata.namespace`` (one field for all ranges);
- the hash is 64-bit FNV-1a of the field's value (its UTF-8 bytes);
- a range is ``[start, end)``: single- or double-quoted string literals, ``0x`` and exactly 16
  lowercase hex digits, or ``'0x10000000000000000'`` (2^64) as the top's exclusive end; start
  must be below end;
- ranges joined by ``||`` (parentheses allowed) select an object in any of them.

What kube-apiserver rejects is a 400 ``BadRequest`` whose message is ``invalid shard selector: ``
and its parser's reason (``k8s.io/apimachinery/pkg/sharding`` and the CEL walk of
``k8s.io/apiserver``); syntax errors that CEL itself reports (unbalanced parentheses, a stray
token) are worded by us, after the same ``CEL parse error: `` prefix.

A list served with a shard selector says so in its metadata, ``shardInfo: {"selector": …}``:
the parameter as sent (the API's ``ShardInfo.selector``: "the shard selector string from the
request, echoed back"), by which a client tells a sharded answer from the whole collection of a
server that ignored the parameter. :meth:`ShardSelector.canonical` is the API server's
``Selector.String()``. Both fields are immutable, so an object never moves between shards: a
sharded watch sees an object leave only when it is deleted (or when another selector of the same
watch stops matching it).
"""

from __future__ import annotations

import dataclasses
import functools
import re
from dataclasses import dataclass

from cacheproxy.kube import status

__all__ = [
    "FIELDS",
    "HASH_SPACE",
    "ShardRange",
    "ShardSelector",
    "fnv1a64",
    "parse_shard_selector",
]

HASH_SPACE = 1 << 64
FIELDS = ("object.metadata.uid", "object.metadata.namespace")
_TOP = "0x10000000000000000"
_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_MASK = HASH_SPACE - 1


def fnv1a64(value: str) -> int:
    """64-bit FNV-1a of ``value``'s UTF-8 bytes (Go's ``hash/fnv.New64a``)."""
    h = _FNV_OFFSET
    for byte in value.encode():
        h = ((h ^ byte) * _FNV_PRIME) & _MASK
    return h


_namespace_hash = functools.lru_cache(maxsize=4096)(fnv1a64)
""":func:`fnv1a64` of a namespace, remembered: a cluster has few namespaces and many objects."""


@dataclass(frozen=True, slots=True)
class ShardRange:
    """``[start, end)`` of the hash space, as written (``0x`` + 16 digits, or 2^64 for ``end``)."""

    start: str
    end: str

    @property
    def bounds(self) -> tuple[int, int]:
        return int(self.start, 16), int(self.end, 16)


@dataclass(frozen=True, slots=True)
class ShardSelector:
    """A parsed ``shardSelector``: one field and the ranges any of which selects an object."""

    field: str
    ranges: tuple[ShardRange, ...]
    source: str = dataclasses.field(default="", compare=False)
    """The parameter as the request gave it: what a sharded list's ``shardInfo`` echoes."""
    _bounds: tuple[tuple[int, int], ...] = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_bounds", tuple(r.bounds for r in self.ranges))

    @property
    def by_uid(self) -> bool:
        return self.field == "object.metadata.uid"

    def contains(self, hashed: int) -> bool:
        """Whether a field value with this hash is in the shard."""
        # A loop, not any(): no generator per object (a tenth of a sharded list's time).
        for start, end in self._bounds:  # noqa: SIM110
            if start <= hashed < end:
                return True
        return False

    def matches(self, *, uid: str, namespace: str) -> bool:
        """Whether an object with this uid and namespace is in the shard."""
        if self.by_uid:
            return self.contains(fnv1a64(uid))
        return self.contains(_namespace_hash(namespace))

    def canonical(self) -> str:
        """The selector as the API server writes it back (``sharding.Selector.String``)."""
        return " || ".join(f"shardRange({self.field}, '{r.start}', '{r.end}')" for r in self.ranges)


# --------------------------------------------------------------------------- the parser

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<or>\|\|)
      | (?P<punct>[(),.])
      | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
      | '(?P<single>[^'\\\n]*)'
      | "(?P<double>[^"\\\n]*)"
      | (?P<other>[^\s(),.|'"]+)
    )""",
    re.VERBOSE,
)


class _Invalid(Exception):
    """Why a selector is refused (the message after ``invalid shard selector: ``)."""


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # "or", "punct", "ident", "string", "other", "end"
    text: str


def _tokens(text: str) -> list[_Token]:
    out: list[_Token] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:  # an unterminated string
            raise _Invalid(
                f"CEL parse error: Syntax error: token recognition error at: '{text[pos:].strip()}'"
            )
        pos = match.end()
        kind = match.lastgroup or "other"
        if kind in ("single", "double"):
            out.append(_Token("string", match.group(kind)))
        else:
            out.append(_Token(kind, match.group(kind)))
    out.append(_Token("end", ""))
    return out


class _SelectorParser:
    """``expr := term ('||' term)*``; ``term := '(' expr ')' | name '(' args ')'``."""

    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.pos = 0

    def peek(self) -> _Token:
        return self.tokens[self.pos]

    def take(self) -> _Token:
        token = self.tokens[self.pos]
        self.pos = min(self.pos + 1, len(self.tokens) - 1)
        return token

    def expect(self, text: str) -> None:
        token = self.take()
        if token.text != text or token.kind not in ("punct", "or"):
            found = token.text or "<EOF>"
            raise _Invalid(
                f"CEL parse error: Syntax error: mismatched input '{found}' expecting '{text}'"
            )

    def parse(self) -> list[tuple[str, ShardRange]]:
        ranges = self.expr()
        token = self.peek()
        if token.kind != "end":
            if token.text in ("&&", "&"):
                raise _Invalid('unsupported function "_&&_"; only shardRange() and || are allowed')
            raise _Invalid(f"CEL parse error: Syntax error: extraneous input '{token.text}'")
        return ranges

    def expr(self) -> list[tuple[str, ShardRange]]:
        ranges = self.term()
        while self.peek().kind == "or":
            self.take()
            ranges += self.term()
        return ranges

    def term(self) -> list[tuple[str, ShardRange]]:
        token = self.take()
        if token.kind == "punct" and token.text == "(":
            inner = self.expr()
            self.expect(")")
            return inner
        if token.kind != "ident":
            kind = {"string": "literal", "end": "<EOF>"}.get(token.kind, token.text)
            raise _Invalid(
                f"unexpected expression kind {kind}; expected shardRange() call or || operator"
            )
        name = token.text
        if self.peek().text != "(":
            raise _Invalid(
                "unexpected expression kind ident; expected shardRange() call or || operator"
            )
        self.take()
        args = self.arguments()
        if name != "shardRange":
            raise _Invalid(f'unsupported function "{name}"; only shardRange() and || are allowed')
        if len(args) != 3:
            raise _Invalid(f"shardRange() requires exactly 3 arguments, got {len(args)}")
        (path_kind, path), (start_kind, start), (end_kind, end) = args
        if path_kind != "path":
            raise _Invalid(
                "shardRange() first argument: expected field path (e.g. object.metadata.uid), "
                f"got expression kind {path_kind}"
            )
        if path not in FIELDS:
            raise _Invalid(
                f'unsupported field path "{path}"; supported: object.metadata.uid, '
                "object.metadata.namespace"
            )
        low = _hex_literal(start_kind, start, "hexStart")
        high = _hex_literal(end_kind, end, "hexEnd")
        if int(low, 16) >= int(high, 16):
            raise _Invalid(f"shard range start {low} must be less than end {high}")
        return [(path, ShardRange(low, high))]

    def arguments(self) -> list[tuple[str, str]]:
        """The call's arguments up to its ``)``: ("path", dotted) or ("string", value)."""
        args: list[tuple[str, str]] = []
        if self.peek().text == ")":
            self.take()
            return args
        while True:
            token = self.take()
            if token.kind == "string":
                args.append(("string", token.text))
            elif token.kind == "ident":
                path = [token.text]
                while self.peek().text == ".":
                    self.take()
                    part = self.take()
                    if part.kind != "ident":
                        raise _Invalid(
                            f"CEL parse error: Syntax error: mismatched input '{part.text}' "
                            "expecting IDENTIFIER"
                        )
                    path.append(part.text)
                args.append(("path", ".".join(path)))
            elif token.kind == "other" and token.text.replace(".", "").isalnum():
                args.append(("literal", token.text))
            else:
                found = token.text or "<EOF>"
                raise _Invalid(f"CEL parse error: Syntax error: mismatched input '{found}'")
            token = self.take()
            if token.text == ")":
                return args
            if token.text != ",":
                found = token.text or "<EOF>"
                raise _Invalid(
                    f"CEL parse error: Syntax error: mismatched input '{found}' expecting ')'"
                )


def _hex_literal(kind: str, value: str, name: str) -> str:
    """A range bound as kube-apiserver checks it (``extractHexLiteral``)."""
    if kind != "string":
        shown = "ident" if kind == "path" else kind
        raise _Invalid(
            f"{name} must be a string literal (e.g. '0xff'), got expression kind {shown}"
        )
    if not value.startswith("0x"):
        raise _Invalid(f"{name} must have '0x' prefix, got \"{value}\"")
    digits = value[2:]
    if not digits:
        raise _Invalid(f"{name}: hex value is required after '0x'")
    if len(digits) > 17:
        raise _Invalid(f'{name}: hex value too long ({len(digits)} chars, max 17): "{digits}"')
    for char in digits:
        if char not in "0123456789abcdef":
            raise _Invalid(f'{name}: invalid hex character "{char}" in "{value}"')
    if len(digits) == 17:
        if value != _TOP:
            raise _Invalid(f"{name}: 17-digit hex value must be '{_TOP}' (2^64), got \"{value}\"")
    elif len(digits) != 16:
        padded = "0x" + digits.rjust(16, "0")
        raise _Invalid(
            f'{name} must be a 0x-prefixed 16-digit hex value, got "{value}" '
            f'(did you mean "{padded}"?)'
        )
    return value


def parse_shard_selector(text: str) -> ShardSelector | None:
    """The ``shardSelector`` parameter (None when empty: every object); a 400 ``BadRequest``
    with kube-apiserver's reason for what it refuses."""
    if not text.strip():
        return None
    try:
        parsed = _SelectorParser(text.strip()).parse()
        field = parsed[0][0]
        for other, _ in parsed[1:]:
            if other != field:
                raise _Invalid(
                    f'all shard ranges must use the same field, got "{field}" and "{other}"'
                )
    except _Invalid as why:
        raise status.bad_request(f"invalid shard selector: {why}") from None
    return ShardSelector(field, tuple(r for _, r in parsed), source=text)
