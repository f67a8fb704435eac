"""The simulator's auth: tokens, client certs, RBAC and the review endpoints.

Error bodies are compared byte for byte with the real kube-apiserver's (the ``*_BODY`` constants
are copied verbatim from ``k8s-samples/protocol/``).
"""

from __future__ import annotations

import datetime
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cacheproxy.errors import ApiError
from cacheproxy.kube.attributes import (
    ANONYMOUS_USER,
    Attributes,
    NonResourceAttributes,
    ResourceAttributes,
    UserInfo,
    bearer_token,
)
from cacheproxy.sim import auth
from cacheproxy.sim.auth import Authenticator, Authorizer
from cacheproxy.sim.policy import Policy, Rule
from cacheproxy.sim.reviewanswers import (
    self_subject_access_review,
    subject_access_review,
    token_review,
)

# err_unauthorized_bad_token.http
UNAUTHORIZED_BODY = '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}'
# err_anonymous_no_token.http
ANONYMOUS_LIST_BODY = '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pods is forbidden: User \\"system:anonymous\\" cannot list resource \\"pods\\" in API group \\"\\" at the cluster scope","reason":"Forbidden","details":{"kind":"pods"},"code":403}'
# err_forbidden_lowpriv_get.http
LOWPRIV_GET_BODY = '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pods \\"app-3-backend-1c1606674d-4n9np\\" is forbidden: User \\"lowpriv\\" cannot get resource \\"pods\\" in API group \\"\\" in the namespace \\"ns-1\\"","reason":"Forbidden","details":{"name":"app-3-backend-1c1606674d-4n9np","kind":"pods"},"code":403}'
# err_forbidden_lowpriv_list_all.http
LOWPRIV_LIST_ALL_BODY = '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pods is forbidden: User \\"lowpriv\\" cannot list resource \\"pods\\" in API group \\"\\" at the cluster scope","reason":"Forbidden","details":{"kind":"pods"},"code":403}'
# err_forbidden_lowpriv_watch.http
LOWPRIV_WATCH_BODY = '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pods is forbidden: User \\"lowpriv\\" cannot watch resource \\"pods\\" in API group \\"\\" in the namespace \\"ns-1\\"","reason":"Forbidden","details":{"kind":"pods"},"code":403}'
# selfsubjectaccessreview_lowpriv.http
SSAR_LOWPRIV_BODY = '{"kind":"SelfSubjectAccessReview","apiVersion":"authorization.k8s.io/v1","metadata":{"creationTimestamp":null,"managedFields":[{"manager":"realk8s-samples","operation":"Update","apiVersion":"authorization.k8s.io/v1","time":"2026-11-29T14:21:59Z","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:resourceAttributes":{".":{},"f:namespace":{},"f:resource":{},"f:verb":{}}}}}]},"spec":{"resourceAttributes":{"namespace":"ns-1","verb":"list","resource":"pods"}},"status":{"allowed":false}}'

POLICY = Policy.from_mapping(
    {
        "users": [
            {"name": "admin", "token": "admin-token", "groups": ["system:masters"]},
            {"name": "lowpriv", "token": "lowpriv-token"},
            {"name": "reader", "token": "reader-token", "uid": "u-1", "groups": ["viewers"]},
        ],
        "rules": [
            {
                "name": "pod-readers",
                "subjects": [{"kind": "User", "name": "reader"}],
                "verbs": ["get", "list", "watch"],
                "apiGroups": [""],
                "resources": ["pods"],
                "namespaces": ["ns-1"],
            },
            {
                "subjects": [{"kind": "Group", "name": "viewers"}],
                "verbs": ["get"],
                "apiGroups": ["apps"],
                "resources": ["deployments"],
                "resourceNames": ["web"],
            },
            {
                "subjects": [{"kind": "Group", "name": "viewers"}],
                "verbs": ["get"],
                "apiGroups": [""],
                "resources": ["*/log"],
            },
        ],
    }
)
ADMIN = UserInfo("admin", ("system:masters", "system:authenticated"))
LOWPRIV = UserInfo("lowpriv", ("system:authenticated",))
READER = UserInfo("reader", ("viewers", "system:authenticated"), "u-1")


def _body(error: ApiError) -> str:
    """The error as the API server writes it: compact JSON in the body's key order."""
    return json.dumps(error.status, separators=(",", ":"))


def _dump(body: dict[str, Any]) -> str:
    return json.dumps(body, separators=(",", ":"))


# --- authentication ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "token"),
    [
        (None, None),
        ("", None),
        ("Bearer abc", "abc"),
        ("bearer abc", "abc"),
        ("  Bearer abc  ", "abc"),
        ("Bearer abc extra", "abc"),
        ("Bearer ", None),
        ("Bearer  abc", None),  # the API server reads an empty token here, i.e. no token
        ("Basic dXNlcjpwdw==", None),
        ("Bearer", None),
    ],
)
def test_bearer_token_is_parsed_like_the_api_server(header: str | None, token: str | None) -> None:
    assert bearer_token(header) == token


def test_token_user_gets_its_groups_uid_and_system_authenticated() -> None:
    authn = Authenticator(POLICY)
    assert authn.authenticate("Bearer reader-token") == READER
    assert authn.authenticate("Bearer lowpriv-token") == LOWPRIV
    assert authn.authenticate("Bearer admin-token") == ADMIN


@pytest.mark.parametrize("header", [None, "", "Basic dXNlcjpwdw==", "Bearer "])
def test_no_credentials_is_the_anonymous_user(header: str | None) -> None:
    user = Authenticator(POLICY).authenticate(header)
    assert user == ANONYMOUS_USER
    assert user == UserInfo("system:anonymous", ("system:unauthenticated",))


def test_unknown_token_is_the_api_servers_401() -> None:
    with pytest.raises(ApiError) as caught:
        Authenticator(POLICY).authenticate("Bearer not-a-token")
    assert caught.value.code == 401
    assert _body(caught.value) == UNAUTHORIZED_BODY


def test_client_cert_user_gets_its_groups_and_system_authenticated() -> None:
    user = Authenticator(POLICY).authenticate(None, ("alice", ("devs",)))
    assert user == UserInfo("alice", ("devs", "system:authenticated"))


def test_client_cert_wins_over_a_bad_token_as_in_the_api_servers_order() -> None:
    user = Authenticator(POLICY).authenticate("Bearer not-a-token", ("alice", ()))
    assert user == UserInfo("alice", ("system:authenticated",))


def test_client_cert_without_a_name_falls_through_to_the_token() -> None:
    assert Authenticator(POLICY).authenticate("Bearer lowpriv-token", ("", ("devs",))) == LOWPRIV


def test_groups_already_marked_are_not_marked_twice() -> None:
    user = Authenticator(POLICY).authenticate(None, ("bob", ("system:authenticated",)))
    assert user.groups == ("system:authenticated",)


def test_static_user_repr_hides_the_token() -> None:
    assert "admin-token" not in repr(POLICY)


# --- authorization: the samples' 403s ----------------------------------------------------------


@pytest.mark.parametrize(
    ("user", "attrs", "expected"),
    [
        (
            LOWPRIV,
            ResourceAttributes(
                "get", "", "pods", namespace="ns-1", name="app-3-backend-1c1606674d-4n9np"
            ),
            LOWPRIV_GET_BODY,
        ),
        (LOWPRIV, ResourceAttributes("list", "", "pods"), LOWPRIV_LIST_ALL_BODY),
        (LOWPRIV, ResourceAttributes("watch", "", "pods", namespace="ns-1"), LOWPRIV_WATCH_BODY),
        (ANONYMOUS_USER, ResourceAttributes("list", "", "pods"), ANONYMOUS_LIST_BODY),
    ],
    ids=["lowpriv-get", "lowpriv-list-all", "lowpriv-watch", "anonymous-list"],
)
def test_forbidden_bodies_equal_the_samples(
    user: UserInfo, attrs: ResourceAttributes, expected: str
) -> None:
    with pytest.raises(ApiError) as caught:
        Authorizer(POLICY).check(user, attrs)
    assert caught.value.code == 403
    assert _body(caught.value) == expected


def test_forbidden_subresource_names_it_in_the_reason_only() -> None:
    attrs = ResourceAttributes("get", "", "pods", namespace="ns-1", name="p", subresource="exec")
    with pytest.raises(ApiError) as caught:
        Authorizer(POLICY).check(LOWPRIV, attrs)
    assert caught.value.message == (
        'pods "p" is forbidden: User "lowpriv" cannot get resource "pods/exec" '
        'in API group "" in the namespace "ns-1"'
    )
    assert caught.value.status["details"] == {"name": "p", "kind": "pods"}


def test_forbidden_group_resource_is_qualified() -> None:
    attrs = ResourceAttributes("list", "apps", "deployments", namespace="ns-1")
    with pytest.raises(ApiError) as caught:
        Authorizer(POLICY).check(LOWPRIV, attrs)
    assert caught.value.message == (
        'deployments.apps is forbidden: User "lowpriv" cannot list resource "deployments" '
        'in API group "apps" in the namespace "ns-1"'
    )
    assert caught.value.status["details"] == {"group": "apps", "kind": "deployments"}


def test_forbidden_path_is_the_api_servers_non_resource_403() -> None:
    with pytest.raises(ApiError) as caught:
        Authorizer(POLICY).check(ANONYMOUS_USER, NonResourceAttributes("get", "/api"))
    assert _body(caught.value) == (
        '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
        '"message":"forbidden: User \\"system:anonymous\\" cannot get path \\"/api\\"",'
        '"reason":"Forbidden","details":{},"code":403}'
    )


# --- authorization: rule matching --------------------------------------------------------------


def test_namespaced_rule_allows_only_its_namespaces() -> None:
    authz = Authorizer(POLICY)
    assert authz.allows(READER, ResourceAttributes("list", "", "pods", namespace="ns-1"))
    assert authz.allows(READER, ResourceAttributes("watch", "", "pods", namespace="ns-1"))
    assert authz.allows(READER, ResourceAttributes("get", "", "pods", namespace="ns-1", name="x"))
    assert not authz.allows(READER, ResourceAttributes("list", "", "pods", namespace="ns-2"))
    assert not authz.allows(READER, ResourceAttributes("list", "", "pods"))  # all namespaces
    assert not authz.allows(READER, ResourceAttributes("delete", "", "pods", namespace="ns-1"))
    assert not authz.allows(READER, ResourceAttributes("list", "", "secrets", namespace="ns-1"))


def test_resource_names_allow_get_by_name_but_never_list() -> None:
    authz = Authorizer(POLICY)
    get_web = ResourceAttributes("get", "apps", "deployments", namespace="ns-3", name="web")
    assert authz.allows(READER, get_web)
    assert not authz.allows(
        READER, ResourceAttributes("get", "apps", "deployments", namespace="ns-3", name="db")
    )
    assert not authz.allows(READER, ResourceAttributes("list", "apps", "deployments"))
    assert not authz.allows(READER, ResourceAttributes("get", "", "deployments", name="web"))


def test_subresource_rules_match_only_that_subresource() -> None:
    authz = Authorizer(POLICY)
    log = ResourceAttributes("get", "", "pods", namespace="ns-9", name="p", subresource="log")
    assert authz.allows(READER, log)
    pod = ResourceAttributes("get", "", "pods", namespace="ns-9", name="p")
    assert not authz.allows(READER, pod)


_ALL = ("*",)
_LOG = ResourceAttributes("get", "", "pods", subresource="log")


@pytest.mark.parametrize(
    ("rule", "attrs", "allowed"),
    [
        (Rule(_ALL, _ALL, _ALL), ResourceAttributes("delete", "apps", "deployments"), True),
        (Rule(_ALL, _ALL, _ALL), _LOG, True),
        (Rule(("get",), _ALL, _ALL), ResourceAttributes("list", "", "pods"), False),
        (Rule(("get",), ("",), _ALL), ResourceAttributes("get", "apps", "deployments"), False),
        (Rule(("get",), _ALL, ("pods",)), _LOG, False),
        (Rule(("get",), _ALL, ("pods/log",)), _LOG, True),
        (Rule(("get",), _ALL, ("*/log",)), _LOG, True),
        (Rule(("get",), _ALL, ("*/log",)), ResourceAttributes("get", "", "pods"), False),
        (Rule(("list",), ("",), ("pods",)), ResourceAttributes("*", "", "pods"), False),
        (
            Rule(_ALL, ("",), ("pods",), namespaces=("a", "b")),
            ResourceAttributes("list", "", "pods", namespace="b"),
            True,
        ),
        (
            Rule(("get",), non_resource_urls=("/logs/*",)),
            NonResourceAttributes("get", "/logs/k"),
            True,
        ),
        (
            Rule(("get",), non_resource_urls=("/logs",)),
            NonResourceAttributes("get", "/logs/k"),
            False,
        ),
        (Rule(("get",), non_resource_urls=_ALL), NonResourceAttributes("get", "/anything"), True),
        (Rule(("get",), _ALL, _ALL), NonResourceAttributes("get", "/api"), False),
        (Rule(("get",), non_resource_urls=_ALL), ResourceAttributes("get", "", "pods"), False),
    ],
)
def test_rule_matching_follows_rbac(rule: Rule, attrs: Attributes, allowed: bool) -> None:
    assert rule.matches(attrs) is allowed


def test_system_masters_may_do_anything_without_a_rule() -> None:
    authz = Authorizer(Policy(), bootstrap=False)
    decision = authz.decide(ADMIN, ResourceAttributes("delete", "x.io", "widgets"))
    assert decision == auth.Decision(True)
    assert authz.allows(ADMIN, NonResourceAttributes("post", "/anything"))


@given(
    verb=st.sampled_from(["get", "list", "watch", "create", "delete", "*"]),
    group=st.sampled_from(["", "apps", "example.com"]),
    resource=st.sampled_from(["pods", "deployments", "widgets"]),
    namespace=st.sampled_from(["", "ns-1", "ns-2"]),
    name=st.sampled_from(["", "web"]),
)
def test_allows_and_check_agree_and_masters_always_pass(
    verb: str, group: str, resource: str, namespace: str, name: str
) -> None:
    authz = Authorizer(POLICY)
    attrs = ResourceAttributes(verb, group, resource, namespace=namespace, name=name)
    assert authz.allows(ADMIN, attrs)
    for user in (LOWPRIV, READER, ANONYMOUS_USER):
        if authz.allows(user, attrs):
            authz.check(user, attrs)
        else:
            with pytest.raises(ApiError):
                authz.check(user, attrs)


def test_bootstrap_bindings_open_discovery_to_the_authenticated_and_version_to_all() -> None:
    authz = Authorizer(POLICY)
    assert authz.allows(LOWPRIV, NonResourceAttributes("get", "/api"))
    assert authz.allows(LOWPRIV, NonResourceAttributes("get", "/apis/apps/v1"))
    assert authz.allows(ANONYMOUS_USER, NonResourceAttributes("get", "/version"))
    assert not authz.allows(ANONYMOUS_USER, NonResourceAttributes("get", "/apis"))
    ssar = ResourceAttributes("create", "authorization.k8s.io", "selfsubjectaccessreviews")
    assert authz.allows(LOWPRIV, ssar)
    assert not authz.allows(ANONYMOUS_USER, ssar)
    assert not Authorizer(POLICY, bootstrap=False).allows(LOWPRIV, ssar)


def test_anonymous_can_be_granted_by_name_or_group() -> None:
    policy = Policy.from_mapping(
        {
            "rules": [
                {
                    "subjects": [{"kind": "Group", "name": "system:unauthenticated"}],
                    "verbs": ["list"],
                    "apiGroups": [""],
                    "resources": ["pods"],
                },
                {
                    "subjects": [{"kind": "User", "name": "system:anonymous"}],
                    "verbs": ["get"],
                    "apiGroups": [""],
                    "resources": ["pods"],
                },
            ]
        }
    )
    authz = Authorizer(policy)
    assert authz.allows(ANONYMOUS_USER, ResourceAttributes("list", "", "pods"))
    assert authz.allows(ANONYMOUS_USER, ResourceAttributes("get", "", "pods", name="p"))
    assert not authz.allows(LOWPRIV, ResourceAttributes("list", "", "pods"))


# --- review endpoints --------------------------------------------------------------------------


def test_token_review_of_a_known_token() -> None:
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview"}
    review = token_review(POLICY, {**body, "spec": {"token": "reader-token"}})
    assert _dump(review) == _dump(
        {
            "kind": "TokenReview",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"creationTimestamp": None},
            "spec": {"token": "reader-token"},
            "status": {
                "authenticated": True,
                "user": {
                    "username": "reader",
                    "uid": "u-1",
                    "groups": ["viewers", "system:authenticated"],
                },
            },
        }
    )


def test_token_review_of_an_unknown_token_reports_the_error() -> None:
    review = token_review(Authenticator(POLICY), {"spec": {"token": "nope"}})
    assert review["status"] == {"user": {}, "error": "invalid bearer token"}
    assert review["status"].get("authenticated", False) is False


def test_token_review_echoes_requested_audiences() -> None:
    review = token_review(POLICY, {"spec": {"token": "admin-token", "audiences": ["cacheproxy"]}})
    assert review["spec"] == {"token": "admin-token", "audiences": ["cacheproxy"]}
    assert review["status"]["audiences"] == ["cacheproxy"]


@pytest.mark.parametrize("body", [{}, {"spec": {}}, {"spec": {"token": ""}}])
def test_token_review_without_a_token_is_a_400(body: dict[str, Any]) -> None:
    with pytest.raises(ApiError) as caught:
        token_review(POLICY, body)
    assert caught.value.code == 400
    assert caught.value.message == "token is required for TokenReview in authentication"


def test_subject_access_review_evaluates_the_named_user_and_groups_only() -> None:
    authz = Authorizer(POLICY)
    spec = {
        "resourceAttributes": {"verb": "list", "resource": "pods", "namespace": "ns-1"},
        "user": "reader",
    }
    review = subject_access_review(authz, {"spec": spec})
    assert _dump(review) == _dump(
        {
            "kind": "SubjectAccessReview",
            "apiVersion": "authorization.k8s.io/v1",
            "metadata": {"creationTimestamp": None},
            "spec": {
                "resourceAttributes": {"namespace": "ns-1", "verb": "list", "resource": "pods"},
                "user": "reader",
            },
            "status": {
                "allowed": True,
                "reason": 'RBAC: allowed by rule "pod-readers" to User "reader"',
            },
        }
    )
    # Without the group from spec.groups, reader's group rule does not apply.
    logs = {"verb": "get", "resource": "pods", "subresource": "log", "name": "p", "namespace": "x"}
    denied = subject_access_review(authz, {"spec": {"resourceAttributes": logs, "user": "reader"}})
    assert denied["status"] == {"allowed": False}
    granted = {"resourceAttributes": logs, "user": "reader", "groups": ["viewers"]}
    assert subject_access_review(authz, {"spec": granted})["status"]["allowed"] is True


def test_subject_access_review_for_system_masters_has_no_reason() -> None:
    spec = {"nonResourceAttributes": {"path": "/x", "verb": "get"}, "groups": ["system:masters"]}
    review = subject_access_review(Authorizer(POLICY), {"spec": spec})
    assert review["spec"] == spec
    assert review["status"] == {"allowed": True}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"resourceAttributes": {"verb": "get"}},
            'SubjectAccessReview.authorization.k8s.io "" is invalid: spec.user: Invalid value: "": '
            "at least one of user or group must be specified",
        ),
        (
            {"user": "u"},
            'SubjectAccessReview.authorization.k8s.io "" is invalid: spec.resourceAttributes: '
            'Invalid value: "null": exactly one of nonResourceAttributes or resourceAttributes '
            "must be specified",
        ),
        (
            {"user": "u", "resourceAttributes": {}, "nonResourceAttributes": {"path": "/a"}},
            'SubjectAccessReview.authorization.k8s.io "" is invalid: spec.nonResourceAttributes: '
            'Invalid value: authorization.NonResourceAttributes{Path:"/a", Verb:""}: '
            "cannot be specified in combination with resourceAttributes",
        ),
    ],
)
def test_invalid_subject_access_review_is_a_422(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(ApiError) as caught:
        subject_access_review(Authorizer(POLICY), {"spec": spec})
    assert caught.value.code == 422
    assert caught.value.message == message


def test_review_with_a_malformed_field_is_a_400() -> None:
    with pytest.raises(ApiError) as caught:
        self_subject_access_review(
            Authorizer(POLICY), LOWPRIV, {"spec": {"resourceAttributes": {"verb": 3}}}
        )
    assert caught.value.code == 400
    assert "spec.resourceAttributes.verb must be a string" in caught.value.message


def test_self_subject_access_review_equals_the_sample() -> None:
    request = {
        "kind": "SelfSubjectAccessReview",
        "apiVersion": "authorization.k8s.io/v1",
        "spec": {"resourceAttributes": {"verb": "list", "resource": "pods", "namespace": "ns-1"}},
    }
    review = self_subject_access_review(
        Authorizer(POLICY),
        LOWPRIV,
        request,
        manager="realk8s-samples",
        now=datetime.datetime(2026, 11, 29, 14, 21, 59, tzinfo=datetime.UTC),
    )
    assert _dump(review) == SSAR_LOWPRIV_BODY


def test_self_subject_access_review_without_a_manager_has_bare_metadata() -> None:
    spec = {"resourceAttributes": {"verb": "watch", "resource": "pods", "namespace": "ns-1"}}
    review = self_subject_access_review(Authorizer(POLICY), READER, {"spec": spec})
    assert review["metadata"] == {"creationTimestamp": None}
    assert review["spec"] == {
        "resourceAttributes": {"namespace": "ns-1", "verb": "watch", "resource": "pods"}
    }
    assert review["status"] == {
        "allowed": True,
        "reason": 'RBAC: allowed by rule "pod-readers" to User "reader"',
    }
