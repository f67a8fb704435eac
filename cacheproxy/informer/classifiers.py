"""What an upstream error means to the Reflector: client-go's classifier functions.

Each takes any exception and answers one question about it (client-go's ``apierrors.IsGone``,
``IsTooManyRequests``, …), so the Reflector's state machine reads as rules rather than as
status-code arithmetic. They know only :mod:`cacheproxy.errors`' tree, into which
``cacheproxy.upstream`` translates what the API server and the transport said.
"""

from __future__ import annotations

from cacheproxy.errors import ApiError, TransportError

__all__ = [
    "is_connection_refused",
    "is_expired",
    "is_resource_expired",
    "is_retryable",
    "is_too_large_resource_version",
    "is_too_many_requests",
]


def is_expired(err: BaseException) -> bool:
    """410 Expired or Gone: the RV (or continue token) is older than the server's history."""
    return isinstance(err, ApiError) and err.code == 410


def is_resource_expired(err: BaseException) -> bool:
    """``apierrors.IsResourceExpired``: reason Expired (what client-go's pager falls back on; a
    410 Gone is not one)."""
    return isinstance(err, ApiError) and err.reason == "Expired"


def is_too_large_resource_version(err: BaseException) -> bool:
    """The server has not reached the requested RV (504 with cause ResourceVersionTooLarge)."""
    if not isinstance(err, ApiError):
        return False
    causes = err.status.get("details", {}).get("causes", [])
    if any(c.get("reason") == "ResourceVersionTooLarge" for c in causes):
        return True
    return "Too large resource version" in err.message


def is_too_many_requests(err: BaseException) -> bool:
    return isinstance(err, ApiError) and err.code == 429


def is_connection_refused(err: BaseException) -> bool:
    return isinstance(err, TransportError) and err.connection_refused


def is_retryable(err: BaseException) -> bool:
    """Worth trying the same request again later: throttling, server errors, transport trouble."""
    if isinstance(err, TransportError):
        return True
    return isinstance(err, ApiError) and (err.code == 429 or err.code >= 500)
