"""The simulator's settings: every one documented for users, the 1.28 profile a complete set."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from cacheproxy.sim import SimConfig

DOCS = Path(__file__).resolve().parents[3] / "docs" / "simulator.md"


def test_every_setting_is_in_the_users_table() -> None:
    text = DOCS.read_text(encoding="utf-8")
    for field in dataclasses.fields(SimConfig):
        assert f"| `{field.name}` |" in text, field.name


def test_the_1_28_profile_takes_overrides_and_leaves_the_defaults_alone() -> None:
    profile = SimConfig.kube_1_28(rv_wait=0.5)
    assert profile.rv_wait == 0.5 and profile.per_resource_cache
    default = SimConfig()
    assert not default.per_resource_cache and default.watch_list and default.pod_generation
    assert default.uncached_resources == frozenset()


def test_the_1_36_profile_is_1_32s_with_cache_snapshots_and_pod_generations() -> None:
    old, new = SimConfig.kube_1_32(), SimConfig.kube_1_36(rv_wait=0.5)
    differing = {
        f.name
        for f in dataclasses.fields(SimConfig)
        if getattr(old, f.name) != getattr(new, f.name)
    }
    assert differing == {"git_version", "pod_generation", "list_from_cache_snapshot", "rv_wait"}
    assert new.git_version == "v1.36.2" and new.pod_generation and new.list_from_cache_snapshot
    assert SimConfig.behaving_as("1.36") == SimConfig.kube_1_36()
