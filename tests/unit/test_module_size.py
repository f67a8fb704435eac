"""No module in cacheproxy is over 800 lines: a module a newcomer can read in one sitting. The
ceiling is loose on purpose: a module holds one concept whole (a reflector with its options), and
one is split where its concepts part, not where a line count falls (ARCHITECTURE.md names what
each module holds)."""

from __future__ import annotations

from pathlib import Path

import cacheproxy

PACKAGE = Path(cacheproxy.__file__).parent
LIMIT = 800


def module_lengths(root: Path) -> dict[str, int]:
    """Every module under ``root`` → its number of lines."""
    return {
        str(path.relative_to(root.parent)): len(path.read_text().splitlines())
        for path in sorted(root.rglob("*.py"))
    }


def test_the_walk_counts_every_module() -> None:
    lengths = module_lengths(PACKAGE)
    assert len(lengths) > 100
    assert lengths["cacheproxy/__init__.py"] == len(
        (PACKAGE / "__init__.py").read_text().splitlines()
    )


def test_no_module_is_over_the_limit() -> None:
    over = {name: n for name, n in module_lengths(PACKAGE).items() if n > LIMIT}
    assert over == {}, f"split these by concept (at most {LIMIT} lines each): {over}"
