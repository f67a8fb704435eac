"""Status errors only the simulator sends: the API server's answers to requests cacheproxy never
serves (writes, subresources, storage-level failures), worded as kube-apiserver words them.

The shared builders are :mod:`cacheproxy.kube.status`; these complete them for the simulator.
"""

from __future__ import annotations

from cacheproxy.errors import ApiError
from cacheproxy.kube import status

__all__ = [
    "ETCD_FUTURE_REVISION",
    "conflict",
    "future_revision",
    "method_not_supported",
    "not_acceptable",
    "too_large_resource_version_now",
    "unsupported_by_etcd",
    "unsupported_media_type",
    "validation_failure",
    "watch_too_old",
]

ETCD_FUTURE_REVISION = "etcdserver: mvcc: required revision is a future revision"

REPRESENTATIONS = (
    "application/json",
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
    "application/json;stream=watch",
    "application/vnd.kubernetes.protobuf;stream=watch",
)
"""What kube-apiserver offers, as its 406 names them (the simulator answers JSON)."""


def method_not_supported() -> ApiError:
    """405 for a method the path has no route for (go-restful's answer: no details)."""
    return ApiError(
        status.status_body(
            code=405,
            reason="MethodNotAllowed",
            message="the server does not allow this method on the requested resource",
            details={},
        )
    )


def not_acceptable() -> ApiError:
    """406 for an ``Accept`` header the resource cannot answer, in the API server's words."""
    return status.not_acceptable(REPRESENTATIONS)


def unsupported_media_type(message: str = "415: Unsupported Media Type") -> ApiError:
    """415 for a body type the verb does not take (a patch that is not JSON/merge/strategic)."""
    return ApiError(
        status.status_body(
            code=415,
            reason="UnsupportedMediaType",
            message=message,
            details={},
        )
    )


def conflict(*, resource: str, name: str, why: str) -> ApiError:
    """409 ``Conflict`` with the storage's reason (``NewConflict``)."""
    return ApiError(
        status.status_body(
            code=409,
            reason="Conflict",
            message=f'Operation cannot be fulfilled on {resource} "{name}": {why}',
            details={"name": name, "kind": resource},
        )
    )


def validation_failure(message: str) -> ApiError:
    """A validation error that reaches the client as a bare 500 (no reason), as a Binding
    without a target does."""
    return ApiError(status.status_body(code=500, reason=None, message=message))


def future_revision() -> ApiError:
    """An exact read of a revision etcd has not reached: etcd's error, passed on as a 500."""
    return validation_failure(ETCD_FUTURE_REVISION)


def watch_too_old() -> ApiError:
    """410 for a watch served by etcd (no watch cache) from a compacted revision."""
    return status.expired("The resourceVersion for the provided watch is too old.")


def unsupported_by_etcd(resource: str) -> ApiError:
    """422 for a watch-list of a resource without a watch cache (etcd cannot stream lists)."""
    return status.invalid(
        kind=resource,
        name="",
        causes=[
            status.forbidden_cause(
                "sendInitialEvents", "for watch is unsupported by an etcd cluster"
            )
        ],
    )


def too_large_resource_version_now(requested: int, current: int) -> ApiError:
    """504 for a read etcd serves at an RV it has not reached: at once, without ``Retry-After``
    (the watch cache's version waits and asks to retry)."""
    return status.too_large_resource_version(requested, current, retry_after=None)
