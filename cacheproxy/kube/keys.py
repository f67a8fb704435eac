"""Object keys: ``namespace/name`` for namespaced objects, ``name`` for cluster-scoped ones.

Keys sort in the order the API server lists (etcd key order within one resource), which is the
order of pages and of the synthetic ADDED events of a watch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["object_key", "object_namespace_name", "split_key"]


def object_key(namespace: str | None, name: str) -> str:
    """The key of an object: ``namespace/name``, or ``name`` without a namespace."""
    return f"{namespace}/{name}" if namespace else name


def split_key(key: str) -> tuple[str, str]:
    """``(namespace, name)``; namespace "" for cluster-scoped keys."""
    namespace, sep, name = key.partition("/")
    return (namespace, name) if sep else ("", namespace)


def object_namespace_name(obj: Mapping[str, Any]) -> tuple[str, str]:
    """``(namespace, name)`` from an object's metadata; "" for what it does not say."""
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")
