"""Watch events on the wire: one JSON object per line, as the API server writes them.

``{"type":"ADDED","object":{…}}``; a BOOKMARK's object is the watched kind's *empty* object with
only ``metadata.resourceVersion`` (and, ending a watch-list's initial events, the
``k8s.io/initial-events-end`` annotation, and in 1.32 and 1.33 the list's blueprint).
"""

from __future__ import annotations

import base64

import orjson

from cacheproxy.kube.partial import partial_object_metadata
from cacheproxy.kube.resources import BUILTIN_RESOURCES, ResourceType

__all__ = [
    "EVENT_HEADS",
    "EVENT_TAIL",
    "INITIAL_EVENTS_END",
    "INITIAL_EVENTS_LIST_BLUEPRINT",
    "bookmark_line",
    "event_line",
    "list_blueprint",
]

INITIAL_EVENTS_END = "k8s.io/initial-events-end"
INITIAL_EVENTS_LIST_BLUEPRINT = "kubernetes.io/initial-events-list-blueprint"


EVENT_HEADS: dict[str, bytes] = {
    event_type: b'{"type":"%s","object":' % event_type.encode()
    for event_type in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR")
}
"""An event line up to its object, by type: a line is the head, the object's bytes (written
apart, never copied into the line: a stored entry's ``prefix`` and ``body``), :data:`EVENT_TAIL`."""
EVENT_TAIL = b"}\n"


def event_line(event_type: str, obj: bytes) -> bytes:
    """One event line (newline-terminated) around an already encoded object."""
    return b"".join((EVENT_HEADS[event_type], obj, EVENT_TAIL))


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


def list_blueprint(rtype: ResourceType, metadata: str | None = None) -> bytes:
    """The empty list of ``rtype`` as kube-apiserver 1.32/1.33 encode it in JSON for the
    initial-events-end bookmark (``watchListTransformer``): typed lists with their zero fields,
    custom resources' as unstructured (sorted keys, no metadata), and for a metadata-only watch
    a ``PartialObjectMetadataList`` of ``metadata``, the apiVersion asked. Newline-terminated,
    as Go's JSON encoder writes it."""
    if metadata is not None:
        kind, api_version = "PartialObjectMetadataList", metadata
    elif rtype in _TYPED:
        kind, api_version = rtype.list_kind, rtype.api_version
    else:
        return (
            orjson.dumps({"apiVersion": rtype.api_version, "items": [], "kind": rtype.list_kind})
            + b"\n"
        )
    empty: dict[str, object] = {
        "kind": kind,
        "apiVersion": api_version,
        "metadata": {},
        "items": None,
    }
    return orjson.dumps(empty) + b"\n"


def _end_annotations(rtype: ResourceType, metadata: str | None, blueprint: bool) -> dict[str, str]:
    annotations = {INITIAL_EVENTS_END: "true"}
    if blueprint:
        encoded = base64.b64encode(list_blueprint(rtype, metadata)).decode("ascii")
        annotations[INITIAL_EVENTS_LIST_BLUEPRINT] = encoded
    return annotations


def bookmark_line(
    rtype: ResourceType,
    rv: int,
    *,
    initial_events_end: bool = False,
    blueprint: bool = False,
    metadata: str | None = None,
    zero_time: bool = True,
) -> bytes:
    """A BOOKMARK at ``rv``; for a metadata-only watch (``metadata``: the apiVersion asked,
    ``meta.k8s.io/v1``) its object is a ``PartialObjectMetadata``, as kube-apiserver transforms
    every event's object of such a watch, bookmarks included. ``initial_events_end``: the
    bookmark ending a watch-list's initial events, with the list's blueprint when ``blueprint``
    (as 1.32 and 1.33 send it: :attr:`KubeVersion.sends_list_blueprint`). ``zero_time``: the
    object's zero ``creationTimestamp`` is written as ``null`` (up to 1.32; 1.36 omits it,
    :attr:`KubeVersion.writes_zero_times`)."""
    meta: dict[str, object] = {"resourceVersion": str(rv)}
    if metadata is not None:
        if initial_events_end:
            meta["annotations"] = _end_annotations(rtype, metadata, blueprint)
        return event_line(
            "BOOKMARK", orjson.dumps(partial_object_metadata({"metadata": meta}, metadata))
        )
    if rtype in _TYPED and zero_time:  # custom resources are unstructured: only what is set
        meta["creationTimestamp"] = None
    if initial_events_end:
        meta["annotations"] = _end_annotations(rtype, None, blueprint)
    obj: dict[str, object] = {"kind": rtype.kind, "apiVersion": rtype.api_version, "metadata": meta}
    if rtype in _TYPED:
        obj.update(_ZERO_FIELDS.get((rtype.group, rtype.kind), {}))
    return event_line("BOOKMARK", orjson.dumps(obj))
