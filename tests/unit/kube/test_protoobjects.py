"""The protobuf reader of a few kinds, on bytes that are not what it reads."""

from __future__ import annotations

from cacheproxy.kube.protoobjects import decode_object

CONFIGMAP = (
    b"k8s\x00\n\x0f\n\x02v1\x12\tConfigMap\x12\x14"
    b"\n\x08\n\x02cm\x1a\x02ns"  # metadata: name, namespace
    b"\x12\x06\n\x01a\x12\x011"  # data: a=1
    b"\x20\x01"  # immutable: true
)


def test_an_object_of_a_kind_it_reads_comes_back_as_json() -> None:
    assert decode_object(CONFIGMAP) == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cm", "namespace": "ns"},
        "data": {"a": "1"},
        "immutable": True,
    }


def test_what_it_does_not_read_is_none() -> None:
    assert decode_object(b'{"kind":"ConfigMap"}') is None  # not the envelope
    assert decode_object(CONFIGMAP[:-5]) is None  # truncated
    assert decode_object(CONFIGMAP.replace(b"\tConfigMap", b"\tEndpoints")) is None
    assert decode_object(b"k8s\x00\x0f") is None  # a wire type that does not exist
