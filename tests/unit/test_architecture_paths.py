"""ARCHITECTURE.md's two walks — one watch event from upstream to a client, one list request from
a client to its bytes — name real files and functions, at most eight hops each, and never come
back to a module they already left (what a newcomer follows without going back up a layer)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "ARCHITECTURE.md"
HOP = re.compile(r"^\d+\. `([\w/]+\.py)` `([\w.]+)`", re.MULTILINE)


def hops(section: str) -> list[tuple[str, str]]:
    text = DOC.read_text()
    start = text.index(f"## {section}")
    end = text.index("\n## ", start + 1)
    return HOP.findall(text[start:end])


@pytest.mark.parametrize("section", ["One watch event", "One list request"])
def test_each_path_is_a_one_way_walk_through_real_functions(section: str) -> None:
    walk = hops(section)
    assert 3 <= len(walk) <= 8, walk
    modules = [path for path, _ in walk]
    assert len(set(modules)) == len(modules), f"a hop returns to a module it left: {modules}"
    for path, symbol in walk:
        source = (ROOT / "cacheproxy" / path).read_text()
        name = symbol.rpartition(".")[2]
        assert re.search(rf"^\s*(async def|def|class) {name}\b", source, re.MULTILINE), (
            f"{path} defines no {symbol}"
        )
