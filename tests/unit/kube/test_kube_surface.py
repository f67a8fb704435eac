"""The public surface of cacheproxy.kube is what we mean it to be."""

from __future__ import annotations

import cacheproxy.kube as kube
from tests.surface import surface_problems


def test_the_package_exports_exactly_its_public_names() -> None:
    assert sorted(kube.__all__) == [
        "BUILTIN_RESOURCES",
        "FieldSelector",
        "GroupVersion",
        "LabelSelector",
        "ResourceRegistry",
        "ResourceType",
        "builtin",
        "object_key",
        "object_namespace_name",
        "parse_field_selector",
        "parse_label_selector",
        "selector_from_match_labels",
        "split_key",
    ]


def test_every_public_name_resolves_is_documented_and_nothing_private_leaks() -> None:
    assert surface_problems(kube) == []
