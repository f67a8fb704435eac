"""The protobuf cacheproxy writes — a ``metav1.Status`` for a client that accepts nothing else —
and the one field it reads: an object's resourceVersion, from a write's protobuf answer that
passed through.

Typed client-go clients ask ``Accept: application/vnd.kubernetes.protobuf, application/json`` and
get JSON, which they read as well. A client that accepts only protobuf cannot be answered (the
cache holds JSON): it gets the API server's 406 for a kind it cannot encode, and that Status, like
every error to such a client, is written as the API server writes it — in protobuf, inside the
``k8s\\x00`` envelope (``runtime.Unknown``), each field as k8s.io/apimachinery's generated
marshalling writes it (strings and integers of value types always, pointers only when set).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cacheproxy.kube.protoobjects import read_fields

__all__ = ["PROTOBUF", "accepts_only_protobuf", "object_resource_version", "status_protobuf"]

PROTOBUF = "application/vnd.kubernetes.protobuf"
_MAGIC = b"k8s\x00"
_JSON_MEDIA = ("application/json", "application/*", "*/*", "application/json-seq")


def accepts_only_protobuf(accept: str) -> bool:
    """Whether ``accept`` names protobuf (``;stream=watch`` too) and nothing JSON can answer."""
    protobuf = False
    for clause in accept.split(","):
        media = clause.split(";")[0].strip().lower()
        if media in _JSON_MEDIA:
            return False
        protobuf = protobuf or media == PROTOBUF
    return protobuf


def _varint(value: int) -> bytes:
    out = bytearray()
    value &= (1 << 64) - 1  # int32 fields: negative values as ten bytes, as protobuf does
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _bytes(number: int, value: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(value)) + value


def _string(number: int, value: Any) -> bytes:
    return _bytes(number, str(value or "").encode())


def _int(number: int, value: Any) -> bytes:
    return _varint(number << 3) + _varint(int(value or 0))


def _list_meta(meta: Mapping[str, Any]) -> bytes:
    out = (
        _string(1, meta.get("selfLink"))
        + _string(2, meta.get("resourceVersion"))
        + _string(3, meta.get("continue"))
    )
    if meta.get("remainingItemCount") is not None:
        out += _int(4, meta["remainingItemCount"])
    return out


def _details(details: Mapping[str, Any]) -> bytes:
    out = _string(1, details.get("name")) + _string(2, details.get("group"))
    out += _string(3, details.get("kind"))
    for cause in details.get("causes") or ():
        body = _string(1, cause.get("reason")) + _string(2, cause.get("message"))
        out += _bytes(4, body + _string(3, cause.get("field")))
    return out + _int(5, details.get("retryAfterSeconds")) + _string(6, details.get("uid"))


def status_protobuf(status: Mapping[str, Any]) -> bytes:
    """``status`` (a ``metav1.Status`` as JSON) as the API server writes it in protobuf."""
    body = _bytes(1, _list_meta(status.get("metadata") or {}))
    body += _string(2, status.get("status")) + _string(3, status.get("message"))
    body += _string(4, status.get("reason"))
    if "details" in status:
        body += _bytes(5, _details(status["details"] or {}))
    body += _int(6, status.get("code"))
    type_meta = _string(1, status.get("apiVersion", "v1")) + _string(
        2, status.get("kind", "Status")
    )
    unknown = _bytes(1, type_meta) + _bytes(2, body) + _string(3, "") + _string(4, "")
    return _MAGIC + unknown


def object_resource_version(body: bytes) -> str | None:
    """``metadata.resourceVersion`` of an object encoded in protobuf (the ``k8s\\x00``
    envelope), or None when ``body`` is not one: the envelope's ``raw`` (field 2) holds the
    object, whose field 1 is its ``ObjectMeta`` (every Kubernetes kind's), whose field 6 is the
    resourceVersion."""
    if not body.startswith(_MAGIC):
        return None
    try:
        raw = _field(memoryview(body)[len(_MAGIC) :], 2)
        meta = _field(raw, 1) if raw is not None else None
        rv = _field(meta, 6) if meta is not None else None
    except (IndexError, ValueError):
        return None
    return bytes(rv).decode() if rv is not None else None


def _field(message: memoryview, number: int) -> memoryview | None:
    """The last length-delimited field ``number`` of ``message`` (None: absent)."""
    found = None
    for at, wire, value in read_fields(message):
        if at == number and wire == 2:
            found = value
    return found
