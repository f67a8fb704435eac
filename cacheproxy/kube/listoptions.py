"""List and watch options: decoded from a query string and validated as the API server does.

Decoding mirrors ``metav1.ListOptions`` query conversion (booleans: anything but ``false``/``0`` is
true; integers must parse → 400). Validation mirrors apimachinery's ``ValidateListOptions`` and its
watch branch: contradictory combinations are a 422 ``Invalid`` naming every violated field.
Selector *syntax* is checked here too; which fields a resource supports is the caller's business.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cacheproxy.errors import StatusCause
from cacheproxy.kube import status
from cacheproxy.kube.fields import FieldSelector, parse_field_selector
from cacheproxy.kube.labels import LabelSelector, parse_label_selector
from cacheproxy.kube.rv import parse_resource_version
from cacheproxy.kube.versions import NEWEST, KubeVersion

__all__ = [
    "EXACT",
    "NOT_OLDER_THAN",
    "ListOptions",
    "parse_list_options",
]

EXACT = "Exact"
NOT_OLDER_THAN = "NotOlderThan"


@dataclass(frozen=True, slots=True)
class ListOptions:
    """A validated list or watch request."""

    label_selector: LabelSelector = LabelSelector.EVERYTHING
    field_selector: FieldSelector = FieldSelector.EVERYTHING
    resource_version: str = ""
    """As sent: "" (unset), "0" or a decimal RV."""
    resource_version_match: str = ""
    limit: int = 0
    continue_token: str = ""
    watch: bool = False
    allow_watch_bookmarks: bool = False
    timeout_seconds: int | None = None
    send_initial_events: bool | None = None

    @property
    def rv(self) -> int:
        """The RV as an integer (0 for unset and "0")."""
        return parse_resource_version(self.resource_version)

    def as_watch_list(self) -> ListOptions:
        """This watch as an API server with ``WatchList`` on takes it
        (``SetListOptionsDefaults``): one from RV unset or "0" that sets neither
        ``sendInitialEvents`` nor ``resourceVersionMatch`` is a watch-list, so its initial events
        end with the initial-events-end bookmark when it allows bookmarks."""
        if (
            self.watch
            and self.send_initial_events is None
            and not self.resource_version_match
            and self.resource_version in ("", "0")
        ):
            return dataclasses.replace(
                self, send_initial_events=True, resource_version_match=NOT_OLDER_THAN
            )
        return self


def _bool(value: str) -> bool:
    # apimachinery's Convert_Slice_string_To_bool: only "false" and "0" are false.
    return value.lower() not in ("false", "0")


_INT64 = 2**63


def _int(value: str) -> int:
    """``strconv.ParseInt(value, 10, 64)``; the 400 carries its bare error, as the API server's
    query-parameter conversion does."""
    digits = value[1:] if value[:1] in ("+", "-") else value
    if not (digits.isascii() and digits.isdigit()):
        raise status.bad_request(f'strconv.ParseInt: parsing "{value}": invalid syntax')
    parsed = int(value)
    if not -_INT64 <= parsed < _INT64:
        raise status.bad_request(f'strconv.ParseInt: parsing "{value}": value out of range')
    return parsed


def _first(query: Mapping[str, Sequence[str]], name: str) -> str | None:
    values = query.get(name)
    return values[0] if values else None


def parse_list_options(
    query: Mapping[str, Sequence[str]],
    *,
    watch: bool = False,
    name: str | None = None,
    kube: KubeVersion = NEWEST,
) -> ListOptions:
    """Decode and validate ``query`` (``parse_qs`` shape). ``watch`` forces a watch (the
    deprecated ``/watch/`` paths); ``name`` is the object name of a named watch; errors are
    worded as ``kube`` words them."""
    label_text = _first(query, "labelSelector") or ""
    field_text = _first(query, "fieldSelector") or ""
    rv = _first(query, "resourceVersion") or ""
    rvm = _first(query, "resourceVersionMatch") or ""
    cont = _first(query, "continue") or ""
    watch_value = _first(query, "watch")
    is_watch = watch or (watch_value is not None and _bool(watch_value))
    bookmarks_value = _first(query, "allowWatchBookmarks")
    timeout_value = _first(query, "timeoutSeconds")
    limit_value = _first(query, "limit")
    sie_value = _first(query, "sendInitialEvents")

    limit = _int(limit_value) if limit_value is not None else 0
    timeout = _int(timeout_value) if timeout_value is not None else None
    send_initial_events = _bool(sie_value) if sie_value is not None else None
    if rv:
        parse_resource_version(rv, kube=kube)

    labels = parse_label_selector(label_text)
    fields = parse_field_selector(field_text)
    if name is not None:
        # A named watch is a watch with fieldSelector=metadata.name=<name> (handlers/get.go).
        # A selector given with it must pin metadata.name to that very name.
        if not fields.empty:
            if fields.requires_exact_match("metadata.name") != name:
                raise status.bad_request("fieldSelector metadata.name doesn't match requested name")
        else:
            fields = parse_field_selector(f"metadata.name={name}")

    causes = (
        _watch_violations(rvm=rvm, cont=cont, send_initial_events=send_initial_events)
        if is_watch
        else _list_violations(rv=rv, rvm=rvm, cont=cont, send_initial_events=send_initial_events)
    )
    if causes:
        raise status.invalid_list_options(causes)

    return ListOptions(
        label_selector=labels,
        field_selector=fields,
        resource_version=rv,
        resource_version_match=rvm,
        limit=max(limit, 0),
        continue_token=cont,
        watch=is_watch,
        allow_watch_bookmarks=bookmarks_value is not None and _bool(bookmarks_value),
        timeout_seconds=timeout,
        send_initial_events=send_initial_events,
    )


def _list_violations(
    *, rv: str, rvm: str, cont: str, send_initial_events: bool | None
) -> list[StatusCause]:
    causes: list[StatusCause] = []
    field = "resourceVersionMatch"
    if rvm:
        if not rv:
            causes.append(
                status.forbidden_cause(
                    field, "resourceVersionMatch is forbidden unless resourceVersion is provided"
                )
            )
        if cont:
            causes.append(
                status.forbidden_cause(
                    field, "resourceVersionMatch is forbidden when continue is provided"
                )
            )
        if rvm not in (EXACT, NOT_OLDER_THAN):
            causes.append(status.not_supported_cause(field, rvm, [EXACT, NOT_OLDER_THAN, ""]))
        if rvm == EXACT and rv == "0":
            causes.append(
                status.forbidden_cause(
                    field, 'resourceVersionMatch "exact" is forbidden for resourceVersion "0"'
                )
            )
    if send_initial_events is not None:
        causes.append(
            status.forbidden_cause("sendInitialEvents", "sendInitialEvents is forbidden for list")
        )
    return causes


def _watch_violations(
    *, rvm: str, cont: str, send_initial_events: bool | None
) -> list[StatusCause]:
    causes: list[StatusCause] = []
    field = "resourceVersionMatch"
    if send_initial_events is not None and rvm != NOT_OLDER_THAN:
        causes.append(
            status.forbidden_cause(
                field,
                f"sendInitialEvents requires setting resourceVersionMatch to {NOT_OLDER_THAN}",
            )
        )
    if rvm:
        if send_initial_events is None:
            causes.append(
                status.forbidden_cause(
                    field,
                    "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                )
            )
        if rvm != NOT_OLDER_THAN:
            causes.append(status.not_supported_cause(field, rvm, [NOT_OLDER_THAN]))
        if cont:
            causes.append(
                status.forbidden_cause(
                    field, "resourceVersionMatch is forbidden when continue is provided"
                )
            )
    return causes
