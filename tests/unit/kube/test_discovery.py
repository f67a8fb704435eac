"""Discovery documents match the real server's for the resources we serve; Accept negotiation picks
aggregated discovery the way the API server does.

What is compared with the samples (``k8s-samples/protocol/discovery_*``, a 1.28 server):

* every field of every built-in resource entry, and the key order of the entry, **except**
  ``verbs`` (the proxy serves only get/list/watch) and, in aggregated discovery, ``subresources``
  (the proxy serves none). ``storageVersionHash`` is compared exactly: it depends only on
  group/version/Kind, and it is present because the verbs we pass include ``watch``;
* the document skeleton: top-level keys and values, group metadata, per-version keys and
  ``freshness``, and ``/api`` and ``/apis`` legacy documents for the groups we serve.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest

from cacheproxy.kube.discovery import (
    AGGREGATED_VERSIONS,
    aggregated_content_type,
    aggregated_discovery,
    api_group,
    api_group_list,
    api_resource_list,
    api_versions,
    negotiate_aggregated,
    storage_version_hash,
)
from cacheproxy.kube.resources import (
    BUILTIN_RESOURCES,
    GroupVersion,
    ResourceRegistry,
    ResourceType,
    builtin,
)
from cacheproxy.kube.versions import KubeVersion

READ_VERBS = ["get", "list", "watch"]
REGISTRY = ResourceRegistry(BUILTIN_RESOURCES)
CORE = GroupVersion("", "v1")
GROUPED = [gv for gv in REGISTRY.group_versions() if gv.group]

V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
V2BETA1 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
# client-go 1.30+ (discovery_client.go acceptDiscoveryFormats): v2, then v2beta1, then legacy.
CLIENT_GO_CURRENT = f"{V2},{V2BETA1},application/json"
# The research notes' client-go: v2, then legacy.
CLIENT_GO_V2_ONLY = f"{V2},application/json"
# kubectl's Accept for a list (Table first): never aggregated discovery.
KUBECTL_TABLE = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;"
    "g=meta.k8s.io,application/json"
)


def http_body(path: Path) -> bytes:
    _, sep, body = path.read_bytes().partition(b"\r\n\r\n")
    assert sep, f"{path.name} has no header/body separator"
    return body.strip()


def protocol(samples_dir: Path, name: str) -> Any:
    path = samples_dir / "protocol" / name
    return orjson.loads(http_body(path) if name.endswith(".http") else path.read_bytes())


def read_verbs(_: ResourceType) -> list[str]:
    return list(READ_VERBS)


def without(entry: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k not in keys}


def kubectl_discovery_accepts(samples_dir: Path) -> list[str]:
    """The Accept headers kubectl 1.28 sent on ``GET /api`` and ``GET /apis`` in the trace."""
    trace = (samples_dir / "protocol" / "kubectl_get_pods_fresh_discovery_cache_v8.txt").read_text()
    accepts: list[str] = []
    in_discovery_request = False
    for line in trace.splitlines():
        if re.search(r"\] GET \S+", line):
            in_discovery_request = bool(re.search(r"\] GET https://[^/]+/apis?\?", line))
        elif in_discovery_request and (found := re.search(r"\]\s+Accept: (.*)$", line)):
            accepts.append(found.group(1).strip())
    return accepts


# --- negotiation ----------------------------------------------------------------------------------


def test_kubectl_1_28_from_the_trace_gets_v2beta1(samples_dir: Path) -> None:
    accepts = kubectl_discovery_accepts(samples_dir)
    assert accepts == [f"{V2BETA1},application/json"] * 2
    assert [negotiate_aggregated(a) for a in accepts] == ["v2beta1", "v2beta1"]


@pytest.mark.parametrize(
    ("accept", "version"),
    [
        (CLIENT_GO_CURRENT, "v2"),
        (CLIENT_GO_V2_ONLY, "v2"),
        (f"{V2},{V2BETA1}", "v2"),
        (f"{V2BETA1},{V2}", "v2beta1"),
        (V2, "v2"),
        (V2BETA1, "v2beta1"),
    ],
)
def test_the_first_aggregated_version_in_the_clients_order_wins(accept: str, version: str) -> None:
    assert negotiate_aggregated(accept) == version


@pytest.mark.parametrize(
    "accept",
    [
        "application/json;as=APIGroupDiscoveryList;v=v2;g=apidiscovery.k8s.io",
        "application/json; g=apidiscovery.k8s.io; v=v2; as=APIGroupDiscoveryList",
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList, application/json",
    ],
)
def test_parameter_order_and_spaces_do_not_matter(accept: str) -> None:
    assert negotiate_aggregated(accept) == "v2"


def test_an_unknown_aggregated_version_is_skipped_for_the_next_clause() -> None:
    v3 = "application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList"
    assert negotiate_aggregated(f"{v3},{V2BETA1}") == "v2beta1"
    assert negotiate_aggregated(f"{v3},application/json") is None


def test_from_1_33_v2beta1_is_not_served_and_a_client_asking_only_for_it_gets_legacy() -> None:
    served = KubeVersion(1, 36).aggregated_discovery_versions
    assert served == ("v2",) == KubeVersion(1, 33).aggregated_discovery_versions
    assert KubeVersion(1, 32).aggregated_discovery_versions == AGGREGATED_VERSIONS
    assert KubeVersion(1, 28).aggregated_discovery_versions == ("v2beta1",)
    assert negotiate_aggregated(f"{V2},application/json", ("v2beta1",)) is None
    assert negotiate_aggregated(f"{V2BETA1},application/json", served) is None
    assert negotiate_aggregated(f"{V2BETA1},{V2},application/json", served) == "v2"


@pytest.mark.parametrize(
    "accept",
    [
        "",
        "application/json",
        "*/*",
        "application/yaml",
        KUBECTL_TABLE,
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupList",
        "application/json;g=example.com;v=v2;as=APIGroupDiscoveryList",
    ],
)
def test_clients_that_do_not_ask_for_aggregated_discovery_get_the_legacy_documents(
    accept: str,
) -> None:
    assert negotiate_aggregated(accept) is None


def test_a_plain_json_clause_before_the_aggregated_one_means_legacy_discovery() -> None:
    # NegotiateMediaTypeOptions takes the first acceptable clause in the client's order (equal q):
    # a bare application/json first is served the legacy document.
    assert negotiate_aggregated(f"application/json,{V2}") is None


def test_the_content_type_names_the_aggregated_version_like_the_sample(samples_dir: Path) -> None:
    head = (samples_dir / "protocol" / "discovery_api_aggregated_v2beta1.http").read_bytes()
    assert f"content-type: {aggregated_content_type('v2beta1')}\r\n".encode() in head
    assert aggregated_content_type("v2") == V2
    assert AGGREGATED_VERSIONS == ("v2", "v2beta1")


# --- aggregated documents -------------------------------------------------------------------------


def core_document(version: str = "v2beta1") -> dict[str, Any]:
    return aggregated_discovery([CORE], REGISTRY.in_group_version, read_verbs, version=version)


def groups_document(version: str = "v2beta1") -> dict[str, Any]:
    return aggregated_discovery(GROUPED, REGISTRY.in_group_version, read_verbs, version=version)


def sample_entries(document: dict[str, Any]) -> dict[tuple[str, str, str], dict[str, Any]]:
    entries = {}
    for item in document["items"]:
        group = item["metadata"].get("name", "")
        for version in item["versions"]:
            for entry in version["resources"]:
                entries[(group, version["version"], entry["resource"])] = entry
    return entries


def test_the_core_document_skeleton_is_the_samples(samples_dir: Path) -> None:
    expected = protocol(samples_dir, "discovery_api_aggregated_v2beta1.http")
    ours = core_document()
    assert list(ours) == list(expected) == ["kind", "apiVersion", "metadata", "items"]
    assert without(ours, "items") == without(expected, "items")
    assert [item["metadata"] for item in ours["items"]] == [{"creationTimestamp": None}]
    assert [item["metadata"] for item in expected["items"]] == [{"creationTimestamp": None}]
    ours_versions = ours["items"][0]["versions"]
    expected_versions = expected["items"][0]["versions"]
    assert [without(v, "resources") for v in ours_versions] == [
        without(v, "resources") for v in expected_versions
    ]
    assert (
        list(ours_versions[0])
        == list(expected_versions[0])
        == ["version", "resources", "freshness"]
    )


def test_the_groups_document_skeleton_is_the_samples_for_our_groups(samples_dir: Path) -> None:
    expected = protocol(samples_dir, "discovery_apis_aggregated_v2beta1.http")
    ours = groups_document()
    assert without(ours, "items") == without(expected, "items")
    expected_items = {item["metadata"]["name"]: item for item in expected["items"]}
    assert [item["metadata"]["name"] for item in ours["items"]] == [
        "apps",
        "batch",
        "networking.k8s.io",
        "discovery.k8s.io",
        "coordination.k8s.io",
        "policy",
        "storage.k8s.io",
        "rbac.authorization.k8s.io",
        "apiextensions.k8s.io",
    ]
    for item in ours["items"]:
        theirs = expected_items[item["metadata"]["name"]]
        assert item["metadata"] == theirs["metadata"]
        assert list(item["metadata"]) == list(theirs["metadata"]) == ["name", "creationTimestamp"]
        assert [without(v, "resources") for v in item["versions"]] == [
            without(v, "resources") for v in theirs["versions"]
        ]


@pytest.mark.parametrize("rtype", BUILTIN_RESOURCES, ids=lambda t: t.config_name)
def test_every_aggregated_entry_equals_the_samples_but_for_verbs_and_subresources(
    samples_dir: Path, rtype: ResourceType
) -> None:
    if rtype.group:
        sample, document = "discovery_apis_aggregated_v2beta1.http", groups_document()
    else:
        sample, document = "discovery_api_aggregated_v2beta1.http", core_document()
    key = (rtype.group, rtype.version, rtype.resource)
    theirs = without(sample_entries(protocol(samples_dir, sample))[key], "verbs", "subresources")
    entry = sample_entries(document)[key]
    assert without(entry, "verbs") == theirs
    assert list(without(entry, "verbs")) == list(theirs)
    assert list(entry)[:5] == ["resource", "responseKind", "scope", "singularResource", "verbs"]
    assert entry["verbs"] == READ_VERBS


def test_the_pods_entry_is_the_samples_field_by_field(samples_dir: Path) -> None:
    expected = sample_entries(protocol(samples_dir, "discovery_api_aggregated_v2beta1.http"))
    pods = sample_entries(core_document())[("", "v1", "pods")]
    assert pods == {
        "resource": "pods",
        "responseKind": {"group": "", "version": "", "kind": "Pod"},
        "scope": "Namespaced",
        "singularResource": "pod",
        "verbs": ["get", "list", "watch"],
        "shortNames": ["po"],
        "categories": ["all"],
    }
    assert without(pods, "verbs") == without(expected[("", "v1", "pods")], "verbs", "subresources")


def test_the_deployments_entry_is_the_samples_field_by_field(samples_dir: Path) -> None:
    expected = sample_entries(protocol(samples_dir, "discovery_apis_aggregated_v2beta1.http"))
    deployments = sample_entries(groups_document())[("apps", "v1", "deployments")]
    assert deployments == {
        "resource": "deployments",
        "responseKind": {"group": "", "version": "", "kind": "Deployment"},
        "scope": "Namespaced",
        "singularResource": "deployment",
        "verbs": ["get", "list", "watch"],
        "shortNames": ["deploy"],
        "categories": ["all"],
    }
    assert without(deployments, "verbs") == without(
        expected[("apps", "v1", "deployments")], "verbs", "subresources"
    )


def test_resources_in_a_version_are_sorted_by_name_like_the_samples(samples_dir: Path) -> None:
    names = [r["resource"] for r in core_document()["items"][0]["versions"][0]["resources"]]
    assert names == sorted(names)
    theirs = protocol(samples_dir, "discovery_api_aggregated_v2beta1.http")
    their_names = [r["resource"] for r in theirs["items"][0]["versions"][0]["resources"]]
    assert their_names == sorted(their_names)


@pytest.mark.parametrize("version", ["v2", "v2beta1"])
def test_the_document_version_only_changes_the_api_version(version: str) -> None:
    doc = core_document(version)
    assert doc["apiVersion"] == f"apidiscovery.k8s.io/{version}"
    assert without(doc, "apiVersion") == without(core_document("v2beta1"), "apiVersion")


def test_several_versions_of_one_group_are_one_item_in_order() -> None:
    a = ResourceType("example.com", "v1", "widgets", "Widget", namespaced=True)
    b = ResourceType("example.com", "v1beta1", "widgets", "Widget", namespaced=True)
    registry = ResourceRegistry([a, b])
    doc = aggregated_discovery(
        registry.group_versions(), registry.in_group_version, read_verbs, version="v2"
    )
    assert [item["metadata"] for item in doc["items"]] == [
        {"name": "example.com", "creationTimestamp": None}
    ]
    assert [v["version"] for v in doc["items"][0]["versions"]] == ["v1", "v1beta1"]


# --- legacy documents -----------------------------------------------------------------------------


def test_the_legacy_api_document_is_the_samples_byte_for_byte(samples_dir: Path) -> None:
    raw = (samples_dir / "protocol" / "discovery_api_legacy.json").read_bytes().strip()
    assert orjson.dumps(api_versions("127.0.0.1:6443")) == raw


def test_the_legacy_group_list_is_the_samples_for_our_groups(samples_dir: Path) -> None:
    expected = protocol(samples_dir, "discovery_apis_legacy.json")
    ours = api_group_list(REGISTRY.group_versions())
    assert without(ours, "groups") == without(expected, "groups")
    assert list(ours) == list(expected) == ["kind", "apiVersion", "groups"]
    theirs = {g["name"]: g for g in expected["groups"]}
    assert ours["groups"] == [theirs[g["name"]] for g in ours["groups"]]
    assert [list(g) for g in ours["groups"]] == [list(theirs[g["name"]]) for g in ours["groups"]]
    assert [g["name"] for g in ours["groups"]] == [
        "apps",
        "batch",
        "networking.k8s.io",
        "discovery.k8s.io",
        "coordination.k8s.io",
        "policy",
        "storage.k8s.io",
        "rbac.authorization.k8s.io",
        "apiextensions.k8s.io",
    ]


def test_a_group_lists_its_versions_with_the_first_preferred() -> None:
    assert api_group("example.com", ["v1", "v1beta1"]) == {
        "name": "example.com",
        "versions": [
            {"groupVersion": "example.com/v1", "version": "v1"},
            {"groupVersion": "example.com/v1beta1", "version": "v1beta1"},
        ],
        "preferredVersion": {"groupVersion": "example.com/v1", "version": "v1"},
    }


def test_the_core_resource_list_equals_the_samples_but_for_verbs(samples_dir: Path) -> None:
    expected = protocol(samples_dir, "discovery_api_v1_resourcelist.json")
    ours = api_resource_list(CORE, REGISTRY.in_group_version(CORE), read_verbs)
    assert list(ours) == list(expected) == ["kind", "groupVersion", "resources"]
    assert without(ours, "resources") == without(expected, "resources")
    theirs = {r["name"]: r for r in expected["resources"]}
    assert [r["name"] for r in ours["resources"]] == sorted(
        t.resource for t in REGISTRY.in_group_version(CORE)
    )
    for entry in ours["resources"]:
        assert without(entry, "verbs") == without(theirs[entry["name"]], "verbs"), entry["name"]
        assert list(entry) == list(theirs[entry["name"]]), entry["name"]
        assert entry["verbs"] == READ_VERBS


def test_the_pods_resource_list_entry_is_the_samples_field_by_field(samples_dir: Path) -> None:
    ours = api_resource_list(CORE, [builtin("pods")], read_verbs)
    assert ours["resources"] == [
        {
            "name": "pods",
            "singularName": "pod",
            "namespaced": True,
            "kind": "Pod",
            "verbs": ["get", "list", "watch"],
            "shortNames": ["po"],
            "categories": ["all"],
            "storageVersionHash": "xPOwRZ+Yhw8=",
        }
    ]


def test_a_group_resource_list_carries_an_api_version() -> None:
    apps = GroupVersion("apps", "v1")
    doc = api_resource_list(apps, [builtin("deployments")], read_verbs)
    assert list(doc) == ["kind", "apiVersion", "groupVersion", "resources"]
    assert without(doc, "resources") == {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": "apps/v1",
    }
    assert doc["resources"][0]["storageVersionHash"] == storage_version_hash(builtin("deployments"))


def test_a_resource_that_cannot_be_watched_has_no_storage_version_hash() -> None:
    # Like componentstatuses (get, list) in the sample: not kept in storage.
    doc = api_resource_list(CORE, [builtin("pods")], lambda _: ["get", "list"])
    assert "storageVersionHash" not in doc["resources"][0]


def test_the_storage_version_hash_is_the_samples_for_every_core_builtin(samples_dir: Path) -> None:
    expected = protocol(samples_dir, "discovery_api_v1_resourcelist.json")
    hashes = {r["name"]: r.get("storageVersionHash") for r in expected["resources"]}
    for t in REGISTRY.in_group_version(CORE):
        assert storage_version_hash(t) == hashes[t.resource], t.resource
