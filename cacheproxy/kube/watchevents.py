"""Watch events on the wire: one JSON object per line, as the API server writes them.

``{"type":"ADDED","object":{…}}``; a BOOKMARK's object is the watched kind's *empty* object with
only ``metadata.resourceVersion`` (and, ending a watch-list's initial events, the
``k8s.io/initial-events-end`` annotation).
"""

from __future__ import annotations

import orjson

from cacheproxy.kube.partial import partial_object_metadata
from cacheproxy.kube.resources import BUILTIN_RESOURCES, ResourceType

__all__ = ["INITIAL_EVENTS_END", "bookmark_line", "event_line"]

INITIAL_EVENTS_END = "k8s.io/initial-events-end"


def event_line(event_type: str, obj: bytes) -> bytes:
    """One event line (newline-terminated) around an already encoded object."""
    return b'{"type":"%s","object":%s}\n' % (event_type.encode(), obj)


_TEMPLATE = {"metadata": {"creationTimestamp": None}, "spec": {"containers": None}}
# A bookmark's object is the watched kind's empty object (``newFunc()``) with only its RV set. For
# typed built-ins Go's encoding/json still writes the fields without ``omitempty``: these are
# those zero values (Pod checked against watch_bookmarks_ns1_app3.txt; the others read from the
# k8s.io/api json tags). Kinds not listed have none beyond ``metadata.creationTimestamp``.
_ZERO_FIELDS: dict[tuple[str, str], dict[str, object]] = {
    ("", "Pod"): {"spec": {"containers": None}, "status": {}},
    ("", "Namespace"): {"spec": {}, "status": {}},
    ("", "Service"): {"spec": {}, "status": {"loadBalancer": {}}},
    ("", "PersistentVolumeClaim"): {"spec": {"resources": {}}, "status": {}},
    ("", "PersistentVolume"): {"spec": {}, "status": {}},
    ("", "Event"): {
        "involvedObject": {},
        "source": {},
        "firstTimestamp": None,
        "lastTimestamp": None,
        "eventTime": None,
        "reportingComponent": "",
        "reportingInstance": "",
    },
    ("apps", "Deployment"): {
        "spec": {"selector": None, "template": _TEMPLATE, "strategy": {}},
        "status": {},
    },
    ("apps", "ReplicaSet"): {
        "spec": {"selector": None, "template": _TEMPLATE},
        "status": {"replicas": 0},
    },
    ("apps", "DaemonSet"): {
        "spec": {"selector": None, "template": _TEMPLATE, "updateStrategy": {}},
        "status": {
            "currentNumberScheduled": 0,
            "numberMisscheduled": 0,
            "desiredNumberScheduled": 0,
            "numberReady": 0,
        },
    },
    ("batch", "Job"): {"spec": {"template": _TEMPLATE}, "status": {}},
    ("batch", "CronJob"): {
        "spec": {
            "schedule": "",
            "jobTemplate": {
                "metadata": {"creationTimestamp": None},
                "spec": {"template": _TEMPLATE},
            },
        },
        "status": {},
    },
    ("networking.k8s.io", "Ingress"): {"spec": {}, "status": {"loadBalancer": {}}},
}
_TYPED = frozenset(BUILTIN_RESOURCES)


def bookmark_line(
    rtype: ResourceType, rv: int, *, initial_events_end: bool = False, metadata: str | None = None
) -> bytes:
    """A BOOKMARK at ``rv``; for a metadata-only watch (``metadata``: the apiVersion asked,
    ``meta.k8s.io/v1``) its object is a ``PartialObjectMetadata``, as kube-apiserver transforms
    every event's object of such a watch, bookmarks included."""
    meta: dict[str, object] = {"resourceVersion": str(rv)}
    if metadata is not None:
        if initial_events_end:
            meta["annotations"] = {INITIAL_EVENTS_END: "true"}
        return event_line(
            "BOOKMARK", orjson.dumps(partial_object_metadata({"metadata": meta}, metadata))
        )
    if rtype in _TYPED:  # custom resources are unstructured: nothing but what is set
        meta["creationTimestamp"] = None
    if initial_events_end:
        meta["annotations"] = {INITIAL_EVENTS_END: "true"}
    obj: dict[str, object] = {"kind": rtype.kind, "apiVersion": rtype.api_version, "metadata": meta}
    if rtype in _TYPED:
        obj.update(_ZERO_FIELDS.get((rtype.group, rtype.kind), {}))
    return event_line("BOOKMARK", orjson.dumps(obj))
