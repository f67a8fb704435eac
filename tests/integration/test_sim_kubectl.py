"""kubectl (the oldest and the newest pinned versions) against the simulator."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from cacheproxy.sim import SimServer, Simulator
from tests.integration.clients import kubectl_binary, run_kubectl

pytestmark = pytest.mark.kubectl


def _pod_keys(sim: Simulator, *, app: str | None = None, node: str | None = None) -> list[str]:
    out = []
    for stored in sim.store.iter_range(sim.resource("pods"), None):
        meta = stored.obj["metadata"]
        if app is not None and meta.get("labels", {}).get("app") != app:
            continue
        if node is not None and stored.obj.get("spec", {}).get("nodeName") != node:
            continue
        out.append(f"{meta['namespace']}/{meta['name']}")
    return out


async def test_get_pods_all_namespaces_as_json_lists_every_pod(
    kubectl: str, demo_server: SimServer, demo_sim: Simulator, tmp_path: Path
) -> None:
    code, out, err = await run_kubectl(
        kubectl, demo_server.url, tmp_path, "get", "pods", "-A", "-o", "json"
    )
    assert code == 0, err
    items = json.loads(out)["items"]
    assert [f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in items] == _pod_keys(
        demo_sim
    )
    assert len(items) == 60


async def test_get_pods_by_label_selects_exactly_the_matching_pods(
    kubectl: str, demo_server: SimServer, demo_sim: Simulator, tmp_path: Path
) -> None:
    code, out, err = await run_kubectl(
        kubectl, demo_server.url, tmp_path, "get", "pods", "-A", "-l", "app=app-1", "-o", "json"
    )
    assert code == 0, err
    names = [
        f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in json.loads(out)["items"]
    ]
    expected = _pod_keys(demo_sim, app="app-1")
    assert expected, "the demo data must have app-1 pods"
    assert names == expected


async def test_get_pods_by_field_selector_on_node_name(
    kubectl: str, demo_server: SimServer, demo_sim: Simulator, tmp_path: Path
) -> None:
    code, out, err = await run_kubectl(
        kubectl,
        demo_server.url,
        tmp_path,
        "get",
        "pods",
        "-A",
        "--field-selector",
        "spec.nodeName=node-2",
        "-o",
        "json",
    )
    assert code == 0, err
    names = [
        f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in json.loads(out)["items"]
    ]
    expected = _pod_keys(demo_sim, node="node-2")
    assert expected, "the demo data must have pods on node-2"
    assert names == expected


async def test_api_resources_lists_the_served_resources(
    kubectl: str, demo_server: SimServer, tmp_path: Path
) -> None:
    code, out, err = await run_kubectl(kubectl, demo_server.url, tmp_path, "api-resources")
    assert code == 0, err
    rows = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert "pods" in rows and " po " in rows["pods"] and "Pod" in rows["pods"]
    assert "deployments" in rows and "apps/v1" in rows["deployments"]
    assert "nodes" in rows and "false" in rows["nodes"]


async def test_get_pods_watch_prints_a_created_pod(
    kubectl: str, demo_server: SimServer, demo_sim: Simulator, tmp_path: Path
) -> None:
    proc = await asyncio.create_subprocess_exec(
        kubectl,
        "--server",
        demo_server.url,
        "--cache-dir",
        str(tmp_path),
        "--kubeconfig",
        "/dev/null",
        "get",
        "pods",
        "-n",
        "default",
        "-w",
        "-o",
        "name",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        # Wait until kubectl's watch is registered before writing.
        pods = demo_sim.resource("pods")
        for _ in range(300):
            if any(getattr(w, "rtype", None) is pods for w in demo_sim.store.watchers()):
                break
            await asyncio.sleep(0.05)
        else:
            pytest.fail("kubectl never opened a watch")
        demo_sim.store.create(
            pods,
            {
                "metadata": {"name": "watched-pod", "namespace": "default"},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]},
            },
        )
        line = await asyncio.wait_for(proc.stdout.readline(), timeout=15)
        assert line.decode().strip() == "pod/watched-pod"
    finally:
        proc.terminate()
        await proc.wait()


CREATES = [
    ("configmap", ["--from-literal=a=1", "--from-literal=b=two"]),
    ("secret", ["generic", "--from-literal=password=s3cret", "--type=Opaque"]),
    ("serviceaccount", []),
    ("namespace", []),
]


@pytest.mark.parametrize(("kind", "args"), CREATES, ids=[k for k, _ in CREATES])
async def test_kubectl_creates_the_same_object_in_json_and_in_protobuf(
    demo_server: SimServer, demo_sim: Simulator, tmp_path: Path, kind: str, args: list[str]
) -> None:
    # kubectl 1.27 sends the object as JSON; 1.33's typed clients as protobuf.
    made = {}
    for version in ("1.27", "1.33"):
        name = f"{kind}-by-{version.replace('.', '-')}"
        sub, rest = (args[:1], args[1:]) if kind == "secret" else ([], args)
        where = [] if kind == "namespace" else ["-n", "ns-0"]
        code, out, err = await run_kubectl(
            kubectl_binary(version),
            demo_server.url,
            tmp_path / version,
            "create",
            kind,
            *sub,
            name,
            *rest,
            *where,
        )
        assert code == 0, err
        rtype = demo_sim.resource(f"{kind}s" if kind != "serviceaccount" else "serviceaccounts")
        stored = demo_sim.store.get(rtype, "" if kind == "namespace" else "ns-0", name)
        assert stored is not None, out
        meta = {
            k: v
            for k, v in stored["metadata"].items()
            if k not in ("uid", "resourceVersion", "creationTimestamp", "managedFields")
        }
        made[version] = json.dumps({**stored, "metadata": meta}, sort_keys=True).replace(name, "N")
    assert made["1.27"] == made["1.33"]
