"""The forms a read is answered in: the object as stored, its ``PartialObjectMetadata``, or a
``meta.k8s.io`` Table, as the first usable clause of the client's ``Accept`` asks.

kube-apiserver's content negotiation, for the forms a client of lists and watches asks for:
``kubectl get`` asks for a Table (``as=Table;g=meta.k8s.io;v=v1``, then ``v1beta1``, then plain
JSON); client-go's metadata client for ``PartialObjectMetadata`` (``…List`` for lists). A clause
naming a form or a media type the simulator does not serve (protobuf, YAML) is skipped; when none
is usable the answer is the API server's 406. Tables use the API server's printers
(:mod:`cacheproxy.kube.table`; the default Table for custom resources), ages relative to now.

Every JSON answer is negotiated (406 naming kube-apiserver's list of what it serves), indented
for people, and gzip-compressed above 128 KiB when the client accepts it (:data:`JSON_ANSWERS`).
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

import orjson

from cacheproxy.kube import status
from cacheproxy.kube.negotiation import negotiate_answer
from cacheproxy.kube.partial import partial_object_metadata
from cacheproxy.kube.resources import ResourceType
from cacheproxy.kube.table import WatchTables, printer_for, table
from cacheproxy.kube.versions import NEWEST, KubeVersion
from cacheproxy.kube.watchevents import INITIAL_EVENTS_LIST_BLUEPRINT, list_blueprint
from cacheproxy.serving import JsonAnswers, Message, Send
from cacheproxy.sim import statuses
from cacheproxy.sim.api import ListResult

__all__ = [
    "GZIP_THRESHOLD",
    "JSON_ANSWERS",
    "PLAIN",
    "AnswerForm",
    "list_body",
    "negotiate",
    "object_body",
    "watch_send",
]

GZIP_THRESHOLD = 128 * 1024  # the API server compresses responses above 128 KiB
JSON_ANSWERS = JsonAnswers(
    representations=statuses.REPRESENTATIONS, negotiate=True, compress_above=GZIP_THRESHOLD
)
"""How the simulator answers in JSON."""

_INCLUDE = ("Metadata", "Object", "None")


@dataclass(frozen=True, slots=True)
class AnswerForm:
    """How to answer: ``object`` (as stored), ``metadata`` or ``table``, in ``meta.k8s.io/<version>``;
    ``include`` is a Table's ``includeObject``."""

    kind: Literal["object", "metadata", "table"] = "object"
    version: str = "v1"
    include: str = "Metadata"
    kube: KubeVersion = NEWEST
    """The kube-apiserver version whose Tables a Table answer has (the simulator's own)."""

    @property
    def api_version(self) -> str:
        return f"meta.k8s.io/{self.version}"


PLAIN = AnswerForm()


def negotiate(
    accept: str, query: Mapping[str, Sequence[str]], *, verb: str, kube: KubeVersion = NEWEST
) -> AnswerForm:
    """The form of a ``verb`` (get, list, watch) answer, or a 406 / 400 as the API server gives;
    a Table as ``kube`` prints it."""
    answer = negotiate_answer(accept, verb=verb)
    if answer is None:
        raise statuses.not_acceptable()
    if answer.kind == "table":
        return AnswerForm("table", answer.version, _include_object(query), kube)
    if answer.kind == "metadata":
        return AnswerForm("metadata", answer.version)
    return PLAIN


def _include_object(query: Mapping[str, Sequence[str]]) -> str:
    value = (query.get("includeObject") or [""])[0]
    if not value:
        return "Metadata"
    if value not in _INCLUDE:
        raise status.bad_request(
            "Unable to convert to Table as requested: includeObject: Invalid value: "
            f"\"{value}\": must be 'Metadata', 'Object', 'None', or empty"
        )
    return value


def list_body(result: ListResult, form: AnswerForm) -> bytes:
    if form.kind == "metadata":
        return result.encode_metadata(form.api_version)
    if form.kind == "table":
        return orjson.dumps(
            table(
                printer_for(result.rtype.group, result.rtype.resource, form.kube),
                [orjson.loads(o.full) for o in result.items],
                now=datetime.now(UTC),
                version=form.version,
                include=form.include,
                resource_version=str(result.resource_version),
                continue_token=result.continue_token,
                remaining=result.remaining,
            )
        )
    return result.encode()


def object_body(rtype: ResourceType, full: bytes, form: AnswerForm) -> bytes:
    if form.kind == "object":
        return full
    obj = orjson.loads(full)
    if form.kind == "metadata":
        return orjson.dumps(partial_object_metadata(obj, form.api_version))
    return orjson.dumps(
        table(
            printer_for(rtype.group, rtype.resource, form.kube),
            [obj],
            now=datetime.now(UTC),
            version=form.version,
            include=form.include,
            resource_version=str(obj["metadata"].get("resourceVersion", "")),
        )
    )


def watch_send(send: Send, rtype: ResourceType, form: AnswerForm) -> Send:
    """``send`` for a watch answered in ``form``: each event's object rewritten (a Status or a
    line that does not parse, as an injected fault, passes as is)."""
    if form.kind == "object":
        return send
    if form.kind == "table":
        tables = WatchTables(
            printer_for(rtype.group, rtype.resource, form.kube),
            version=form.version,
            include=form.include,
        )

        def convert(body: bytes) -> bytes:
            with contextlib.suppress(orjson.JSONDecodeError, KeyError, TypeError):
                return tables.convert(body)
            return body

    else:
        blueprint = base64.b64encode(list_blueprint(rtype, form.api_version)).decode("ascii")

        def convert(body: bytes) -> bytes:
            lines = []
            for line in body.split(b"\n"):
                with contextlib.suppress(orjson.JSONDecodeError, KeyError, TypeError):
                    event = orjson.loads(line)
                    if event["object"].get("kind") != "Status":
                        obj = partial_object_metadata(event["object"], form.api_version)
                        annotations = obj["metadata"].get("annotations") or {}
                        if INITIAL_EVENTS_LIST_BLUEPRINT in annotations:
                            # The blueprint is of the list the watch is answered as.
                            annotations[INITIAL_EVENTS_LIST_BLUEPRINT] = blueprint
                        event["object"] = obj
                        line = orjson.dumps(event)
                lines.append(line)
            return b"\n".join(lines)

    async def send_converted(message: Message) -> None:
        body = message.get("body", b"")
        if message["type"] == "http.response.body" and body:
            message = {**message, "body": convert(body)}
        await send(message)

    return send_converted
