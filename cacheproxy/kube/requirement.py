"""One term of a label selector: ``key <operator> values``, how it matches and how it prints.

It mirrors apimachinery's ``labels.Requirement`` (``selection.Operator``, ``Requirement.Matches``,
``Requirement.String()``): :mod:`cacheproxy.kube.labels` holds the conjunction of these terms,
:mod:`cacheproxy.kube.labelparser` reads them from a ``labelSelector``.

Pure code, no I/O.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "Operator",
    "Requirement",
    "parse_int64",
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

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
_INT_RE = re.compile(r"[+-]?[0-9]+")


def parse_int64(text: str) -> int | None:
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
        have = parse_int64(labels[self.key])
        want = parse_int64(self.values[0])
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
