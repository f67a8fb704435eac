"""PartialObjectMetadata as kube-apiserver writes it (ObjectMeta's field order whatever the
object's, ``creationTimestamp`` always there), the list metadata every list carries, and the
negotiation of the form a read is answered in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from cacheproxy.kube.negotiation import AS_STORED, AnswerAs, negotiate_answer
from cacheproxy.kube.partial import (
    Reform,
    list_meta,
    object_meta,
    partial_list_head,
    partial_object_metadata,
)


def ordered(value: Any) -> Any:
    """``value`` with every mapping as its list of items: equality then includes key order."""
    if isinstance(value, dict):
        return [(k, ordered(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [ordered(v) for v in value]
    return value


def test_a_custom_resources_alphabetical_metadata_comes_out_in_object_meta_order(
    samples_dir: Path,
) -> None:
    # The real API server's Table rows carry PartialObjectMetadata (includeObject=Metadata)
    # of the same objects its list returns with alphabetical metadata.
    tables = samples_dir / "tables"
    items = orjson.loads(
        (tables / "list_apis_example.com_v1_namespaces_tables_widgets.json").read_bytes()
    )
    table = orjson.loads(
        (tables / "table_apis_example.com_v1_namespaces_tables_widgets.json").read_bytes()
    )
    assert len(items["items"]) == len(table["rows"]) > 0
    for item, row in zip(items["items"], table["rows"], strict=True):
        assert ordered(partial_object_metadata(item, "meta.k8s.io/v1")) == ordered(row["object"])


def test_a_pods_metadata_is_kept_as_it_is(samples_dir: Path) -> None:
    pod = orjson.loads((samples_dir / "protocol" / "pod.json").read_bytes())
    partial = orjson.loads(Reform("meta.k8s.io/v1").encode(orjson.dumps(pod)))
    assert list(partial) == ["kind", "apiVersion", "metadata"]
    assert partial["kind"] == "PartialObjectMetadata"
    assert ordered(partial["metadata"]) == ordered(pod["metadata"])


def test_object_meta_writes_creation_timestamp_null_and_leaves_out_empty_values() -> None:
    meta = object_meta(
        {
            "uid": "u",
            "name": "n",
            "generation": 0,
            "labels": {},
            "clusterName": "",
            "deletionGracePeriodSeconds": 0,
            "ownerReferences": [
                {
                    "uid": "o",
                    "name": "rs",
                    "kind": "ReplicaSet",
                    "controller": False,
                    "apiVersion": "apps/v1",
                }
            ],
        }
    )
    assert ordered(meta) == ordered(
        {
            "name": "n",
            "uid": "u",
            "creationTimestamp": None,
            "deletionGracePeriodSeconds": 0,
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "rs",
                    "uid": "o",
                    "controller": False,
                }
            ],
        }
    )


def test_a_partial_list_has_the_api_servers_head(samples_dir: Path) -> None:
    sample = (samples_dir / "protocol" / "partialobjectmetadatalist_limit2.http").read_bytes()
    body = (
        sample.split(b"\r\n\r\n", 1)[-1] if b"\r\n\r\n" in sample else sample.split(b"\n\n", 1)[1]
    )
    doc = orjson.loads(body)
    meta = doc["metadata"]
    head = partial_list_head(
        "meta.k8s.io/v1",
        list_meta(
            meta["resourceVersion"],
            continue_token=meta["continue"],
            remaining=meta["remainingItemCount"],
        ),
    )
    assert body.startswith(head)


def test_list_meta_echoes_a_shard_selector_after_the_paging_fields() -> None:
    assert list_meta(7) == b'{"resourceVersion":"7"}'
    assert list_meta(7, remaining=3) == b'{"resourceVersion":"7"}'
    assert list_meta(7, continue_token="t", remaining=3, shard_selector="s") == (
        b'{"resourceVersion":"7","continue":"t","remainingItemCount":3,"shardInfo":{"selector":"s"}}'
    )


METADATA_LIST = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
METADATA = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1beta1,application/json"
KUBECTL = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"


@pytest.mark.parametrize(
    ("accept", "verb", "expected"),
    [
        ("", "list", AS_STORED),
        ("application/json", "list", AS_STORED),
        (METADATA_LIST, "list", AnswerAs("metadata", "v1")),
        (METADATA_LIST, "get", AS_STORED),  # the list form is skipped for one object
        (METADATA, "get", AnswerAs("metadata", "v1beta1")),
        (METADATA, "watch", AnswerAs("metadata", "v1beta1")),
        (METADATA, "list", AS_STORED),
        (METADATA, None, AS_STORED),
        (KUBECTL, "list", AnswerAs("table", "v1")),
        ("application/yaml", "list", None),
        ("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v2", "get", None),
        (
            "application/json;drop=metadata.managedFields",
            "list",
            AnswerAs(drop_managed_fields=True),
        ),
        (
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1;drop=metadata.managedFields",
            "watch",
            AnswerAs("metadata", "v1", drop_managed_fields=True),
        ),
        ("application/json;drop=metadata.labels", "get", AS_STORED),  # only managedFields
    ],
)
def test_the_form_is_the_first_usable_clause(
    accept: str, verb: str | None, expected: AnswerAs | None
) -> None:
    assert negotiate_answer(accept, verb=verb) == expected


def test_a_reform_drops_managed_fields_and_keeps_the_rest_in_its_order() -> None:
    obj = {
        "kind": "ConfigMap",
        "metadata": {"name": "a", "managedFields": [{"manager": "m"}], "uid": "u"},
        "data": {"k": "v"},
    }
    raw = orjson.dumps(obj)
    dropped = Reform(drop_managed_fields=True).encode(raw)
    assert dropped == b'{"kind":"ConfigMap","metadata":{"name":"a","uid":"u"},"data":{"k":"v"}}'
    partial = orjson.loads(Reform("meta.k8s.io/v1", drop_managed_fields=True).encode(raw))
    assert partial["metadata"] == {"name": "a", "uid": "u", "creationTimestamp": None}
    kept = orjson.loads(Reform("meta.k8s.io/v1").encode(raw))
    assert kept["metadata"]["managedFields"] == [{"manager": "m"}]
