"""Real operator frameworks run unmodified with the daemon as their only server: a kopf operator
(its finalizer, status from its handlers' results, Events), watching one namespace or all of
them, and two ``@kubernetes/client-node`` informers (one with a label selector) beside writes
of every kind. Each scenario runs twice, in two namespaces, once straight against the API server
and once through the daemon; what each leaves behind, and what the informers saw, must be the
same.

The daemon serves HTTPS here (``server.tls``): client-node 1.x refuses an ``http://`` server
unless told ``insecure-skip-tls-verify``, and a kubeconfig with a CA is what users give both.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import copy
import fcntl
import functools
import json
import os
import shutil
import ssl
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from cacheproxy.daemon.runtime import Daemon
from cacheproxy.envtest import Cluster
from cacheproxy.sim.testpki import TestPKI, generate_pki
from tests.e2e.support import (
    DEFAULT_RESOURCES,
    counters,
    crd,
    create,
    daemon_over,
    delete,
    fresh_namespace,
    merge_patch,
    write_kubeconfig,
)

pytestmark = pytest.mark.every_server

HERE = Path(__file__).resolve().parent / "operators"
OPERATOR = HERE / "gadget_operator.py"
INFORMER = HERE / "configmap_informer.mjs"
CLIENT_NODE = "@kubernetes/client-node@1"
CLIENT_NODE_PREFIX = Path.home() / ".cache" / "cacheproxy-tests" / "node"
"""Where ``npm install --prefix`` puts client-node, once per machine (the npm registry is
reached then only)."""

GROUP_VERSION = "/apis/operators.example.com/v1"
GADGETS = crd("operators.example.com", "Gadget", plural="gadgets")
GADGETS["spec"]["versions"][0]["subresources"] = {"status": {}}
"""Gadgets with a status subresource: kopf writes its handlers' results through ``/status``."""
FINALIZER = "kopf.zalando.org/KopfFinalizerMarker"
LAST_HANDLED = "kopf.zalando.org/last-handled-configuration"
WITHIN = 60.0
"""How long one step of a scenario may take before the test fails (liveness, not speed)."""
NODE_GUARD = 120.0

T = TypeVar("T")


# ------------------------------------------------------------------ fixtures


@pytest.fixture
async def gadgets(cluster: Cluster) -> None:
    """The Gadget CRD, installed and served before the daemon starts."""
    async with cluster.async_client() as upstream:
        made = await upstream.post(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=GADGETS
        )
        assert made.status_code in (201, 409), made.text
        await eventually(
            lambda: _served(upstream, f"{GROUP_VERSION}/gadgets"), what="the Gadget CRD served"
        )


async def _served(upstream: httpx.AsyncClient, path: str) -> bool:
    return (await upstream.get(path)).status_code == 200


@pytest.fixture
def pki(tmp_path: Path) -> TestPKI:
    return generate_pki(tmp_path / "pki", hosts=("127.0.0.1",))


@pytest.fixture
async def tls_daemon(
    cluster: Cluster, gadgets: None, pki: TestPKI, tmp_path: Path
) -> AsyncIterator[Daemon]:
    """The daemon over HTTPS, caching its default resources and Gadgets."""
    async with daemon_over(
        cluster,
        tmp_path,
        resources=[*DEFAULT_RESOURCES, "operators.example.com/v1/gadgets"],
        extra={
            "server.tls.certFile": str(pki.server_cert),
            "server.tls.keyFile": str(pki.server_key),
        },
    ) as daemon:
        assert daemon.url.startswith("https://127.0.0.1:")
        yield daemon


@pytest.fixture
def proxied_kubeconfig(cluster: Cluster, tls_daemon: Daemon, pki: TestPKI, tmp_path: Path) -> Path:
    """A kubeconfig whose only server is the daemon, with the admin's token."""
    return write_kubeconfig(
        tmp_path / "proxied.kubeconfig",
        server=tls_daemon.url,
        ca_file=pki.ca_cert,
        token=cluster.admin.token,
    )


@pytest.fixture(scope="session")
def client_node() -> Path:
    """The folder ``@kubernetes/client-node`` 1.x is installed in (``npm install`` the first
    time). Like kubectl, a missing node or npm fails the test rather than skipping it."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.fail("node and npm are needed to run @kubernetes/client-node (not on PATH)")
    CLIENT_NODE_PREFIX.mkdir(parents=True, exist_ok=True)
    installed = CLIENT_NODE_PREFIX / "node_modules" / "@kubernetes" / "client-node" / "package.json"
    with (CLIENT_NODE_PREFIX / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # xdist workers install it once between them
        if not installed.exists():
            done = subprocess.run(
                [
                    npm,
                    "install",
                    "--prefix",
                    str(CLIENT_NODE_PREFIX),
                    "--no-audit",
                    "--no-fund",
                    CLIENT_NODE,
                ],
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
            if done.returncode != 0:
                pytest.fail(f"npm install {CLIENT_NODE} failed:\n{done.stdout}\n{done.stderr}")
    version = json.loads(installed.read_text())["version"]
    assert version.startswith("1."), f"client-node {version} installed in {CLIENT_NODE_PREFIX}"
    return CLIENT_NODE_PREFIX


# ------------------------------------------------------------------ helpers


async def eventually(
    probe: Callable[[], Awaitable[T | None]], *, what: str, log: Path | None = None
) -> T:
    """``probe()``'s first truthy answer, asked again until :data:`WITHIN` seconds passed (then
    the test fails, with the tail of the operator's ``log``)."""
    deadline = asyncio.get_running_loop().time() + WITHIN
    while True:
        found = await probe()
        if found:
            return found
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail(f"never happened within {WITHIN:.0f} s: {what}\n{_tail(log)}")
        await asyncio.sleep(0.1)


def _tail(log: Path | None) -> str:
    """The end of an operator's log, for a failure's message."""
    return log.read_text()[-6000:] if log is not None and log.exists() else ""


@contextlib.asynccontextmanager
async def running(argv: list[str], *, kubeconfig: Path, log: Path) -> AsyncIterator[None]:
    """``argv`` running with ``kubeconfig`` as its only configuration, its output in ``log``;
    terminated (then killed) at the end."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}
    env["KUBECONFIG"] = str(kubeconfig)
    with log.open("wb") as out:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdout=out, stderr=subprocess.STDOUT, env=env
        )
    try:
        yield
        assert proc.returncode is None, f"{argv[0]} exited early:\n{_tail(log)}"
    finally:
        if proc.returncode is None:
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 20)
            except TimeoutError:
                proc.kill()
                await proc.wait()


def _complaints(log: Path) -> list[str]:
    """The lines kopf logged at WARNING or above."""
    return [
        line
        for line in log.read_text().splitlines()
        if any(f"[{level}" in line for level in ("WARNING", "ERROR", "CRITICAL"))
    ]


def _kopf(namespace: str, scope: str) -> list[str]:
    """The Gadget operator watching ``namespace`` or (``scope`` ``all-namespaces``) every one."""
    watching = ["--namespace", namespace] if scope == "namespace" else ["--all-namespaces"]
    return [
        sys.executable,
        "-m",
        "kopf",
        "run",
        "--standalone",
        *watching,
        "--verbose",
        str(OPERATOR),
    ]


# ------------------------------------------------------------------ kopf


async def _get(upstream: httpx.AsyncClient, path: str) -> dict[str, Any] | None:
    response = await upstream.get(path)
    assert response.status_code in (200, 404), response.text
    return response.json() if response.status_code == 200 else None


def _events_of(body: dict[str, Any], kind: str) -> list[tuple[str, str, str, str]]:
    """(object, type, reason, message) of the Events about objects of ``kind``, sorted."""
    return sorted(
        (e["involvedObject"]["name"], e["type"], e["reason"], e["message"])
        for e in body["items"]
        if e["involvedObject"].get("kind") == kind
    )


EXPECTED_EVENTS = [
    ("g-1", "Normal", "Built", "built g-1 of size 1"),
    ("g-1", "Normal", "Resized", "resized g-1 from 1 to 10"),
    ("g-2", "Normal", "Built", "built g-2 of size 2"),
    ("g-2", "Normal", "Scrapped", "scrapped g-2"),
    ("g-3", "Normal", "Built", "built g-3 of size 3"),
]


async def gadget_scenario(
    writer: httpx.AsyncClient, upstream: httpx.AsyncClient, ns: str, log: Path
) -> dict[str, Any]:
    """Three Gadgets made, one resized, one deleted (by ``writer``), each step waited for until
    the operator has handled it (as ``upstream`` sees it); what is left: the Gadgets (as
    :func:`_gadget`) and the Events about them."""
    path = f"{GROUP_VERSION}/namespaces/{ns}/gadgets"

    async def handled(name: str, check: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        async def probe() -> dict[str, Any] | None:
            obj = await _get(upstream, f"{path}/{name}")
            return obj if obj is not None and check(obj) else None

        return await eventually(probe, what=f"the operator handled {ns}/{name}", log=log)

    for size in (1, 2, 3):
        gadget = {
            "apiVersion": "operators.example.com/v1",
            "kind": "Gadget",
            "metadata": {"name": f"g-{size}", "labels": {"app": "gadgets"}},
            "spec": {"size": size},
        }
        await create(writer, path, gadget)
    for size in (1, 2, 3):
        await handled(
            f"g-{size}",
            lambda o: (
                "created" in o.get("status", {})
                and FINALIZER in o["metadata"].get("finalizers", [])
            ),
        )
    await merge_patch(writer, f"{path}/g-1", {"spec": {"size": 10}})
    await handled("g-1", lambda o: "resized" in o.get("status", {}))
    await delete(writer, f"{path}/g-2")

    async def gone() -> bool:
        return await _get(upstream, f"{path}/g-2") is None

    await eventually(gone, what=f"{ns}/g-2 deleted once the operator let it go", log=log)

    async def events() -> list[tuple[str, str, str, str]] | None:
        response = await upstream.get(f"/api/v1/namespaces/{ns}/events")
        assert response.status_code == 200, response.text
        found = _events_of(response.json(), "Gadget")
        return found if set(found) >= set(EXPECTED_EVENTS) else None

    posted = await eventually(events, what=f"the operator's Events in {ns}", log=log)
    listed = await upstream.get(path)
    assert listed.status_code == 200, listed.text
    return {
        "gadgets": {o["metadata"]["name"]: _gadget(o) for o in listed.json()["items"]},
        "events": posted,
    }


async def operated(
    argv: list[str],
    *,
    kubeconfig: Path,
    writer: httpx.AsyncClient,
    upstream: httpx.AsyncClient,
    ns: str,
    log: Path,
) -> dict[str, Any]:
    """:func:`gadget_scenario` with the operator ``argv`` running; what it left, before the
    Gadgets left are deleted (while the operator still runs: they have its finalizer)."""
    async with running(argv, kubeconfig=kubeconfig, log=log):
        state = await gadget_scenario(writer, upstream, ns, log)
        path = f"{GROUP_VERSION}/namespaces/{ns}/gadgets"
        for name in state["gadgets"]:
            await delete(writer, f"{path}/{name}")

        async def emptied() -> bool:
            response = await upstream.get(path)
            assert response.status_code == 200, response.text
            return not response.json()["items"]

        await eventually(emptied, what=f"the Gadgets in {ns} deleted", log=log)
    return state


def _gadget(obj: dict[str, Any]) -> dict[str, Any]:
    """What the operator made of a Gadget: its status, finalizers, labels, annotations (kopf's
    record of the last handled spec parsed) and generation."""
    meta = obj["metadata"]
    annotations = dict(meta.get("annotations", {}))
    if LAST_HANDLED in annotations:
        annotations[LAST_HANDLED] = json.loads(annotations[LAST_HANDLED])
    return {
        "spec": obj.get("spec"),
        "status": obj.get("status"),
        "finalizers": meta.get("finalizers"),
        "labels": meta.get("labels"),
        "annotations": annotations,
        "generation": meta.get("generation"),
    }


@pytest.mark.parametrize("scope", ["namespace", "all-namespaces"])
async def test_a_kopf_operator_does_through_the_daemon_what_it_does_against_the_api_server(
    cluster: Cluster,
    tls_daemon: Daemon,
    pki: TestPKI,
    proxied_kubeconfig: Path,
    tmp_path: Path,
    scope: str,
) -> None:
    async with (
        cluster.async_client() as upstream,
        _through(cluster, tls_daemon, pki) as proxy,
    ):
        direct_ns = await fresh_namespace(upstream, "kopf-direct")
        proxied_ns = await fresh_namespace(upstream, "kopf-proxied")
        direct_log, proxied_log = tmp_path / "kopf-direct.log", tmp_path / "kopf-proxied.log"
        direct_run = functools.partial(
            operated,
            _kopf(direct_ns, scope),
            kubeconfig=cluster.admin.kubeconfig,
            writer=upstream,
            upstream=upstream,
            ns=direct_ns,
            log=direct_log,
        )
        proxied_run = functools.partial(
            operated,
            _kopf(proxied_ns, scope),
            kubeconfig=proxied_kubeconfig,
            writer=proxy,
            upstream=upstream,
            ns=proxied_ns,
            log=proxied_log,
        )
        if scope == "namespace":
            direct, proxied = await asyncio.gather(direct_run(), proxied_run())
        else:  # one after the other: each would handle the other's Gadgets too
            direct = await direct_run()
            proxied = await proxied_run()
    assert proxied == direct
    # Handled at the first try: kopf logs a failed or inconsistent patch, a retry, a broken
    # watch as a warning or an error.
    assert _complaints(proxied_log) == _complaints(direct_log) == []
    assert sorted(direct["gadgets"]) == ["g-1", "g-3"]
    g1 = direct["gadgets"]["g-1"]
    assert g1["status"] == {
        "created": {"size": 1, "phase": "built"},
        "resized": {"from": 1, "to": 10},
    }
    assert g1["finalizers"] == [FINALIZER]
    assert g1["annotations"][LAST_HANDLED]["spec"] == {"size": 10}
    assert g1["generation"] == 2  # the status went through /status: only the spec counted
    assert direct["events"] == EXPECTED_EVENTS
    # The proxied operator talked to the daemon only: it listed Gadgets from the cache, and its
    # writes (finalizers, annotations, status, Events) were passed through.
    served, forwarded = _served_and_forwarded(tls_daemon)
    assert served[("list", "operators.example.com/v1/gadgets")] >= 1
    for verb, resource in [
        ("patch", "gadgets.operators.example.com"),
        ("patch", "gadgets.operators.example.com/status"),
        ("create", "events"),
    ]:
        assert forwarded[(verb, resource)] >= 1, (verb, resource, forwarded)


@contextlib.asynccontextmanager
async def _through(
    cluster: Cluster, daemon: Daemon, pki: TestPKI
) -> AsyncIterator[httpx.AsyncClient]:
    """The daemon, as the admin (the proxied kubeconfig's user), trusting the daemon's CA."""
    async with httpx.AsyncClient(
        base_url=daemon.url,
        verify=ssl.create_default_context(cafile=str(pki.ca_cert)),
        headers=cluster.admin.headers,
        timeout=30,
    ) as client:
        yield client


def _served_and_forwarded(
    daemon: Daemon,
) -> tuple[collections.Counter[tuple[str, str]], collections.Counter[tuple[str, str]]]:
    """Requests the daemon answered and those it passed through, by (verb, resource), any code."""
    out = []
    for metric in ("cacheproxy_http_requests_total", "cacheproxy_passthrough_requests_total"):
        by_verb: collections.Counter[tuple[str, str]] = collections.Counter()
        for labels, value in counters(daemon, metric).items():
            found = dict(labels)
            by_verb[(found["verb"], found["resource"])] += int(value)
        out.append(by_verb)
    return out[0], out[1]


# ------------------------------------------------------------------ client-node


INFORMER_EVENTS = {
    "all": [
        ("add", "cm-0", "front", "before"),
        ("add", "cm-1", "front", "created"),
        ("add", "cm-2", "front", "created"),
        ("add", "cm-3", "back", "created"),
        ("update", "cm-1", "front", "replaced"),
        ("update", "cm-2", "back", "merged"),
        ("update", "cm-3", "front", "strategic"),
        ("update", "cm-0", "front", "json-patched"),
        ("update", "cm-0", "front", "applied"),
        ("delete", "cm-1", "front", "replaced"),
        ("delete", "cm-2", "back", "merged"),
        ("delete", "cm-3", "front", "strategic"),
    ],
    # A watch with a label selector tells of an object that stops matching as deleted (with
    # its content before the change), of one that starts matching as added: the API server's
    # watch cache (cacheWatcher.convertToWatchEvent).
    "front": [
        ("add", "cm-0", "front", "before"),
        ("add", "cm-1", "front", "created"),
        ("add", "cm-2", "front", "created"),
        ("update", "cm-1", "front", "replaced"),
        ("delete", "cm-2", "front", "created"),
        ("add", "cm-3", "front", "strategic"),
        ("update", "cm-0", "front", "json-patched"),
        ("update", "cm-0", "front", "applied"),
        ("delete", "cm-1", "front", "replaced"),
        ("delete", "cm-3", "front", "strategic"),
    ],
}
"""What each informer of configmap_informer.mjs sees, in order: (event, name, tier, step)."""


def _without_versions(report: dict[str, Any]) -> dict[str, Any]:
    """``report`` without the resourceVersions (two namespaces' objects have different ones)."""
    out = copy.deepcopy(report)
    for informer in INFORMER_EVENTS:
        for event in out[informer]["events"]:
            del event["resourceVersion"]
    return out


def _assert_versions_consistent(report: dict[str, Any]) -> None:
    """Each informer saw resourceVersions only grow, and the selecting informer saw each change
    at the resourceVersion the other saw it at: an object leaving the selection is deleted at
    the version of the change that moved it out."""
    for informer in INFORMER_EVENTS:
        versions = [int(e["resourceVersion"]) for e in report[informer]["events"]]
        assert versions == sorted(set(versions)), (informer, versions)
    names = {e["resourceVersion"]: e["name"] for e in report["all"]["events"]}
    for event in report["front"]["events"]:
        assert names.get(event["resourceVersion"]) == event["name"], event


async def informer_run(client_node: Path, kubeconfig: Path, ns: str) -> dict[str, Any]:
    """What the client-node script prints, run with ``kubeconfig`` in ``ns``."""
    node = shutil.which("node")
    assert node is not None
    proc = await asyncio.create_subprocess_exec(
        node,
        str(INFORMER),
        str(client_node),
        str(kubeconfig),
        ns,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), NODE_GUARD)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    assert proc.returncode == 0, err.decode()
    report: dict[str, Any] = json.loads(out)
    return report


async def test_a_client_node_informer_and_writes_do_through_the_daemon_what_they_do_directly(
    cluster: Cluster, tls_daemon: Daemon, proxied_kubeconfig: Path, client_node: Path
) -> None:
    async with cluster.async_client() as upstream:
        direct_ns = await fresh_namespace(upstream, "node-direct")
        proxied_ns = await fresh_namespace(upstream, "node-proxied")
    direct, proxied = await asyncio.gather(
        informer_run(client_node, cluster.admin.kubeconfig, direct_ns),
        informer_run(client_node, proxied_kubeconfig, proxied_ns),
    )
    assert _without_versions(proxied) == _without_versions(direct)
    for report in (direct, proxied):
        _assert_versions_consistent(report)
    assert direct["errors"] == []
    for informer, expected in INFORMER_EVENTS.items():
        seen = direct[informer]
        assert [
            (e["type"], e["name"], e["labels"]["tier"], e["data"]["step"]) for e in seen["events"]
        ] == expected
        assert seen["cache"] == seen["listed"]
        assert {name: cm["data"] for name, cm in seen["listed"].items()} == {
            "cm-0": {"step": "applied"}
        }
    # Through the daemon: the informers' lists and the read before the replace were answered
    # from the cache (so were the watches: they are counted when they end); every write was
    # passed through.
    served, forwarded = _served_and_forwarded(tls_daemon)
    for verb in ("list", "get"):
        assert served[(verb, "configmaps")] >= 1, (verb, served)
    for verb in ("create", "update", "patch", "delete"):
        assert forwarded[(verb, "configmaps")] >= 1, (verb, forwarded)
