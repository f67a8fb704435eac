"""Deep ``sys.getsizeof``: what a structure's objects say they cost, each counted once.

A cross-check of the tracemalloc figures, not a replacement: ``getsizeof`` reports an object's
nominal size, so it misses spare capacity (``orjson.dumps`` output, list growth), allocator
rounding and anything reached only from C. Functions, classes and modules are not followed
(an index's compiled field path is code, not data).
"""

from __future__ import annotations

import sys
import types
from collections import deque
from collections.abc import Iterator

__all__ = ["deep_sizeof"]

_LEAVES = (str, bytes, bytearray, int, float, complex, bool, type(None), memoryview, range)
_SKIP = (
    type,
    types.ModuleType,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    types.CodeType,
)


def deep_sizeof(root: object) -> int:
    seen: set[int] = set()
    total = 0
    stack: list[object] = [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, _SKIP):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        if isinstance(obj, _LEAVES):
            continue
        stack.extend(_children(obj))
    return total


def _children(obj: object) -> Iterator[object]:
    if isinstance(obj, dict):
        yield from obj.keys()
        yield from obj.values()
        return
    if isinstance(obj, list | tuple | set | frozenset | deque):
        yield from obj
        return
    attrs = getattr(obj, "__dict__", None)
    if attrs is not None:
        yield attrs
    for cls in type(obj).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name in ("__dict__", "__weakref__"):
                continue
            try:
                yield getattr(obj, name)
            except AttributeError:
                continue
