"""cacheproxy.upstream.apierrors: HTTP answers and httpx failures become the one exception tree."""

from __future__ import annotations

import socket
import ssl

import httpx
import orjson

from cacheproxy.errors import TransportError
from cacheproxy.kube import status
from cacheproxy.upstream.apierrors import (
    api_error_from_response,
    api_error_from_status,
    describe_request,
    transport_error,
)

REQUEST = httpx.Request("GET", "https://10.0.0.1:6443/api/v1/pods?limit=500&continue=abc")


def response(code: int, body: bytes, **headers: str) -> httpx.Response:
    return httpx.Response(code, content=body, headers=headers, request=REQUEST)


def caused(exc: httpx.HTTPError, *chain: BaseException) -> httpx.HTTPError:
    """``exc`` raised from ``chain[0]``, raised from ``chain[1]``…, as httpx/httpcore do."""
    inner: BaseException = exc
    for cause in chain:
        inner.__cause__ = cause
        inner = cause
    return exc


def test_describe_request_names_the_method_server_and_path_without_the_query() -> None:
    assert describe_request(REQUEST) == "GET https://10.0.0.1:6443/api/v1/pods"


def test_a_status_body_is_kept_exactly() -> None:
    sent = status.forbidden(user="lowpriv", verb="list", resource="pods").status
    error = api_error_from_response(response(403, orjson.dumps(sent)))
    assert error.status == sent
    assert error.code == 403 and error.reason == "Forbidden"


def test_retry_after_fills_in_a_status_that_lacks_retry_after_seconds() -> None:
    sent = status.status_body(code=429, reason="TooManyRequests", message="slow down")
    error = api_error_from_response(response(429, orjson.dumps(sent), **{"Retry-After": "4"}))
    assert error.retry_after == 4
    assert error.message == "slow down"


def test_retry_after_does_not_override_the_status_own_retry_after_seconds() -> None:
    sent = status.too_many_requests("busy", retry_after=2).status
    error = api_error_from_response(response(429, orjson.dumps(sent), **{"Retry-After": "9"}))
    assert error.retry_after == 2


def test_an_http_date_retry_after_is_ignored_as_client_go_does() -> None:
    error = api_error_from_response(
        response(503, b"", **{"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"})
    )
    assert error.retry_after is None


def test_a_non_status_body_gets_the_generic_status_client_go_would_make() -> None:
    error = api_error_from_response(
        response(503, b"<html>upstream down</html>", **{"Retry-After": "5"})
    )
    assert error.status == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "the server is currently unable to handle the request "
        "(GET https://10.0.0.1:6443/api/v1/pods)",
        "reason": "ServiceUnavailable",
        "details": {
            "causes": [
                {"reason": "UnexpectedServerResponse", "message": "<html>upstream down</html>"}
            ],
            "retryAfterSeconds": 5,
        },
        "code": 503,
    }


def test_an_unknown_5xx_without_status_is_an_internal_error_quoting_the_body() -> None:
    error = api_error_from_response(response(502, b"bad gateway"))
    assert error.code == 502 and error.reason == "InternalError"
    assert error.message.startswith(
        "an error on the server ('bad gateway') has prevented the request from succeeding"
    )


def test_an_unknown_4xx_without_status_says_so_and_has_no_reason() -> None:
    error = api_error_from_response(response(418, b""))
    assert error.reason == ""
    assert error.message.startswith(
        "the server responded with the status code 418 but did not return more information"
    )
    assert "details" not in error.status or "causes" not in error.status["details"]


def test_a_status_without_code_or_message_gets_the_http_code_and_a_message() -> None:
    error = api_error_from_response(response(401, b'{"kind":"Status","metadata":null}'))
    assert error.code == 401
    assert error.message == "the server has asked for the client to provide credentials"
    assert error.status["metadata"] == {}


def test_a_watch_error_object_is_an_api_error_only_if_it_is_a_status() -> None:
    sent = status.too_old_resource_version(5, 10).status
    error = api_error_from_status(dict(sent))
    assert error is not None and error.status == sent
    assert api_error_from_status({"kind": "Pod"}) is None
    assert api_error_from_status("nonsense") is None


def test_connection_refused_is_named() -> None:
    exc = caused(
        httpx.ConnectError("All connection attempts failed", request=REQUEST),
        OSError("All connection attempts failed"),
        ConnectionRefusedError(111, "Connect call failed"),
    )
    error = transport_error(exc)
    assert isinstance(error, TransportError)
    assert error.connection_refused
    assert str(error) == (
        "GET https://10.0.0.1:6443/api/v1/pods: connection to https://10.0.0.1:6443 refused "
        "(is the API server running?)"
    )


def test_a_certificate_verify_failure_names_the_verify_reason() -> None:
    cause = ssl.SSLCertVerificationError(1, "certificate verify failed")
    cause.verify_message = "unable to get local issuer certificate"
    exc = caused(httpx.ConnectError("ssl", request=REQUEST), cause)
    assert str(transport_error(exc)).endswith(
        "TLS handshake with https://10.0.0.1:6443 failed: certificate verify failed: "
        "unable to get local issuer certificate"
    )


def test_a_reset_during_a_watch_says_where_it_happened() -> None:
    exc = caused(httpx.ReadError("", request=REQUEST), ConnectionResetError(104, "reset"))
    assert not transport_error(exc).connection_refused
    assert str(transport_error(exc, during="the watch stream")) == (
        "GET https://10.0.0.1:6443/api/v1/pods: connection reset by https://10.0.0.1:6443 "
        "(during the watch stream)"
    )


def test_an_unresolvable_host_is_named() -> None:
    exc = caused(
        httpx.ConnectError("x", request=REQUEST),
        socket.gaierror(socket.EAI_NONAME, "Name or service not known"),
    )
    assert "cannot resolve the host of https://10.0.0.1:6443: Name or service not known" in str(
        transport_error(exc)
    )


def test_a_cut_response_is_a_protocol_error() -> None:
    exc = httpx.RemoteProtocolError("incomplete chunked read", request=REQUEST)
    assert str(transport_error(exc)).endswith(
        "https://10.0.0.1:6443 closed the connection or broke the HTTP protocol: "
        "incomplete chunked read"
    )


def test_timeouts_say_how_long_was_waited() -> None:
    request = httpx.Request(
        "GET", "https://10.0.0.1:6443/api/v1/pods", extensions={"timeout": {"read": 60.0}}
    )
    assert str(transport_error(httpx.ReadTimeout("", request=request))).endswith(
        "https://10.0.0.1:6443 sent nothing for 60.0 s"
    )
    request = httpx.Request(
        "GET", "https://10.0.0.1:6443/version", extensions={"timeout": {"connect": 10.0}}
    )
    assert str(transport_error(httpx.ConnectTimeout("", request=request))).endswith(
        "timed out connecting to https://10.0.0.1:6443 after 10.0 s"
    )


def test_an_error_without_a_request_still_translates() -> None:
    assert str(transport_error(httpx.ConnectError("boom"))).startswith("the upstream: ")
