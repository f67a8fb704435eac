"""Custom resources' Tables: additionalPrinterColumns as apiextensions-apiserver renders them."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest

from cacheproxy.kube.crdcolumns import custom_columns, default_columns, go_text

NOW = datetime(2026, 11, 29, 14, 38, 1, tzinfo=UTC)


def crd(*columns: dict[str, Any], version: str = "v1") -> dict[str, Any]:
    entry: dict[str, Any] = {"name": version}
    if columns:
        entry["additionalPrinterColumns"] = list(columns)
    return {"spec": {"versions": [{"name": "v0"}, entry]}}


def test_the_sample_crd_renders_the_sample_table(samples_dir: Path) -> None:
    tables = samples_dir / "tables"
    definition = orjson.loads(
        (tables / "list_apis_apiextensions.k8s.io_v1_customresourcedefinitions.json").read_bytes()
    )["items"][0]
    widget = orjson.loads(
        (tables / "list_apis_example.com_v1_namespaces_tables_widgets.json").read_bytes()
    )["items"][0]
    expected = orjson.loads(
        (tables / "table_apis_example.com_v1_namespaces_tables_widgets.json").read_bytes()
    )
    printer = custom_columns(definition, "v1")
    assert printer is not None
    assert printer.column_definitions() == expected["columnDefinitions"]
    assert printer.cells(widget, NOW) == expected["rows"][0]["cells"]
    assert custom_columns(definition, "v2") is None


def test_a_version_without_columns_gets_name_and_age() -> None:
    printer = custom_columns(crd(), "v1")
    assert printer is not None
    assert [c["name"] for c in printer.column_definitions()] == ["Name", "Age"]
    assert printer.column_definitions()[1]["type"] == "date"
    assert printer.column_definitions() == default_columns().column_definitions()
    obj = {"metadata": {"name": "w", "creationTimestamp": "2026-11-29T14:37:01Z"}}
    assert printer.cells(obj, NOW) == ["w", "60s"]


@pytest.mark.parametrize(
    ("column", "obj", "cell"),
    [
        # The filter expressions CRDs use for conditions.
        (
            {"type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
            {"status": {"conditions": [{"type": "A", "status": "x"}, {"type": "Ready", "status": "True"}]}},
            "True",
        ),
        ({"type": "string", "jsonPath": ".spec.missing"}, {"spec": {}}, None),
        ({"type": "string", "jsonPath": ".spec.n"}, {"spec": {"n": 3}}, "3"),
        ({"type": "string", "jsonPath": ".spec.b"}, {"spec": {"b": False}}, "false"),
        ({"type": "string", "jsonPath": ".spec.f"}, {"spec": {"f": 1e6}}, "1e+06"),
        ({"type": "string", "jsonPath": ".spec.m"}, {"spec": {"m": {"z": 1, "a": "<b>"}}}, '{"a":"\\u003cb\\u003e","z":1}'),
        ({"type": "string", "jsonPath": ".spec.items[*].name"}, {"spec": {"items": [{"name": "a"}, {"name": "b"}]}}, "a"),
        ({"type": "string", "jsonPath": ".spec.items[1].name"}, {"spec": {"items": [{"name": "a"}, {"name": "b"}]}}, "b"),
        ({"type": "string", "jsonPath": ".spec.n"}, {"spec": {"n": None}}, None),
        ({"type": "integer", "jsonPath": ".spec.n"}, {"spec": {"n": 3.9}}, 3),
        ({"type": "integer", "jsonPath": ".spec.n"}, {"spec": {"n": "3"}}, None),
        ({"type": "integer", "jsonPath": ".spec.n"}, {"spec": {"n": True}}, None),
        ({"type": "number", "jsonPath": ".spec.n"}, {"spec": {"n": 2}}, 2),
        ({"type": "number", "jsonPath": ".spec.n"}, {"spec": {"n": 2.5}}, 2.5),
        ({"type": "boolean", "jsonPath": ".spec.b"}, {"spec": {"b": True}}, True),
        ({"type": "boolean", "jsonPath": ".spec.b"}, {"spec": {"b": "true"}}, None),
        ({"type": "date", "jsonPath": ".status.t"}, {"status": {"t": "2026-11-29T14:00:00Z"}}, "38m"),
        ({"type": "date", "jsonPath": ".status.t"}, {"status": {"t": "yesterday"}}, "<invalid>"),
        ({"type": "date", "jsonPath": ".status.t"}, {"status": {"t": ""}}, "<unknown>"),
        ({"type": "date", "jsonPath": ".status.t"}, {"status": {"t": 5}}, None),
        ({"type": "string", "jsonPath": ".spec[[["}, {"spec": {}}, None),
    ],
)  # fmt: skip
def test_cells_by_type(column: dict[str, Any], obj: dict[str, Any], cell: Any) -> None:
    printer = custom_columns(crd({"name": "C", **column}), "v1")
    assert printer is not None
    assert printer.cells({"metadata": {"name": "x"}, **obj}, NOW) == ["x", cell]


def test_declared_description_format_and_priority_are_kept() -> None:
    column = {
        "name": "Phase",
        "type": "string",
        "format": "byte",
        "description": "The phase.",
        "priority": 2,
        "jsonPath": ".status.phase",
    }
    printer = custom_columns(crd(column), "v1")
    assert printer is not None
    assert printer.column_definitions()[1] == {
        "name": "Phase",
        "type": "string",
        "format": "byte",
        "description": "The phase.",
        "priority": 2,
    }


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (999999.0, "999999"),
        (1234567.0, "1.234567e+06"),
        (0.0001, "0.0001"),
        (0.00001, "1e-05"),
        (-2.5, "-2.5"),
        (1e21, "1e+21"),
        ([1, "a"], '[1,"a"]'),
        ("plain", "plain"),
    ],
)
def test_go_text(value: Any, text: str) -> None:
    assert go_text(value) == text
