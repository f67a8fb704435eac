"""The README's ten-line controller (``examples/controller.py``) runs as written against the real
API server: it greets each labelled ConfigMap once — those there before it started and those made
while it runs — leaves the others alone, and stops cleanly on Ctrl-C."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import httpx
import pytest

from cacheproxy.envtest import Cluster
from tests.e2e.support import create, delete, fresh_namespace, merge_patch

pytestmark = pytest.mark.every_server

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "controller.py"
LABEL = {"example.com/greet": "yes"}


async def _lines_until(stream: asyncio.StreamReader, wanted: set[str], seen: list[str]) -> None:
    while not wanted <= set(seen):
        line = await stream.readline()
        if not line:
            raise AssertionError(f"the example ended; it printed {seen}")
        seen.append(line.decode().strip())


async def test_the_controller_example_greets_labelled_configmaps_on_the_real_server(
    cluster: Cluster, upstream: httpx.AsyncClient
) -> None:
    ns = await fresh_namespace(upstream, "greet")
    path = f"/api/v1/namespaces/{ns}/configmaps"
    await create(upstream, path, {"metadata": {"name": "before", "labels": LABEL}})
    await create(upstream, path, {"metadata": {"name": "plain"}})
    await create(
        upstream,
        path,
        {"metadata": {"name": "greeted", "labels": LABEL}, "data": {"greeting": "hi there"}},
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(EXAMPLE),
        "--kubeconfig",
        str(cluster.admin.kubeconfig),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
    )
    assert process.stdout is not None and process.stderr is not None
    seen: list[str] = []
    try:
        async with asyncio.timeout(120):
            await _lines_until(process.stdout, {f"greeted {ns}/before"}, seen)
            await create(upstream, path, {"metadata": {"name": "during", "labels": LABEL}})
            await merge_patch(upstream, f"{path}/plain", {"metadata": {"labels": LABEL}})
            await _lines_until(
                process.stdout, {f"greeted {ns}/during", f"greeted {ns}/plain"}, seen
            )
            await delete(upstream, f"{path}/during")  # a deletion is reconciled as nothing to do
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGINT)
        async with asyncio.timeout(60):
            rest, errors = await process.communicate()
    seen += rest.decode().splitlines()
    assert process.returncode == 0, errors.decode()
    assert b"Traceback" not in errors, errors.decode()
    cms = (await upstream.get(path)).json()["items"]
    greetings = {cm["metadata"]["name"]: (cm.get("data") or {}).get("greeting") for cm in cms}
    assert greetings == {
        "before": "hello before",
        "plain": "hello plain",
        "greeted": "hi there",  # already greeted: left as it was
    }
    ours = [line for line in seen if line.startswith(f"greeted {ns}/")]
    assert sorted(ours) == [f"greeted {ns}/{n}" for n in ("before", "during", "plain")]
