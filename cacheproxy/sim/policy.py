"""The simulator's auth policy: static users, RBAC-like bindings, and the file they come from.

It owns the policy model (:class:`StaticUser`, :class:`Subject`, :class:`Rule`, :class:`Binding`,
:class:`Policy`) with the rule matching of ``plugin/pkg/auth/authorizer/rbac``, the bootstrap
bindings every cluster has (:data:`BOOTSTRAP_BINDINGS`), and the policy file's format and
parsing, whose every :class:`~cacheproxy.errors.ConfigError` names the source and the bad key.
:mod:`~cacheproxy.sim.auth` authenticates and authorizes with it.

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

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NoReturn

import yaml

from cacheproxy.errors import ConfigError
from cacheproxy.kube.attributes import (
    AUTHENTICATED,
    UNAUTHENTICATED,
    Attributes,
    NonResourceAttributes,
    UserInfo,
)

__all__ = [
    "BOOTSTRAP_BINDINGS",
    "Binding",
    "Policy",
    "Rule",
    "StaticUser",
    "Subject",
]


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
