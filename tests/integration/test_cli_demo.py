"""``make run`` = ``cacheproxy demo``: it reaches ready and the commands it prints work."""

from __future__ import annotations

import asyncio
import re
import signal

import pytest

from tests.support import start_demo

pytestmark = pytest.mark.kubectl


async def test_the_demo_gets_ready_and_every_printed_command_works() -> None:
    proc = await start_demo()
    assert proc.stdout is not None
    try:
        lines: list[str] = []
        while not lines or not lines[-1].startswith("Press Ctrl-C"):
            line = (await asyncio.wait_for(proc.stdout.readline(), timeout=60)).decode()
            assert line, "the demo exited before printing its commands"
            lines.append(line.rstrip("\n"))
        assert re.match(
            r"cacheproxy is ready on http://127\.0\.0\.1:\d+, caching the simulator on", lines[0]
        )
        commands = [
            line.strip()
            for line in lines
            if line.startswith("  ") and " -w" not in line and "watch=1" not in line
        ]
        assert len(commands) >= 7
        for command in commands:
            run = await asyncio.create_subprocess_shell(
                command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
            )
            out, err = await asyncio.wait_for(run.communicate(), timeout=30)
            assert run.returncode == 0, f"{command}: {err.decode()}"
            assert out.strip(), f"{command} printed nothing"
            if command.startswith("curl") and "/version" not in command:
                assert b'"kind"' in out, command
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(proc.wait(), timeout=20)
    assert code == 0
