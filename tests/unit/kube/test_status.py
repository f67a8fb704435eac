"""Every ``metav1.Status`` builder writes what the API server writes.

Where a real response exists (``k8s-samples/protocol/err_*.http``) the builder's body must equal it
as data *and* serialize to the same bytes, which pins the key order (kind, apiVersion, metadata,
status, message, reason, details{name, group, kind, causes, retryAfterSeconds}, code). The other
shapes follow ``k8s.io/apimachinery/pkg/api/errors``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from cacheproxy.errors import ApiError
from cacheproxy.kube import status

STATUS_KEYS = ["kind", "apiVersion", "metadata", "status", "message", "reason", "details", "code"]


def http_body(path: Path) -> bytes:
    _, sep, body = path.read_bytes().partition(b"\r\n\r\n")
    assert sep, f"{path.name} has no header/body separator"
    return body.strip()


def sample(samples_dir: Path, name: str) -> bytes:
    return http_body(samples_dir / "protocol" / name)


def assert_same_as_sample(error: ApiError, raw: bytes) -> None:
    expected = orjson.loads(raw)
    assert error.status == expected
    assert list(error.status) == list(expected)
    if "details" in expected:
        assert list(error.status["details"]) == list(expected["details"])
    assert orjson.dumps(error.status) == raw
    assert error.code == expected["code"]
    assert error.message == expected["message"]


def failure(code: int, reason: str, message: str, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": extra.pop("metadata", {}),
        "status": "Failure",
        "message": message,
        "reason": reason,
    }
    if "details" in extra:
        body["details"] = extra.pop("details")
    body["code"] = code
    assert not extra
    return body


# --- bodies equal to the real API server's --------------------------------------------------------


def test_a_missing_pod_is_the_samples_not_found(samples_dir: Path) -> None:
    error = status.not_found(resource="pods", name="does-not-exist")
    assert_same_as_sample(error, sample(samples_dir, "err_pod_not_found.http"))


def test_a_forbidden_named_get_is_the_samples_body(samples_dir: Path) -> None:
    error = status.forbidden(
        user="lowpriv",
        verb="get",
        resource="pods",
        namespace="ns-1",
        name="app-3-backend-1c1606674d-4n9np",
    )
    assert_same_as_sample(error, sample(samples_dir, "err_forbidden_lowpriv_get.http"))


def test_a_forbidden_cluster_wide_list_is_the_samples_body(samples_dir: Path) -> None:
    error = status.forbidden(user="lowpriv", verb="list", resource="pods")
    assert_same_as_sample(error, sample(samples_dir, "err_forbidden_lowpriv_list_all.http"))


def test_a_forbidden_namespaced_watch_is_the_samples_body(samples_dir: Path) -> None:
    error = status.forbidden(user="lowpriv", verb="watch", resource="pods", namespace="ns-1")
    assert_same_as_sample(error, sample(samples_dir, "err_forbidden_lowpriv_watch.http"))


def test_an_anonymous_list_is_forbidden_for_system_anonymous(samples_dir: Path) -> None:
    error = status.forbidden(user="system:anonymous", verb="list", resource="pods")
    assert_same_as_sample(error, sample(samples_dir, "err_anonymous_no_token.http"))


def test_a_bad_token_is_the_samples_unauthorized(samples_dir: Path) -> None:
    assert_same_as_sample(
        status.unauthorized(), sample(samples_dir, "err_unauthorized_bad_token.http")
    )


def test_an_expired_continue_token_is_the_samples_410_with_the_inconsistent_token(
    samples_dir: Path,
) -> None:
    raw = sample(samples_dir, "err_expired_continue_token.http")
    token = orjson.loads(raw)["metadata"]["continue"]
    error = status.expired(status.CONTINUE_EXPIRED_MESSAGE, continue_token=token)
    assert_same_as_sample(error, raw)
    assert error.reason == "Expired"


def test_an_exact_list_at_a_compacted_rv_is_the_samples_410(samples_dir: Path) -> None:
    error = status.expired("The resourceVersion for the provided list is too old.")
    assert_same_as_sample(error, sample(samples_dir, "err_list_exact_rv_compacted.http"))


def test_an_unknown_resource_is_the_samples_404_with_empty_details(samples_dir: Path) -> None:
    error = status.resource_not_found()
    assert_same_as_sample(error, sample(samples_dir, "err_unknown_resource_core.http"))
    assert error.status["details"] == {}


@pytest.mark.parametrize(
    ("name", "requested", "oldest"),
    [
        ("err_watch_too_old_rv_after_apiserver_restart.http", 10393, 10399),
        ("err_watch_too_old_rv1_ns_selector_after_restart.http", 1, 10399),
    ],
)
def test_a_watch_from_too_old_an_rv_is_the_object_of_the_samples_error_event(
    samples_dir: Path, name: str, requested: int, oldest: int
) -> None:
    event = orjson.loads(sample(samples_dir, name))
    assert event["type"] == "ERROR"
    error = status.too_old_resource_version(requested, oldest)
    assert_same_as_sample(error, orjson.dumps(event["object"]))
    assert orjson.dumps({"type": "ERROR", "object": error.status}) == sample(samples_dir, name)


def test_a_bad_continue_token_message_makes_the_samples_400(samples_dir: Path) -> None:
    raw = sample(samples_dir, "err_invalid_continue_token.http")
    assert_same_as_sample(status.bad_request(orjson.loads(raw)["message"]), raw)


def test_an_unsupported_field_label_makes_the_samples_400(samples_dir: Path) -> None:
    raw = sample(samples_dir, "err_unsupported_fieldselector.http")
    assert_same_as_sample(status.bad_request("field label not supported: spec.foo"), raw)


# --- group resources ----------------------------------------------------------------------------


def test_a_missing_deployment_names_the_group_resource_and_its_group() -> None:
    error = status.not_found(resource="deployments", name="x", group="apps")
    assert error.status == failure(
        404,
        "NotFound",
        'deployments.apps "x" not found',
        details={"name": "x", "group": "apps", "kind": "deployments"},
    )
    assert list(error.status["details"]) == ["name", "group", "kind"]


def test_a_forbidden_group_resource_names_the_group_in_message_and_details() -> None:
    error = status.forbidden(
        user="alice", verb="get", resource="deployments", group="apps", namespace="ns", name="web"
    )
    assert error.status == failure(
        403,
        "Forbidden",
        'deployments.apps "web" is forbidden: User "alice" cannot get resource "deployments" '
        'in API group "apps" in the namespace "ns"',
        details={"name": "web", "group": "apps", "kind": "deployments"},
    )
    assert list(error.status["details"]) == ["name", "group", "kind"]


def test_a_forbidden_cluster_scoped_group_list_names_the_cluster_scope() -> None:
    error = status.forbidden(
        user="bob", verb="list", resource="customresourcedefinitions", group="apiextensions.k8s.io"
    )
    assert error.message == (
        'customresourcedefinitions.apiextensions.k8s.io is forbidden: User "bob" cannot list '
        'resource "customresourcedefinitions" in API group "apiextensions.k8s.io" at the cluster '
        "scope"
    )
    assert error.status["details"] == {
        "group": "apiextensions.k8s.io",
        "kind": "customresourcedefinitions",
    }


def test_a_method_not_allowed_names_the_verb_and_the_group_resource() -> None:
    assert status.method_not_allowed(verb="create", resource="pods").status == failure(
        405,
        "MethodNotAllowed",
        'create is not supported on resources of kind "pods"',
        details={"kind": "pods"},
    )
    assert status.method_not_allowed(
        verb="delete", resource="deployments", group="apps"
    ).status == failure(
        405,
        "MethodNotAllowed",
        'delete is not supported on resources of kind "deployments.apps"',
        details={"group": "apps", "kind": "deployments"},
    )


def test_already_exists_and_conflict_name_the_group_resource() -> None:
    assert status.already_exists(resource="deployments", name="web", group="apps").status == (
        failure(
            409,
            "AlreadyExists",
            'deployments.apps "web" already exists',
            details={"name": "web", "group": "apps", "kind": "deployments"},
        )
    )
    assert status.conflict(resource="pods", name="a").status == failure(
        409,
        "Conflict",
        'Operation cannot be fulfilled on pods "a": the object has been modified; please apply '
        "your changes to the latest version and try again",
        details={"name": "a", "kind": "pods"},
    )


# --- retry-after ----------------------------------------------------------------------------------


def test_too_many_requests_carries_retry_after_in_details() -> None:
    error = status.too_many_requests("storage is (re)initializing")
    assert error.status == failure(
        429,
        "TooManyRequests",
        "storage is (re)initializing",
        details={"retryAfterSeconds": 1},
    )
    assert error.retry_after == 1
    assert status.too_many_requests("busy", retry_after=7).retry_after == 7


def test_a_too_large_resource_version_is_a_504_timeout_with_its_cause_and_retry_after() -> None:
    error = status.too_large_resource_version(200, 150)
    assert error.status == failure(
        504,
        "Timeout",
        "Timeout: Too large resource version: 200, current: 150",
        details={
            "causes": [
                {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
            ],
            "retryAfterSeconds": 1,
        },
    )
    assert list(error.status["details"]) == ["causes", "retryAfterSeconds"]
    assert error.retry_after == 1
    assert status.too_large_resource_version(200, 150, retry_after=3).retry_after == 3


def test_a_too_large_resource_version_from_etcd_has_no_retry_after() -> None:
    error = status.too_large_resource_version(200, 150, retry_after=None)
    assert error.status["details"] == {
        "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}]
    }
    assert error.retry_after is None


@pytest.mark.parametrize(
    "error",
    [
        status.not_found(resource="pods", name="a"),
        status.bad_request("nope"),
        status.unauthorized(),
        status.expired("gone"),
        status.resource_not_found(),
    ],
)
def test_errors_other_than_throttling_and_timeouts_carry_no_retry_after(error: ApiError) -> None:
    assert error.retry_after is None


# --- the other builders -------------------------------------------------------------------------


def test_gone_is_a_410_with_the_old_reason() -> None:
    assert status.gone("too old").status == failure(410, "Gone", "too old")


def test_an_expired_error_without_a_token_has_empty_metadata() -> None:
    assert status.expired("x").status["metadata"] == {}


def test_not_acceptable_names_the_available_representations_as_the_api_server() -> None:
    error = status.not_acceptable(["application/json", "application/json;stream=watch"])
    assert error.status == failure(
        406,
        "NotAcceptable",
        "406: Not Acceptable\n\nAvailable representations: application/json, "
        "application/json;stream=watch",
        details={},
    )


def test_an_internal_error_repeats_its_message_as_a_cause() -> None:
    assert status.internal_error("boom").status == failure(
        500,
        "InternalError",
        "Internal error occurred: boom",
        details={"causes": [{"message": "boom"}]},
    )


def test_an_invalid_object_names_the_kind_and_one_violation_without_brackets() -> None:
    cause = status.required_cause("metadata.name", "name or generateName is required")
    error = status.invalid(kind="Pod", name="", causes=[cause])
    assert error.status == failure(
        422,
        "Invalid",
        'Pod "" is invalid: metadata.name: Required value: name or generateName is required',
        details={"kind": "Pod", "causes": [cause]},
    )
    assert cause == {
        "reason": "FieldValueRequired",
        "message": "Required value: name or generateName is required",
        "field": "metadata.name",
    }


def test_an_invalid_group_object_with_several_violations_brackets_them() -> None:
    causes = [
        status.invalid_value_cause("spec.replicas", "-1", "must be greater than or equal to 0"),
        status.required_cause("spec.selector"),
    ]
    error = status.invalid(kind="Deployment", group="apps", name="web", causes=causes)
    assert error.message == (
        'Deployment.apps "web" is invalid: [spec.replicas: Invalid value: "-1": must be greater '
        "than or equal to 0, spec.selector: Required value]"
    )
    assert error.status["details"] == {
        "name": "web",
        "group": "apps",
        "kind": "Deployment",
        "causes": causes,
    }


def test_invalid_list_options_are_a_422_of_the_meta_group_without_a_name() -> None:
    cause = status.forbidden_cause("sendInitialEvents", "sendInitialEvents is forbidden for list")
    error = status.invalid_list_options([cause])
    assert error.status == failure(
        422,
        "Invalid",
        'ListOptions.meta.k8s.io "" is invalid: sendInitialEvents: Forbidden: sendInitialEvents '
        "is forbidden for list",
        details={"group": "meta.k8s.io", "kind": "ListOptions", "causes": [cause]},
    )


def test_a_not_supported_cause_quotes_every_supported_value_including_the_empty_one() -> None:
    assert status.not_supported_cause("f", "x", ["A", "B", ""]) == {
        "reason": "FieldValueNotSupported",
        "message": 'Unsupported value: "x": supported values: "A", "B", ""',
        "field": "f",
    }


def test_every_builder_writes_the_status_keys_in_the_api_servers_order() -> None:
    built = [
        status.bad_request("x"),
        status.not_found(resource="deployments", name="x", group="apps"),
        status.too_large_resource_version(2, 1),
        status.expired("x", continue_token="tok"),
        status.invalid_list_options([status.forbidden_cause("f", "x")]),
    ]
    for error in built:
        keys = list(error.status)
        assert keys == [k for k in STATUS_KEYS if k in keys]
        assert keys[:5] == ["kind", "apiVersion", "metadata", "status", "message"]
        assert keys[-1] == "code"
