"""The README's commands, run as a newcomer runs them: against the demo it starts, and against a
cluster (here the demo's simulator, reached through a kubeconfig in ``~/.kube/config``). Only the
ports are rewritten (tests listen on port 0); everything else runs as printed, so the README
cannot go stale. The blocks are the ``sh`` blocks marked ``<!-- readme: … -->``."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest
import yaml

from tests.support import marked_commands, start_demo

pytestmark = pytest.mark.kubectl

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
DEMO_PORT = "http://127.0.0.1:8080"
STREAMING = re.compile(r"(\s-w\b|watch=1)")
GUARD = 60.0


@dataclass(frozen=True)
class Demo:
    proxy: str
    upstream: str


@pytest.fixture(scope="module")
def demo_commands() -> list[str]:
    commands = marked_commands(README, "readme: against the demo")
    assert len(commands) >= 6, "the README shows commands to try against the demo"
    return commands


@pytest.fixture
async def demo() -> AsyncIterator[Demo]:
    """``cacheproxy demo`` as ``make run`` starts it (ports: any free ones)."""
    proc = await start_demo()
    assert proc.stdout is not None
    try:
        first = (await asyncio.wait_for(proc.stdout.readline(), GUARD)).decode()
        found = re.match(r"cacheproxy is ready on (\S+), caching the simulator on (\S+)", first)
        assert found, first
        yield Demo(proxy=found.group(1), upstream=found.group(2))
    finally:
        proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.wait(), GUARD)


def _environment(home: Path) -> dict[str, str]:
    """A newcomer's shell after ``source .venv/bin/activate``: ``cacheproxy`` on PATH, no
    ``CACHEPROXY_*`` variables, a home of its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CACHEPROXY_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["HOME"] = str(home)
    env.pop("KUBECONFIG", None)
    return env


async def _shell(
    command: str, *, cwd: Path, env: dict[str, str], seconds: float = GUARD
) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        "bash",
        "-c",
        command,
        cwd=cwd,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), seconds + 10)
    return proc.returncode or 0, out.decode(), err.decode()


async def test_every_command_shown_for_the_demo_works_against_it(
    demo: Demo, demo_commands: list[str], tmp_path: Path
) -> None:
    env = _environment(tmp_path)
    for command in demo_commands:
        assert DEMO_PORT in command, command
        runnable = command.replace(DEMO_PORT, demo.proxy)
        if STREAMING.search(command):
            # A watch streams until stopped: what it printed in 3 s, then the stop.
            code, out, err = await _shell(f"timeout 3 {runnable}", cwd=tmp_path, env=env)
            assert code == 124, f"{command}: exited {code} before being stopped: {err}"
        else:
            code, out, err = await _shell(runnable, cwd=tmp_path, env=env)
            assert code == 0, f"{command}: {err}"
        assert out.strip(), f"{command} printed nothing: {err}"
        if command.startswith("curl") and "/cacheproxy/" in command:
            # cacheproxy's own API answers plain JSON about the resource it was asked of
            assert orjson.loads(out)["resource"] == "pods", command
        elif command.startswith("curl"):
            assert '"kind"' in out, command


async def test_every_command_shown_for_a_cluster_works_against_one(
    demo: Demo, tmp_path: Path
) -> None:
    # The cluster: the demo's simulator, in the newcomer's default kubeconfig.
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    (home / ".kube" / "config").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "demo", "cluster": {"server": demo.upstream}}],
                "users": [{"name": "me", "user": {}}],
                "contexts": [{"name": "demo", "context": {"cluster": "demo", "user": "me"}}],
                "current-context": "demo",
            }
        )
    )
    work = tmp_path / "work"
    (work / "deploy").mkdir(parents=True)
    (work / "deploy" / "config.example.yaml").symlink_to(REPO / "deploy" / "config.example.yaml")
    env = _environment(home)
    commands = marked_commands(README, "readme: against a cluster")
    assert any(c.startswith("cacheproxy serve") for c in commands)
    for command in commands:
        if not command.startswith("cacheproxy serve"):
            code, out, err = await _shell(command, cwd=work, env=env)
            assert code == 0, f"{command}: {out}{err}"
            continue
        runnable = command.replace("server.port=9090", "server.port=0")
        if "server.port" not in runnable:
            runnable += " --port 0"
        await _serves_until_ready(runnable, cwd=work, env=env)


async def _serves_until_ready(command: str, *, cwd: Path, env: dict[str, str]) -> None:
    """``command`` starts a daemon that syncs; it stops cleanly on SIGTERM."""
    proc = await asyncio.create_subprocess_exec(
        "bash",
        "-c",
        f"exec {command}",
        cwd=cwd,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stderr is not None
    seen: list[str] = []
    try:
        async with asyncio.timeout(GUARD):
            while not any("ready: every resource synced" in line for line in seen):
                line = (await proc.stderr.readline()).decode()
                assert line, f"{command} exited: {''.join(seen)}"
                seen.append(line)
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(proc.wait(), GUARD)
    assert code == 0, f"{command}: exit {code}: {''.join(seen)}"
    assert not any("Traceback" in line for line in seen), "".join(seen)
