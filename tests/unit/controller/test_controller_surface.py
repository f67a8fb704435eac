"""The public surface of cacheproxy.controller is what we mean it to be."""

from __future__ import annotations

import cacheproxy.controller as controller
from tests.surface import surface_problems


def test_the_package_exports_exactly_its_public_names() -> None:
    assert sorted(controller.__all__) == [
        "Controller",
        "InformerFactory",
        "Reconcile",
        "Requeue",
        "owner_keys",
    ]


def test_the_public_surface_is_sound() -> None:
    assert surface_problems(controller) == []
