"""What the simulator's storage holds and tells its watchers: object versions and writes.

- :class:`StoredObject`: one version of an object, kept as its dict and its compact JSON (built
  once per write, so lists and watches only join bytes);
- :class:`Event`: one write (ADDED, MODIFIED, DELETED at its RV, with the version it replaced);
- :class:`Progress`: etcd's progress notification (the storage reached an RV, nothing changed);
- :class:`WatchSink`: what the storage needs of a watcher.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cacheproxy.kube.fields import FieldSelector, object_fields
from cacheproxy.kube.labels import LabelSelector
from cacheproxy.kube.resources import ResourceType

__all__ = ["BUILTIN_GROUPS", "Event", "Progress", "StoredObject", "WatchSink"]


@dataclass(slots=True)
class StoredObject:
    """One stored object version. ``body`` is its JSON without ``kind``/``apiVersion`` (the form
    typed list items take); ``full`` is the whole object (GET, watch events)."""

    rtype: ResourceType
    key: str
    obj: dict[str, Any]
    rv: int
    body: bytes
    _fields: dict[str, str] | None = None

    @property
    def full(self) -> bytes:
        head = b'{"kind":"%s","apiVersion":"%s"' % (
            self.rtype.kind.encode(),
            self.rtype.api_version.encode(),
        )
        return head + (b"," + self.body[1:] if len(self.body) > 2 else b"}")

    @property
    def list_item(self) -> bytes:
        """Typed built-in lists omit ``kind``/``apiVersion`` per item; custom resources keep them."""
        return self.full if self.rtype.group not in BUILTIN_GROUPS else self.body

    @property
    def labels(self) -> dict[str, str]:
        labels: dict[str, str] = self.obj.get("metadata", {}).get("labels") or {}
        return labels

    @property
    def fields(self) -> dict[str, str]:
        if self._fields is None:
            self._fields = object_fields(self.rtype, self.obj)
        return self._fields

    def matches(self, labels: LabelSelector, fields: FieldSelector) -> bool:
        return (labels.empty or labels.matches(self.labels)) and (
            fields.empty or fields.matches(self.fields)
        )


BUILTIN_GROUPS = frozenset(
    {
        "",
        "apps",
        "batch",
        "networking.k8s.io",
        "apiextensions.k8s.io",
        "policy",
        "rbac.authorization.k8s.io",
    }
)


@dataclass(frozen=True, slots=True)
class Event:
    """One write: ``type`` ADDED/MODIFIED/DELETED at ``rv``; ``prev`` the version it replaced."""

    rv: int
    type: str
    obj: StoredObject
    prev: StoredObject | None


@dataclass(frozen=True, slots=True)
class Progress:
    """etcd's progress notification: the storage has reached ``rv`` (no object changed)."""

    rv: int


class WatchSink:
    """What the store needs of a watcher: its filter and a non-blocking ``offer``."""

    rtype: ResourceType
    namespace: str | None

    def offer(self, event: Event | Progress) -> None:  # pragma: no cover - interface
        raise NotImplementedError
