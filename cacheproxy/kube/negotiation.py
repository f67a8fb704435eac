"""The form of a read's answer, from the ``Accept`` header: kube-apiserver's content negotiation
for the forms its clients of get, list and watch ask for.

- plain JSON (a clause without ``as=``): the object or list as stored;
- ``as=Table;g=meta.k8s.io;v=v1`` (or ``v1beta1``): a Table (``kubectl get``, :mod:`.table`);
- ``as=PartialObjectMetadataList;g=meta.k8s.io;v=v1`` on lists, ``as=PartialObjectMetadata`` on
  get and watch (client-go's metadata client, controller-runtime): metadata only
  (:mod:`.partial`).

Clauses are taken in order and the first usable one wins; a clause naming a form or a media type
not served (protobuf, YAML, a list form for a single object) is skipped. None usable is a 406,
which each server words itself. A JSON or metadata clause may also ask for objects without
their managedFields (``;drop=metadata.managedFields``, KEP-5958).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from cacheproxy.kube.partial import DROP_MANAGED_FIELDS, METADATA_API_VERSIONS

__all__ = ["AS_STORED", "AnswerAs", "negotiate_answer"]

_JSON_MEDIA = ("application/json", "application/*", "*/*", "application/json-seq")


@dataclass(frozen=True, slots=True)
class AnswerAs:
    """A negotiated form: ``object`` (as stored), ``table`` or ``metadata``, and for the last two
    their ``meta.k8s.io`` version."""

    kind: Literal["object", "table", "metadata"] = "object"
    version: str = ""
    drop_managed_fields: bool = False
    """The clause asked for objects without ``metadata.managedFields``
    (``;drop=metadata.managedFields``, KEP-5958)."""

    @property
    def api_version(self) -> str:
        """``meta.k8s.io/<version>``: the apiVersion a Table or PartialObjectMetadata carries."""
        return f"meta.k8s.io/{self.version}"


AS_STORED = AnswerAs()


def negotiate_answer(accept: str, *, verb: str | None) -> AnswerAs | None:
    """The form ``accept`` asks for on a ``verb`` (get, list or watch; None: Tables and plain
    JSON only), or None when no clause is usable (a 406)."""
    if not accept:
        return AS_STORED
    metadata_kind = (
        None
        if verb is None
        else "PartialObjectMetadataList"
        if verb == "list"
        else "PartialObjectMetadata"
    )
    for clause in accept.split(","):
        media, *raw = (p.strip() for p in clause.split(";"))
        if media.lower() not in _JSON_MEDIA:
            continue
        params: dict[str, str] = {}
        for param in raw:
            key, _, value = param.partition("=")
            params[key.strip().lower()] = value.strip()
        as_kind = params.get("as")
        drop = params.get("drop") == DROP_MANAGED_FIELDS
        if as_kind is None:
            return AnswerAs(drop_managed_fields=True) if drop else AS_STORED
        if params.get("g") != "meta.k8s.io" or params.get("v") not in METADATA_API_VERSIONS:
            continue
        if as_kind == "Table":
            return AnswerAs("table", params["v"])
        if as_kind == metadata_kind:
            return AnswerAs("metadata", params["v"], drop)
    return None
