"""The one place where the upstream's failures become :mod:`cacheproxy.errors`.

Two kinds of failure come back from an API server:

- an *answer*: an HTTP error response or an in-stream watch ``ERROR`` event. Its body is a
  ``metav1.Status``, kept exactly as sent (401 and 403 included, so a person reads the API
  server's own words) and raised as :class:`~cacheproxy.errors.ApiError`. A body that is not a
  Status (a load balancer's HTML page, an empty 503) gets one synthesized the way client-go's
  ``NewGenericServerResponse`` does, and a ``Retry-After`` header lands in
  ``details.retryAfterSeconds`` when the Status lacks it (client-go's ``retryAfterSeconds``).
- no answer: the connection was refused, TLS failed, the stream was reset or cut. httpx raises
  those; :func:`transport_error` says which server and what happened, naming the TLS verify
  reason or the socket error, and the caller raises it ``from`` the httpx exception. A refused
  connection is flagged (``TransportError.connection_refused``) for the informer's retry policy.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator
from typing import Any, cast

import httpx
import orjson

from cacheproxy.errors import ApiError, Status, StatusDetails, TransportError, UpstreamTimeout
from cacheproxy.kube.status import status_body

__all__ = [
    "api_error_from_response",
    "api_error_from_status",
    "describe_request",
    "transport_error",
]

_GENERIC: dict[int, tuple[str, str]] = {
    # code: (reason, message) as apimachinery's NewGenericServerResponse words them.
    400: ("BadRequest", "the server rejected our request for an unknown reason"),
    401: ("Unauthorized", "the server has asked for the client to provide credentials"),
    403: ("Forbidden", "the server does not allow access to the requested resource"),
    404: ("NotFound", "the server could not find the requested resource"),
    405: ("MethodNotAllowed", "the server does not allow this method on the requested resource"),
    406: (
        "NotAcceptable",
        "the server was unable to respond with a content type that the client supports",
    ),
    409: ("Conflict", "the server reported a conflict"),
    415: ("UnsupportedMediaType", "the server does not support the media type of the request"),
    422: ("Invalid", "the server rejected our request due to an error in our request"),
    429: (
        "TooManyRequests",
        "the server has received too many requests and has asked us to try again later",
    ),
    503: ("ServiceUnavailable", "the server is currently unable to handle the request"),
    504: (
        "Timeout",
        "the server was unable to return a response in the time allotted, but may still be "
        "processing the request",
    ),
}
_BODY_EXCERPT = 200
"""How much of a non-Status body is quoted in the synthesized Status's cause."""


def describe_request(request: httpx.Request) -> str:
    """``GET https://host:6443/api/v1/pods``: which server, and what we asked of it (no query:
    it adds nothing a person needs and can be long)."""
    url = request.url
    return f"{request.method} {url.scheme}://{url.netloc.decode('ascii')}{url.path}"


# ---------------------------------------------------------------------------- answers


def api_error_from_response(response: httpx.Response) -> ApiError:
    """The :class:`ApiError` for an HTTP error response whose body has been read."""
    code = response.status_code
    retry_after = _retry_after(response.headers.get("retry-after"))
    try:
        body = orjson.loads(response.content)
    except orjson.JSONDecodeError:
        body = None
    if _is_status(body):
        status = _normalized(body, code)
    else:
        status = _generic_status(code, response.text, describe_request(response.request))
    if retry_after is not None:
        details = status.setdefault("details", {})
        details.setdefault("retryAfterSeconds", retry_after)
    return ApiError(status)


def api_error_from_status(obj: Any) -> ApiError | None:
    """The :class:`ApiError` of a watch ``ERROR`` event's object, or None if it is no Status
    (client-go's ``apierrors.FromObject``)."""
    if not _is_status(obj):
        return None
    return ApiError(_normalized(obj, 500))


def _is_status(body: Any) -> bool:
    return isinstance(body, dict) and body.get("kind") == "Status"


def _normalized(body: dict[str, Any], default_code: int) -> Status:
    """``body`` with the keys our :class:`Status` requires filled in, in the API server's order;
    whatever the server sent is kept unchanged."""
    out: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": body.get("apiVersion", "v1"),
        "metadata": body.get("metadata") or {},
        "status": body.get("status", "Failure"),
        "message": body.get("message") or "",
    }
    out.update(body)
    if not isinstance(out["metadata"], dict):
        out["metadata"] = {}
    code = body.get("code")
    out["code"] = code if isinstance(code, int) and code else default_code
    if not out["message"]:
        out["message"] = _GENERIC.get(out["code"], ("", f"error {out['code']}"))[1]
    return cast(Status, out)


def _generic_status(code: int, text: str, request: str) -> Status:
    reason, message = _GENERIC.get(code, ("", ""))
    excerpt = " ".join(text.split())[:_BODY_EXCERPT]
    if not message:
        if code >= 500:
            reason = "InternalError"
            message = (
                f"an error on the server ({excerpt!r}) has prevented the request from succeeding"
            )
        else:
            message = (
                f"the server responded with the status code {code} but did not return more "
                "information"
            )
    details: StatusDetails = {}
    if excerpt:
        details["causes"] = [{"reason": "UnexpectedServerResponse", "message": excerpt}]
    return status_body(code=code, reason=reason, message=f"{message} ({request})", details=details)


def _retry_after(value: str | None) -> int | None:
    """Whole seconds only, as client-go reads it (an HTTP date is ignored)."""
    if value is None or not value.strip().isdigit():
        return None
    return int(value.strip())


# ---------------------------------------------------------------------------- no answer


def transport_error(exc: httpx.HTTPError, *, during: str = "") -> TransportError:
    """A :class:`TransportError` saying which server and what went wrong.

    ``during`` adds where it happened (``"the watch stream"``). Raise it ``from exc``.
    """
    try:
        where = describe_request(exc.request)
        origin = f"{exc.request.url.scheme}://{exc.request.url.netloc.decode('ascii')}"
    except RuntimeError:  # an httpx error raised before a request existed
        where = origin = "the upstream"
    what = _what_happened(exc, origin)
    if during:
        what = f"{what} (during {during})"
    # client-go's isWatchErrorRetriable: a refused connection is a restarting server, retried
    # without relisting; the informer reads this flag.
    refused = isinstance(_root_cause(exc), ConnectionRefusedError)
    if isinstance(exc, httpx.TimeoutException):
        return UpstreamTimeout(f"{where}: {what}")
    return TransportError(f"{where}: {what}", connection_refused=refused)


def _what_happened(exc: httpx.HTTPError, origin: str) -> str:
    cause = _root_cause(exc)
    if isinstance(exc, httpx.TimeoutException):
        return _timeout(exc, origin)
    if isinstance(cause, ssl.SSLCertVerificationError):
        return (
            f"TLS handshake with {origin} failed: certificate verify failed: {cause.verify_message}"
        )
    if isinstance(cause, ssl.SSLError):
        return f"TLS with {origin} failed: {cause.reason or cause}"
    if isinstance(exc, httpx.ProxyError):
        return f"the proxy refused to connect us to {origin}: {exc}"
    if isinstance(cause, ConnectionRefusedError):
        return f"connection to {origin} refused (is the API server running?)"
    if isinstance(cause, socket.gaierror):
        return f"cannot resolve the host of {origin}: {cause.strerror or cause}"
    if isinstance(cause, ConnectionResetError):
        return f"connection reset by {origin}"
    if isinstance(exc, httpx.RemoteProtocolError):
        return f"{origin} closed the connection or broke the HTTP protocol: {exc}"
    if isinstance(exc, httpx.ConnectError):
        return f"cannot connect to {origin}: {_os_message(cause) or exc}"
    if isinstance(exc, httpx.ReadError):
        return f"reading from {origin} failed: {_os_message(cause) or exc or 'connection lost'}"
    if isinstance(exc, httpx.WriteError):
        return f"writing to {origin} failed: {_os_message(cause) or exc or 'connection lost'}"
    if isinstance(exc, httpx.DecodingError):
        return f"the response from {origin} could not be decoded: {exc}"
    return f"{type(exc).__name__}: {exc}"


def _timeout(exc: httpx.TimeoutException, origin: str) -> str:
    timeouts = exc.request.extensions.get("timeout", {}) if _has_request(exc) else {}
    if isinstance(exc, httpx.ConnectTimeout):
        return f"timed out connecting to {origin} after {timeouts.get('connect')} s"
    if isinstance(exc, httpx.ReadTimeout):
        return f"{origin} sent nothing for {timeouts.get('read')} s"
    if isinstance(exc, httpx.WriteTimeout):
        return f"timed out sending the request to {origin}"
    return f"no connection to {origin} became free in {timeouts.get('pool')} s"


def _has_request(exc: httpx.HTTPError) -> bool:
    try:
        exc.request  # noqa: B018 - the property raises when unset
    except RuntimeError:
        return False
    return True


def _os_message(exc: BaseException | None) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) if exc is not None else ""


def _root_cause(exc: BaseException) -> BaseException | None:
    """The most specific lower-level error behind an httpx error: the first TLS error, else the
    deepest OSError (httpx → httpcore → anyio → the socket's own error)."""
    found: BaseException | None = None
    for e in _causes(exc):
        if isinstance(e, ssl.SSLError):
            return e
        if isinstance(e, OSError):
            found = e
    return found


def _causes(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    stack: list[BaseException] = [exc]
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        if isinstance(e, BaseExceptionGroup):
            stack.extend(reversed(e.exceptions))
        nxt = e.__cause__ or e.__context__
        if nxt is not None:
            stack.append(nxt)
