"""Object keys: ``namespace/name`` for namespaced objects, ``name`` for cluster-scoped ones.

Keys sort in the order the API server lists (etcd key order within one resource), which is the
order of pages and of the synthetic ADDED events of a watch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["KeyDigest", "key_digest", "object_key", "object_namespace_name", "split_key"]


@dataclass(frozen=True, slots=True)
class KeyDigest:
    """A set of keys in constant memory: how many, and the XOR of their hashes. Two sets of
    distinct keys with equal digests are the same set but by a 2**-64 chance (Python's string
    hash is keyed per process: both sides must be digested in the same process, and nobody can
    choose keys that collide)."""

    count: int = 0
    xor: int = 0


def key_digest(keys: Iterable[str]) -> KeyDigest:
    """The :class:`KeyDigest` of distinct ``keys``."""
    count = xor = 0
    for key in keys:
        count += 1
        xor ^= hash(key)
    return KeyDigest(count, xor)


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
