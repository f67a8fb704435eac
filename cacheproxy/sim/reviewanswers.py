"""The bodies of the simulator's three review endpoints, so the HTTP layer only routes.

:func:`token_review` (``authentication.k8s.io/v1`` TokenReview) asks an
:class:`~cacheproxy.sim.auth.Authenticator`; :func:`subject_access_review` and
:func:`self_subject_access_review` (``authorization.k8s.io/v1``) ask an
:class:`~cacheproxy.sim.auth.Authorizer`. They mirror ``registry/authentication/tokenreview`` and
``registry/authorization/*``: a 400 for an undecodable body, a 422 for an invalid spec, the spec
echoed in Go field order, and managedFields for the caller's field manager.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, NoReturn

from cacheproxy.errors import StatusCause
from cacheproxy.kube import status
from cacheproxy.kube.attributes import (
    Attributes,
    NonResourceAttributes,
    ResourceAttributes,
    UserInfo,
)
from cacheproxy.sim.auth import INVALID_TOKEN, Authenticator, Authorizer, Decision
from cacheproxy.sim.policy import Policy

__all__ = ["self_subject_access_review", "subject_access_review", "token_review"]

_AUTHN = "authentication.k8s.io/v1"
_AUTHZ = "authorization.k8s.io/v1"


def token_review(
    policy_or_authenticator: Policy | Authenticator,
    body: Mapping[str, Any],
    *,
    manager: str | None = None,
    now: datetime.datetime | None = None,
) -> dict[str, Any]:
    """``POST /apis/authentication.k8s.io/v1/tokenreviews``: the response body.

    Mirrors ``registry/authentication/tokenreview``: an empty token is a 400; an unknown one is
    ``status: {user: {}, error: "invalid bearer token"}`` (``authenticated`` false is omitted, as
    Go omits it). ``manager`` (the field manager or User-Agent) and ``now`` fill managedFields.
    """
    auth = policy_or_authenticator
    authenticator = Authenticator(auth) if isinstance(auth, Policy) else auth
    spec = _spec(body, "TokenReview")
    token = _optional_str(spec, "token", "TokenReview", "spec")
    audiences = _optional_str_list(spec, "audiences", "TokenReview")
    if not token:
        raise status.bad_request("token is required for TokenReview in authentication")
    echo: dict[str, Any] = {"token": token}
    if audiences:
        echo["audiences"] = audiences
    user = authenticator.authenticate_token(token)
    result: dict[str, Any]
    if user is None:
        result = {"user": {}, "error": INVALID_TOKEN}
    else:
        info: dict[str, Any] = {"username": user.name}
        if user.uid:
            info["uid"] = user.uid
        if user.groups:
            info["groups"] = list(user.groups)
        result = {"authenticated": True, "user": info}
        if audiences:  # static tokens are audience-agnostic: they are valid for whatever was asked
            result["audiences"] = audiences
    return _review("TokenReview", _AUTHN, echo, result, manager=manager, now=now)


def subject_access_review(
    authorizer: Authorizer,
    body: Mapping[str, Any],
    *,
    manager: str | None = None,
    now: datetime.datetime | None = None,
) -> dict[str, Any]:
    """``POST /apis/authorization.k8s.io/v1/subjectaccessreviews``: may ``spec.user`` do it?

    The user is exactly ``spec.user``/``spec.groups``/``spec.uid``: no group is added. Invalid
    specs are the API server's 422s.
    """
    kind = "SubjectAccessReview"
    spec = _spec(body, kind)
    attrs, echo, causes = _review_attributes(spec, kind)
    name = _optional_str(spec, "user", kind, "spec")
    groups = _optional_str_list(spec, "groups", kind)
    uid = _optional_str(spec, "uid", kind, "spec")
    if not name and not groups:
        causes.append(
            _invalid("spec.user", '""', "at least one of user or group must be specified")
        )
    if attrs is None or causes:
        raise status.invalid(kind=kind, group="authorization.k8s.io", name="", causes=causes)
    echo.update((k, v) for k, v in (("user", name), ("groups", groups)) if v)
    if isinstance(spec.get("extra"), Mapping) and spec["extra"]:
        echo["extra"] = dict(spec["extra"])
    if uid:
        echo["uid"] = uid
    decision = authorizer.decide(UserInfo(name, tuple(groups), uid), attrs)
    return _review(kind, _AUTHZ, echo, _decision(decision), manager=manager, now=now)


def self_subject_access_review(
    authorizer: Authorizer,
    user: UserInfo,
    body: Mapping[str, Any],
    *,
    manager: str | None = None,
    now: datetime.datetime | None = None,
) -> dict[str, Any]:
    """``POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews`` by ``user``.

    Shaped like ``selfsubjectaccessreview_lowpriv.http``: ``creationTimestamp: null``, the spec
    echoed in Go field order, ``status: {allowed}`` (plus ``reason`` when allowed by a rule).
    """
    kind = "SelfSubjectAccessReview"
    attrs, echo, causes = _review_attributes(_spec(body, kind), kind)
    if attrs is None or causes:
        raise status.invalid(kind=kind, group="authorization.k8s.io", name="", causes=causes)
    decision = authorizer.decide(user, attrs)
    return _review(kind, _AUTHZ, echo, _decision(decision), manager=manager, now=now)


def _decision(decision: Decision) -> dict[str, Any]:
    result: dict[str, Any] = {"allowed": decision.allowed}
    if decision.reason:
        result["reason"] = decision.reason
    return result


def _review(
    kind: str,
    api_version: str,
    spec: dict[str, Any],
    result: dict[str, Any],
    *,
    manager: str | None,
    now: datetime.datetime | None,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"creationTimestamp": None}
    if manager:
        when = (now or datetime.datetime.now(datetime.UTC)).astimezone(datetime.UTC)
        metadata["managedFields"] = [
            {
                "manager": manager,
                "operation": "Update",
                "apiVersion": api_version,
                "time": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": _field_set(spec, owned=False)},
            }
        ]
    return {
        "kind": kind,
        "apiVersion": api_version,
        "metadata": metadata,
        "spec": spec,
        "status": result,
    }


def _field_set(value: Mapping[str, Any], *, owned: bool) -> dict[str, Any]:
    """The server-side-apply field set of ``value``: keys sorted, nested objects marked ``"."``
    (spec itself is a plain struct, so it carries no ``"."``); lists are atomic."""
    fields: dict[str, Any] = {".": {}} if owned else {}
    for key in sorted(value):
        child = value[key]
        is_object = isinstance(child, Mapping) and child
        fields[f"f:{key}"] = _field_set(child, owned=True) if is_object else {}
    return fields


def _spec(body: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    if not isinstance(body, Mapping):
        _undecodable(kind, "the body", "an object")
    spec = body.get("spec")
    if spec is None:
        return {}
    if not isinstance(spec, Mapping):
        _undecodable(kind, "spec", "an object")
    return spec


def _review_attributes(
    spec: Mapping[str, Any], kind: str
) -> tuple[Attributes | None, dict[str, Any], list[StatusCause]]:
    """``spec.resourceAttributes`` / ``nonResourceAttributes``, their echo, validation causes."""
    raw_res, raw_non = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    echo: dict[str, Any] = {}
    causes: list[StatusCause] = []
    attrs: Attributes | None = None
    if raw_res is not None:
        res = _object(raw_res, kind, "spec.resourceAttributes")
        s = {k: _optional_str(res, k, kind, "spec.resourceAttributes") for k in _RES_KEYS}
        res_attrs = ResourceAttributes(**s)
        echo["resourceAttributes"] = res_attrs.to_review()
        for selector in ("fieldSelector", "labelSelector"):  # limits only; echoed, not evaluated
            if res.get(selector):
                echo["resourceAttributes"][selector] = res[selector]
        attrs = res_attrs
    if raw_non is not None:
        non = _object(raw_non, kind, "spec.nonResourceAttributes")
        path = _optional_str(non, "path", kind, "spec.nonResourceAttributes")
        verb = _optional_str(non, "verb", kind, "spec.nonResourceAttributes")
        non_attrs = NonResourceAttributes(verb=verb, path=path)
        echo["nonResourceAttributes"] = non_attrs.to_review()
        if attrs is not None:
            value = f'authorization.NonResourceAttributes{{Path:"{path}", Verb:"{verb}"}}'
            detail = "cannot be specified in combination with resourceAttributes"
            causes.append(_invalid("spec.nonResourceAttributes", value, detail))
        attrs = non_attrs
    if attrs is None:
        detail = "exactly one of nonResourceAttributes or resourceAttributes must be specified"
        causes.append(_invalid("spec.resourceAttributes", '"null"', detail))
    return attrs, echo, causes


_RES_KEYS = ("namespace", "verb", "group", "version", "resource", "subresource", "name")


def _invalid(path: str, value: str, detail: str) -> StatusCause:
    return {
        "reason": "FieldValueInvalid",
        "message": f"Invalid value: {value}: {detail}",
        "field": path,
    }


def _object(value: object, kind: str, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        _undecodable(kind, path, "an object")
    return value


def _optional_str(data: Mapping[str, Any], key: str, kind: str, path: str) -> str:
    value = data.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        _undecodable(kind, f"{path}.{key}", "a string")
    return value


def _optional_str_list(data: Mapping[str, Any], key: str, kind: str) -> list[str]:
    value = data.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        _undecodable(kind, f"spec.{key}", "a list of strings")
    return list(value)


def _undecodable(kind: str, path: str, expected: str) -> NoReturn:
    """400, worded like the API server's decoding failure (whose Go details we do not copy)."""
    raise status.bad_request(
        f'{kind} in version "v1" cannot be handled as a {kind}: {path} must be {expected}'
    )
