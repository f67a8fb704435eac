"""The registry strategies' pure parts: a pod's QoS class and what each kind's writes may change."""

from __future__ import annotations

from typing import Any

import pytest

from cacheproxy.kube.resources import builtin
from cacheproxy.sim.strategy import (
    has_status,
    prepare_create,
    prepare_status_update,
    prepare_update,
    qos_class,
    subresources,
)


def pod(*resources: dict[str, Any]) -> dict[str, Any]:
    return {
        "spec": {"containers": [{"name": f"c{i}", "resources": r} for i, r in enumerate(resources)]}
    }


BOTH = {"cpu": "1", "memory": "1Gi"}


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (pod({}), "BestEffort"),
        (pod({}, {}), "BestEffort"),
        (pod({"limits": BOTH}), "Guaranteed"),
        (pod({"limits": BOTH, "requests": BOTH}), "Guaranteed"),
        (pod({"limits": BOTH}, {"limits": BOTH}), "Guaranteed"),
        (pod({"limits": BOTH, "requests": {"cpu": "500m"}}), "Burstable"),
        (pod({"limits": {"cpu": "1"}}), "Burstable"),
        (pod({"requests": {"cpu": "10m"}}), "Burstable"),
        (pod({"limits": BOTH}, {}), "Burstable"),
    ],
)
def test_a_pods_qos_class_is_the_api_servers(obj: dict[str, Any], expected: str) -> None:
    assert qos_class(obj) == expected


def test_only_kinds_with_a_status_have_the_subresource() -> None:
    assert has_status(builtin("pods")) and has_status(builtin("apps/v1/deployments"))
    assert not has_status(builtin("configmaps")) and not has_status(builtin("events"))
    assert subresources(builtin("pods")) == ("binding", "status")
    assert subresources(builtin("nodes")) == ("status",)
    assert subresources(builtin("secrets")) == ()


def test_a_create_sets_the_kinds_initial_status_and_nodes_keep_theirs() -> None:
    rs: dict[str, Any] = {"spec": {}, "status": {"replicas": 3}}
    prepare_create(builtin("apps/v1/replicasets"), rs)
    assert rs["status"] == {"replicas": 0}
    node: dict[str, Any] = {"status": {"capacity": {"cpu": "4"}}}
    prepare_create(builtin("nodes"), node)
    assert node["status"] == {"capacity": {"cpu": "4"}}


def test_an_update_keeps_the_stored_status_even_when_the_body_has_none() -> None:
    old = {"metadata": {}, "spec": {"a": 1}, "status": {"phase": "Running"}}
    new: dict[str, Any] = {"metadata": {}, "spec": {"a": 2}}
    prepare_update(builtin("pods"), new, old)
    assert new == {"metadata": {}, "spec": {"a": 2}, "status": {"phase": "Running"}}


def test_a_status_update_keeps_every_other_top_level_field() -> None:
    old = {"metadata": {"labels": {"a": "1"}}, "spec": {"x": 1}, "extra": 1, "status": {}}
    new: dict[str, Any] = {
        "metadata": {"labels": {"a": "2"}},
        "spec": {"x": 2},
        "other": 3,
        "status": {"s": 1},
    }
    prepare_status_update(builtin("apps/v1/deployments"), new, old)
    assert new == {
        "metadata": {"labels": {"a": "1"}},
        "spec": {"x": 1},
        "extra": 1,
        "status": {"s": 1},
    }
