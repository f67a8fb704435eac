"""The one exception tree of cacheproxy.

Every error the project raises on purpose is one of these::

    CacheProxyError
     ├── ApiError            an answer the Kubernetes API would give: carries the exact
     │                       ``metav1.Status`` body (code, reason, message, details).
     │                       Built by ``cacheproxy.kube.status``; ``server/`` and ``sim/`` write
     │                       it out unchanged; ``upstream/`` builds it from upstream Status bodies.
     ├── ConfigError         a configuration or command-line mistake a person must fix.
     │    └── ListenError    the address to listen on is taken (or not ours to take).
     └── TransportError      the upstream could not be reached or dropped the connection
                             (refused, reset, TLS failure, truncated or garbage stream).

Lower-layer exceptions (OSError, httpx errors, orjson decode errors) are translated into this tree
once, at the boundary where they occur, with ``raise ... from exc``.

The ``is_*`` predicates (client-go's ``apierrors.IsGone``, ``IsTooManyRequests``, …) say what an
error means, so that rules such as the Reflector's read as rules rather than status-code arithmetic.

This module imports nothing from the package, so every layer may use it.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

__all__ = [
    "ApiError",
    "CacheProxyError",
    "ConfigError",
    "ListenError",
    "Status",
    "StatusCause",
    "StatusDetails",
    "TransportError",
    "UpstreamTimeout",
    "is_connection_refused",
    "is_expired",
    "is_resource_expired",
    "is_retryable",
    "is_too_large_resource_version",
    "is_too_many_requests",
]


class StatusCause(TypedDict, total=False):
    reason: str
    message: str
    field: str


class StatusDetails(TypedDict, total=False):
    name: str
    group: str
    kind: str
    uid: str
    causes: list[StatusCause]
    retryAfterSeconds: int


class Status(TypedDict):
    """``metav1.Status`` as JSON; keys in the order the API server writes them."""

    kind: str
    apiVersion: str
    metadata: dict[str, Any]
    status: str
    message: str
    reason: NotRequired[str]
    details: NotRequired[StatusDetails]
    code: int


class CacheProxyError(Exception):
    """Base of every error cacheproxy raises on purpose."""


class ApiError(CacheProxyError):
    """An error that *is* a Kubernetes API answer: its ``status`` is the exact response body."""

    def __init__(self, status: Status) -> None:
        super().__init__(status["message"])
        self.status = status

    @property
    def code(self) -> int:
        return self.status["code"]

    @property
    def reason(self) -> str:
        return self.status.get("reason", "")

    @property
    def message(self) -> str:
        return self.status["message"]

    @property
    def retry_after(self) -> int | None:
        """Seconds the client should wait before retrying (sent as ``Retry-After``), if any."""
        details = self.status.get("details")
        if details is None:
            return None
        return details.get("retryAfterSeconds")

    def __repr__(self) -> str:
        return f"ApiError({self.code} {self.reason}: {self.message})"


class ConfigError(CacheProxyError):
    """A configuration or command-line mistake. The message says what is wrong and where."""


class TransportError(CacheProxyError):
    """The upstream could not be reached, or the connection or stream broke.

    ``connection_refused`` marks the one case client-go retries a watch for without relisting
    (the server is restarting)."""

    def __init__(self, message: str, *, connection_refused: bool = False) -> None:
        super().__init__(message)
        self.connection_refused = connection_refused


class UpstreamTimeout(TransportError):
    """The upstream did not connect, take a request or answer within the time allowed."""


class ListenError(ConfigError):
    """Cannot listen on ``host:port`` (in use, or not permitted): say which, and what changes it."""

    def __init__(self, host: str, port: int, reason: str) -> None:
        super().__init__(f"cannot listen on {host}:{port}: {reason}")
        self.host = host
        self.port = port
        self.reason = reason

    def with_hint(self, hint: str) -> ConfigError:
        """The same complaint, naming the flag or variable that sets this port."""
        return ConfigError(f"{self}; {hint}")


# ---------------------------------------------------------------------------- what an error means


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
