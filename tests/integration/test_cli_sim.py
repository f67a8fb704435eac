"""``cacheproxy sim`` as ``make run`` starts it: demo data, churn, printed commands, clean stop."""

from __future__ import annotations

import asyncio
import re
import signal
import sys

import httpx
import orjson


async def test_sim_command_serves_demo_data_with_churn_and_stops_on_sigterm() -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "cacheproxy",
        "sim",
        "--port",
        "0",
        "--pods",
        "12",
        "--churn",
        "40",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    try:
        banner = []
        url = None
        while url is None:
            line = (await asyncio.wait_for(proc.stdout.readline(), timeout=30)).decode()
            assert line, "the simulator exited before printing its address"
            banner.append(line)
            found = re.search(r"listening on (http://127\.0\.0\.1:\d+)", line)
            url = found.group(1) if found else None
        while not banner[-1].startswith("Press Ctrl-C"):
            banner.append((await asyncio.wait_for(proc.stdout.readline(), timeout=10)).decode())
        text = "".join(banner)
        assert f"kubectl --server {url}" in text
        assert f"curl -s {url}/version" in text

        async with httpx.AsyncClient(base_url=url, timeout=10) as c:
            nodes = (await c.get("/api/v1/nodes")).json()
            assert len(nodes["items"]) == 5  # the demo's nodes (churn writes only pods)
            pods = (await c.get("/api/v1/pods")).json()
            # 12 demo pods, give or take what churn already created or deleted.
            assert 6 <= len(pods["items"]) <= 24
            rv = pods["metadata"]["resourceVersion"]
            # Churn writes pods: a watch from the list's RV sees them.
            async with c.stream("GET", f"/api/v1/pods?watch=1&resourceVersion={rv}") as r:
                it = r.aiter_lines()
                try:
                    event = orjson.loads(await asyncio.wait_for(it.__anext__(), timeout=10))
                finally:
                    await it.aclose()
        assert event["type"] in ("ADDED", "MODIFIED", "DELETED")
        assert int(event["object"]["metadata"]["resourceVersion"]) > int(rv)
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(proc.wait(), timeout=15)
    assert code == 0


async def test_sim_behaves_as_kube_apiserver_1_28_when_asked() -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "cacheproxy",
        "sim",
        "--port",
        "0",
        "--pods",
        "12",
        "--behave-as",
        "1.28",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    try:
        url = None
        while url is None:
            line = (await asyncio.wait_for(proc.stdout.readline(), timeout=30)).decode()
            assert line, "the simulator exited before printing its address"
            found = re.search(r"listening on (http://127\.0\.0\.1:\d+)", line)
            url = found.group(1) if found else None
        async with httpx.AsyncClient(base_url=url, timeout=10) as http:
            assert (await http.get("/version")).json()["gitVersion"] == "v1.28.7"
            # 1.28's watch cache: an RV=0 list is the whole collection, whatever the limit.
            page = (await http.get("/api/v1/pods?resourceVersion=0&limit=5")).json()
            assert len(page["items"]) == 12 and not page["metadata"].get("continue")
            # No WatchList gate: a watch-list is refused.
            refused = await http.get(
                "/api/v1/pods?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
            )
            assert refused.status_code == 422
    finally:
        proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.wait(), timeout=20)
