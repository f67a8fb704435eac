"""Each module name in cacheproxy says one thing: no two modules share a file name, so a name in a
traceback, a log line or a conversation ("the store", "the watch filter") points at one file."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import cacheproxy

PACKAGE = Path(cacheproxy.__file__).parent
SHARED = {"__init__.py", "__main__.py"}


def modules_by_name(root: Path) -> dict[str, list[str]]:
    """Every module file name under ``root`` → where it is."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in sorted(root.rglob("*.py")):
        found[path.name].append(str(path.relative_to(root.parent)))
    return found


def test_the_walk_finds_modules_of_every_package() -> None:
    found = modules_by_name(PACKAGE)
    assert found["reflector.py"] == ["cacheproxy/informer/reflector.py"]
    assert len(found["__init__.py"]) >= 10


def test_no_two_modules_share_a_name() -> None:
    twice = {
        name: where
        for name, where in modules_by_name(PACKAGE).items()
        if len(where) > 1 and name not in SHARED
    }
    assert twice == {}
