"""The reference tables of ``docs/configuration.md``, generated from the declarations.

Each table sits between two marker comments in the document::

    <!-- BEGIN GENERATED server: make docs -->
    | key | type | default | env | meaning |
    …
    <!-- END GENERATED server -->

``python -m cacheproxy.daemon.config.reference`` (``make docs``) rewrites them in place;
``--check`` exits 1 when the document and the declarations differ (a test runs it).
"""

from __future__ import annotations

import argparse
import enum
import json
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Final

from cacheproxy.daemon.config.entry import ENTRY
from cacheproxy.daemon.config.model import SETTINGS
from cacheproxy.daemon.config.settings import Kind, Setting, env_var_name
from cacheproxy.daemon.config.sources import RESOURCES

__all__ = ["DOCUMENT", "main", "regenerate", "tables"]

DOCUMENT: Final = Path(__file__).resolve().parents[3] / "docs" / "configuration.md"
_BLOCK: Final = re.compile(
    r"(<!-- BEGIN GENERATED (?P<name>[\w-]+)[^>]*-->\n)(?P<body>.*?)(<!-- END GENERATED (?P=name) -->)",
    re.DOTALL,
)


def _num(x: float) -> str:
    return str(int(x)) if x == int(x) else str(x)


def type_text(s: Setting) -> str:
    if s.shown.type:
        return s.shown.type
    if s.kind in (Kind.CHOICE, Kind.TRISTATE):
        return ", ".join(f"`{c}`" for c in s.choices)
    if s.kind in (Kind.INT, Kind.SECONDS):
        lo, hi = s.bounds
        name = "integer" if s.kind is Kind.INT else "seconds"
        if lo is not None and hi is not None:
            return f"{name}, {_num(lo)}\N{EN DASH}{_num(hi)}"
        return f"{name} ≥ {_num(lo)}" if lo is not None else name
    return str(s.kind.value)


def default_text(s: Setting) -> str:
    if s.shown.default:
        return s.shown.default
    value: Any = s.default
    if value is None and s.kind is not Kind.TRISTATE:
        return "—"
    if value is None:
        return "`auto`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float | int):
        return f"`{_num(value)}`"
    if isinstance(value, enum.Enum):
        return f"`{value.value!s}`"
    if isinstance(value, tuple):
        return f"`{json.dumps(list(value))}`"
    return f"`{value}`"


def _table(settings: Iterable[Setting], prefix: str, *, env: bool) -> str:
    head = ["key", "type", "default", *(["env"] if env else []), "meaning"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in settings:
        cells = [f"`{s.path.removeprefix(prefix)}`", type_text(s), default_text(s)]
        if env:
            cells.append(f"`{s.env}`")
        cells.append(s.doc)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def tables() -> dict[str, str]:
    """Each generated table by its marker's name."""
    out = {RESOURCES: _table(ENTRY.values(), "", env=False)}
    for section in dict.fromkeys(p.split(".")[0] for p in SETTINGS):
        chosen = [s for s in SETTINGS.values() if s.path.startswith(section + ".")]
        out[section] = _table(chosen, section + ".", env=True)
    out["resources-env"] = (
        f"| key | env |\n|---|---|\n| `{RESOURCES}` | `{env_var_name(RESOURCES)}` |\n"
    )
    return out


def regenerate(text: str) -> str:
    """``text`` with every generated table replaced by the declarations' (a marker naming an
    unknown table, or a table without its marker, is an error)."""
    made = tables()
    seen: set[str] = set()

    def replace(found: re.Match[str]) -> str:
        name = found["name"]
        if name not in made:
            raise ValueError(f"no generated table named {name!r}")
        seen.add(name)
        return found.group(1) + made[name] + found.group(4)

    out = _BLOCK.sub(replace, text)
    missing = sorted(set(made) - seen)
    if missing:
        raise ValueError(f"no marker for the generated table(s) {', '.join(missing)}")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cacheproxy.daemon.config.reference",
        description="Write the reference tables of docs/configuration.md from the declarations.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("document", nargs="?", type=Path, default=DOCUMENT, help="the document")
    parser.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 if the tables are stale"
    )
    args = parser.parse_args(argv)
    text = args.document.read_text(encoding="utf-8")
    fresh = regenerate(text)
    if fresh == text:
        return 0
    if args.check:
        print(f"{args.document}: the tables differ from the declarations; run make docs")
        return 1
    args.document.write_text(fresh, encoding="utf-8")
    print(f"{args.document}: tables regenerated")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
