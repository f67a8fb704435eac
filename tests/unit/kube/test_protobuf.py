"""A Status in protobuf, byte for byte as kube-apiserver writes it (1.28 and 1.32 wrote the same
bytes for these, captured from them), and who is answered in protobuf."""

from __future__ import annotations

import pytest

from cacheproxy.kube import status
from cacheproxy.kube.protobuf import accepts_only_protobuf, status_protobuf

# A custom resource asked for with `Accept: application/vnd.kubernetes.protobuf`.
NOT_ENCODABLE = (
    b"k8s\x00\n\x0c\n\x02v1\x12\x06Status\x12\x99\x01\n\x06\n\x00\x12\x00\x1a\x00\x12\x07Failure"
    b"\x1atonly the following media types are accepted: application/json, application/yaml, "
    b'application/vnd.kubernetes.protobuf"\rNotAcceptable0\x96\x03\x1a\x00"\x00'
)
# `GET /api/v1/namespaces/ns/configmaps/nope` with the same Accept.
NOT_FOUND = (
    b"k8s\x00\n\x0c\n\x02v1\x12\x06Status\x12U\n\x06\n\x00\x12\x00\x1a\x00\x12\x07Failure\x1a\x1b"
    b'configmaps "nope" not found"\x08NotFound*\x18\n\x04nope\x12\x00\x1a\nconfigmaps(\x002\x000'
    b'\x94\x03\x1a\x00"\x00'
)
# `GET /apis/example.com/v1/namespaces/ns/widgets/nope`, `Accept: …protobuf, */*;q=0.5`.
CUSTOM_NOT_FOUND = (
    b"k8s\x00\n\x0c\n\x02v1\x12\x06Status\x12f\n\x06\n\x00\x12\x00\x1a\x00\x12\x07Failure\x1a$"
    b'widgets.example.com "nope" not found"\x08NotFound* \n\x04nope\x12\x0bexample.com\x1a\x07'
    b'widgets(\x002\x000\x94\x03\x1a\x00"\x00'
)


def test_a_406_for_an_object_that_cannot_be_encoded_is_the_api_servers_bytes() -> None:
    assert status_protobuf(status.not_encodable().status) == NOT_ENCODABLE


@pytest.mark.parametrize(
    ("error", "wire"),
    [
        (status.not_found(resource="configmaps", name="nope"), NOT_FOUND),
        (status.not_found(resource="widgets", group="example.com", name="nope"), CUSTOM_NOT_FOUND),
    ],
)
def test_a_404_with_details_is_the_api_servers_bytes(error: status.ApiError, wire: bytes) -> None:
    assert status_protobuf(error.status) == wire


def test_causes_retry_after_and_list_metadata_are_written_in_their_fields() -> None:
    error = status.too_many_requests("slow down", retry_after=3)
    body = error.status
    body["details"]["causes"] = [{"reason": "R", "message": "m", "field": "f"}]
    body["metadata"] = {"continue": "c", "remainingItemCount": 2}
    wire = status_protobuf(body)
    assert b'"\t\n\x01R\x12\x01m\x1a\x01f' in wire  # causes: field 4, reason/message/field
    assert b"(\x03" in wire  # retryAfterSeconds 3
    assert b"\n\t\n\x00\x12\x00\x1a\x01c \x02" in wire  # metadata: continue, remaining 2
    assert wire.endswith(b'0\xad\x03\x1a\x00"\x00')  # code 429


@pytest.mark.parametrize(
    ("accept", "only"),
    [
        ("application/vnd.kubernetes.protobuf", True),
        ("application/vnd.kubernetes.protobuf;stream=watch", True),
        ("application/vnd.kubernetes.protobuf, application/json", False),
        ("application/vnd.kubernetes.protobuf,*/*", False),
        ("application/json", False),
        ("text/html", False),
        ("", False),
    ],
)
def test_only_a_client_that_takes_nothing_but_protobuf_is_answered_in_it(
    accept: str, only: bool
) -> None:
    assert accepts_only_protobuf(accept) is only
