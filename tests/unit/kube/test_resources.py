"""Resource types know their paths and names; the registry resolves the names kubectl users type.

The built-in table is checked against the real server's ``kubectl api-resources``
(``k8s-samples/protocol/kubectl_api_resources.txt``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cacheproxy.kube.resources import (
    BUILTIN_RESOURCES,
    GroupVersion,
    ResourceRegistry,
    ResourceType,
    builtin,
)

PODS = builtin("pods")
NODES = builtin("nodes")
DEPLOYMENTS = builtin("deployments")
WIDGETS = ResourceType("example.com", "v1", "widgets", "Widget", namespaced=True)
WIDGETS_BETA = ResourceType("example.com", "v1beta1", "widgets", "Widget", namespaced=True)
GIZMOS = ResourceType(
    "example.com", "v1", "gizmos", "Gizmo", namespaced=False, singular="gizmo", short_names=("gz",)
)
GIZMOS_KEY = ("example.com", "v1", "gizmos")


# --- group versions -------------------------------------------------------------------------------


def test_the_core_group_version_is_v1_under_api() -> None:
    gv = GroupVersion("", "v1")
    assert gv.api_version == "v1"
    assert gv.path == "/api/v1"


def test_a_named_group_version_is_group_slash_version_under_apis() -> None:
    gv = GroupVersion("apps", "v1")
    assert gv.api_version == "apps/v1"
    assert gv.path == "/apis/apps/v1"


# --- resource types -------------------------------------------------------------------------------


def test_pods_are_namespaced_core_resources_with_their_paths() -> None:
    assert PODS.api_version == "v1"
    assert PODS.group_version == GroupVersion("", "v1")
    assert PODS.collection_path() == "/api/v1/pods"
    assert PODS.collection_path("ns-1") == "/api/v1/namespaces/ns-1/pods"
    assert PODS.object_path("web-0", "ns-1") == "/api/v1/namespaces/ns-1/pods/web-0"
    assert PODS.scope == "Namespaced"
    assert PODS.qualified == "pods"
    assert PODS.config_name == "pods"
    assert PODS.list_kind == "PodList"
    assert PODS.singular == "pod"


def test_deployments_live_under_their_group_and_are_named_with_it() -> None:
    assert DEPLOYMENTS.api_version == "apps/v1"
    assert DEPLOYMENTS.collection_path() == "/apis/apps/v1/deployments"
    assert DEPLOYMENTS.collection_path("ns") == "/apis/apps/v1/namespaces/ns/deployments"
    assert DEPLOYMENTS.object_path("web", "ns") == "/apis/apps/v1/namespaces/ns/deployments/web"
    assert DEPLOYMENTS.qualified == "deployments.apps"
    assert DEPLOYMENTS.config_name == "apps/v1/deployments"
    assert DEPLOYMENTS.list_kind == "DeploymentList"


def test_a_cluster_scoped_resource_ignores_a_namespace_in_its_paths() -> None:
    assert NODES.scope == "Cluster"
    assert NODES.collection_path("ns-1") == "/api/v1/nodes"
    assert NODES.object_path("n1", "ns-1") == "/api/v1/nodes/n1"
    assert GIZMOS.object_path("g", "ns") == "/apis/example.com/v1/gizmos/g"


def test_singular_and_list_kind_default_from_the_kind_unless_given() -> None:
    assert WIDGETS.singular == "widget"
    assert WIDGETS.list_kind == "WidgetList"
    custom = ResourceType(
        "x.io", "v1", "things", "Thing", False, singular="thingy", list_kind="Bag"
    )
    assert (custom.singular, custom.list_kind) == ("thingy", "Bag")


def test_resource_types_are_values() -> None:
    assert ResourceType("example.com", "v1", "widgets", "Widget", namespaced=True) == WIDGETS
    assert hash(ResourceType("example.com", "v1", "widgets", "Widget", True)) == hash(WIDGETS)


def test_the_builtin_table_matches_the_real_servers_api_resources(samples_dir: Path) -> None:
    # NAME  SHORTNAMES  APIVERSION  NAMESPACED  KIND — SHORTNAMES may be blank.
    rows: dict[tuple[str, str], tuple[tuple[str, ...], bool, str]] = {}
    lines = (samples_dir / "protocol" / "kubectl_api_resources.txt").read_text().splitlines()
    for line in lines[1:]:
        cells = line.split()
        name, api_version, namespaced, kind = cells[0], cells[-3], cells[-2], cells[-1]
        shorts = tuple(cells[1].split(",")) if len(cells) == 5 else ()
        rows[(name, api_version)] = (shorts, namespaced == "true", kind)
    for t in BUILTIN_RESOURCES:
        assert rows[(t.resource, t.api_version)] == (t.short_names, t.namespaced, t.kind), t


# --- resolving names ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "resource", "group"),
    [
        ("pods", "pods", ""),
        ("pod", "pods", ""),
        ("po", "pods", ""),
        ("Pods", "pods", ""),
        ("PO", "pods", ""),
        ("v1/pods", "pods", ""),
        ("/v1/pods", "pods", ""),
        ("deployments", "deployments", "apps"),
        ("deployment", "deployments", "apps"),
        ("deploy", "deployments", "apps"),
        ("deployments.apps", "deployments", "apps"),
        ("apps/v1/deployments", "deployments", "apps"),
        ("ingresses.networking.k8s.io", "ingresses", "networking.k8s.io"),
        ("crd", "customresourcedefinitions", "apiextensions.k8s.io"),
        ("crds", "customresourcedefinitions", "apiextensions.k8s.io"),
        ("cj", "cronjobs", "batch"),
        ("ns", "namespaces", ""),
        ("endpoints", "endpoints", ""),
    ],
)
def test_builtin_resources_resolve_by_every_name_kubectl_accepts(
    name: str, resource: str, group: str
) -> None:
    found = builtin(name)
    assert (found.resource, found.group) == (resource, group)


@pytest.mark.parametrize(
    "name",
    ["widgets", "v1/deployments", "apps/v2/deployments", "pods.apps", "deployments.batch", "", "p"],
)
def test_names_no_builtin_answers_to_are_a_key_error(name: str) -> None:
    with pytest.raises(KeyError):
        builtin(name)


def test_a_registry_resolves_custom_resources_by_every_form() -> None:
    registry = ResourceRegistry([PODS, GIZMOS])
    assert registry.resolve("gizmos") == GIZMOS
    assert registry.resolve("gizmo") == GIZMOS
    assert registry.resolve("gz") == GIZMOS
    assert registry.resolve("gizmos.example.com") == GIZMOS
    assert registry.resolve("example.com/v1/gizmos") == GIZMOS
    assert registry.resolve("deployments") is None
    assert registry.resolve("example.com/v2/gizmos") is None


def test_a_group_version_resource_picks_the_exact_version() -> None:
    registry = ResourceRegistry([WIDGETS, WIDGETS_BETA])
    assert registry.resolve("example.com/v1beta1/widgets") == WIDGETS_BETA
    assert registry.resolve("example.com/v1/widgets") == WIDGETS
    assert registry.get_gvr("example.com", "v1beta1", "widgets") == WIDGETS_BETA
    assert registry.get_gvr("example.com", "v2", "widgets") is None


# --- the registry as a mapping --------------------------------------------------------------------


def test_the_registry_is_keyed_by_group_version_resource_in_registration_order() -> None:
    registry = ResourceRegistry([DEPLOYMENTS, PODS, GIZMOS])
    assert list(registry) == [("apps", "v1", "deployments"), ("", "v1", "pods"), GIZMOS_KEY]
    assert len(registry) == 3
    assert registry[("", "v1", "pods")] == PODS
    with pytest.raises(KeyError):
        registry[("", "v1", "nodes")]


def test_adding_a_type_with_the_same_group_version_resource_replaces_it() -> None:
    registry = ResourceRegistry([GIZMOS])
    renamed = ResourceType("example.com", "v1", "gizmos", "Gadget", namespaced=True)
    registry.add(renamed)
    assert len(registry) == 1
    assert registry[GIZMOS_KEY] == renamed


def test_group_versions_put_core_first_then_groups_in_registration_order() -> None:
    registry = ResourceRegistry(
        [WIDGETS, DEPLOYMENTS, PODS, builtin("jobs"), WIDGETS_BETA, GIZMOS, NODES]
    )
    assert registry.group_versions() == [
        GroupVersion("", "v1"),
        GroupVersion("example.com", "v1"),
        GroupVersion("apps", "v1"),
        GroupVersion("batch", "v1"),
        GroupVersion("example.com", "v1beta1"),
    ]


def test_the_builtin_group_versions_are_core_then_the_table_order() -> None:
    registry = ResourceRegistry(BUILTIN_RESOURCES)
    assert [gv.api_version for gv in registry.group_versions()] == [
        "v1",
        "apps/v1",
        "batch/v1",
        "networking.k8s.io/v1",
        "discovery.k8s.io/v1",
        "coordination.k8s.io/v1",
        "policy/v1",
        "storage.k8s.io/v1",
        "rbac.authorization.k8s.io/v1",
        "apiextensions.k8s.io/v1",
    ]


def test_in_group_version_lists_that_group_versions_types_in_registration_order() -> None:
    registry = ResourceRegistry([GIZMOS, PODS, WIDGETS, WIDGETS_BETA, NODES])
    assert registry.in_group_version(GroupVersion("example.com", "v1")) == [GIZMOS, WIDGETS]
    assert registry.in_group_version(GroupVersion("", "v1")) == [PODS, NODES]
    assert registry.in_group_version(GroupVersion("apps", "v1")) == []
