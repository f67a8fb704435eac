"""Builders for every ``metav1.Status`` error the project emits.

The shapes and wording mirror ``k8s.io/apimachinery/pkg/api/errors`` (``NewNotFound``,
``NewForbidden``, ``NewResourceExpired`` …) and the real responses in the project's samples:
keys in the API server's order, ``details.kind`` is the *resource* (plural) for resource errors and
the *Kind* for validation errors, ``details.group`` only when not the core group.

Each builder returns an :class:`~cacheproxy.errors.ApiError`; raise it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from cacheproxy.errors import ApiError, Status, StatusCause, StatusDetails

__all__ = [
    "CONTINUE_EXPIRED_MESSAGE",
    "already_exists",
    "bad_request",
    "conflict",
    "expired",
    "forbidden",
    "forbidden_cause",
    "gone",
    "internal_error",
    "invalid",
    "invalid_list_options",
    "invalid_value_cause",
    "method_not_allowed",
    "not_acceptable",
    "not_encodable",
    "not_found",
    "not_supported_cause",
    "required_cause",
    "resource_not_found",
    "service_unavailable",
    "status_body",
    "too_large_resource_version",
    "too_many_requests",
    "too_old_resource_version",
    "unauthorized",
]

CONTINUE_EXPIRED_MESSAGE = (
    "The provided continue parameter is too old to display a consistent list result. You can "
    "start a new list without the continue parameter, or use the continue token in this response "
    "to retrieve the remainder of the results. Continuing with the provided token results in an "
    "inconsistent list - objects that were created, modified, or deleted between the time the "
    "first chunk was returned and now may show up in the list."
)


def status_body(
    *,
    code: int,
    reason: str | None,
    message: str,
    details: StatusDetails | None = None,
    metadata: dict[str, Any] | None = None,
) -> Status:
    """A failure ``Status`` with keys in the API server's order."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": metadata if metadata is not None else {},
        "status": "Failure",
        "message": message,
    }
    if reason:
        body["reason"] = reason
    if details is not None:
        body["details"] = details
    body["code"] = code
    return cast(Status, body)


def _details(
    *,
    name: str | None = None,
    group: str = "",
    kind: str | None = None,
    causes: Sequence[StatusCause] | None = None,
    retry_after: int | None = None,
) -> StatusDetails:
    d: StatusDetails = {}
    if name:
        d["name"] = name
    if group:
        d["group"] = group
    if kind:
        d["kind"] = kind
    if causes:
        d["causes"] = list(causes)
    if retry_after:
        d["retryAfterSeconds"] = retry_after
    return d


def _qualified(resource: str, group: str) -> str:
    """``pods`` or ``deployments.apps``: how the API server names a group resource."""
    return f"{resource}.{group}" if group else resource


def bad_request(message: str) -> ApiError:
    return ApiError(status_body(code=400, reason="BadRequest", message=message))


def unauthorized(message: str = "Unauthorized") -> ApiError:
    return ApiError(status_body(code=401, reason="Unauthorized", message=message))


def forbidden(
    *,
    user: str,
    verb: str,
    resource: str,
    group: str = "",
    namespace: str = "",
    name: str = "",
) -> ApiError:
    """403 as the RBAC authorizer words it (``NewForbidden`` + the authorizer's reason)."""
    qualified = _qualified(resource, group)
    subject = f'{qualified} "{name}"' if name else qualified
    scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
    message = (
        f'{subject} is forbidden: User "{user}" cannot {verb} resource "{resource}" '
        f'in API group "{group}" {scope}'
    )
    return ApiError(
        status_body(
            code=403,
            reason="Forbidden",
            message=message,
            details=_details(name=name, group=group, kind=resource),
        )
    )


def not_found(*, resource: str, name: str, group: str = "") -> ApiError:
    """404 for a named object: ``pods "x" not found``."""
    return ApiError(
        status_body(
            code=404,
            reason="NotFound",
            message=f'{_qualified(resource, group)} "{name}" not found',
            details=_details(name=name, group=group, kind=resource),
        )
    )


def resource_not_found() -> ApiError:
    """404 for a path that names no served resource."""
    return ApiError(
        status_body(
            code=404,
            reason="NotFound",
            message="the server could not find the requested resource",
            details={},
        )
    )


def method_not_allowed(*, verb: str, resource: str, group: str = "") -> ApiError:
    return ApiError(
        status_body(
            code=405,
            reason="MethodNotAllowed",
            message=f'{verb} is not supported on resources of kind "{_qualified(resource, group)}"',
            details=_details(group=group, kind=resource),
        )
    )


def not_acceptable(representations: Sequence[str]) -> ApiError:
    """406 for an ``Accept`` header the server cannot answer, naming what it can
    (``NewNotAcceptableError``)."""
    return ApiError(
        status_body(
            code=406,
            reason="NotAcceptable",
            message="406: Not Acceptable\n\nAvailable representations: "
            + ", ".join(representations),
            details={},
        )
    )


ENCODINGS = ("application/json", "application/yaml", "application/vnd.kubernetes.protobuf")
"""The media types kube-apiserver lists when it cannot encode an object in the one asked for."""


def not_encodable(accepted: Sequence[str] = ENCODINGS) -> ApiError:
    """406 for a media type the object cannot be encoded in, as the API server answers a custom
    resource asked for in protobuf only (``NewNotAcceptableError``; no details)."""
    return ApiError(
        status_body(
            code=406,
            reason="NotAcceptable",
            message="only the following media types are accepted: " + ", ".join(accepted),
        )
    )


def already_exists(*, resource: str, name: str, group: str = "") -> ApiError:
    return ApiError(
        status_body(
            code=409,
            reason="AlreadyExists",
            message=f'{_qualified(resource, group)} "{name}" already exists',
            details=_details(name=name, group=group, kind=resource),
        )
    )


def conflict(*, resource: str, name: str, group: str = "") -> ApiError:
    """409 for an update whose ``resourceVersion`` is stale (optimistic concurrency)."""
    message = (
        f'Operation cannot be fulfilled on {_qualified(resource, group)} "{name}": the object has '
        "been modified; please apply your changes to the latest version and try again"
    )
    return ApiError(
        status_body(
            code=409,
            reason="Conflict",
            message=message,
            details=_details(name=name, group=group, kind=resource),
        )
    )


def expired(message: str, *, continue_token: str | None = None) -> ApiError:
    """410 Expired (``NewResourceExpired``); for a continue token, with the inconsistent token."""
    metadata: dict[str, Any] = {"continue": continue_token} if continue_token else {}
    return ApiError(status_body(code=410, reason="Expired", message=message, metadata=metadata))


def too_old_resource_version(requested: int, oldest: int) -> ApiError:
    """410 for a watch (or exact list) older than the history window."""
    return expired(f"too old resource version: {requested} ({oldest})")


def gone(message: str) -> ApiError:
    return ApiError(status_body(code=410, reason="Gone", message=message))


def invalid(*, kind: str, name: str, causes: Sequence[StatusCause], group: str = "") -> ApiError:
    """422 for an invalid object (``NewInvalid``): details name the *Kind*."""
    qualified = f"{kind}.{group}" if group else kind
    summary = ", ".join(f"{c.get('field', '')}: {c.get('message', '')}" for c in causes)
    if len(causes) > 1:
        summary = f"[{summary}]"
    return ApiError(
        status_body(
            code=422,
            reason="Invalid",
            message=f'{qualified} "{name}" is invalid: {summary}',
            details=_details(name=name, group=group, kind=kind, causes=causes),
        )
    )


def invalid_list_options(causes: Sequence[StatusCause]) -> ApiError:
    """422 for contradictory list/watch options (``ListOptions.meta.k8s.io "" is invalid``)."""
    return invalid(kind="ListOptions", group="meta.k8s.io", name="", causes=causes)


def forbidden_cause(field: str, detail: str) -> StatusCause:
    """A ``field.Forbidden`` validation cause."""
    return {"reason": "FieldValueForbidden", "message": f"Forbidden: {detail}", "field": field}


def not_supported_cause(field: str, value: str, supported: Sequence[str]) -> StatusCause:
    """A ``field.NotSupported`` validation cause (Go quotes every value)."""
    quoted = ", ".join(f'"{v}"' for v in supported)
    return {
        "reason": "FieldValueNotSupported",
        "message": f'Unsupported value: "{value}": supported values: {quoted}',
        "field": field,
    }


def invalid_value_cause(field: str, value: str, detail: str) -> StatusCause:
    """A ``field.Invalid`` validation cause."""
    return {
        "reason": "FieldValueInvalid",
        "message": f'Invalid value: "{value}": {detail}',
        "field": field,
    }


def required_cause(field: str, detail: str = "") -> StatusCause:
    """A ``field.Required`` validation cause."""
    message = f"Required value: {detail}" if detail else "Required value"
    return {"reason": "FieldValueRequired", "message": message, "field": field}


def too_many_requests(message: str, *, retry_after: int = 1) -> ApiError:
    return ApiError(
        status_body(
            code=429,
            reason="TooManyRequests",
            message=message,
            details=_details(retry_after=retry_after),
        )
    )


def internal_error(message: str) -> ApiError:
    return ApiError(
        status_body(
            code=500,
            reason="InternalError",
            message=f"Internal error occurred: {message}",
            details=_details(causes=[{"message": message}]),
        )
    )


def service_unavailable(message: str, *, retry_after: int = 1) -> ApiError:
    return ApiError(
        status_body(
            code=503,
            reason="ServiceUnavailable",
            message=message,
            details=_details(retry_after=retry_after),
        )
    )


def too_large_resource_version(
    requested: int, current: int, *, retry_after: int | None = 1
) -> ApiError:
    """504 for a read at an RV the server has not reached (``NewTooLargeResourceVersionError``).

    The watch cache waits for the RV, then asks to retry after ``retry_after`` seconds; etcd
    answers at once, without ``Retry-After`` (``retry_after=None``).
    """
    details: StatusDetails = {
        "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}]
    }
    if retry_after is not None:
        details["retryAfterSeconds"] = retry_after
    return ApiError(
        status_body(
            code=504,
            reason="Timeout",
            message=f"Timeout: Too large resource version: {requested}, current: {current}",
            details=details,
        )
    )
