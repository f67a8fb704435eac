"""Field paths over object JSON: ``spec.nodeName``, ``metadata.ownerReferences[*].uid``,
``spec.containers[*].image``, ``metadata.labels.app``.

A path compiles once into a function from a parsed object to the tuple of its values, each
stringified as field selectors compare them (strings as is, booleans ``true``/``false``, numbers
in decimal). ``[*]`` fans out over a list, so one object can have several values (a
multi-valued index); a missing field yields no value.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from cacheproxy.errors import ConfigError

__all__ = ["FieldPath", "compile_field_path", "stringify"]

FieldPath = Callable[[Mapping[str, Any]], tuple[str, ...]]


def stringify(value: Any) -> str | None:
    """A scalar as field selectors see it; None for objects, lists and null."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return str(value)
    return None


def _parse(path: str) -> list[tuple[str, bool]]:
    if not path or path.startswith(".") or path.endswith(".") or ".." in path:
        raise ConfigError(f"invalid field path {path!r}: expected dotted names like spec.nodeName")
    steps: list[tuple[str, bool]] = []
    for part in path.split("."):
        fan_out = part.endswith("[*]")
        name = part[:-3] if fan_out else part
        if not name or any(c in name for c in "[]*"):
            raise ConfigError(
                f"invalid field path {path!r}: segment {part!r} must be a name, optionally "
                "followed by [*]"
            )
        steps.append((name, fan_out))
    return steps


def compile_field_path(path: str) -> FieldPath:
    """Compile ``path``; a malformed path is a ConfigError naming it."""
    steps = _parse(path)
    if all(not fan_out for _, fan_out in steps):
        names = [name for name, _ in steps]

        def simple(obj: Mapping[str, Any]) -> tuple[str, ...]:
            value: Any = obj
            for name in names:
                # A parsed object's dicts are dicts: the Mapping check (an ABC's, slow) is for
                # the other mappings a caller may hand.
                if type(value) is not dict and not isinstance(value, Mapping):
                    return ()
                value = value.get(name)
            if type(value) is str:
                return (value,)
            text = stringify(value)
            return () if text is None else (text,)

        return simple

    def fanning(obj: Mapping[str, Any]) -> tuple[str, ...]:
        current: list[Any] = [obj]
        for name, fan_out in steps:
            nxt: list[Any] = []
            for value in current:
                if isinstance(value, Mapping):
                    child = value.get(name)
                    if fan_out:
                        if isinstance(child, list):
                            nxt.extend(child)
                    elif child is not None:
                        nxt.append(child)
            current = nxt
        out: list[str] = []
        for value in current:
            text = stringify(value)
            if text is not None and text not in out:
                out.append(text)
        return tuple(out)

    return fanning
