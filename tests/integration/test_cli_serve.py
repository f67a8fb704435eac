"""``cacheproxy serve`` as a process: it reloads its resources on SIGHUP and when its config file
changes, keeps running on a bad edit, and exits 0 on SIGTERM after shutting down in order."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from pathlib import Path

import httpx

from cacheproxy.sim import SimServer


def config_text(sim_url: str, kubeconfig: Path, resources: list[str]) -> str:
    listed = "".join(f"  - {r}\n" for r in resources)
    return (
        f"resources:\n{listed}"
        f"upstream:\n  kubeconfig: {kubeconfig}\n  inCluster: false\n"
        "server:\n  port: 0\n  shutdownGraceSeconds: 2\n"
        "logging:\n  level: info\n"
        # Read-only, so that what is not cached answers 404 (else it passes through).
        "passthrough:\n  enabled: false\n"
    )


def kubeconfig_for(url: str, path: Path) -> Path:
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: sim\n"
        f"clusters: [{{name: sim, cluster: {{server: '{url}'}}}}]\n"
        "users: [{name: sim, user: {}}]\n"
        "contexts: [{name: sim, context: {cluster: sim, user: sim}}]\n"
    )
    return path


async def test_serve_reloads_on_sighup_and_on_file_change_and_stops_on_sigterm(
    demo_server: SimServer, tmp_path: Path
) -> None:
    kubeconfig = kubeconfig_for(demo_server.url, tmp_path / "kubeconfig")
    config = tmp_path / "config.yaml"
    config.write_text(config_text(demo_server.url, kubeconfig, ["pods"]))
    env = {k: v for k, v in os.environ.items() if not k.startswith("CACHEPROXY_")}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cacheproxy", "serve", "--config", str(config),
        stderr=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL, env=env,
    )  # fmt: skip
    assert proc.stderr is not None
    seen: list[str] = []

    async def log_line(pattern: str) -> re.Match[str]:
        assert proc.stderr is not None
        while True:
            line = (await asyncio.wait_for(proc.stderr.readline(), 30)).decode()
            assert line, f"the daemon exited; it logged: {seen}"
            seen.append(line)
            found = re.search(pattern, line)
            if found:
                return found

    try:
        url = (await log_line(r"serving pods on (http://\S+)")).group(1)
        async with httpx.AsyncClient(base_url=url, timeout=10) as c:

            async def served(path: str) -> int:
                for _ in range(100):
                    code = (await c.get(path)).status_code
                    if code == 200:
                        return code
                    await asyncio.sleep(0.1)
                return code

            assert await served("/api/v1/pods") == 200
            assert (await c.get("/api/v1/nodes")).status_code == 404
            # The file changes: picked up without a signal.
            config.write_text(config_text(demo_server.url, kubeconfig, ["pods", "nodes"]))
            await log_line(r"config reload: resources \+nodes")
            assert await served("/api/v1/nodes") == 200
            # A bad edit is refused and changes nothing.
            config.write_text("resources: [podz]\n")
            await log_line(r"config reload failed; keeping the current configuration")
            assert (await c.get("/api/v1/nodes")).status_code == 200
            # SIGHUP reads the (fixed) file again.
            config.write_text(config_text(demo_server.url, kubeconfig, ["nodes"]))
            await log_line(r"config reload: resources -pods")
            proc.send_signal(signal.SIGHUP)
            await log_line(r"reloading the configuration \(SIGHUP\)")
            assert (await c.get("/api/v1/pods")).status_code == 404
        proc.send_signal(signal.SIGTERM)
        await log_line("shutting down")
        code = await asyncio.wait_for(proc.wait(), 20)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert code == 0
