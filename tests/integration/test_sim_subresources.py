"""The simulator's writes as kube-apiserver's registry strategies shape them: ``/status`` and the
main resource each change their half of an object, pods are bound through ``/binding``, and
collections can be deleted. What a real 1.28 server answers here is checked by
``tests/e2e/test_differential.py``; these tests pin the simulator's side without one.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from cacheproxy.sim import Simulator

Json = dict[str, Any]
PODS = "/api/v1/namespaces/default/pods"
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
MERGE = {"Content-Type": "application/merge-patch+json"}
POD = {
    "metadata": {"name": "p", "labels": {"app": "a"}},
    "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    "status": {"phase": "Running"},
}


async def patch(client: httpx.AsyncClient, path: str, body: Json) -> httpx.Response:
    return await client.patch(path, content=json.dumps(body).encode(), headers=MERGE)


async def created(client: httpx.AsyncClient, collection: str, body: Json) -> Json:
    response = await client.post(collection, json=body)
    assert response.status_code == 201, response.text
    obj: Json = response.json()
    return obj


def deployment(name: str = "d") -> Json:
    labels = {"app": name}
    return {
        "metadata": {"name": name, "labels": {"team": "x"}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": []}},
        },
        "status": {"replicas": 5},
    }


async def test_a_created_pod_starts_pending_with_its_qos_class_whatever_its_body_says(
    client: httpx.AsyncClient,
) -> None:
    pod = await created(client, PODS, POD)
    assert pod["status"] == {"phase": "Pending", "qosClass": "BestEffort"}


async def test_a_created_deployment_starts_with_an_empty_status(client: httpx.AsyncClient) -> None:
    assert (await created(client, DEPLOYMENTS, deployment()))["status"] == {}


async def test_a_configmap_keeps_what_its_body_says(client: httpx.AsyncClient) -> None:
    body = {"metadata": {"name": "c"}, "data": {"a": "b"}, "status": {"kept": True}}
    made = await created(client, "/api/v1/namespaces/default/configmaps", body)
    assert made["status"] == {"kept": True}


async def test_a_status_patch_changes_the_status_and_metadata_but_not_the_spec(
    client: httpx.AsyncClient,
) -> None:
    await created(client, PODS, POD)
    change = {
        "metadata": {"labels": {"by": "status"}},
        "spec": {"activeDeadlineSeconds": 5},
        "status": {"phase": "Running", "podIP": "10.0.0.1"},
    }
    response = await patch(client, f"{PODS}/p/status", change)
    assert response.status_code == 200
    pod = response.json()
    assert pod["status"]["phase"] == "Running" and pod["status"]["podIP"] == "10.0.0.1"
    assert pod["metadata"]["labels"] == {"app": "a", "by": "status"}
    assert "activeDeadlineSeconds" not in pod["spec"]
    assert (await client.get(f"{PODS}/p")).json() == pod


async def test_a_main_resource_patch_changes_the_spec_but_not_the_status(
    client: httpx.AsyncClient,
) -> None:
    await created(client, PODS, POD)
    change = {"spec": {"activeDeadlineSeconds": 5}, "status": {"phase": "Failed"}}
    pod = (await patch(client, f"{PODS}/p", change)).json()
    assert pod["spec"]["activeDeadlineSeconds"] == 5
    assert pod["status"]["phase"] == "Pending"


async def test_a_status_put_keeps_the_spec_and_the_pods_owner_references(
    client: httpx.AsyncClient,
) -> None:
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u-1"}
    await created(client, PODS, {**POD, "metadata": {"name": "p", "ownerReferences": [owner]}})
    pod = (await client.get(f"{PODS}/p")).json()
    pod["metadata"]["ownerReferences"] = []
    pod["spec"]["nodeName"] = "elsewhere"
    pod["status"]["phase"] = "Succeeded"
    response = await client.put(f"{PODS}/p/status", json=pod)
    assert response.status_code == 200
    stored = response.json()
    assert stored["status"]["phase"] == "Succeeded"
    assert stored["metadata"]["ownerReferences"] == [owner]
    assert "nodeName" not in stored["spec"]


async def test_a_deployments_status_write_keeps_its_labels_and_generation(
    client: httpx.AsyncClient,
) -> None:
    await created(client, DEPLOYMENTS, deployment())
    change = {"metadata": {"labels": {"team": "y"}}, "status": {"replicas": 1}}
    stored = (await patch(client, f"{DEPLOYMENTS}/d/status", change)).json()
    assert stored["metadata"]["labels"] == {"team": "x"}
    assert stored["metadata"]["generation"] == 1
    assert stored["status"] == {"replicas": 1}
    spec_change = (await patch(client, f"{DEPLOYMENTS}/d", {"spec": {"replicas": 3}})).json()
    assert spec_change["metadata"]["generation"] == 2
    assert spec_change["status"] == {"replicas": 1}


async def test_status_is_read_at_its_own_path(client: httpx.AsyncClient) -> None:
    pod = await created(client, PODS, POD)
    response = await client.get(f"{PODS}/p/status")
    assert response.status_code == 200
    assert response.json() == pod


async def test_a_status_of_a_missing_object_is_that_objects_404(client: httpx.AsyncClient) -> None:
    response = await patch(client, f"{PODS}/nope/status", {"status": {}})
    assert response.status_code == 404
    assert response.json()["message"] == 'pods "nope" not found'
    assert response.json()["details"] == {"name": "nope", "kind": "pods"}


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/namespaces/default/configmaps/c/status",
        f"{PODS}/p/log",
        f"{PODS}/p/binding/extra",
    ],
)
async def test_a_subresource_the_kind_does_not_have_is_a_404(
    client: httpx.AsyncClient, path: str
) -> None:
    response = await client.get(path)
    assert response.status_code == 404
    assert response.json()["message"] == "the server could not find the requested resource"


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", f"{PODS}/p/status"),
        ("GET", f"{PODS}/p/binding"),
        ("PUT", f"{PODS}/p/binding"),
        ("POST", f"{PODS}/p"),
        ("PUT", PODS),
        ("PATCH", PODS),
        ("DELETE", "/api/v1/namespaces"),
    ],
)
async def test_a_method_a_path_has_no_route_for_is_the_api_servers_405(
    client: httpx.AsyncClient, method: str, path: str
) -> None:
    response = await client.request(method, path, json={})
    assert response.status_code == 405
    assert response.json() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "the server does not allow this method on the requested resource",
        "reason": "MethodNotAllowed",
        "details": {},
        "code": 405,
    }


def binding(name: str, node: str = "node-1", **meta: Any) -> Json:
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name, **meta},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


async def test_a_binding_sets_the_node_annotations_and_the_scheduled_condition_once(
    client: httpx.AsyncClient,
) -> None:
    before = await created(client, PODS, POD)
    response = await client.post(
        f"{PODS}/p/binding", json=binding("p", annotations={"scheduled-by": "me"})
    )
    assert response.status_code == 201
    assert response.json() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "code": 201,
    }
    pod = (await client.get(f"{PODS}/p")).json()
    assert pod["spec"]["nodeName"] == "node-1"
    assert pod["metadata"]["annotations"] == {"scheduled-by": "me"}
    (condition,) = pod["status"]["conditions"]
    assert (condition["type"], condition["status"]) == ("PodScheduled", "True")
    assert int(pod["metadata"]["resourceVersion"]) == int(before["metadata"]["resourceVersion"]) + 1

    again = await client.post(f"{PODS}/p/binding", json=binding("p", "node-2"))
    assert again.status_code == 409
    assert again.json()["message"] == (
        'Operation cannot be fulfilled on pods/binding "p": pod p is already assigned to node '
        '"node-1"'
    )
    assert again.json()["details"] == {"name": "p", "kind": "pods/binding"}


async def test_a_binding_for_another_pod_or_no_node_is_refused(client: httpx.AsyncClient) -> None:
    await created(client, PODS, POD)
    other = await client.post(f"{PODS}/p/binding", json=binding("q"))
    assert (other.status_code, other.json()["message"]) == (
        400,
        "name in URL does not match name in Binding object",
    )
    nowhere = await client.post(f"{PODS}/p/binding", json=binding("p", ""))
    assert (nowhere.status_code, nowhere.json()["message"]) == (500, "target.name: Required value")
    missing = await client.post(f"{PODS}/nope/binding", json=binding("nope"))
    assert (missing.status_code, missing.json()["message"]) == (404, 'pods "nope" not found')


async def test_a_watcher_sees_a_binding_as_one_modification(
    client: httpx.AsyncClient, sim: Simulator
) -> None:
    pod = await created(client, PODS, POD)
    params = {"watch": "1", "resourceVersion": pod["metadata"]["resourceVersion"]}
    async with client.stream("GET", PODS, params=params) as watch:
        await client.post(f"{PODS}/p/binding", json=binding("p"))
        lines = watch.aiter_lines()
        event = json.loads(await anext(lines))
    assert event["type"] == "MODIFIED"
    assert event["object"]["spec"]["nodeName"] == "node-1"


async def test_deleting_a_collection_deletes_what_the_selectors_match(
    client: httpx.AsyncClient, sim: Simulator
) -> None:
    configmaps = "/api/v1/namespaces/default/configmaps"
    for name, app in (("a", "x"), ("b", "y"), ("c", "x")):
        await created(client, configmaps, {"metadata": {"name": name, "labels": {"app": app}}})
    response = await client.delete(configmaps, params={"labelSelector": "app=x"})
    assert response.status_code == 200
    body = response.json()
    assert (body["kind"], body["apiVersion"]) == ("ConfigMapList", "v1")
    assert body["metadata"] == {"resourceVersion": str(sim.store.rv)}
    assert [i["metadata"]["name"] for i in body["items"]] == ["a", "c"]
    left = (await client.get(configmaps)).json()["items"]
    assert [i["metadata"]["name"] for i in left] == ["b"]


async def test_a_watch_parameter_on_an_object_path_is_a_get(client: httpx.AsyncClient) -> None:
    # As kube-apiserver: a named watch is the /watch/ prefix or a metadata.name field selector.
    pod = await created(client, PODS, POD)
    response = await client.get(f"{PODS}/p", params={"watch": "1"})
    assert response.status_code == 200
    assert response.json() == pod
    async with client.stream("GET", "/api/v1/watch/namespaces/default/pods/p") as watch:
        event = json.loads(await anext(watch.aiter_lines()))
    assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "p")


async def test_discovery_lists_the_subresources_and_verbs_served(client: httpx.AsyncClient) -> None:
    core = {r["name"]: r for r in (await client.get("/api/v1")).json()["resources"]}
    assert core["pods/status"] == {
        "name": "pods/status",
        "singularName": "",
        "namespaced": True,
        "kind": "Pod",
        "verbs": ["get", "patch", "update"],
    }
    assert core["pods/binding"]["kind"] == "Binding"
    assert core["pods/binding"]["verbs"] == ["create"]
    assert "configmaps/status" not in core
    assert "deletecollection" in core["pods"]["verbs"]
    assert "deletecollection" not in core["namespaces"]["verbs"]
    accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    doc = (await client.get("/apis", headers={"Accept": accept})).json()
    (apps,) = [g for g in doc["items"] if g["metadata"].get("name") == "apps"]
    (deployments,) = [r for r in apps["versions"][0]["resources"] if r["resource"] == "deployments"]
    assert deployments["subresources"] == [
        {
            "subresource": "status",
            "responseKind": {"group": "", "version": "", "kind": "Deployment"},
            "verbs": ["get", "patch", "update"],
        }
    ]
