"""The README's Python snippets are not run (they need a cluster), but what they import exists:
each snippet parses, and every ``from cacheproxy… import …`` in it resolves."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)


def test_every_cacheproxy_name_the_readme_imports_exists() -> None:
    imported: list[tuple[str, str]] = []
    for block in python_blocks(README.read_text()):
        for node in ast.walk(ast.parse(block)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("cacheproxy"):
                imported += [(node.module or "", alias.name) for alias in node.names]
    assert ("cacheproxy.controller", "InformerFactory") in imported  # the library's snippet is seen
    missing = [f"{m}.{n}" for m, n in imported if not hasattr(importlib.import_module(m), n)]
    assert missing == []


def test_the_readme_controller_is_the_example_that_the_tests_run() -> None:
    """Every line of the README's controller snippet is in ``examples/controller.py``, in the same
    order (``tests/e2e/test_controller_example.py`` runs that file against real API servers)."""
    example = (README.parent / "examples" / "controller.py").read_text().splitlines()
    (snippet,) = [b for b in python_blocks(README.read_text()) if "Controller(" in b]
    lines = [line for line in snippet.splitlines() if line.strip()]
    assert len(lines) >= 10
    position = 0
    for line in lines:
        assert line in example[position:], f"README line not in the example (in order): {line!r}"
        position = example.index(line, position) + 1
