"""Bookmark lines as each kube-apiserver version writes them."""

from __future__ import annotations

import orjson

from cacheproxy.kube.resources import BUILTIN_RESOURCES
from cacheproxy.kube.versions import KUBE_1_32, KUBE_1_36
from cacheproxy.kube.watchevents import bookmark_line

CONFIGMAPS = next(r for r in BUILTIN_RESOURCES if r.resource == "configmaps")


def test_a_bookmark_has_a_null_creation_timestamp_up_to_1_32_and_none_on_1_36() -> None:
    # As both answered a watch of ConfigMaps with allowWatchBookmarks.
    old = orjson.loads(bookmark_line(CONFIGMAPS, 7, zero_time=KUBE_1_32.writes_zero_times))
    new = orjson.loads(bookmark_line(CONFIGMAPS, 7, zero_time=KUBE_1_36.writes_zero_times))
    assert old["object"] == {
        "kind": "ConfigMap",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": "7", "creationTimestamp": None},
    }
    assert new["object"] == {
        "kind": "ConfigMap",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": "7"},
    }
