"""Indexes on a path no cached object has: a typo (``spec.nodName``) makes an index silently
empty, and every query on it answers nothing.

:func:`empty_indexes` finds them among objects (a sample is enough: a path the first hundreds of
objects lack is almost surely mistyped), with the closest paths the objects do have as
suggestions. The daemon warns once after each resource's first sync; ``cacheproxy check-config
--live`` asks upstream and reports them before anything is deployed.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cacheproxy.informer import InformerEvent, Relisted, SharedInformer
from cacheproxy.kube.fieldpath import compile_field_path

__all__ = ["EmptyIndex", "empty_indexes", "object_paths", "warn_of_empty_indexes"]

log = logging.getLogger("cacheproxy.daemon")

SAMPLE = 200
"""Objects looked at: enough to tell a typo from a field only some objects have."""


@dataclass(frozen=True, slots=True)
class EmptyIndex:
    """An index path no sampled object has a value at, and the paths they have close to it."""

    path: str
    suggestions: tuple[str, ...]

    def describe(self, resource: str) -> str:
        hint = f"; did you mean {' or '.join(self.suggestions)}?" if self.suggestions else ""
        return (
            f"{resource}: no cached object has a value at the index path {self.path}, so every "
            f"query on it answers nothing{hint}"
        )


def empty_indexes(objects: Iterable[Mapping[str, Any]], paths: Sequence[str]) -> list[EmptyIndex]:
    """The ``paths`` none of (the first :data:`SAMPLE` of) ``objects`` has a value at; nothing
    when there are no objects (an empty collection says nothing about its paths)."""
    sample = [obj for _, obj in zip(range(SAMPLE), objects, strict=False)]
    if not sample or not paths:
        return []
    extractors = {path: compile_field_path(path) for path in paths}
    missing = [path for path, extract in extractors.items() if not any(extract(o) for o in sample)]
    if not missing:
        return []
    known = sorted({p for obj in sample for p in object_paths(obj)})
    return [
        EmptyIndex(path, tuple(difflib.get_close_matches(path, known, n=2, cutoff=0.75)))
        for path in missing
    ]


def object_paths(obj: Mapping[str, Any], prefix: str = "") -> Iterator[str]:
    """Every path to a scalar (or a list of scalars) of ``obj``, in the index syntax: lists of
    objects as ``name[*]`` (``spec.containers[*].image``)."""
    for key, value in obj.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, Mapping):
            yield from object_paths(value, path)
        elif isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
            for item in value:
                yield from object_paths(item, f"{path}[*]")
        else:
            yield path


def warn_of_empty_indexes(name: str, informer: SharedInformer, paths: Sequence[str]) -> None:
    """Once the first sync is in: a warning per index no synced object has a value for (a
    mistyped path makes every query on it answer nothing)."""

    checked = False

    def check(event: InformerEvent) -> None:
        nonlocal checked
        if checked or not isinstance(event, Relisted):
            return
        checked = True
        objects = (entry.object() for entry in informer.store.entries())
        for found in empty_indexes(objects, paths):
            log.warning("%s", found.describe(name))

    informer.subscribe(check)
