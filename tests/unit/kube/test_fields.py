"""Field selectors parse, validate per kind and match as the API server's do."""

from __future__ import annotations

from typing import Any

import pytest

from cacheproxy.errors import ApiError
from cacheproxy.kube.fields import (
    FieldRequirement,
    FieldSelector,
    escape_value,
    object_fields,
    parse_field_selector,
    supported_fields,
    unescape_value,
    validate_field_selector,
)
from cacheproxy.kube.resources import ResourceType, builtin

WIDGETS = ResourceType("example.com", "v1", "widgets", "Widget", namespaced=True)
GIZMOS = ResourceType("example.com", "v1", "gizmos", "Gizmo", namespaced=False)
GATEWAYS = ResourceType("gateway.networking.k8s.io", "v1", "gateways", "Gateway", namespaced=True)
CSRS = ResourceType(
    "certificates.k8s.io", "v1", "certificatesigningrequests", "CertificateSigningRequest", False
)
EVENTS_API = ResourceType("events.k8s.io", "v1", "events", "Event", namespaced=True)
PVS = builtin("persistentvolumes")
RCS = ResourceType("", "v1", "replicationcontrollers", "ReplicationController", namespaced=True)


def rejection(action: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(ApiError) as info:
        action(*args, **kwargs)
    assert info.value.code == 400
    assert info.value.reason == "BadRequest"
    return str(info.value.message)


def validated(rtype: ResourceType, text: str, **kwargs: Any) -> FieldSelector:
    return validate_field_selector(rtype, parse_field_selector(text), **kwargs)


# --- parsing ------------------------------------------------------------------------------------


def test_terms_are_anded_and_double_equals_means_equals() -> None:
    selector = parse_field_selector("status.phase==Running,spec.nodeName!=n1")
    assert selector.requirements == (
        FieldRequirement("spec.nodeName", "!=", "n1"),
        FieldRequirement("status.phase", "=", "Running"),
    )
    assert str(selector) == "spec.nodeName!=n1,status.phase=Running"


def test_the_first_operator_occurrence_splits_a_term() -> None:
    assert parse_field_selector("a!=b").requirements == (FieldRequirement("a", "!=", "b"),)
    assert parse_field_selector("a=!b").requirements == (FieldRequirement("a", "=", "!b"),)


def test_spaces_belong_to_the_field_and_value() -> None:
    assert parse_field_selector("a = b").requirements == (FieldRequirement("a ", "=", " b"),)


def test_empty_terms_and_the_empty_selector_select_everything() -> None:
    assert parse_field_selector("") == FieldSelector.EVERYTHING
    assert parse_field_selector(",,") == FieldSelector.EVERYTHING
    assert parse_field_selector("=").empty  # field and value both empty: dropped by Transform
    assert FieldSelector.EVERYTHING.matches({})


def test_an_escaped_comma_stays_inside_its_value() -> None:
    selector = parse_field_selector(r"metadata.name=a\,b,metadata.namespace=c\=d\\")
    assert selector.requirements == (
        FieldRequirement("metadata.name", "=", "a,b"),
        FieldRequirement("metadata.namespace", "=", "c=d\\"),
    )
    assert str(selector) == r"metadata.name=a\,b,metadata.namespace=c\=d\\"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("x", "invalid selector: 'x'; can't understand 'x'"),
        ("b=1,a", "invalid selector: 'b=1,a'; can't understand 'a'"),
        ("a=b=c", "invalid field selector: unescaped character in value: 61"),
        ("a===b", "invalid field selector: unescaped character in value: 61"),
        (r"a=b\x", r"invalid field selector: invalid escape sequence: \x"),
        ("a=b\\", "invalid field selector: invalid escape sequence: \\"),
    ],
)
def test_malformed_selectors_carry_apimachinerys_messages(text: str, message: str) -> None:
    assert rejection(parse_field_selector, text) == message


def test_the_sorted_first_bad_term_is_the_one_reported() -> None:
    assert rejection(parse_field_selector, "z,y") == "invalid selector: 'z,y'; can't understand 'y'"


@pytest.mark.parametrize(
    ("value", "escaped"),
    [("plain", "plain"), ("a,b", r"a\,b"), ("a=b", r"a\=b"), ("a\\b", r"a\\b"), ("", "")],
)
def test_escaping_round_trips(value: str, escaped: str) -> None:
    assert escape_value(value) == escaped
    assert unescape_value(escaped) == value


def test_an_unknown_operator_cannot_be_constructed() -> None:
    with pytest.raises(ValueError, match="operator"):
        FieldRequirement("a", "in", "b")


# --- matching -----------------------------------------------------------------------------------


def test_an_absent_field_matches_as_the_empty_string() -> None:
    assert parse_field_selector("spec.nodeName=").matches({})
    assert not parse_field_selector("spec.nodeName=n1").matches({})
    assert parse_field_selector("spec.nodeName!=n1").matches({})
    assert not parse_field_selector("spec.nodeName!=").matches({})


def test_all_terms_must_match() -> None:
    selector = parse_field_selector("a=1,b!=2")
    assert selector.matches({"a": "1", "b": "3"})
    assert not selector.matches({"a": "1", "b": "2"})


def test_requires_exact_match_and_field_names() -> None:
    selector = parse_field_selector("spec.nodeName=n1,status.phase!=Failed")
    assert selector.requires_exact_match("spec.nodeName") == "n1"
    assert selector.requires_exact_match("status.phase") is None
    assert selector.fields == frozenset({"spec.nodeName", "status.phase"})


def test_renaming_a_field_keeps_operator_and_value() -> None:
    renamed = parse_field_selector("spec.host!=n1,a=b").with_field_renamed(
        "spec.host", "spec.nodeName"
    )
    assert str(renamed) == "a=b,spec.nodeName!=n1"


# --- per-kind support ---------------------------------------------------------------------------


def test_an_unsupported_pod_field_is_rejected_with_the_api_servers_exact_body() -> None:
    with pytest.raises(ApiError) as info:
        validated(builtin("pods"), "spec.foo=x")
    assert info.value.status == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "field label not supported: spec.foo",
        "reason": "BadRequest",
        "code": 400,
    }


def test_pods_accept_their_documented_fields() -> None:
    assert supported_fields(builtin("pods")) == (
        "metadata.name",
        "metadata.namespace",
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.podIPs",
        "status.nominatedNodeName",
    )


def test_pods_legacy_spec_host_is_rewritten_to_spec_node_name() -> None:
    assert str(validated(builtin("pods"), "spec.host=n1")) == "spec.nodeName=n1"


@pytest.mark.parametrize(
    ("rtype", "text"),
    [
        (builtin("nodes"), "spec.unschedulable=true"),
        (builtin("nodes"), "metadata.name=n1"),
        (builtin("namespaces"), "status.phase=Active"),
        (builtin("secrets"), "type=Opaque,metadata.namespace=x"),
        (builtin("services"), "spec.clusterIP=None,spec.type=ClusterIP"),
        (builtin("events"), "involvedObject.kind=Pod,source=kubelet,reportingComponent=x"),
        (builtin("jobs"), "status.successful=1"),
        (builtin("configmaps"), "metadata.name=a,metadata.namespace=b"),
        (PVS, "metadata.namespace="),
        (CSRS, "spec.signerName=kubernetes.io/kubelet-serving"),
        (WIDGETS, "metadata.name=a,metadata.namespace=b"),
    ],
)
def test_supported_fields_pass_validation_unchanged(rtype: ResourceType, text: str) -> None:
    selector = parse_field_selector(text)
    assert validate_field_selector(rtype, selector) == selector


@pytest.mark.parametrize(
    ("rtype", "text", "message"),
    [
        (builtin("nodes"), "metadata.namespace=x", "field label not supported: metadata.namespace"),
        (
            builtin("namespaces"),
            "metadata.namespace=x",
            "field label not supported: metadata.namespace",
        ),
        (builtin("secrets"), "data=x", "field label not supported: data"),
        (builtin("jobs"), "status.active=1", 'field label "status.active" not supported for Job'),
        (
            builtin("configmaps"),
            "data.x=1",
            '"data.x" is not a known field selector: only "metadata.name", "metadata.namespace"',
        ),
        # apps/v1 registers no conversion, so a ReplicaSet's status.replicas is refused upstream
        # (kubernetes/kubernetes#135136) although its registry computes the field.
        (
            builtin("replicasets"),
            "status.replicas=0",
            '"status.replicas" is not a known field selector: only "metadata.name", '
            '"metadata.namespace"',
        ),
        (builtin("pods"), "=x", "field label not supported: "),
    ],
)
def test_unsupported_built_in_fields_are_refused_in_their_kinds_words(
    rtype: ResourceType, text: str, message: str
) -> None:
    assert rejection(validated, rtype, text) == message


def test_replication_controllers_do_support_status_replicas() -> None:
    assert str(validated(RCS, "status.replicas=1")) == "status.replicas=1"
    assert object_fields(RCS, {"status": {"replicas": 1}})["status.replicas"] == "1"


def test_custom_resources_refuse_other_fields_in_the_crd_converters_words() -> None:
    assert (
        rejection(validated, WIDGETS, "spec.color=red") == "field label not supported: spec.color"
    )
    assert rejection(validated, GATEWAYS, "spec.x=1") == "field label not supported: spec.x"


def test_cluster_scoped_custom_resources_refuse_metadata_namespace() -> None:
    assert supported_fields(GIZMOS) == ("metadata.name",)
    assert rejection(validated, GIZMOS, "metadata.namespace=") == (
        "field label not supported: metadata.namespace"
    )


def test_extra_fields_extend_what_a_kind_accepts() -> None:
    selector = validated(WIDGETS, "spec.color=red", extra_fields=["spec.color"])
    assert str(selector) == "spec.color=red"


def test_events_api_spellings_map_onto_the_core_event_field_set() -> None:
    selector = validated(EVENTS_API, "regarding.name=p1,reportingController=kubelet")
    assert str(selector) == "involvedObject.name=p1,reportingComponent=kubelet"
    assert rejection(validated, EVENTS_API, "involvedObject.name=p1") == (
        "field label not supported: involvedObject.name"
    )


def test_a_field_table_works_for_any_version_of_the_group() -> None:
    pods_v2 = ResourceType("", "v2", "pods", "Pod", namespaced=True)
    assert str(validated(pods_v2, "spec.host=n1")) == "spec.nodeName=n1"


# --- field sets ---------------------------------------------------------------------------------


def test_a_pods_field_set_defaults_host_network_to_false() -> None:
    pod = {"metadata": {"name": "p", "namespace": "ns"}, "spec": {"nodeName": "n1"}}
    assert object_fields(builtin("pods"), pod) == {
        "metadata.name": "p",
        "metadata.namespace": "ns",
        "spec.nodeName": "n1",
        "spec.restartPolicy": "",
        "spec.schedulerName": "",
        "spec.serviceAccountName": "",
        "spec.hostNetwork": "false",
        "status.phase": "",
        "status.podIP": "",
        "status.nominatedNodeName": "",
    }


def test_a_pods_host_network_is_stringified_as_go_does() -> None:
    pod = {"metadata": {"name": "p"}, "spec": {"hostNetwork": True}}
    assert object_fields(builtin("pods"), pod)["spec.hostNetwork"] == "true"


def test_a_pods_ip_is_the_first_of_its_pod_ips() -> None:
    pod = {"status": {"podIP": "10.0.0.9", "podIPs": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}]}}
    assert object_fields(builtin("pods"), pod)["status.podIP"] == "10.0.0.1"
    only_scalar = {"status": {"podIP": "10.0.0.9"}}
    assert object_fields(builtin("pods"), only_scalar)["status.podIP"] == "10.0.0.9"


def test_status_pod_ips_is_accepted_but_never_in_the_field_set() -> None:
    pods = builtin("pods")
    pod = {"status": {"podIPs": [{"ip": "10.0.0.1"}]}}
    selector = validated(pods, "status.podIPs=10.0.0.1")
    assert not selector.matches(object_fields(pods, pod))


def test_cluster_scoped_kinds_have_no_namespace_field() -> None:
    node = {"metadata": {"name": "n1"}, "spec": {"unschedulable": True}}
    assert object_fields(builtin("nodes"), node) == {
        "metadata.name": "n1",
        "spec.unschedulable": "true",
    }
    assert object_fields(builtin("nodes"), {})["spec.unschedulable"] == "false"


def test_counts_are_decimal_strings_defaulting_to_zero() -> None:
    job = {"status": {"succeeded": 3}}
    assert object_fields(builtin("jobs"), job)["status.successful"] == "3"
    assert object_fields(builtin("jobs"), {})["status.successful"] == "0"
    assert (
        object_fields(builtin("replicasets"), {"status": {"replicas": 2}})["status.replicas"] == "2"
    )


def test_simple_kind_fields_are_read_from_the_object() -> None:
    assert object_fields(builtin("secrets"), {"type": "Opaque"})["type"] == "Opaque"
    service = {"spec": {"clusterIP": "None", "type": "ClusterIP"}}
    assert object_fields(builtin("services"), service)["spec.type"] == "ClusterIP"
    assert object_fields(builtin("namespaces"), {"status": {"phase": "Active"}})[
        "status.phase"
    ] == ("Active")
    assert object_fields(CSRS, {"spec": {"signerName": "s"}})["spec.signerName"] == "s"


def test_an_events_source_falls_back_to_its_reporting_component() -> None:
    events = builtin("events")
    event = {"involvedObject": {"kind": "Pod", "name": "p"}, "reportingComponent": "kubelet"}
    fields = object_fields(events, event)
    assert fields["source"] == "kubelet"
    assert fields["involvedObject.kind"] == "Pod"
    assert fields["involvedObject.uid"] == ""
    with_source = {**event, "source": {"component": "scheduler"}}
    assert object_fields(events, with_source)["source"] == "scheduler"


def test_an_events_api_event_fills_the_core_field_set() -> None:
    event = {
        "metadata": {"name": "e", "namespace": "ns"},
        "regarding": {"kind": "Pod", "name": "p", "fieldPath": "spec"},
        "reportingController": "kubelet",
        "reason": "Pulled",
        "type": "Normal",
    }
    fields = object_fields(EVENTS_API, event)
    assert fields["involvedObject.kind"] == "Pod"
    assert fields["involvedObject.fieldPath"] == "spec"
    assert fields["reportingComponent"] == "kubelet"
    assert fields["source"] == "kubelet"
    assert validated(EVENTS_API, "regarding.name=p,reason=Pulled").matches(fields)


def test_a_custom_resource_field_set_is_its_metadata() -> None:
    widget = {"metadata": {"name": "w", "namespace": "ns"}, "spec": {"color": "red"}}
    assert object_fields(WIDGETS, widget) == {"metadata.name": "w", "metadata.namespace": "ns"}
    assert object_fields(GIZMOS, {"metadata": {"name": "g"}}) == {"metadata.name": "g"}


def test_validated_selectors_match_object_field_sets_end_to_end() -> None:
    pods = builtin("pods")
    pod = {
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"nodeName": "n1"},
        "status": {"phase": "Running"},
    }
    fields = object_fields(pods, pod)
    assert validated(pods, "spec.host=n1,status.phase!=Failed").matches(fields)
    assert not validated(pods, "spec.nodeName=n2").matches(fields)
    assert validated(pods, "spec.hostNetwork=false").matches(fields)
