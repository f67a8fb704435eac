"""Real clients for integration tests: pinned kubectl binaries (oldest and newest)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

PINNED_KUBECTL = Path("/usr/lib/google-cloud-sdk/bin")
# The oldest and the newest kubectl this machine pins; both must work against our servers.
KUBECTL_VERSIONS = ("1.27", "1.33")


def kubectl_binary(version: str) -> str:
    path = PINNED_KUBECTL / f"kubectl.{version}"
    if path.exists():
        return str(path)
    fallback = shutil.which("kubectl")
    if fallback is None:
        pytest.fail(f"kubectl {version} is not installed (looked for {path} and kubectl on PATH)")
    return fallback


async def start_kubectl(
    binary: str, server: str, cache_dir: Path, *args: str
) -> asyncio.subprocess.Process:
    """``kubectl --server SERVER ARGS`` with no kubeconfig, stdout and stderr piped."""
    return await asyncio.create_subprocess_exec(
        binary,
        "--server",
        server,
        "--cache-dir",
        str(cache_dir),
        "--kubeconfig",
        "/dev/null",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def run_kubectl(
    binary: str, server: str, cache_dir: Path, *args: str, deadline: float = 30
) -> tuple[int, str, str]:
    proc = await start_kubectl(binary, server, cache_dir, *args)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout=deadline)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    return proc.returncode or 0, out.decode(), err.decode()
