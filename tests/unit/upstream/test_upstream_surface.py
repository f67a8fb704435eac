"""The public surface of cacheproxy.upstream is what we mean it to be."""

from __future__ import annotations

import cacheproxy.upstream as upstream


def test_the_package_exports_exactly_its_public_names() -> None:
    assert sorted(upstream.__all__) == [
        "ApiListerWatcher",
        "BearerTokenAuth",
        "TokenSource",
        "UpstreamConfig",
        "VersionInfo",
        "build_client",
        "get_version",
        "list_all",
        "load_incluster",
        "load_kubeconfig",
        "load_upstream",
    ]
    assert all(hasattr(upstream, name) for name in upstream.__all__)
