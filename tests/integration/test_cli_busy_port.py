"""A port that is taken: one line naming the port and what changes it, exit 2, no traceback."""

from __future__ import annotations

import asyncio
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml


@pytest.fixture
def taken() -> Iterator[int]:
    """A loopback port some other socket listens on."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


async def _cacheproxy(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "cacheproxy",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    return proc.returncode or 0, out.decode(), err.decode()


def _said(err: str, port: int, hint: str) -> None:
    lines = [line for line in err.splitlines() if "cannot listen" in line]
    assert lines == [
        f"cacheproxy: cannot listen on 127.0.0.1:{port}: the address is already in use "
        f"(another process listens there); {hint}"
    ], err
    assert "Traceback" not in err
    assert "churn" not in err


async def test_demo_names_the_proxy_port_and_its_flag(taken: int) -> None:
    code, _, err = await _cacheproxy("demo", "--port", str(taken), "--sim-port", "0")
    assert code == 2
    _said(err, taken, "the proxy's port: choose another with --port or CACHEPROXY_DEMO_PORT")


async def test_demo_names_the_simulator_port_and_its_flag(taken: int) -> None:
    code, _, err = await _cacheproxy("demo", "--port", "0", "--sim-port", str(taken))
    assert code == 2
    _said(
        err,
        taken,
        "the simulator's port: choose another with --sim-port or CACHEPROXY_DEMO_SIM_PORT",
    )


async def test_sim_names_its_port_and_flag(taken: int) -> None:
    code, _, err = await _cacheproxy("sim", "--port", str(taken))
    assert code == 2
    _said(err, taken, "choose another with --port or CACHEPROXY_SIM_PORT")


async def test_serve_names_the_setting(taken: int, tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}],
                "users": [{"name": "u", "user": {}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    code, _, err = await _cacheproxy(
        "serve", "--set", "resources=pods", "--kubeconfig", str(kubeconfig), "--port", str(taken)
    )
    assert code == 2
    _said(
        err,
        taken,
        "choose another with --port, --set server.port=PORT, CACHEPROXY_SERVER_PORT or "
        "server.port in the config file",
    )
