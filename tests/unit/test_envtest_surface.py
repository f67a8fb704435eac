"""The public surface of cacheproxy.envtest is what we mean it to be."""

from __future__ import annotations

import cacheproxy.envtest as envtest
from tests.surface import surface_problems


def test_the_package_exports_exactly_its_public_names() -> None:
    assert sorted(envtest.__all__) == [
        "ASSETS_ENV",
        "ASSETS_HINT",
        "Assets",
        "Cluster",
        "ControlPlane",
        "EnvtestError",
        "FakeKubelet",
        "User",
        "collection_path",
        "find_all_assets",
        "find_assets",
    ]


def test_every_public_name_resolves_is_documented_and_nothing_private_leaks() -> None:
    assert surface_problems(envtest) == []
