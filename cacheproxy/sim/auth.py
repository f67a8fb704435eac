"""The simulator's optional auth: static bearer tokens, client certificates, and a small RBAC.

It owns *who is asking* (:class:`Authenticator`), *may they* (:class:`Authorizer`), the policy
file both are built from (:class:`Policy`), and the bodies of the three review endpoints
(:func:`token_review`, :func:`subject_access_review`, :func:`self_subject_access_review`), so the
HTTP layer only routes. Decisions and error bodies mirror the API server: the bearer-token and
x509 authenticators, ``AuthenticatedGroupAdder``, the privileged ``system:masters`` group, the
RBAC rule matching of ``plugin/pkg/auth/authorizer/rbac``, and the 401/403 bodies of
``k8s-samples/protocol/err_*``.

Policy file (YAML)::

    users:                         # static bearer tokens (like --token-auth-file)
      - name: admin
        token: admin-token         # sent as "Authorization: Bearer admin-token"
        groups: [system:masters]   # optional; system:masters may do anything
        uid: "42"                  # optional
      - name: lowpriv
        token: lowpriv-token
    rules:                         # each rule is a binding: subjects -> what they may do
      - name: readers              # optional, quoted in SubjectAccessReview reasons
        subjects: [{kind: User, name: reader}, {kind: Group, name: viewers}]
        verbs: [get, list, watch]  # "*" = any verb
        apiGroups: [""]            # "" = core group, "*" = any group
        resources: [pods, pods/log]  # "*" = any; "pods/log" a subresource; "*/log" too
        namespaces: [ns-1]         # optional; omitted = every namespace and cluster scope
        resourceNames: [web-0]     # optional; omitted = any name (list/watch need it omitted)
      - subjects: [{kind: Group, name: system:authenticated}]
        verbs: [get]
        nonResourceURLs: ["/metrics", "/logs/*"]   # instead of apiGroups + resources

Subjects are users (by name, including ``system:anonymous``) or groups (including
``system:authenticated`` and ``system:unauthenticated``). Like a fresh cluster, the authorizer
also applies the bootstrap bindings ``system:discovery``, ``system:public-info-viewer`` and
``system:basic-user`` (discovery for the authenticated, ``/version`` and health for everyone,
self-reviews for the authenticated), unless built with ``bootstrap=False``.

Not modelled: roles as separate objects, aggregation, impersonation, token audiences.
"""

from __future__ import annotations

import datetime
import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NoReturn

import yaml

from cacheproxy.errors import ApiError, ConfigError, StatusCause
from cacheproxy.kube import status

__all__ = [
    "ANONYMOUS",
    "ANONYMOUS_USER",
    "AUTHENTICATED",
    "BOOTSTRAP_BINDINGS",
    "MASTERS",
    "UNAUTHENTICATED",
    "Attributes",
    "Authenticator",
    "Authorizer",
    "Binding",
    "Decision",
    "NonResourceAttributes",
    "Policy",
    "ResourceAttributes",
    "Rule",
    "StaticUser",
    "Subject",
    "UserInfo",
    "bearer_token",
    "self_subject_access_review",
    "subject_access_review",
    "token_review",
]

ANONYMOUS = "system:anonymous"
UNAUTHENTICATED = "system:unauthenticated"
AUTHENTICATED = "system:authenticated"
MASTERS = "system:masters"
INVALID_TOKEN = "invalid bearer token"
"""The bearer-token authenticator's error when no token authenticator knows the token."""


@dataclass(frozen=True, slots=True)
class UserInfo:
    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""


ANONYMOUS_USER = UserInfo(ANONYMOUS, (UNAUTHENTICATED,))


@dataclass(frozen=True, slots=True)
class ResourceAttributes:
    """What a resource request does, as the API server's RequestInfo describes it.

    ``namespace`` is empty for cluster-scoped requests and for lists across all namespaces; for
    ``namespaces/<name>`` requests it is ``<name>`` (so a namespace-limited rule may read its own
    namespace). ``name`` is empty for list, watch and create.
    """

    verb: str
    group: str
    resource: str
    namespace: str = ""
    name: str = ""
    subresource: str = ""
    version: str = ""

    def to_review(self) -> dict[str, str]:
        """``spec.resourceAttributes`` JSON: Go field order, empty fields omitted."""
        pairs = (
            ("namespace", self.namespace),
            ("verb", self.verb),
            ("group", self.group),
            ("version", self.version),
            ("resource", self.resource),
            ("subresource", self.subresource),
            ("name", self.name),
        )
        return {k: v for k, v in pairs if v}


@dataclass(frozen=True, slots=True)
class NonResourceAttributes:
    """A request for a path that is not a resource (``/version``, ``/api``, ``/healthz``)."""

    verb: str
    path: str

    def to_review(self) -> dict[str, str]:
        return {k: v for k, v in (("path", self.path), ("verb", self.verb)) if v}


Attributes = ResourceAttributes | NonResourceAttributes


@dataclass(frozen=True, slots=True)
class Subject:
    kind: Literal["User", "Group"]
    name: str

    def matches(self, user: UserInfo) -> bool:
        return user.name == self.name if self.kind == "User" else self.name in user.groups


@dataclass(frozen=True, slots=True)
class Rule:
    """An RBAC ``PolicyRule`` plus where it applies: ``namespaces`` empty = a ClusterRoleBinding
    (every namespace and cluster scope), else a RoleBinding in each listed namespace."""

    verbs: tuple[str, ...]
    api_groups: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    namespaces: tuple[str, ...] = ()
    resource_names: tuple[str, ...] = ()
    non_resource_urls: tuple[str, ...] = ()

    def matches(self, attrs: Attributes) -> bool:
        if not ("*" in self.verbs or attrs.verb in self.verbs):
            return False
        if isinstance(attrs, NonResourceAttributes):
            # Only cluster-wide bindings grant non-resource URLs; "/logs/*" is a prefix match.
            return not self.namespaces and any(
                url in ("*", attrs.path) or (url.endswith("*") and attrs.path.startswith(url[:-1]))
                for url in self.non_resource_urls
            )
        if self.namespaces and attrs.namespace not in self.namespaces:
            return False
        if not ("*" in self.api_groups or attrs.group in self.api_groups):
            return False
        combined = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
        if not any(
            r in ("*", combined) or (attrs.subresource and r == f"*/{attrs.subresource}")
            for r in self.resources
        ):
            return False
        # A rule limited to names never matches a request without one (list, watch, create).
        return not self.resource_names or attrs.name in self.resource_names


@dataclass(frozen=True, slots=True)
class Binding:
    name: str
    subjects: tuple[Subject, ...]
    rule: Rule

    def subject_for(self, user: UserInfo) -> Subject | None:
        return next((s for s in self.subjects if s.matches(user)), None)


@dataclass(frozen=True, slots=True)
class StaticUser:
    name: str
    token: str = field(repr=False)
    groups: tuple[str, ...] = ()
    uid: str = ""


_DISCOVERY_URLS = ("/api", "/api/*", "/apis", "/apis/*", "/openapi", "/openapi/*")
_PUBLIC_URLS = ("/healthz", "/livez", "/readyz", "/version", "/version/")
BOOTSTRAP_BINDINGS: tuple[Binding, ...] = (
    Binding(
        "system:discovery",
        (Subject("Group", AUTHENTICATED),),
        Rule(verbs=("get",), non_resource_urls=(*_DISCOVERY_URLS, *_PUBLIC_URLS)),
    ),
    Binding(
        "system:public-info-viewer",
        (Subject("Group", AUTHENTICATED), Subject("Group", UNAUTHENTICATED)),
        Rule(verbs=("get",), non_resource_urls=_PUBLIC_URLS),
    ),
    Binding(
        "system:basic-user",
        (Subject("Group", AUTHENTICATED),),
        Rule(
            verbs=("create",),
            api_groups=("authorization.k8s.io", "authentication.k8s.io"),
            resources=("selfsubjectaccessreviews", "selfsubjectrulesreviews", "selfsubjectreviews"),
        ),
    ),
)
"""The default ClusterRoleBindings of ``rbac/bootstrappolicy`` that every cluster has."""


@dataclass(frozen=True, slots=True)
class Policy:
    users: tuple[StaticUser, ...] = ()
    bindings: tuple[Binding, ...] = ()

    @classmethod
    def from_mapping(cls, data: object, *, source: str = "policy") -> Policy:
        """Build from parsed YAML/JSON; a :class:`ConfigError` names ``source`` and the bad key."""
        return _PolicyParser(source).policy(data)

    @classmethod
    def load(cls, path: Path) -> Policy:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read policy file {path}: {exc}") from exc
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
        if data is None:
            raise ConfigError(f"{path}: the file is empty; expected a mapping with users and rules")
        return cls.from_mapping(data, source=str(path))


def bearer_token(authorization_header: str | None) -> str | None:
    """The token of ``Authorization: Bearer <token>``, or None if the header carries none.

    As the API server's bearer-token authenticator: the scheme is case-insensitive, anything
    other than Bearer (or an empty token) is "no token" (so anonymous), not an error.
    """
    parts = (authorization_header or "").strip().split(" ", 2)
    if len(parts) < 2 or parts[0].lower() != "bearer" or not parts[1]:
        return None
    return parts[1]


def _with_authenticated(user: UserInfo) -> UserInfo:
    """``AuthenticatedGroupAdder``: every authenticated user is in ``system:authenticated``."""
    if AUTHENTICATED in user.groups or UNAUTHENTICATED in user.groups:
        return user
    return UserInfo(user.name, (*user.groups, AUTHENTICATED), user.uid)


class Authenticator:
    """Who is asking. Order as in the API server: a verified client certificate, then a bearer
    token (unknown token → 401, never anonymous), then anonymous."""

    def __init__(self, policy: Policy) -> None:
        self._users = policy.users

    def authenticate(
        self,
        authorization_header: str | None,
        peer_user: tuple[str, tuple[str, ...]] | None = None,
    ) -> UserInfo:
        """The request's user; raises the 401 ``ApiError`` for a bearer token nobody issued."""
        if peer_user is not None and peer_user[0]:
            return _with_authenticated(UserInfo(peer_user[0], tuple(peer_user[1])))
        token = bearer_token(authorization_header)
        if token is None:
            return ANONYMOUS_USER
        user = self.authenticate_token(token)
        if user is None:
            raise status.unauthorized()
        return user

    def authenticate_token(self, token: str) -> UserInfo | None:
        # Compare against every token in constant time, so timing does not reveal a prefix.
        found: StaticUser | None = None
        candidate = token.encode()
        for u in self._users:
            if hmac.compare_digest(u.token.encode(), candidate) and found is None:
                found = u
        if found is None:
            return None
        return _with_authenticated(UserInfo(found.name, found.groups, found.uid))


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    reason: str = ""


class Authorizer:
    """May they. Members of ``system:masters`` may do anything (the privileged-group authorizer);
    otherwise the first binding with a matching subject and rule allows; nothing denies."""

    def __init__(self, policy: Policy, *, bootstrap: bool = True) -> None:
        self._bindings = (*BOOTSTRAP_BINDINGS, *policy.bindings) if bootstrap else policy.bindings

    def decide(self, user: UserInfo, attrs: Attributes) -> Decision:
        if MASTERS in user.groups:
            return Decision(True)
        for binding in self._bindings:
            subject = binding.subject_for(user)
            if subject is not None and binding.rule.matches(attrs):
                reason = (
                    f'RBAC: allowed by rule "{binding.name}" to {subject.kind} "{subject.name}"'
                )
                return Decision(True, reason)
        return Decision(False)

    def allows(self, user: UserInfo, attrs: Attributes) -> bool:
        return self.decide(user, attrs).allowed

    def check(self, user: UserInfo, attrs: Attributes) -> None:
        """Raise the API server's 403 ``ApiError`` unless allowed."""
        if not self.allows(user, attrs):
            raise _forbidden(user, attrs)


def _forbidden(user: UserInfo, attrs: Attributes) -> ApiError:
    """``responsewriters.Forbidden`` + ``NewForbidden``: the 403 body for a denied request."""
    if isinstance(attrs, NonResourceAttributes):
        message = f'forbidden: User "{user.name}" cannot {attrs.verb} path "{attrs.path}"'
        return ApiError(
            status.status_body(code=403, reason="Forbidden", message=message, details={})
        )
    error = status.forbidden(
        user=user.name,
        verb=attrs.verb,
        resource=attrs.resource,
        group=attrs.group,
        namespace=attrs.namespace,
        name=attrs.name,
    )
    if not attrs.subresource:
        return error
    # The message names "pods/log"; the subject and details.kind stay "pods".
    needle = f'cannot {attrs.verb} resource "{attrs.resource}"'
    full = f'cannot {attrs.verb} resource "{attrs.resource}/{attrs.subresource}"'
    body = error.status.copy()
    body["message"] = body["message"].replace(needle, full, 1)
    return ApiError(body)


# --- review endpoints --------------------------------------------------------------------------

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


# --- policy file -------------------------------------------------------------------------------

_TOP_KEYS = ("users", "rules")
_USER_KEYS = ("name", "token", "groups", "uid")
_RULE_KEYS = (
    "name",
    "subjects",
    "verbs",
    "apiGroups",
    "resources",
    "namespaces",
    "resourceNames",
    "nonResourceURLs",
)
_SUBJECT_KEYS = ("kind", "name")


class _PolicyParser:
    """Parsed YAML → :class:`Policy`; every error reads ``<source>: <path>: <problem>``."""

    def __init__(self, source: str) -> None:
        self.source = source

    def policy(self, data: object) -> Policy:
        top = self._mapping(data, "", _TOP_KEYS)
        users = tuple(
            self._user(u, f"users[{i}]")
            for i, u in enumerate(self._list(top.get("users"), "users"))
        )
        seen: dict[str, int] = {}
        for i, user in enumerate(users):
            if user.token in seen:
                self._fail(f"users[{i}].token", f"the same token as users[{seen[user.token]}]")
            seen[user.token] = i
        rules = self._list(top.get("rules"), "rules")
        return Policy(users, tuple(self._binding(r, f"rules[{i}]") for i, r in enumerate(rules)))

    def _user(self, data: object, path: str) -> StaticUser:
        m = self._mapping(data, path, _USER_KEYS)
        token = self._string(m.get("token"), f"{path}.token")
        if any(c.isspace() for c in token):
            self._fail(f"{path}.token", "must not contain whitespace (it could never be sent)")
        return StaticUser(
            name=self._string(m.get("name"), f"{path}.name"),
            token=token,
            groups=self._strings(m.get("groups"), f"{path}.groups"),
            uid=self._string(m.get("uid", ""), f"{path}.uid", allow_empty=True),
        )

    def _binding(self, data: object, path: str) -> Binding:
        m = self._mapping(data, path, _RULE_KEYS)
        name = self._string(m.get("name", path), f"{path}.name")
        subjects = self._list(m.get("subjects"), f"{path}.subjects", required=True)
        verbs = self._strings(m.get("verbs"), f"{path}.verbs", required=True)
        urls = self._strings(m.get("nonResourceURLs"), f"{path}.nonResourceURLs")
        resource_keys = ("apiGroups", "resources", "namespaces", "resourceNames")
        if urls:
            if clash := [k for k in resource_keys if k in m]:
                self._fail(path, f"nonResourceURLs cannot be combined with {', '.join(clash)}")
            for j, url in enumerate(urls):
                if url != "*" and (not url.startswith("/") or "*" in url[:-1]):
                    self._fail(
                        f"{path}.nonResourceURLs[{j}]", f'"{url}" is not "/path" or "/prefix*"'
                    )
            rule = Rule(verbs=verbs, non_resource_urls=urls)
        else:
            namespaces = self._strings(m.get("namespaces"), f"{path}.namespaces")
            if "*" in namespaces or "" in namespaces:
                self._fail(f"{path}.namespaces", "omit namespaces to grant every namespace")
            rule = Rule(
                verbs=verbs,
                api_groups=self._strings(
                    m.get("apiGroups"), f"{path}.apiGroups", required=True, allow_empty=True
                ),
                resources=self._strings(m.get("resources"), f"{path}.resources", required=True),
                namespaces=namespaces,
                resource_names=self._strings(m.get("resourceNames"), f"{path}.resourceNames"),
            )
        return Binding(
            name,
            tuple(self._subject(s, f"{path}.subjects[{j}]") for j, s in enumerate(subjects)),
            rule,
        )

    def _subject(self, data: object, path: str) -> Subject:
        m = self._mapping(data, path, _SUBJECT_KEYS)
        kind = m.get("kind")
        name = self._string(m.get("name"), f"{path}.name")
        if kind not in ("User", "Group"):
            self._fail(f"{path}.kind", f'must be "User" or "Group", got {_show(kind)}')
        return Subject(kind, name)

    def _mapping(self, value: object, path: str, allowed: tuple[str, ...]) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            self._fail(path, f"expected a mapping, got {_show(value)}")
        for key in value:
            if key not in allowed:
                where = f"{path}.{key}" if path else str(key)
                self._fail(where, f"unknown key (expected one of: {', '.join(allowed)})")
        return value

    def _list(self, value: object, path: str, *, required: bool = False) -> list[Any]:
        if value is None and not required:
            return []
        if not isinstance(value, list) or (required and not value):
            expected = "a non-empty list" if required else "a list"
            self._fail(path, f"expected {expected}, got {_show(value)}")
        return value

    def _strings(
        self, value: object, path: str, *, required: bool = False, allow_empty: bool = False
    ) -> tuple[str, ...]:
        items = self._list(value, path, required=required)
        return tuple(
            self._string(v, f"{path}[{i}]", allow_empty=allow_empty) for i, v in enumerate(items)
        )

    def _string(self, value: object, path: str, *, allow_empty: bool = False) -> str:
        if not isinstance(value, str) or (not value and not allow_empty):
            expected = "a string" if allow_empty else "a non-empty string"
            self._fail(path, f"expected {expected}, got {_show(value)}")
        return value

    def _fail(self, path: str, problem: str) -> NoReturn:
        raise ConfigError(
            f"{self.source}: {path}: {problem}" if path else f"{self.source}: {problem}"
        )


def _show(value: object) -> str:
    """A value as the policy file's author would recognise it."""
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return f"{str(value).lower()} (a boolean; quote it for a string)"
    if isinstance(value, str):
        return f'"{value}"' if value else "an empty string"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list" if value else "an empty list"
    return f"{value!r} (a {type(value).__name__})"
