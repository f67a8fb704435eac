"""Field selectors: the ``fieldSelector`` grammar, the per-kind allow-lists and objects' field sets.

This module owns what the API server does with a ``fieldSelector`` query parameter, in the same
three steps, so the proxy accepts, rejects and matches exactly as the upstream would:

1. **Parsing** — ``k8s.io/apimachinery/pkg/fields/selector.go``: terms split on unescaped ``,``,
   each ``lhs OP rhs`` with ``OP`` the first of ``!=``, ``==``, ``=`` found; values unescaped.
2. **Validation and aliasing** — ``Scheme.ConvertFieldLabel``: the conversion functions each
   built-in kind registers (``pkg/apis/<group>/<version>/conversion.go``), the fallback
   ``runtime.DefaultMetaV1FieldSelectorConversion`` for built-in kinds that register none, and
   ``crConverter.ConvertFieldLabel`` for custom resources. Each has its own 400 wording.
3. **Matching** — against the object's *field set*, the strings each registry strategy's
   ``ToSelectableFields`` computes (``pkg/registry/.../strategy.go``); a field missing from the
   set reads as ``""``.

The allow-list (step 2) and the field set (step 3) are deliberately separate tables, as upstream:
pods accept ``status.podIPs`` but never put it in the field set, so ``status.podIPs=x`` matches
nothing, and ``apps/v1`` ReplicaSets put ``status.replicas`` in their field set but register no
conversion, so selecting on it is a 400 (kubernetes/kubernetes#135136).

Pure code, no I/O. Errors are raised as ``status.bad_request``.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from cacheproxy.kube import status
from cacheproxy.kube.resources import ResourceType
from cacheproxy.kube.validation import go_quote

__all__ = [
    "WATCH_CACHE_INDEXES",
    "FieldRequirement",
    "FieldSelector",
    "escape_value",
    "object_fields",
    "parse_field_selector",
    "supported_fields",
    "unescape_value",
    "validate_field_selector",
]

_OPERATORS = ("!=", "==", "=")  # checked in this order at each position (``termOperators``)


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    """One term ``field OP value``; ``==`` is stored as ``=`` (both are ``hasTerm`` upstream)."""

    field: str
    operator: str
    value: str

    def __post_init__(self) -> None:
        if self.operator not in _OPERATORS:
            raise ValueError(f"field selector operator must be =, == or !=, not {self.operator!r}")
        if self.operator == "==":
            object.__setattr__(self, "operator", "=")

    def matches(self, fields: Mapping[str, str]) -> bool:
        """``hasTerm``/``notHasTerm``: a field absent from the set is the empty string."""
        return (fields.get(self.field, "") == self.value) == (self.operator == "=")

    def __str__(self) -> str:
        return f"{self.field}{self.operator}{escape_value(self.value)}"


@dataclass(frozen=True, slots=True)
class FieldSelector:
    """A conjunction of field requirements; the empty selector matches everything.

    Requirements are kept sorted by their string form (upstream sorts the raw terms before
    building them), so ``str()`` is canonical and equal selectors compare equal.
    """

    requirements: tuple[FieldRequirement, ...] = ()

    EVERYTHING: ClassVar[FieldSelector]

    def __post_init__(self) -> None:
        object.__setattr__(self, "requirements", tuple(sorted(self.requirements, key=str)))

    @property
    def empty(self) -> bool:
        return not self.requirements

    @property
    def fields(self) -> frozenset[str]:
        """The field names the selector reads."""
        return frozenset(r.field for r in self.requirements)

    def matches(self, fields: Mapping[str, str]) -> bool:
        return all(r.matches(fields) for r in self.requirements)

    def requires_exact_match(self, field_name: str) -> str | None:
        """``RequiresExactMatch``: the value an ``=`` term pins ``field_name`` to, if any."""
        for r in self.requirements:
            if r.field == field_name and r.operator == "=":
                return r.value
        return None

    def with_field_renamed(self, old: str, new: str) -> FieldSelector:
        """The same selector with every term on ``old`` reading ``new`` instead (aliases)."""
        return FieldSelector(
            tuple(
                FieldRequirement(new, r.operator, r.value) if r.field == old else r
                for r in self.requirements
            )
        )

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


FieldSelector.EVERYTHING = FieldSelector()


# ------------------------------------------------------------------------------------------------
# Parsing (fields.ParseSelector)

_ESCAPES = {"\\": "\\\\", ",": "\\,", "=": "\\="}


def escape_value(value: str) -> str:
    """``fields.EscapeValue``: backslash-escape ``\\``, ``,`` and ``=``."""
    return "".join(_ESCAPES.get(ch, ch) for ch in value)


def unescape_value(text: str) -> str:
    """``fields.UnescapeValue``: the inverse of :func:`escape_value`.

    Any other escape, a trailing backslash, or an unescaped ``,``/``=`` is the API server's 400.
    """
    if not any(ch in _ESCAPES for ch in text):
        return text
    out: list[str] = []
    in_slash = False
    for ch in text:
        if in_slash:
            if ch not in _ESCAPES:
                raise status.bad_request(f"invalid field selector: invalid escape sequence: \\{ch}")
            out.append(ch)
            in_slash = False
        elif ch == "\\":
            in_slash = True
        elif ch in ",=":
            # Go formats the rune with %v, i.e. as its code point number.
            raise status.bad_request(
                f"invalid field selector: unescaped character in value: {ord(ch)}"
            )
        else:
            out.append(ch)
    if in_slash:
        raise status.bad_request("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def _split_terms(text: str) -> list[str]:
    """``splitTerms``: split on commas not preceded by an escaping backslash (kept in the term)."""
    if not text:
        return []
    terms: list[str] = []
    start = 0
    in_slash = False
    for i, ch in enumerate(text):
        if in_slash:
            in_slash = False
        elif ch == "\\":
            in_slash = True
        elif ch == ",":
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return terms


def _split_term(term: str) -> tuple[str, str, str] | None:
    """``splitTerm``: the first operator occurrence splits; the left side is never unescaped."""
    for i in range(len(term)):
        for op in _OPERATORS:
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op) :]
    return None


def parse_field_selector(text: str) -> FieldSelector:
    """Parse a ``fieldSelector`` as ``fields.ParseSelector`` does; ``""`` selects everything."""
    return _parse_field_selector(text) if text else FieldSelector.EVERYTHING


@functools.lru_cache(maxsize=1024)
def _parse_field_selector(text: str) -> FieldSelector:
    """Each distinct selector is parsed once (only successes are kept)."""
    requirements: list[FieldRequirement] = []
    # Upstream sorts the raw terms first, so the first error reported is the sorted-first one.
    for term in sorted(_split_terms(text)):
        if not term:
            continue
        parts = _split_term(term)
        if parts is None:
            raise status.bad_request(f"invalid selector: '{text}'; can't understand '{term}'")
        lhs, op, rhs = parts
        value = unescape_value(rhs)
        if not lhs and not value:
            continue  # Transform drops a term whose field and value are both empty ("=")
        requirements.append(FieldRequirement(lhs, op, value))
    return FieldSelector(tuple(requirements)) if requirements else FieldSelector.EVERYTHING


# ------------------------------------------------------------------------------------------------
# Per-kind allow-lists (Scheme.ConvertFieldLabel)

_NAME = "metadata.name"
_NAMESPACE = "metadata.namespace"


def _not_supported(label: str) -> str:
    """The wording of most registered conversion funcs, and of ``crConverter``."""
    return f"field label not supported: {label}"


def _not_known(label: str) -> str:
    """``runtime.DefaultMetaV1FieldSelectorConversion``, for built-ins registering no func."""
    only = f"{go_quote(_NAME)}, {go_quote(_NAMESPACE)}"
    return f"{go_quote(label)} is not a known field selector: only {only}"


@dataclass(frozen=True, slots=True)
class _Rules:
    """One kind's conversion func: labels taken as is, aliases rewritten, the refusal wording."""

    accepted: tuple[str, ...]
    aliases: Mapping[str, str] = dataclasses.field(default_factory=dict)
    refuse: Callable[[str], str] = _not_supported


_EVENT_FIELDS = (
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
)

# Keyed by (group, resource): no kind's field-label contract differs between the versions served
# today. Sources: pkg/apis/core/v1/conversion.go, pkg/apis/batch/v1/conversion.go,
# pkg/apis/certificates/v1/conversion.go, pkg/apis/events/v1/conversion.go.
_REGISTERED: dict[tuple[str, str], _Rules] = {
    ("", "pods"): _Rules(
        accepted=(
            _NAME,
            _NAMESPACE,
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.podIPs",
            "status.nominatedNodeName",
        ),
        # Backwards compatibility with old v1 clients that send spec.host.
        aliases={"spec.host": "spec.nodeName"},
    ),
    ("", "nodes"): _Rules(accepted=(_NAME, "spec.unschedulable")),
    ("", "replicationcontrollers"): _Rules(accepted=(_NAME, _NAMESPACE, "status.replicas")),
    ("", "events"): _Rules(accepted=(*_EVENT_FIELDS, _NAMESPACE, _NAME)),
    ("", "namespaces"): _Rules(accepted=("status.phase", _NAME)),
    ("", "secrets"): _Rules(accepted=("type", _NAMESPACE, _NAME)),
    # Kubernetes 1.31+ (kubernetes/kubernetes#122541); older servers fall back to metadata only.
    ("", "services"): _Rules(accepted=(_NAMESPACE, _NAME, "spec.clusterIP", "spec.type")),
    ("batch", "jobs"): _Rules(
        accepted=(_NAME, _NAMESPACE, "status.successful"),
        refuse=lambda label: f"field label {go_quote(label)} not supported for Job",
    ),
    ("certificates.k8s.io", "certificatesigningrequests"): _Rules(
        accepted=(_NAME, "spec.signerName")
    ),
    # events.k8s.io shares the core Event storage: its spellings map onto the core field set,
    # and the core spellings (involvedObject.*) are refused here.
    ("events.k8s.io", "events"): _Rules(
        accepted=("reason", "source", "type", _NAMESPACE, _NAME),
        aliases={
            "regarding.kind": "involvedObject.kind",
            "regarding.namespace": "involvedObject.namespace",
            "regarding.name": "involvedObject.name",
            "regarding.uid": "involvedObject.uid",
            "regarding.apiVersion": "involvedObject.apiVersion",
            "regarding.resourceVersion": "involvedObject.resourceVersion",
            "regarding.fieldPath": "involvedObject.fieldPath",
            "reportingController": "reportingComponent",
        },
    ),
}

# Accepts metadata.namespace even for cluster-scoped kinds: it is absent from their field set, so
# "metadata.namespace=" matches everything and any other value matches nothing, as upstream.
_METADATA_ONLY = _Rules(accepted=(_NAME, _NAMESPACE), refuse=_not_known)


def _rules_for(rtype: ResourceType) -> _Rules:
    registered = _REGISTERED.get((rtype.group, rtype.resource))
    if registered is not None:
        return registered
    if rtype.builtin:
        return _METADATA_ONLY
    # crConverter: metadata.namespace only for namespaced custom resources.
    return _Rules(accepted=(_NAME, _NAMESPACE) if rtype.namespaced else (_NAME,))


WATCH_CACHE_INDEXES: dict[tuple[str, str], tuple[str, ...]] = {("", "pods"): ("spec.nodeName",)}
"""The field indexes the API server's watch cache keeps, by (group, resource): pods by node
(``pod.Indexers`` in pkg/registry/core/pod, the kubelet's query). The daemon indexes them too,
unasked, so that query is answered from an index as upstream answers it."""


def supported_fields(rtype: ResourceType) -> tuple[str, ...]:
    """The field labels the API server accepts for ``rtype`` as written (aliases excluded)."""
    return _rules_for(rtype).accepted


def validate_field_selector(
    rtype: ResourceType, selector: FieldSelector, *, extra_fields: Iterable[str] = ()
) -> FieldSelector:
    """Run every term through ``rtype``'s field-label conversion, as the list/watch handler does.

    Aliases are rewritten to the label the field set uses (pods' ``spec.host`` →
    ``spec.nodeName``); a label neither accepted nor in ``extra_fields`` (e.g. a CRD's
    ``selectableFields``) is the API server's 400, worded as that kind's conversion words it.
    """
    rules = _rules_for(rtype)
    extra = frozenset(extra_fields)
    converted: list[FieldRequirement] = []
    for r in selector.requirements:
        if r.field in rules.accepted or r.field in extra:
            converted.append(r)
        elif r.field in rules.aliases:
            converted.append(FieldRequirement(rules.aliases[r.field], r.operator, r.value))
        else:
            raise status.bad_request(rules.refuse(r.field))
    return FieldSelector(tuple(converted))


# ------------------------------------------------------------------------------------------------
# Field sets (the registries' ToSelectableFields), computed from the v1 JSON of an object


def _get(obj: Mapping[str, Any], *path: str) -> Any:
    node: Any = obj
    for key in path:
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node


def _str(obj: Mapping[str, Any], *path: str) -> str:
    value = _get(obj, *path)
    return value if isinstance(value, str) else ""


def _bool(obj: Mapping[str, Any], *path: str) -> str:
    """Go's ``strconv.FormatBool`` of a bool that defaults to false."""
    return "true" if _get(obj, *path) is True else "false"


def _int(obj: Mapping[str, Any], *path: str) -> str:
    """Go's ``strconv.Itoa`` of an int32 that defaults to 0."""
    value = _get(obj, *path)
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else "0"


def _pod_fields(pod: Mapping[str, Any]) -> dict[str, str]:
    # v1 → internal conversion fills status.podIPs from status.podIP when it is empty.
    pod_ips = _get(pod, "status", "podIPs")
    first_ip = pod_ips[0] if isinstance(pod_ips, list) and pod_ips else None
    pod_ip = _str(first_ip, "ip") if isinstance(first_ip, Mapping) else _str(pod, "status", "podIP")
    return {
        "spec.nodeName": _str(pod, "spec", "nodeName"),
        "spec.restartPolicy": _str(pod, "spec", "restartPolicy"),
        "spec.schedulerName": _str(pod, "spec", "schedulerName"),
        "spec.serviceAccountName": _str(pod, "spec", "serviceAccountName"),
        "spec.hostNetwork": _bool(pod, "spec", "hostNetwork"),
        "status.phase": _str(pod, "status", "phase"),
        "status.podIP": pod_ip,
        "status.nominatedNodeName": _str(pod, "status", "nominatedNodeName"),
    }


def _event_fields(event: Mapping[str, Any], *, events_api: bool) -> dict[str, str]:
    """Core Event's field set, read from the core/v1 or the events.k8s.io/v1 shape."""
    involved = "regarding" if events_api else "involvedObject"
    reporting = _str(event, "reportingController" if events_api else "reportingComponent")
    source = _str(event, "deprecatedSource" if events_api else "source", "component")
    fields = {
        f"involvedObject.{name}": _str(event, involved, name)
        for name in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion")
    }
    fields["involvedObject.fieldPath"] = _str(event, involved, "fieldPath")
    fields |= {
        "reason": _str(event, "reason"),
        "reportingComponent": reporting,
        "source": source or reporting,
        "type": _str(event, "type"),
    }
    return fields


_KIND_FIELDS: dict[tuple[str, str], Callable[[Mapping[str, Any]], dict[str, str]]] = {
    ("", "pods"): _pod_fields,
    ("", "nodes"): lambda o: {"spec.unschedulable": _bool(o, "spec", "unschedulable")},
    # "name" is an upstream bug kept for compatibility; no request can select on it.
    ("", "namespaces"): lambda o: {
        "status.phase": _str(o, "status", "phase"),
        "name": _str(o, "metadata", "name"),
    },
    ("", "secrets"): lambda o: {"type": _str(o, "type")},
    ("", "services"): lambda o: {
        "spec.clusterIP": _str(o, "spec", "clusterIP"),
        "spec.type": _str(o, "spec", "type"),
    },
    ("", "replicationcontrollers"): lambda o: {"status.replicas": _int(o, "status", "replicas")},
    ("apps", "replicasets"): lambda o: {"status.replicas": _int(o, "status", "replicas")},
    ("", "events"): lambda o: _event_fields(o, events_api=False),
    ("events.k8s.io", "events"): lambda o: _event_fields(o, events_api=True),
    # The label is status.successful; the field it reads is status.succeeded.
    ("batch", "jobs"): lambda o: {"status.successful": _int(o, "status", "succeeded")},
    ("certificates.k8s.io", "certificatesigningrequests"): lambda o: {
        "spec.signerName": _str(o, "spec", "signerName")
    },
}


def object_fields(rtype: ResourceType, obj: Mapping[str, Any]) -> dict[str, str]:
    """The field set of ``obj`` (its v1 JSON), stringified as the API server stringifies it.

    Always ``metadata.name``, ``metadata.namespace`` for namespaced kinds
    (``generic.ObjectMetaFieldsSet``), then the kind's own fields. Missing strings are ``""``,
    missing booleans ``"false"``, missing counts ``"0"``.
    """
    fields = {_NAME: _str(obj, "metadata", "name")}
    if rtype.namespaced:
        fields[_NAMESPACE] = _str(obj, "metadata", "namespace")
    kind_fields = _KIND_FIELDS.get((rtype.group, rtype.resource))
    if kind_fields is not None:
        fields |= kind_fields(obj)
    return fields
