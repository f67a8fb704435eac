"""The public surface of cacheproxy.upstream is what we mean it to be."""

from __future__ import annotations

import cacheproxy.upstream as upstream
from tests.surface import surface_problems


def test_the_package_exports_exactly_its_public_names() -> None:
    assert sorted(upstream.__all__) == [
        "ApiListerWatcher",
        "BearerTokenAuth",
        "CollectionKeys",
        "Discovered",
        "ForwardingTarget",
        "ImpersonatingTarget",
        "KeysListed",
        "ObjectVersions",
        "ResourceVersionProbe",
        "TokenSource",
        "UpstreamConfig",
        "UpstreamReviews",
        "VersionInfo",
        "build_client",
        "build_forwarding_target",
        "get_version",
        "list_all",
        "lister_watchers",
        "load_incluster",
        "load_kubeconfig",
        "load_upstream",
        "resource_types",
        "served_resources",
    ]


def test_every_public_name_resolves_is_documented_and_nothing_private_leaks() -> None:
    assert surface_problems(upstream) == []
