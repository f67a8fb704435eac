"""The simulator reads protobuf request bodies of a few kinds (kubectl 1.32+'s typed clients send
them): its decoder, fed the real API server's own protobuf encoding of each kind, gives back what
the API server answers in JSON."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from cacheproxy.kube.protobuf import PROTOBUF
from cacheproxy.kube.protoobjects import decode_object
from tests.e2e.support import create, fresh_namespace

pytestmark = pytest.mark.every_server


def _objects(ns: str) -> list[tuple[str, dict[str, Any]]]:
    meta = {"labels": {"app": "x", "tier": "web"}, "annotations": {"note": "a b c"}}
    return [
        (
            f"/api/v1/namespaces/{ns}/configmaps",
            {
                "metadata": {"name": "cm", **meta, "finalizers": ["example.com/keep"]},
                "data": {"a": "1", "empty": ""},
                "binaryData": {"bin": "AAEC/w=="},
                "immutable": False,
            },
        ),
        (
            f"/api/v1/namespaces/{ns}/secrets",
            {
                "metadata": {"name": "s", **meta},
                "type": "example.com/kind",
                "data": {"k": "czNjcmV0"},
            },
        ),
        (
            f"/api/v1/namespaces/{ns}/serviceaccounts",
            {
                "metadata": {"name": "sa", **meta},
                "imagePullSecrets": [{"name": "pull"}],
                "automountServiceAccountToken": False,
            },
        ),
        ("/api/v1/namespaces", {"metadata": {"name": f"{ns}-x", **meta}}),
    ]


async def test_the_decoder_reads_the_api_servers_protobuf_as_its_json(
    upstream: httpx.AsyncClient,
) -> None:
    ns = await fresh_namespace(upstream, "pb")
    for collection, body in _objects(ns):
        made = await create(upstream, collection, body)
        path = f"{collection}/{made['metadata']['name']}"
        as_json = (await upstream.get(path)).json()
        encoded = await upstream.get(path, headers={"Accept": PROTOBUF})
        assert encoded.headers["content-type"] == PROTOBUF
        decoded = decode_object(encoded.content)
        assert decoded is not None, path
        as_json["metadata"].pop("managedFields")
        assert decoded == as_json, path
