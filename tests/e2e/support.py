"""Support for the tests against a real kube-apiserver: seeding it, a daemon in front of it, and
comparing what the two answer.

The daemon is built exactly as ``cacheproxy serve --config FILE`` builds it (the YAML loader, the
kubeconfig loader, every default), with only the resources, the kubeconfig and port 0 written in
the file: the tests judge the configuration users get.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import operator
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import httpx
import yaml
from prometheus_client.parser import text_string_to_metric_families

from cacheproxy.daemon.config import load_config, resolve_upstream
from cacheproxy.daemon.runtime import Daemon
from cacheproxy.envtest import Cluster
from cacheproxy.envtest.controlplane import write_token_kubeconfig
from cacheproxy.sim.workload import DemoSpec, demo_objects

DEMO = DemoSpec(namespaces=3, nodes=5, apps=4, pods=60)
"""What every test cluster holds: ``ns-0``..``ns-2``, ``node-0``..``node-4``, apps, 60 pods."""

DEFAULT_RESOURCES: list[Any] = [
    {"resource": "pods", "indexes": ["spec.nodeName", "metadata.ownerReferences[*].uid"]},
    "configmaps",
    "namespaces",
    "nodes",
    "services",
    "events",
    "apps/v1/deployments",
    "apps/v1/replicasets",
]


def demo() -> list[tuple[str, dict[str, Any]]]:
    return demo_objects(DEMO)


def write_config(
    directory: Path,
    cluster: Cluster,
    *,
    resources: list[Any] | None = None,
    user: str = "admin",
    extra: Mapping[str, Any] | None = None,
) -> Path:
    """A configuration file as a user writes it: resources, the kubeconfig, port 0."""
    doc: dict[str, Any] = {
        "resources": resources if resources is not None else DEFAULT_RESOURCES,
        "upstream": {"kubeconfig": str(cluster.users[user].kubeconfig)},
        "server": {"port": 0},
    }
    for dotted, value in (extra or {}).items():
        node = doc
        *parents, leaf = dotted.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    path = directory / "cacheproxy.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@contextlib.asynccontextmanager
async def daemon_over(
    cluster: Cluster,
    directory: Path,
    *,
    resources: list[Any] | None = None,
    extra: Mapping[str, Any] | None = None,
    ready_within: float = 30.0,
) -> AsyncIterator[Daemon]:
    """A synced daemon in front of ``cluster``, configured as ``cacheproxy serve`` would be."""
    config = load_config(write_config(directory, cluster, resources=resources, extra=extra), env={})
    daemon = Daemon(config, resolve_upstream(config.upstream))
    async with daemon:
        assert await daemon.wait_ready(ready_within), "the daemon did not sync with the cluster"
        yield daemon


T = TypeVar("T")


async def agreeing(
    ask: Callable[[], Awaitable[tuple[T, T]]],
    same: Callable[[T, T], bool] = operator.eq,
    *,
    within: float = 60.0,
) -> tuple[T, T]:
    """``ask()`` — one question to the API server and to the daemon at one moment, (upstream's
    answer, the daemon's) — until ``same`` says they agree or ``within`` seconds passed; the last
    pair. For answers with ages in them (Table and kubectl cells are worked out per request):
    two that straddle a second boundary differ by one, and are asked again. How long this waits
    depends on the machine; what the caller then asserts does not."""
    deadline = asyncio.get_running_loop().time() + within
    while True:
        up, down = await ask()
        if same(up, down) or asyncio.get_running_loop().time() > deadline:
            return up, down
        await asyncio.sleep(0.05)


def keyed(items: Iterable[Mapping[str, Any]]) -> list[tuple[str, str, str]]:
    """(namespace, name, resourceVersion) of each item, in order."""
    return [
        (
            i["metadata"].get("namespace", ""),
            i["metadata"]["name"],
            i["metadata"]["resourceVersion"],
        )
        for i in items
    ]


def without_managed_fields(obj: Any) -> Any:
    """``obj`` as the daemon stores it by default (``metadata.managedFields`` dropped)."""
    obj = copy.deepcopy(obj)
    if isinstance(obj, dict):
        if "items" in obj:
            for item in obj["items"]:
                item.get("metadata", {}).pop("managedFields", None)
        else:
            obj.get("metadata", {}).pop("managedFields", None)
    return obj


async def converged(
    upstream: httpx.AsyncClient,
    proxy: httpx.AsyncClient,
    path: str,
    *,
    params: Mapping[str, str] | None = None,
    within: float = 20.0,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Both answers to ``GET path`` once the daemon holds what upstream holds (same items at the
    same resourceVersions): (upstream's, the daemon's)."""
    deadline = asyncio.get_running_loop().time() + within
    while True:
        up = await upstream.get(path, params=params)
        down = await proxy.get(path, params=params)
        assert up.status_code == 200, up.text
        assert down.status_code == 200, down.text
        up_body, down_body = up.json(), down.json()
        if keyed(up_body["items"]) == keyed(down_body["items"]):
            return up_body, down_body
        if asyncio.get_running_loop().time() > deadline:
            assert keyed(down_body["items"]) == keyed(up_body["items"])
        await asyncio.sleep(0.05)


async def fresh_namespace(upstream: httpx.AsyncClient, prefix: str = "t") -> str:
    """A new namespace (with its ``default`` ServiceAccount) for one test's objects."""
    name = f"{prefix}-{secrets.token_hex(4)}"
    for path, body in (
        ("/api/v1/namespaces", {"metadata": {"name": name}}),
        (f"/api/v1/namespaces/{name}/serviceaccounts", {"metadata": {"name": "default"}}),
    ):
        response = await upstream.post(path, json=body)
        assert response.status_code == 201, response.text
    return name


async def create(upstream: httpx.AsyncClient, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
    response = await upstream.post(path, json=body)
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


async def merge_patch(
    upstream: httpx.AsyncClient, path: str, patch: Mapping[str, Any]
) -> dict[str, Any]:
    response = await upstream.patch(
        path, json=patch, headers={"Content-Type": "application/merge-patch+json"}
    )
    assert response.status_code == 200, response.text
    patched: dict[str, Any] = response.json()
    return patched


async def delete(upstream: httpx.AsyncClient, path: str) -> dict[str, Any]:
    response = await upstream.delete(path)
    assert response.status_code == 200, response.text
    deleted: dict[str, Any] = response.json()
    return deleted


def rv_of(obj: Mapping[str, Any]) -> int:
    return int(obj["metadata"]["resourceVersion"])


def counters(daemon: Daemon, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """Samples of the daemon's metric ``name`` by their (sorted) labels."""
    assert daemon.metrics is not None
    return {
        tuple(sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(daemon.metrics.exposition().decode())
        for s in family.samples
        if s.name == name
    }


def upstream_requests(daemon: Daemon, verb: str) -> dict[str, float]:
    """Upstream requests of ``verb`` by resource (``cacheproxy_upstream_requests_total``)."""
    out: dict[str, float] = {}
    for labels, value in counters(daemon, "cacheproxy_upstream_requests_total").items():
        found = dict(labels)
        if found["verb"] == verb:
            out[found["resource"]] = out.get(found["resource"], 0) + value
    return out


def syncs(daemon: Daemon) -> dict[str, float]:
    """Whole reads of a resource upstream, by resource: its lists (1.28) and the watch-lists
    upstream served (1.32; a 1.28 without the gate refuses them)."""
    out = upstream_requests(daemon, "list")
    for labels, value in counters(daemon, "cacheproxy_upstream_responses_total").items():
        found = dict(labels)
        if (found["verb"], found["code"]) == ("watch-list", "200"):
            out[found["resource"]] = out.get(found["resource"], 0) + value
    return out


KUBECTL_GUARD = 60.0
"""How long one kubectl may run before the test fails (liveness, not speed)."""


async def kubectl_output(binary: str, *args: str) -> str:
    """What ``kubectl ARGS`` prints (it must succeed)."""
    proc = await asyncio.create_subprocess_exec(
        binary, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), KUBECTL_GUARD)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    assert proc.returncode == 0, err.decode()
    return out.decode()


async def kubectl_both(
    kubectl: str, cluster: Cluster, daemon_url: str, cache: Path, *args: str
) -> tuple[str, str]:
    """What ``kubectl ARGS`` prints against the API server and through the daemon, run at once
    (AGE columns: a pair that straddles a second is run again, :func:`agreeing`)."""

    async def ask() -> tuple[str, str]:
        direct = kubectl_output(
            kubectl,
            "--kubeconfig",
            str(cluster.admin.kubeconfig),
            "--cache-dir",
            str(cache / "direct"),
            *args,
        )
        proxied = kubectl_output(
            kubectl,
            "--kubeconfig",
            "/dev/null",
            "--server",
            daemon_url,
            "--cache-dir",
            str(cache / "proxied"),
            *args,
        )
        up, down = await asyncio.gather(direct, proxied)
        return up, down

    return await agreeing(ask)


def crd(
    group: str,
    kind: str,
    *,
    plural: str,
    short_names: Sequence[str] = (),
    categories: Sequence[str] = (),
    scope: str = "Namespaced",
) -> dict[str, Any]:
    """A CustomResourceDefinition of one served and stored version ``v1`` whose objects may hold
    anything (``x-kubernetes-preserve-unknown-fields``)."""
    names: dict[str, Any] = {
        "kind": kind,
        "listKind": f"{kind}List",
        "plural": plural,
        "singular": kind.lower(),
    }
    if short_names:
        names["shortNames"] = list(short_names)
    if categories:
        names["categories"] = list(categories)
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "names": names,
            "scope": scope,
            "versions": [{"name": "v1", "served": True, "storage": True, "schema": schema}],
        },
    }


def write_kubeconfig(path: Path, *, server: str, ca_file: Path, token: str) -> Path:
    """A kubeconfig whose only cluster is ``server`` (trusted through ``ca_file``) and whose only
    user sends ``token``: what a client library run against the daemon is given."""
    return write_token_kubeconfig(path, server=server, ca_file=ca_file, token=token)
