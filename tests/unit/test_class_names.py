"""Each class name in cacheproxy says one thing: no name is defined twice, in any two modules."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import cacheproxy

PACKAGE = Path(cacheproxy.__file__).parent


def class_definitions(root: Path) -> dict[str, list[str]]:
    """Every class name defined under ``root`` → where (``module.py:line``), by the AST."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ClassDef):
                found[node.name].append(f"{path.relative_to(root.parent)}:{node.lineno}")
    return found


def test_the_walk_finds_the_package_classes() -> None:
    found = class_definitions(PACKAGE)
    assert len(found) > 100
    assert [where.split(":")[0] for where in found["SharedInformer"]] == [
        "cacheproxy/informer/informer.py"
    ]


def test_no_class_name_is_defined_twice() -> None:
    twice = {name: where for name, where in class_definitions(PACKAGE).items() if len(where) > 1}
    assert twice == {}
