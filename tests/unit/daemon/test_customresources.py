"""What the daemon says of a resource upstream does not serve: the closest names it serves."""

from __future__ import annotations

import pytest

from cacheproxy.daemon.customresources import closest_served
from cacheproxy.kube.resources import BUILTIN_RESOURCES, ResourceType


@pytest.mark.parametrize(
    ("name", "closest"),
    [
        # A plural of another version: the same plural first.
        ("coordination.k8s.io/v2/leases", ["coordination.k8s.io/v1/leases"]),
        # A misspelt plural: plurals alike, its own group's first.
        (
            "discovery.k8s.io/v1/endpointslice",
            ["discovery.k8s.io/v1/endpointslices", "endpoints"],
        ),
        ("apps/v1/deploymnets", ["apps/v1/deployments", "apps/v1/daemonsets"]),
        ("example.com/v1/zzz", []),
    ],
)
def test_the_closest_served_names_are_the_same_plural_then_plurals_alike(
    name: str, closest: list[str]
) -> None:
    group, version, plural = name.split("/")
    rtype = ResourceType(group, version, plural, "", namespaced=True)
    assert closest_served(rtype, BUILTIN_RESOURCES) == closest
