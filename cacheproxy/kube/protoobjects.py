"""Reading a few kinds' protobuf encoding back into their JSON form.

Typed client-go clients send their bodies in protobuf (``application/vnd.kubernetes.protobuf``)
since about 1.32: ``kubectl create configmap``, ``create secret``, ``create namespace``,
``create serviceaccount`` among them. The API server decodes any built-in kind; the simulator
decodes the kinds below with :func:`decode_object` (the kinds' ``generated.proto`` field numbers,
ObjectMeta's as in ``apimachinery/pkg/apis/meta/v1``) and refuses the others with a 415.

The envelope: ``k8s\\x00`` then a ``runtime.Unknown`` — ``typeMeta`` (1: apiVersion, kind),
``raw`` (2: the object's own message).
"""

from __future__ import annotations

import base64
import datetime
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

__all__ = ["DECODED_KINDS", "decode_object", "read_fields"]

_MAGIC = b"k8s\x00"

Reader = Callable[[memoryview], Any]
Schema = Mapping[int, tuple[str, str, Any]]
"""Field number → (JSON name, how it repeats: "one", "list" or "map", how a value reads)."""


def _text(value: memoryview) -> str:
    return bytes(value).decode()


def _base64(value: memoryview) -> str:
    return base64.b64encode(bytes(value)).decode()


def _time(value: memoryview) -> str | None:
    fields = dict(_scalars(value))
    if not fields.get(1) and not fields.get(2):
        return None  # the zero time: JSON null, left out
    moment = datetime.datetime.fromtimestamp(fields.get(1, 0), datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _message(schema: Schema) -> Reader:
    return lambda value: _decode(value, schema)


_BOOL, _INT = "bool", "int"

_OWNER_REFERENCE: Final[Schema] = {
    1: ("kind", "one", _text),
    3: ("name", "one", _text),
    4: ("uid", "one", _text),
    5: ("apiVersion", "one", _text),
    6: ("controller", "one", _BOOL),
    7: ("blockOwnerDeletion", "one", _BOOL),
}
_OBJECT_META: Final[Schema] = {
    1: ("name", "one", _text),
    2: ("generateName", "one", _text),
    3: ("namespace", "one", _text),
    5: ("uid", "one", _text),
    6: ("resourceVersion", "one", _text),
    7: ("generation", "one", _INT),
    8: ("creationTimestamp", "one", _time),
    11: ("labels", "map", _text),
    12: ("annotations", "map", _text),
    13: ("ownerReferences", "list", _message(_OWNER_REFERENCE)),
    14: ("finalizers", "list", _text),
}
_OBJECT_REFERENCE: Final[Schema] = {
    1: ("kind", "one", _text),
    2: ("namespace", "one", _text),
    3: ("name", "one", _text),
    4: ("uid", "one", _text),
    5: ("apiVersion", "one", _text),
    6: ("resourceVersion", "one", _text),
    7: ("fieldPath", "one", _text),
}

_META_FIELD: Final = ("metadata", "one", _message(_OBJECT_META))

KINDS: Final[Mapping[tuple[str, str], Schema]] = {
    ("v1", "ConfigMap"): {
        1: _META_FIELD,
        2: ("data", "map", _text),
        3: ("binaryData", "map", _base64),
        4: ("immutable", "one", _BOOL),
    },
    ("v1", "Secret"): {
        1: _META_FIELD,
        2: ("data", "map", _base64),
        3: ("type", "one", _text),
        4: ("stringData", "map", _text),
        5: ("immutable", "one", _BOOL),
    },
    ("v1", "Namespace"): {
        1: _META_FIELD,
        2: ("spec", "one", _message({1: ("finalizers", "list", _text)})),
        3: ("status", "one", _message({1: ("phase", "one", _text)})),
    },
    ("v1", "ServiceAccount"): {
        1: _META_FIELD,
        2: ("secrets", "list", _message(_OBJECT_REFERENCE)),
        3: ("imagePullSecrets", "list", _message({1: ("name", "one", _text)})),
        4: ("automountServiceAccountToken", "one", _BOOL),
    },
}
DECODED_KINDS: Final = frozenset(kind for _, kind in KINDS)


def decode_object(body: bytes) -> dict[str, Any] | None:
    """The JSON form of a protobuf-encoded object of one of :data:`KINDS`; None for another kind
    or for bytes that are not such an encoding."""
    if not body.startswith(_MAGIC):
        return None
    try:
        envelope = read_fields(memoryview(body)[len(_MAGIC) :])
        type_meta = raw = None
        for number, _, value in envelope:
            if number == 1:
                type_meta = {
                    n: _text(v) for n, _, v in read_fields(value) if isinstance(v, memoryview)
                }
            elif number == 2:
                raw = value
        if type_meta is None or raw is None:
            return None
        api_version, kind = type_meta.get(1, ""), type_meta.get(2, "")
        schema = KINDS.get((api_version, kind))
        if schema is None:
            return None
        return {"apiVersion": api_version, "kind": kind, **_decode(raw, schema)}
    except (IndexError, ValueError, UnicodeDecodeError):
        return None


def _decode(message: memoryview, schema: Schema) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for number, wire, value in read_fields(message):
        field = schema.get(number)
        if field is None:
            continue
        name, shape, read = field
        if read in (_BOOL, _INT):
            if wire != 0:
                raise ValueError(f"field {name}: not a varint")
            item: Any = bool(value) if read == _BOOL else value
        elif not isinstance(value, memoryview):
            raise ValueError(f"field {name}: not length-delimited")
        elif shape == "map":
            entry = {n: v for n, _, v in read_fields(value)}
            key = _text(entry.get(1, memoryview(b"")))
            out.setdefault(name, {})[key] = read(entry.get(2, memoryview(b"")))
            continue
        else:
            item = read(value)
        if shape == "list":
            out.setdefault(name, []).append(item)
        elif item is not None and item != "" and not (read == _INT and item == 0):
            # Go's generated encoders write every non-pointer field, zero values too; its JSON
            # leaves those out (omitempty). Booleans are pointers here: a false was set.
            out[name] = item
    return out


def read_fields(message: memoryview) -> Iterator[tuple[int, int, Any]]:
    """The fields of a protobuf message, in order: (field number, wire type, value) — an int
    for varints, the bytes for the others. Raises ValueError (or IndexError) on bad bytes."""
    at, end = 0, len(message)
    while at < end:
        key, at = _varint(message, at)
        wire = key & 7
        if wire == 0:
            value, at = _varint(message, at)
            yield key >> 3, wire, value
        elif wire == 2:
            size, at = _varint(message, at)
            if at + size > end:
                raise ValueError("truncated")
            yield key >> 3, wire, message[at : at + size]
            at += size
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            yield key >> 3, wire, message[at : at + size]
            at += size
        else:
            raise ValueError(f"wire type {wire}")


def _scalars(message: memoryview) -> Iterator[tuple[int, int]]:
    for number, wire, value in read_fields(message):
        if wire == 0:
            yield number, value


def _varint(data: memoryview, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")
