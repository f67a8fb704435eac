"""The simulator answers in the form the client's ``Accept`` asks: a ``meta.k8s.io`` Table (what
``kubectl get`` prints from), ``PartialObjectMetadata``, or the object; else the API server's 406.
"""

from __future__ import annotations

import json

import httpx
import pytest

from cacheproxy.sim import Simulator

KUBECTL = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,"
    "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
)
PODS = "/api/v1/namespaces/ns-1/pods"


async def test_a_list_as_a_table_has_the_printers_columns_and_a_row_per_item(
    demo_client: httpx.AsyncClient,
) -> None:
    plain = (await demo_client.get(PODS, params={"limit": "3"})).json()
    response = await demo_client.get(PODS, params={"limit": "3"}, headers={"Accept": KUBECTL})
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    table = response.json()
    assert (table["kind"], table["apiVersion"]) == ("Table", "meta.k8s.io/v1")
    assert table["metadata"] == plain["metadata"]
    columns = [c["name"] for c in table["columnDefinitions"]]
    assert columns[:5] == ["Name", "Ready", "Status", "Restarts", "Age"]
    assert [r["cells"][0] for r in table["rows"]] == [i["metadata"]["name"] for i in plain["items"]]
    first = table["rows"][0]["object"]
    assert (first["kind"], first["apiVersion"]) == ("PartialObjectMetadata", "meta.k8s.io/v1")
    assert first["metadata"] == plain["items"][0]["metadata"]


async def test_a_table_can_carry_whole_objects_or_none(demo_client: httpx.AsyncClient) -> None:
    whole = await demo_client.get(
        PODS, params={"includeObject": "Object"}, headers={"Accept": KUBECTL}
    )
    assert whole.json()["rows"][0]["object"]["kind"] == "Pod"
    bare = await demo_client.get(
        PODS, params={"includeObject": "None"}, headers={"Accept": KUBECTL}
    )
    assert "object" not in bare.json()["rows"][0]
    bad = await demo_client.get(PODS, params={"includeObject": "All"}, headers={"Accept": KUBECTL})
    assert bad.status_code == 400
    assert bad.json()["message"] == (
        'Unable to convert to Table as requested: includeObject: Invalid value: "All": must be '
        "'Metadata', 'Object', 'None', or empty"
    )


async def test_one_object_as_a_table_is_one_row_at_its_resource_version(
    demo_client: httpx.AsyncClient,
) -> None:
    node = (await demo_client.get("/api/v1/nodes/node-1")).json()
    table = (await demo_client.get("/api/v1/nodes/node-1", headers={"Accept": KUBECTL})).json()
    assert table["metadata"] == {"resourceVersion": node["metadata"]["resourceVersion"]}
    assert [r["cells"][:2] for r in table["rows"]] == [["node-1", "Ready"]]


async def test_watch_events_as_tables_carry_the_columns_once(
    client: httpx.AsyncClient, sim: Simulator
) -> None:
    configmaps = sim.resource("configmaps")
    params = {"watch": "1", "resourceVersion": str(sim.store.rv)}
    async with client.stream(
        "GET", "/api/v1/namespaces/default/configmaps", params=params, headers={"Accept": KUBECTL}
    ) as watch:
        sim.store.create(configmaps, {"metadata": {"name": "a", "namespace": "default"}})
        sim.store.create(configmaps, {"metadata": {"name": "b", "namespace": "default"}})
        lines = watch.aiter_lines()
        events = [json.loads(await anext(lines)) for _ in range(2)]
    assert [e["object"]["kind"] for e in events] == ["Table", "Table"]
    assert [c["name"] for c in events[0]["object"]["columnDefinitions"]] == ["Name", "Data", "Age"]
    assert events[1]["object"]["columnDefinitions"] == []
    assert [e["object"]["rows"][0]["cells"][0] for e in events] == ["a", "b"]


@pytest.mark.parametrize(
    "accept",
    [
        "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
        "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,"
        "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
    ],
)
async def test_a_metadata_client_gets_partial_object_metadata(
    demo_client: httpx.AsyncClient, accept: str
) -> None:
    body = (await demo_client.get(PODS, headers={"Accept": accept})).json()
    assert body["kind"] == "PartialObjectMetadataList"
    assert {i["kind"] for i in body["items"]} == {"PartialObjectMetadata"}


@pytest.mark.parametrize("path", [PODS, f"{PODS}?watch=1", "/api/v1/nodes/node-1"])
async def test_an_accept_nothing_can_answer_is_the_api_servers_406(
    demo_client: httpx.AsyncClient, path: str
) -> None:
    response = await demo_client.get(path, headers={"Accept": "text/html"})
    assert response.status_code == 406
    assert response.json()["reason"] == "NotAcceptable"
    assert response.json()["details"] == {}
    assert response.json()["message"] == (
        "406: Not Acceptable\n\nAvailable representations: application/json, application/yaml, "
        "application/vnd.kubernetes.protobuf, application/json;stream=watch, "
        "application/vnd.kubernetes.protobuf;stream=watch"
    )
