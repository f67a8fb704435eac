"""Server-side ``meta.k8s.io`` Tables (what ``kubectl get`` asks for), docs/design.md §4.

Pure: objects are decoded JSON dicts, "now" is passed in (ages are relative to it). Cells follow
the API server's ``pkg/printers/internalversion/printers.go`` for the kinds in ``PRINTERS``;
every other kind gets the default Table (``Name``, ``Created At``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import orjson

from cacheproxy.kube import status
from cacheproxy.kube.columns import COLUMNS, Column, columns_for
from cacheproxy.kube.negotiation import negotiate_answer
from cacheproxy.kube.partial import partial_object_metadata
from cacheproxy.kube.printers import (
    PRINTERS,
    PRINTERS_1_36,
    Obj,
    Printer,
    human_duration,
    metadata,
    pod_conditions,
    print_default,
    print_pod,
)
from cacheproxy.kube.request import REPRESENTATIONS
from cacheproxy.kube.versions import KUBE_1_36, NEWEST, KubeVersion

__all__ = [
    "INCLUDE_OBJECT",
    "BuiltinPrinter",
    "TablePrinter",
    "WatchTables",
    "has_printer",
    "human_duration",
    "include_object",
    "negotiate_table",
    "printer_for",
    "table",
    "table_row",
]

Row = dict[str, Any]

INCLUDE_OBJECT = ("None", "Metadata", "Object")


# --------------------------------------------------------------------------- negotiation


def negotiate_table(accept: str) -> str | None:
    """The Table version (``v1``/``v1beta1``) the Accept header asks for, or None for plain JSON.

    Clauses are taken in order and the first acceptable one wins: a ``meta.k8s.io`` Table in a
    served version, or plain JSON (no ``as=``). Anything else (another ``as=``, YAML, protobuf)
    is skipped; nothing acceptable is a 406 (:func:`~.negotiation.negotiate_answer`).
    """
    answer = negotiate_answer(accept, verb=None)
    if answer is None:
        raise status.not_acceptable(REPRESENTATIONS)
    return answer.version if answer.kind == "table" else None


def include_object(query: Mapping[str, Sequence[str]]) -> str:
    """``includeObject`` (default ``Metadata``); any other value is a 400, as the API server."""
    values = query.get("includeObject")
    value = values[0] if values else ""
    if not value:
        return "Metadata"
    if value not in INCLUDE_OBJECT:
        raise status.bad_request(
            f'includeObject: Unsupported value: "{value}": supported values: '
            '"None", "Metadata", "Object"'
        )
    return value


# --------------------------------------------------------------------------- the Table


class TablePrinter(Protocol):
    """What a Table of one kind needs: its column definitions and each object's cells."""

    def column_definitions(self) -> list[dict[str, Any]]: ...

    def cells(self, obj: Obj, now: datetime) -> list[Any]: ...


@dataclass(frozen=True)
class BuiltinPrinter:
    """A built-in kind's printer (``printers.PRINTERS``), or the default Table for other kinds.
    The printers fill the newest release's columns; ``keep`` picks the cells of an older one's."""

    columns: tuple[Column, ...]
    printer: Printer
    keep: tuple[int, ...] | None = None
    """Which of the printer's cells this release shows, in order; None: all of them."""

    def column_definitions(self) -> list[dict[str, Any]]:
        return [
            {"name": n, "type": t, "format": f, "description": d, "priority": p}
            for n, t, f, p, d in self.columns
        ]

    def cells(self, obj: Obj, now: datetime) -> list[Any]:
        cells = self.printer(obj, now)
        return cells if self.keep is None else [cells[i] for i in self.keep]


def has_printer(group: str, resource: str) -> bool:
    """Whether a built-in resource has a printer of its own here (else :func:`printer_for`
    gives the default Table, which may not be the API server's for it)."""
    return (group, resource) in PRINTERS


def printer_for(group: str, resource: str, version: KubeVersion = NEWEST) -> BuiltinPrinter:
    """The printer of a built-in resource as ``version`` of the API server prints it (the
    default Table for any other resource)."""
    printers = PRINTERS_1_36 if version.table_columns >= KUBE_1_36 else PRINTERS
    printer = printers.get((group, resource))
    if printer is None:
        return BuiltinPrinter(COLUMNS[("*", "default")], print_default)
    columns = columns_for((group, resource), version)
    newest = COLUMNS[(group, resource)]
    if columns == newest:
        return BuiltinPrinter(columns, printer)
    names = [c[0] for c in newest]
    return BuiltinPrinter(columns, printer, tuple(names.index(c[0]) for c in columns))


def table_row(
    printer: TablePrinter,
    obj: Obj,
    *,
    now: datetime,
    version: str = "v1",
    include: str = "Metadata",
) -> Row:
    row: Row = {"cells": printer.cells(obj, now)}
    if isinstance(printer, BuiltinPrinter) and printer.printer is print_pod:
        conditions = pod_conditions(obj)
        if conditions:
            row["conditions"] = conditions
    if include == "Metadata":
        row["object"] = partial_object_metadata(obj, f"meta.k8s.io/{version}")
    elif include == "Object":
        row["object"] = obj
    return row


def table(
    printer: TablePrinter,
    objects: Iterable[Obj],
    *,
    now: datetime | None = None,
    version: str = "v1",
    include: str = "Metadata",
    resource_version: str = "",
    continue_token: str = "",
    remaining: int | None = None,
    with_columns: bool = True,
) -> dict[str, Any]:
    """A ``meta.k8s.io`` Table of ``objects`` (a list page, one object, or one watch event)."""
    when = now or datetime.now(UTC)
    meta: dict[str, Any] = {"resourceVersion": resource_version}
    if continue_token:
        meta["continue"] = continue_token
        if remaining is not None:
            meta["remainingItemCount"] = remaining
    return {
        "kind": "Table",
        "apiVersion": f"meta.k8s.io/{version}",
        "metadata": meta,
        "columnDefinitions": printer.column_definitions() if with_columns else [],
        "rows": [
            table_row(printer, obj, now=when, version=version, include=include) for obj in objects
        ],
    }


class WatchTables:
    """Rewrites watch event lines so each object is a one-row Table (``kubectl get -w``).

    Only the first Table carries ``columnDefinitions``; ERROR (Status) and BOOKMARK events pass
    through unchanged. Feed whole response chunks; a partial trailing line is kept for the next.
    """

    def __init__(
        self,
        printer: TablePrinter,
        *,
        version: str = "v1",
        include: str = "Metadata",
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.printer, self.version, self.include = printer, version, include
        self.clock = clock
        self.first = True
        self._pending = b""

    def convert(self, chunk: bytes) -> bytes:
        data = self._pending + chunk
        end = data.rfind(b"\n") + 1
        self._pending = data[end:]
        out: list[bytes] = []
        for line in data[:end].splitlines():
            if not line.strip():
                continue
            event = orjson.loads(line)
            obj = event.get("object")
            if event.get("type") in ("ERROR", "BOOKMARK") or not isinstance(obj, dict):
                out.append(line + b"\n")
                continue
            event["object"] = table(
                self.printer,
                [obj],
                now=self.clock(),
                version=self.version,
                include=self.include,
                resource_version=str(metadata(obj).get("resourceVersion", "")),
                with_columns=self.first,
            )
            self.first = False
            out.append(orjson.dumps(event) + b"\n")
        return b"".join(out)
