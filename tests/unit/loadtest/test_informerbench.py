"""informerbench's child program syncs every pod with each client (against the simulator here),
and its report's ratios are the medians' quotients."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import orjson
import yaml

from cacheproxy.sim import SimServer, Simulator
from loadtest.clients.informersync import CLIENTS
from loadtest.scenarios.informerbench import Size, Sync, render

ROOT = Path(__file__).resolve().parents[3]
MiB = 1 << 20


def _kubeconfig(url: str, path: Path) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "sim", "cluster": {"server": url}}],
                "users": [{"name": "u", "user": {"token": "any"}}],
                "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": "u"}}],
                "current-context": "sim",
            }
        )
    )
    return path


async def test_each_client_syncs_every_pod_and_reports_its_memory(
    demo_server: SimServer, demo_sim: Simulator, tmp_path: Path
) -> None:
    kubeconfig = _kubeconfig(demo_server.url, tmp_path / "config")
    pods = demo_sim.store.count(demo_sim.resource("pods"))
    for client in CLIENTS:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "loadtest.clients.informersync",
            client,
            "--kubeconfig",
            str(kubeconfig),
            "--expect",
            str(pods),
            cwd=ROOT,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(process.communicate(), 120)
        assert process.returncode == 0, err.decode()
        result = orjson.loads(out.splitlines()[-1])
        assert result["client"] == client and result["pods"] == pods
        assert result["sync_s"] > 0
        assert result["rss_after"] > 0 and result["rss_after_trimmed"] > 0
        assert result["hwm"] > 0  # the kernel updates VmHWM lazily: not compared with VmRSS


def test_the_report_divides_each_clients_medians_by_the_official_clients() -> None:
    def sync(client: str, seconds: float, added_mib: int) -> Sync:
        return Sync(
            client,
            1000,
            seconds,
            100 * MiB,
            (100 + added_mib) * MiB,
            90 * MiB,
            (90 + added_mib // 2) * MiB,
            400 * MiB,
        )

    size = Size(
        1000,
        10 * MiB,
        1.0,
        [
            sync("official", 10.0, 200),
            sync("official", 14.0, 220),
            sync("cacheproxy", 2.0, 20),
            sync("cacheproxy", 2.0, 22),
            sync("cacheproxy-full", 3.0, 30),
        ],
    )
    text = render([size], version="v1.28.7", machine="m", command="c")
    rows = {line.split("|")[3].strip(): line for line in text.splitlines() if "| 1000 |" in line}
    assert set(rows) == set(CLIENTS)
    cells = [c.strip() for c in rows["cacheproxy"].split("|")]
    assert cells[5] == "2.00"  # median sync s
    assert cells[6] == "21"  # median MiB added
    assert cells[11] == f"{2.0 / 12.0:.3f}"  # sync ÷ official (medians)
    assert cells[12] == f"{21 / 210:.3f}"  # memory ÷ official
    assert [c.strip() for c in rows["official"].split("|")][11] == "1.000"
