"""The naive baseline: a dict of parsed dicts with the same indexes as the Store.

What a straightforward cache would keep (and what docs/design.md §3 argues against): each object as
``orjson.loads`` made it, ``metadata.managedFields`` dropped as the Store's default transform
does, indexed by namespace, labels (key → value → keys) and ``spec.nodeName``. Indexes are
updated only where an object's values changed, as the Store does, so the comparison is about
how objects are kept, not about index bookkeeping.
"""

from __future__ import annotations

from typing import Any

__all__ = ["NaiveDictCache"]


class NaiveDictCache:
    """Parsed objects by ``namespace/name``, with namespace, label and node indexes."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.by_namespace: dict[str, set[str]] = {}
        self.by_label: dict[str, dict[str, set[str]]] = {}
        self.by_node: dict[str, set[str]] = {}

    def __len__(self) -> int:
        return len(self.objects)

    def apply(self, event_type: str, obj: dict[str, Any]) -> None:
        """Apply one watch event whose freshly parsed object this cache now owns."""
        meta: dict[str, Any] = obj["metadata"]
        meta.pop("managedFields", None)
        namespace: str = meta.get("namespace") or ""
        key = f"{namespace}/{meta['name']}" if namespace else meta["name"]
        if event_type == "DELETED":
            prev = self.objects.pop(key, None)
            if prev is not None:
                _discard(self.by_namespace, namespace, key)
                self._reindex(key, prev, None)
            return
        prev = self.objects.get(key)
        self.objects[key] = obj
        if prev is None:
            self.by_namespace.setdefault(namespace, set()).add(key)
        self._reindex(key, prev, obj)

    def _reindex(self, key: str, prev: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        old_labels: dict[str, str] = (prev or {}).get("metadata", {}).get("labels") or {}
        new_labels: dict[str, str] = (new or {}).get("metadata", {}).get("labels") or {}
        if old_labels != new_labels:
            for k, v in old_labels.items():
                by_value = self.by_label.get(k)
                if by_value is not None:
                    _discard(by_value, v, key)
                    if not by_value:
                        del self.by_label[k]
            for k, v in new_labels.items():
                self.by_label.setdefault(k, {}).setdefault(v, set()).add(key)
        old_node = (prev or {}).get("spec", {}).get("nodeName")
        new_node = (new or {}).get("spec", {}).get("nodeName")
        if old_node != new_node:
            if old_node:
                _discard(self.by_node, old_node, key)
            if new_node:
                self.by_node.setdefault(new_node, set()).add(key)


def _discard(index: dict[str, set[str]], value: str, key: str) -> None:
    keys = index.get(value)
    if keys is not None:
        keys.discard(key)
        if not keys:
            del index[value]
