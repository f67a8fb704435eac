"""The simulator's auth policy file: the documented format loads, and every error names its key."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from cacheproxy.errors import ConfigError
from cacheproxy.kube.attributes import ResourceAttributes
from cacheproxy.sim import policy as policy_module
from cacheproxy.sim.auth import Authenticator, Authorizer
from cacheproxy.sim.policy import Policy, Rule


def test_the_documented_example_loads(tmp_path: Path) -> None:
    doc = policy_module.__doc__ or ""
    example = doc.split("Policy file (YAML)::", 1)[1].split("\nSubjects are", 1)[0]
    path = tmp_path / "policy.yaml"
    path.write_text(textwrap.dedent(example))
    policy = Policy.load(path)

    assert [u.name for u in policy.users] == ["admin", "lowpriv"]
    assert policy.users[0].uid == "42"
    readers, metrics = policy.bindings
    assert readers.name == "readers"
    assert readers.rule.resource_names == ("web-0",)
    assert metrics.name == "rules[1]"
    assert metrics.rule.non_resource_urls == ("/metrics", "/logs/*")
    admin = Authenticator(policy).authenticate("Bearer admin-token")
    assert Authorizer(policy).allows(admin, ResourceAttributes("delete", "", "nodes"))


def test_the_briefs_example_loads(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(
        textwrap.dedent(
            """\
            users:
              - name: admin
                token: admin-token
                groups: [system:masters]
              - name: lowpriv
                token: lowpriv-token
            rules:
              - subjects: [{kind: Group, name: "system:masters"}]
                verbs: ["*"]
                apiGroups: ["*"]
                resources: ["*"]
              - subjects: [{kind: User, name: reader}]
                verbs: [get, list, watch]
                apiGroups: [""]
                resources: [pods]
                namespaces: [ns-1]
            """
        )
    )
    policy = Policy.load(path)
    assert policy.users[0].groups == ("system:masters",)
    assert policy.bindings[1].rule == Rule(
        verbs=("get", "list", "watch"), api_groups=("",), resources=("pods",), namespaces=("ns-1",)
    )


def _user(**fields: object) -> dict[str, object]:
    return {"users": [{"name": "a", "token": "t", **fields}]}


def _rule(**fields: object) -> dict[str, object]:
    """A valid rule changed by ``fields``; a field set to None is removed."""
    rule: dict[str, object] = {
        "subjects": [{"kind": "User", "name": "u"}],
        "verbs": ["get"],
        "apiGroups": [""],
        "resources": ["pods"],
    }
    rule.update(fields)
    return {"rules": [{k: v for k, v in rule.items() if v is not None}]}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "policy: expected a mapping, got an empty list"),
        ({"user": []}, "policy: user: unknown key (expected one of: users, rules)"),
        ({"users": {}}, "policy: users: expected a list, got a mapping"),
        (_user(name=None), "policy: users[0].name: expected a non-empty string, got nothing"),
        (_user(token=None), "policy: users[0].token: expected a non-empty string, got nothing"),
        (_user(token=123), "policy: users[0].token: expected a non-empty string, got 123 (a int)"),
        (_user(token="t u"), "policy: users[0].token: must not contain whitespace"),
        (_user(group=["g"]), "policy: users[0].group: unknown key (expected one of: name, token,"),
        (_user(groups="g"), 'policy: users[0].groups: expected a list, got "g"'),
        (
            {"users": [{"name": "a", "token": "t"}, {"name": "b", "token": "t"}]},
            "policy: users[1].token: the same token as users[0]",
        ),
        (_rule(subjects=None), "policy: rules[0].subjects: expected a non-empty list, got nothing"),
        (
            _rule(subjects=[{"kind": "Team", "name": "x"}]),
            'policy: rules[0].subjects[0].kind: must be "User" or "Group", got "Team"',
        ),
        (
            _rule(subjects=[{"kind": "User"}]),
            "policy: rules[0].subjects[0].name: expected a non-empty string, got nothing",
        ),
        (_rule(verbs=[]), "policy: rules[0].verbs: expected a non-empty list, got an empty list"),
        (
            _rule(verbs=[True]),
            "policy: rules[0].verbs[0]: expected a non-empty string, got true (a boolean; quote",
        ),
        (_rule(verb=["get"]), "policy: rules[0].verb: unknown key"),
        (
            _rule(apiGroups=None),
            "policy: rules[0].apiGroups: expected a non-empty list, got nothing",
        ),
        (
            _rule(resources=[""]),
            "policy: rules[0].resources[0]: expected a non-empty string, got an",
        ),
        (_rule(namespaces=["*"]), "policy: rules[0].namespaces: omit namespaces to grant every"),
        (
            _rule(nonResourceURLs=["/a"]),
            "policy: rules[0]: nonResourceURLs cannot be combined with apiGroups, resources",
        ),
        (
            _rule(nonResourceURLs=["a*b"], apiGroups=None, resources=None),
            'policy: rules[0].nonResourceURLs[0]: "a*b" is not "/path" or "/prefix*"',
        ),
    ],
)
def test_policy_errors_name_the_bad_key(data: object, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Policy.from_mapping(data)
    assert str(caught.value).startswith(message)


def test_policy_file_errors_name_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "missing.yaml"
    with pytest.raises(ConfigError, match=r"cannot read policy file .*missing\.yaml"):
        Policy.load(missing)

    broken = tmp_path / "broken.yaml"
    broken.write_text("users: [\n")
    with pytest.raises(ConfigError, match=r"broken.yaml: not valid YAML"):
        Policy.load(broken)

    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing yet\n")
    with pytest.raises(ConfigError, match=r"empty.yaml: the file is empty"):
        Policy.load(empty)

    bad = tmp_path / "bad.yaml"
    bad.write_text("users:\n  - name: a\n    token: t\n    uid: 42\n")
    with pytest.raises(ConfigError) as caught:
        Policy.load(bad)
    assert str(caught.value) == f"{bad}: users[0].uid: expected a string, got 42 (a int)"
