"""Server-side Tables through the daemon: kubectl's human output and the raw Table protocol.

The simulator holds the sample objects of ``k8s-samples/tables`` (pods, configmaps, deployments
in namespace ``tables``); the daemon caches them and answers kubectl's Table Accept.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from cacheproxy.daemon.runtime import Daemon
from cacheproxy.sim import SimServer, Simulator
from tests.integration.clients import kubectl_binary, run_kubectl
from tests.integration.daemon_support import daemon_for

pytestmark = pytest.mark.kubectl

TABLE_ACCEPT = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,"
    "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
)
LISTS = {
    "pods": "list_api_v1_namespaces_tables_pods.json",
    "configmaps": "list_api_v1_namespaces_tables_configmaps.json",
    "deployments": "list_apis_apps_v1_namespaces_tables_deployments.json",
}
KINDS = {
    "pods": ("v1", "Pod"),
    "configmaps": ("v1", "ConfigMap"),
    "deployments": ("apps/v1", "Deployment"),
}


def sample_objects(samples_dir: Path) -> list[tuple[str, dict[str, Any]]]:
    objects: list[tuple[str, dict[str, Any]]] = [
        ("namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tables"}})
    ]
    for resource, name in LISTS.items():
        listed = orjson.loads((samples_dir / "tables" / name).read_bytes())
        api_version, kind = KINDS[resource]
        for item in listed["items"]:
            meta = {
                k: v
                for k, v in item["metadata"].items()
                if k not in ("resourceVersion", "uid", "managedFields", "generation")
            }
            objects.append(
                (resource, {**item, "apiVersion": api_version, "kind": kind, "metadata": meta})
            )
    return objects


@pytest.fixture
async def daemon(samples_dir: Path) -> AsyncIterator[Daemon]:
    sim = Simulator()
    sim.load(sample_objects(samples_dir))
    async with SimServer(sim) as server, daemon_for(server.url) as d:
        yield d


async def test_kubectl_get_pods_prints_server_columns(daemon: Daemon, tmp_path: Path) -> None:
    kubectl = kubectl_binary("1.33")
    code, out, err = await run_kubectl(kubectl, daemon.url, tmp_path, "get", "pods", "-A")
    assert code == 0, err
    assert "Unable to decode server response into a Table" not in err
    lines = out.splitlines()
    assert re.split(r"\s{2,}", lines[0].strip()) == [
        "NAMESPACE",
        "NAME",
        "READY",
        "STATUS",
        "RESTARTS",
        "AGE",
    ]
    rows = {
        re.split(r"\s{2,}", line.strip())[1]: re.split(r"\s{2,}", line.strip())
        for line in lines[1:]
    }
    assert rows["crash-1"][:4] == ["tables", "crash-1", "0/1", "CrashLoopBackOff"]
    assert re.fullmatch(r"5 \(\S+ ago\)", rows["crash-1"][4])
    assert rows["pending-1"][2:5] == ["0/1", "Pending", "0"]
    assert rows["run-1"][2:4] == ["2/2", "Running"]
    assert re.fullmatch(r"2 \(\S+ ago\)", rows["run-1"][4])


async def test_kubectl_wide_and_other_kinds(daemon: Daemon, tmp_path: Path) -> None:
    kubectl = kubectl_binary("1.33")
    code, out, err = await run_kubectl(
        kubectl, daemon.url, tmp_path, "get", "pods", "-n", "tables", "-o", "wide"
    )
    assert code == 0, err
    assert "Unable to decode" not in err
    header = re.split(r"\s{2,}", out.splitlines()[0].strip())
    assert header[-4:] == ["IP", "NODE", "NOMINATED NODE", "READINESS GATES"]
    assert "10.244.2.7" in out and "node-b" in out
    code, out, err = await run_kubectl(
        kubectl, daemon.url, tmp_path, "get", "deployments", "-n", "tables"
    )
    assert code == 0, err
    assert re.split(r"\s{2,}", out.splitlines()[0].strip()) == [
        "NAME",
        "READY",
        "UP-TO-DATE",
        "AVAILABLE",
        "AGE",
    ]
    assert re.split(r"\s{2,}", out.splitlines()[1].strip())[:4] == ["web", "2/3", "3", "2"]
    code, out, err = await run_kubectl(
        kubectl, daemon.url, tmp_path, "get", "configmaps", "-n", "tables"
    )
    assert code == 0, err
    assert re.split(r"\s{2,}", out.splitlines()[0].strip()) == ["NAME", "DATA", "AGE"]


async def test_table_protocol(daemon: Daemon) -> None:
    async with httpx.AsyncClient(base_url=daemon.url, timeout=10) as c:
        headers = {"Accept": TABLE_ACCEPT}
        page = await c.get("/api/v1/pods", params={"limit": "2"}, headers=headers)
        assert page.status_code == 200
        body = page.json()
        assert body["kind"] == "Table" and body["apiVersion"] == "meta.k8s.io/v1"
        assert len(body["rows"]) == 2 and body["metadata"]["continue"]
        assert body["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
        rest = await c.get(
            "/api/v1/pods", params={"continue": body["metadata"]["continue"]}, headers=headers
        )
        assert [r["cells"][0] for r in body["rows"] + rest.json()["rows"]] == [
            "crash-1",
            "pending-1",
            "run-1",
        ]
        one = await c.get(
            "/api/v1/namespaces/tables/pods/run-1",
            params={"includeObject": "Object"},
            headers={"Accept": "application/json;as=Table;v=v1beta1;g=meta.k8s.io"},
        )
        table = one.json()
        assert table["apiVersion"] == "meta.k8s.io/v1beta1"
        assert table["rows"][0]["object"]["kind"] == "Pod"
        assert table["rows"][0]["cells"][:3] == ["run-1", "2/2", "Running"]
        # Never a Table unless asked; another form only → 406; bad includeObject → 400.
        plain = await c.get("/api/v1/pods", headers={"Accept": "application/json"})
        assert plain.json()["kind"] == "PodList"
        first_json = await c.get(
            "/api/v1/pods",
            headers={"Accept": "application/json,application/json;as=Table;v=v1;g=meta.k8s.io"},
        )
        assert first_json.json()["kind"] == "PodList"
        # A metadata-only client gets its list kind (not a Table, not a PodList).
        partial = await c.get(
            "/api/v1/pods",
            headers={"Accept": "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"},
        )
        assert partial.json()["kind"] == "PartialObjectMetadataList"
        refused = await c.get(
            "/api/v1/pods",
            headers={"Accept": "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io"},
        )
        assert refused.status_code == 406  # the single-object form, for a list
        bad = await c.get("/api/v1/pods", params={"includeObject": "x"}, headers=headers)
        assert bad.status_code == 400


async def test_watch_tables(daemon: Daemon) -> None:
    async with httpx.AsyncClient(base_url=daemon.url, timeout=10) as c:
        response = await c.get(
            "/api/v1/namespaces/tables/pods",
            params={"watch": "1", "timeoutSeconds": "1"},
            headers={"Accept": TABLE_ACCEPT},
        )
        events = [orjson.loads(line) for line in response.text.splitlines() if line]
    assert [e["type"] for e in events] == ["ADDED"] * 3
    tables = [e["object"] for e in events]
    assert all(t["kind"] == "Table" and len(t["rows"]) == 1 for t in tables)
    assert len(tables[0]["columnDefinitions"]) == 9
    assert all(t["columnDefinitions"] == [] for t in tables[1:])
    assert {t["rows"][0]["cells"][0] for t in tables} == {"crash-1", "pending-1", "run-1"}
