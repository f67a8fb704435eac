"""Table columns of custom resources: a CRD version's ``additionalPrinterColumns``.

Mirrors apiextensions-apiserver's ``tableconvertor``: the first column is always ``Name``; each
printer column's cell is the first value its JSONPath finds (none → a null cell), converted by
the column's type — ``string`` prints the value as kubectl's JSONPath printer does (scalars as
text, objects and lists as compact JSON), ``integer``/``number``/``boolean`` keep JSON values of
that type (others are null), ``date`` becomes an age like ``5m`` (``<invalid>`` if it is not a
timestamp). A version without printer columns gets the API server's default: an ``Age`` column
of ``.metadata.creationTimestamp``.

JSONPath is evaluated by ``jsonpath-ng`` (its extended parser accepts the filter expressions
CRDs use, e.g. ``.status.conditions[?(@.type=="Ready")].status``); a path it cannot parse yields
null cells, as a path that fails to evaluate does in the API server.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

import orjson
from jsonpath_ng.exceptions import JsonPathLexerError, JsonPathParserError
from jsonpath_ng.ext.parser import parse as parse_jsonpath

from cacheproxy.kube.columns import COLUMNS
from cacheproxy.kube.printers.cells import Obj, human_duration, name_of, parse_time

__all__ = ["CustomColumns", "custom_columns", "default_columns", "go_text"]

_NAME_DESCRIPTION = COLUMNS[("*", "default")][0][4]
_CREATED_DESCRIPTION = COLUMNS[("*", "default")][1][4]
_DEFAULT_COLUMNS = (
    {
        "name": "Age",
        "type": "date",
        "jsonPath": ".metadata.creationTimestamp",
        "description": _CREATED_DESCRIPTION,
    },
)


@dataclass(frozen=True)
class _Column:
    type: str
    finder: Any  # a compiled jsonpath-ng expression, or None when the path does not parse


@dataclass(frozen=True)
class CustomColumns:
    """The Table printer of one custom resource version (column definitions + cells)."""

    definitions: tuple[Mapping[str, Any], ...]
    columns: tuple[_Column, ...] = field(repr=False)

    def column_definitions(self) -> list[dict[str, Any]]:
        return [dict(d) for d in self.definitions]

    def cells(self, obj: Obj, now: datetime) -> list[Any]:
        row: list[Any] = [name_of(obj)]
        for column in self.columns:
            row.append(_cell(column, obj, now))
        return row


def custom_columns(crd: Obj, version: str) -> CustomColumns | None:
    """The printer of ``version`` of the CRD ``crd`` (its JSON), or None if it has no such version."""
    versions = (crd.get("spec") or {}).get("versions")
    for entry in versions if isinstance(versions, list) else []:
        if isinstance(entry, Mapping) and entry.get("name") == version:
            declared = entry.get("additionalPrinterColumns")
            specs = declared if isinstance(declared, list) and declared else _DEFAULT_COLUMNS
            return _build(tuple(s for s in specs if isinstance(s, Mapping)))
    return None


def default_columns() -> CustomColumns:
    """The printer of a CRD version without printer columns: Name and Age."""
    return _build(_DEFAULT_COLUMNS)


def _build(specs: tuple[Mapping[str, Any], ...]) -> CustomColumns:
    definitions: list[Mapping[str, Any]] = [
        {
            "name": "Name",
            "type": "string",
            "format": "name",
            "description": _NAME_DESCRIPTION,
            "priority": 0,
        }
    ]
    columns: list[_Column] = []
    for spec in specs:
        path = str(spec.get("jsonPath") or "")
        definitions.append(
            {
                "name": str(spec.get("name") or ""),
                "type": str(spec.get("type") or ""),
                "format": str(spec.get("format") or ""),
                "description": str(
                    spec.get("description")
                    or f"Custom resource definition column (in JSONPath format): {path}"
                ),
                "priority": int(spec.get("priority") or 0),
            }
        )
        columns.append(_Column(str(spec.get("type") or ""), _compile(path)))
    return CustomColumns(tuple(definitions), tuple(columns))


def _compile(path: str) -> Any:
    text = path.strip()
    if not text.startswith("$"):
        text = "$" + (text if text.startswith((".", "[")) else "." + text)
    try:
        return parse_jsonpath(text)
    except (JsonPathLexerError, JsonPathParserError, ValueError, TypeError, AttributeError):
        return None


def _cell(column: _Column, obj: Obj, now: datetime) -> Any:
    if column.finder is None:
        return None
    try:
        found = column.finder.find(obj)
    except Exception:
        return None
    if not found:
        return None
    value = found[0].value
    if value is None:
        return None
    kind = column.type
    if kind == "string":
        return go_text(value)
    if kind == "integer":
        if isinstance(value, bool):
            return None
        if isinstance(value, int):
            return value
        if isinstance(value, float) and math.isfinite(value):
            return int(value)
        return None
    if kind == "number":
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return value
    if kind == "boolean":
        return value if isinstance(value, bool) else None
    if kind == "date":
        if not isinstance(value, str):
            return None
        if not value or value == "null":
            return "<unknown>"
        when = parse_time(value)
        if when is None:
            return "<invalid>"
        return human_duration((now - when).total_seconds())
    return None


def go_text(value: Any) -> str:
    """A JSON value as kubectl's JSONPath printer prints it (Go ``fmt.Print``/``json.Marshal``)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _go_float(value)
    text = orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    # encoding/json escapes HTML-sensitive characters.
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _go_float(value: float) -> str:
    """Go's ``%v`` of a float64 (``strconv`` 'g', shortest): exponent form when the decimal
    exponent is below -4 or at least 6 (``1e+06``), else plain digits (``0.0001``, ``123456``)."""
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    sign, digit_tuple, exp = Decimal(repr(value)).normalize().as_tuple()
    digits = "".join(map(str, digit_tuple))
    assert isinstance(exp, int)
    point = len(digits) + exp  # the decimal point's position within the digits
    minus = "-" if sign else ""
    if point - 1 < -4 or point - 1 >= 6:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        e = point - 1
        return f"{minus}{mantissa}e{'-' if e < 0 else '+'}{abs(e):02d}"
    if point <= 0:
        return f"{minus}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return minus + digits + "0" * (point - len(digits))
    return f"{minus}{digits[:point]}.{digits[point:]}"
