"""Field paths: simple, fanned out over lists, stringified as field selectors compare them."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from cacheproxy.errors import ConfigError
from cacheproxy.kube.fieldpath import compile_field_path

POD = {
    "metadata": {
        "name": "p",
        "labels": {"app": "web"},
        "ownerReferences": [{"uid": "u1"}, {"uid": "u2"}, {"uid": "u1"}],
    },
    "spec": {
        "nodeName": "n1",
        "hostNetwork": True,
        "priority": 7,
        "containers": [{"image": "a"}, {"image": "b"}, {"name": "no-image"}],
    },
}


@pytest.mark.parametrize(
    ("path", "values"),
    [
        ("spec.nodeName", ("n1",)),
        ("spec.hostNetwork", ("true",)),
        ("spec.priority", ("7",)),
        ("metadata.labels.app", ("web",)),
        ("metadata.ownerReferences[*].uid", ("u1", "u2")),
        ("spec.containers[*].image", ("a", "b")),
        ("spec.missing", ()),
        ("spec.containers", ()),  # a list is not a scalar value
        ("spec.nodeName.deeper", ()),
        ("status.phase", ()),
    ],
)
def test_paths_yield_the_stringified_values(path: str, values: tuple[str, ...]) -> None:
    assert compile_field_path(path)(POD) == values


def test_simple_paths_read_any_mapping_not_only_dicts() -> None:
    obj = MappingProxyType({"spec": MappingProxyType({"nodeName": "n1", "priority": 7})})
    assert compile_field_path("spec.nodeName")(obj) == ("n1",)
    assert compile_field_path("spec.priority")(obj) == ("7",)
    assert compile_field_path("spec.nodeName.deeper")(obj) == ()


@pytest.mark.parametrize("path", ["", ".spec", "spec.", "spec..x", "spec.[*]", "spec.a[0]", "a*"])
def test_malformed_paths_are_config_errors_naming_the_path(path: str) -> None:
    with pytest.raises(ConfigError, match="invalid field path"):
        compile_field_path(path)
