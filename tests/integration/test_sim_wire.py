"""Answers of the simulator's write path worded as kube-apiserver words them (found by
``tests/e2e/test_differential.py``): pretty JSON for terminals, the 415 of a patch type it does not
take, the decoder's answer to a body of another kind, and JSON patches as the API server's
library applies them."""

from __future__ import annotations

import json

import httpx

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


async def test_a_terminal_gets_indented_json_without_a_trailing_newline(
    client: httpx.AsyncClient,
) -> None:
    response = await client.get("/api/v1/namespaces/default", headers={"User-Agent": "curl/8.5"})
    assert response.text.startswith('{\n  "kind": "Namespace",\n')
    assert response.text.endswith("}")


async def test_a_patch_of_a_type_it_does_not_take_is_the_api_servers_415(
    client: httpx.AsyncClient,
) -> None:
    await client.post(CONFIGMAPS, json={"metadata": {"name": "c"}})
    response = await client.patch(
        f"{CONFIGMAPS}/c", content=b"{}", headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 415
    assert (response.json()["message"], response.json()["details"]) == (
        "415: Unsupported Media Type",
        {},
    )


async def test_a_protobuf_body_it_does_not_read_is_refused_with_a_415_saying_what_to_send(
    client: httpx.AsyncClient,
) -> None:
    # A typed client-go client's create (kubectl 1.32+ create configmap): envelope, then bytes.
    response = await client.post(
        CONFIGMAPS,
        content=b"k8s\x00\n\x0f\n\x02v1\x12\tEndpoints",
        headers={"Content-Type": "application/vnd.kubernetes.protobuf"},
    )
    assert response.status_code == 415
    assert (
        "decodes protobuf request bodies of ConfigMap, Namespace, Secret, ServiceAccount only"
        in (response.json()["message"])
    )
    assert (await client.get(CONFIGMAPS)).json()["items"] == []


async def test_a_body_of_another_kind_is_a_failed_conversion(client: httpx.AsyncClient) -> None:
    body = {"kind": "Secret", "apiVersion": "v1", "metadata": {"name": "x"}}
    response = await client.post(CONFIGMAPS, json=body)
    assert response.status_code == 400
    assert response.json()["message"] == (
        'Secret in version "v1" cannot be handled as a ConfigMap: converting (v1.Secret) to '
        "(core.ConfigMap): unknown conversion"
    )
    other = {"kind": "ReplicaSet", "apiVersion": "apps/v1", "metadata": {"name": "x"}}
    response = await client.post("/apis/apps/v1/namespaces/default/deployments", json=other)
    assert response.json()["message"] == (
        'ReplicaSet in version "v1" cannot be handled as a Deployment: converting '
        "(v1.ReplicaSet) to (apps.Deployment): unknown conversion"
    )


async def test_a_json_patch_replacing_a_missing_key_adds_it(client: httpx.AsyncClient) -> None:
    await client.post(CONFIGMAPS, json={"metadata": {"name": "c"}, "data": {"a": "1"}})
    patch = [{"op": "replace", "path": "/data/b", "value": "2"}]
    response = await client.patch(
        f"{CONFIGMAPS}/c",
        content=json.dumps(patch).encode(),
        headers={"Content-Type": "application/json-patch+json"},
    )
    assert response.status_code == 200
    assert response.json()["data"] == {"a": "1", "b": "2"}
    missing_parent = [{"op": "replace", "path": "/nope/b", "value": "2"}]
    response = await client.patch(
        f"{CONFIGMAPS}/c",
        content=json.dumps(missing_parent).encode(),
        headers={"Content-Type": "application/json-patch+json"},
    )
    assert response.status_code == 422
    assert (response.json()["message"], response.json()["details"]) == (
        "the server rejected our request due to an error in our request",
        {},
    )


async def test_a_continue_token_is_decoded_before_its_rv_is_checked(
    client: httpx.AsyncClient,
) -> None:
    response = await client.get(CONFIGMAPS, params={"continue": "x", "resourceVersion": "5"})
    assert response.status_code == 400
    assert response.json()["message"].startswith("invalid continue token: ")
