"""What a daemon's start imports, checked in a fresh interpreter (never by timing): a warm restart
reaches ready in well under a second only while the start path leaves FastAPI (cacheproxy's own
API, built on its first request) and the ``kubernetes`` package (imported to load the upstream's
credentials, not by importing a module) alone, and while importing the CLI imports nothing
heavy, so that ``main()`` pauses the collector over the imports (docs/operations.md, "Warm
restarts")."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HEAVY = {"fastapi", "starlette", "kubernetes"}

START_PATH = """
from cacheproxy.cli import build_parser

build_parser()  # the configuration's declarations, as `cacheproxy serve` builds its flags
import cacheproxy.daemon.logs
import cacheproxy.daemon.warmrestart
import cacheproxy.daemon.reload
import cacheproxy.daemon.runtime
import cacheproxy.daemon.wiring
import cacheproxy.upstream
from cacheproxy.server.app import CacheServer

CacheServer([], version={})  # the server the daemon builds before it listens
"""


def imported_by(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``code``."""
    report = "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))\n"
    out = subprocess.run(
        [sys.executable, "-c", code + report], check=True, capture_output=True, text=True
    ).stdout
    return set(json.loads(out.splitlines()[-1]))


def tops(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


def test_the_serving_start_path_imports_neither_fastapi_nor_kubernetes() -> None:
    assert tops(imported_by(START_PATH)) & HEAVY == set()


def test_importing_the_cli_imports_no_configuration_yet() -> None:
    modules = imported_by("import cacheproxy.cli")
    assert "cacheproxy.daemon.config" not in modules
    assert tops(modules) & {"pydantic", "httpx", "uvicorn", *HEAVY} == set()


def test_cacheproxys_own_api_imports_fastapi_once_built() -> None:
    code = (
        START_PATH
        + "\nfrom cacheproxy.server.ownapi import build_api\nbuild_api(CacheServer([], version={}))\n"
    )
    assert {"fastapi", "starlette"} <= tops(imported_by(code))


def test_kubernetes_is_imported_when_a_kubeconfig_is_loaded(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'https://127.0.0.1:6443'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    assert "kubernetes" not in tops(imported_by("import cacheproxy.upstream"))
    code = f"from pathlib import Path\nfrom cacheproxy.upstream import load_kubeconfig\nload_kubeconfig(Path({str(kubeconfig)!r}))\n"
    assert "kubernetes" in tops(imported_by(code))
