"""Real clients read through the daemon as they read from an API server: kubectl (the oldest and
the newest pinned), the official ``kubernetes`` Python client, our own informer library (a proxy
of the proxy), and a daemon in front of a daemon.

The simulator is the reference: every answer read through the daemon is compared with what the
simulator itself answers (keys and resourceVersions; the daemon drops ``managedFields``).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from kubernetes import client as kube_client
from kubernetes import watch as kube_watch

from cacheproxy.daemon.runtime import Daemon
from cacheproxy.informer import Backoff, ReflectorOptions, SharedInformer, Store
from cacheproxy.kube.resources import builtin
from cacheproxy.sim import SimServer, Simulator
from cacheproxy.sim.churn import ChurnDriver
from cacheproxy.upstream import ApiListerWatcher, UpstreamConfig, build_client
from tests.integration.clients import run_kubectl, start_kubectl
from tests.integration.daemon_support import daemon_for
from tests.support import until

PODS = builtin("pods")
GUARD = 10.0
"""Seconds a single wait may take before the test fails (a guard, never an assertion)."""

Key = tuple[str, str, int]


def rv_of(obj: dict[str, Any]) -> int:
    return int(obj["metadata"]["resourceVersion"])


def keys(body: dict[str, Any]) -> list[Key]:
    return [
        (i["metadata"].get("namespace", ""), i["metadata"]["name"], rv_of(i)) for i in body["items"]
    ]


def sim_pods(sim: Simulator, keep: Callable[[dict[str, Any]], bool] = lambda _: True) -> list[Key]:
    """The simulator's pods (key order) that ``keep`` accepts."""
    return [
        (s.obj["metadata"]["namespace"], s.obj["metadata"]["name"], s.rv)
        for s in sim.store.iter_range(sim.resource("pods"), None)
        if keep(s.obj)
    ]


def pod(name: str, **labels: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {"nodeName": "node-1", "containers": [{"name": "main", "image": "busybox"}]},
    }


def relabelled(obj: dict[str, Any], **labels: str) -> dict[str, Any]:
    return {**obj, "metadata": {**obj["metadata"], "labels": labels}}


def churn_for(sim: Simulator, *, rate: float = 0, seed: int = 3) -> ChurnDriver:
    return ChurnDriver(
        sim.store,
        rate=rate,
        rng=random.Random(seed),
        namespaces=["ns-0", "ns-1", "ns-2"],
        nodes=[f"node-{i}" for i in range(5)],
        apps=[f"app-{i}" for i in range(4)],
        max_pods=90,
    )


@pytest.fixture
async def upstream(demo_server: SimServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=demo_server.url, timeout=GUARD) as c:
        yield c


# ---------------------------------------------------------------------------------- kubectl


@pytest.mark.kubectl
async def test_kubectl_lists_through_the_daemon_what_the_simulator_lists(
    kubectl: str,
    daemon: Daemon,
    upstream: httpx.AsyncClient,
    demo_sim: Simulator,
    tmp_path: Path,
) -> None:
    async def kubectl_json(*args: str) -> dict[str, Any]:
        code, out, err = await run_kubectl(kubectl, daemon.url, tmp_path, "get", "pods", *args)
        assert code == 0, err
        parsed: dict[str, Any] = orjson.loads(out)
        return parsed

    cases = [
        ((), {}),
        (
            ("-l", "app in (app-1,app-2),tier!=frontend"),
            {"labelSelector": "app in (app-1,app-2),tier!=frontend"},
        ),
        (("--field-selector", "status.phase=Running"), {"fieldSelector": "status.phase=Running"}),
        (
            ("-n", "ns-2", "--field-selector", "spec.nodeName=node-3"),
            {"fieldSelector": "spec.nodeName=node-3"},
        ),
    ]
    for args, params in cases:
        scope = [] if "-n" in args else ["-A"]
        mine = await kubectl_json(*scope, *args, "-o", "json")
        path = "/api/v1/namespaces/ns-2/pods" if "-n" in args else "/api/v1/pods"
        theirs = (await upstream.get(path, params=params)).json()
        assert keys(mine) == keys(theirs) and keys(theirs), args

    # A field selector on an index path (the simulator, like an API server, has no such field).
    owner = next(iter(demo_sim.store.iter_range(demo_sim.resource("pods"), None)))
    uid = owner.obj["metadata"]["ownerReferences"][0]["uid"]
    by_owner = await kubectl_json(
        "-A", "--field-selector", f"metadata.ownerReferences[*].uid={uid}", "-o", "json"
    )
    owned = sim_pods(
        demo_sim, lambda o: uid in {r["uid"] for r in o["metadata"]["ownerReferences"]}
    )
    assert keys(by_owner) == owned and len(owned) >= 2

    # --chunk-size walks the continue tokens: one request per page of 7, the same items.
    code, out, err = await run_kubectl(
        kubectl, daemon.url, tmp_path, "get", "pods", "-A", "--chunk-size=7", "-o", "json", "-v=6"
    )
    assert code == 0, err
    assert keys(orjson.loads(out)) == sim_pods(demo_sim)
    requests = [line for line in err.splitlines() if "/api/v1/pods?" in line]
    assert len(requests) == -(-len(sim_pods(demo_sim)) // 7)  # one request per page of 7
    assert all("limit=7" in line for line in requests)
    assert all("continue=" in line for line in requests[1:])


@pytest.mark.kubectl
async def test_kubectl_api_resources_lists_the_cached_resources_read_only(
    kubectl: str, read_only_daemon: Daemon, tmp_path: Path
) -> None:
    url = read_only_daemon.url
    code, out, err = await run_kubectl(kubectl, url, tmp_path, "api-resources", "-o", "wide")
    assert code == 0, err
    rows = [line.split() for line in out.splitlines()[1:] if line.strip()]
    assert {(r[0], r[-2] if r[-1] == "all" else r[-1]) for r in rows} == {
        ("configmaps", "get,list,watch"),
        ("namespaces", "get,list,watch"),
        ("pods", "get,list,watch"),
        ("deployments", "get,list,watch"),
    }


@pytest.mark.kubectl
async def test_kubectl_get_watch_through_the_daemon_prints_create_update_delete(
    kubectl: str, daemon: Daemon, demo_sim: Simulator, tmp_path: Path
) -> None:
    columns = "TYPE:.type,NAME:.object.metadata.name,RV:.object.metadata.resourceVersion"
    proc = await start_kubectl(
        kubectl,
        daemon.url,
        tmp_path,
        "get",
        "pods",
        "-n",
        "default",
        "-w",
        "--output-watch-events",
        "-o",
        f"custom-columns={columns}",
    )
    try:
        assert proc.stdout is not None
        assert daemon.server is not None
        hub = daemon.server.hubs[PODS]
        await until(lambda: bool(hub.watchers), "kubectl opened its watch")
        store, pods = demo_sim.store, demo_sim.resource("pods")
        created = store.create(pods, pod("watched"))
        updated = store.update(pods, relabelled(created, seen="yes"))
        deleted = store.delete(pods, "default", "watched")
        header = await asyncio.wait_for(proc.stdout.readline(), GUARD)
        assert header.split() == [b"TYPE", b"NAME", b"RV"]
        lines = [(await asyncio.wait_for(proc.stdout.readline(), GUARD)).split() for _ in range(3)]
    finally:
        proc.terminate()
        await proc.wait()
    assert lines == [
        [b"ADDED", b"watched", str(rv_of(created)).encode()],
        [b"MODIFIED", b"watched", str(rv_of(updated)).encode()],
        [b"DELETED", b"watched", str(rv_of(deleted)).encode()],
    ]


# ---------------------------------------------------------------------------------- kubernetes


@pytest.fixture
def core_v1(daemon: Daemon) -> Iterator[kube_client.CoreV1Api]:
    config = kube_client.Configuration()
    config.host = daemon.url
    with kube_client.ApiClient(config) as api_client:
        yield kube_client.CoreV1Api(api_client)


def _client_keys(pods: Any) -> list[Key]:
    return [
        (p.metadata.namespace, p.metadata.name, int(p.metadata.resource_version))
        for p in pods.items
    ]


async def test_the_python_client_lists_through_the_daemon_what_the_simulator_lists(
    core_v1: kube_client.CoreV1Api, upstream: httpx.AsyncClient, demo_sim: Simulator
) -> None:
    everything = await asyncio.to_thread(core_v1.list_pod_for_all_namespaces)
    assert _client_keys(everything) == sim_pods(demo_sim)
    assert everything.metadata.resource_version == str(demo_sim.store.rv)
    selected = await asyncio.to_thread(
        core_v1.list_namespaced_pod,
        "ns-1",
        label_selector="tier=frontend",
        field_selector="status.phase=Running",
    )
    theirs = await upstream.get(
        "/api/v1/namespaces/ns-1/pods",
        params={"labelSelector": "tier=frontend", "fieldSelector": "status.phase=Running"},
    )
    assert _client_keys(selected) == keys(theirs.json()) and selected.items
    paged = await asyncio.to_thread(core_v1.list_namespaced_pod, "ns-0", limit=4)
    rest = await asyncio.to_thread(
        core_v1.list_namespaced_pod, "ns-0", _continue=paged.metadata._continue
    )
    assert paged.metadata.remaining_item_count == len(rest.items)
    assert _client_keys(paged) + _client_keys(rest) == [
        k for k in sim_pods(demo_sim) if k[0] == "ns-0"
    ]


async def test_the_python_client_watch_resumes_from_the_last_resource_version_it_saw(
    core_v1: kube_client.CoreV1Api, daemon: Daemon, demo_sim: Simulator
) -> None:
    start = (await asyncio.to_thread(core_v1.list_namespaced_pod, "default")).metadata
    store, pods = demo_sim.store, demo_sim.resource("pods")
    a = store.create(pods, pod("a"))
    b = store.create(pods, pod("b"))

    def watch_from(rv: str, n: int) -> tuple[list[tuple[str, str, int]], str]:
        w = kube_watch.Watch()
        seen: list[tuple[str, str, int]] = []
        for event in w.stream(
            core_v1.list_namespaced_pod, "default", resource_version=rv, timeout_seconds=10
        ):
            obj = event["object"]
            seen.append((event["type"], obj.metadata.name, int(obj.metadata.resource_version)))
            if len(seen) == n:
                w.stop()
                break
        return seen, w.resource_version

    first, last_rv = await asyncio.to_thread(watch_from, start.resource_version, 2)
    assert first == [("ADDED", "a", rv_of(a)), ("ADDED", "b", rv_of(b))]
    assert last_rv == str(rv_of(b))
    # Changes while no one watches; a resume from the last RV seen gets them, once each.
    updated = store.update(pods, relabelled(a, v="2"))
    deleted = store.delete(pods, "default", "b")
    resumed, _ = await asyncio.to_thread(watch_from, last_rv, 2)
    assert resumed == [("MODIFIED", "a", rv_of(updated)), ("DELETED", "b", rv_of(deleted))]


# ---------------------------------------------------------------------------------- informers


async def test_our_informer_through_the_daemon_converges_to_the_simulator_under_churn_and_relists(
    daemon: Daemon, demo_sim: Simulator
) -> None:
    client = build_client(UpstreamConfig(server=daemon.url))
    informer = SharedInformer(
        ApiListerWatcher(client, PODS),
        name="pods-via-daemon",
        store=Store(kind=PODS.kind, api_version=PODS.api_version, field_indexes=("spec.nodeName",)),
        reflector_options=ReflectorOptions(backoff=lambda: Backoff(initial=0.01, cap=0.05)),
    )
    task = asyncio.create_task(informer.run(), name="informer-via-daemon")
    try:
        await asyncio.wait_for(informer.wait_for_sync(), GUARD)
        stats = await churn_for(demo_sim, rate=400).run(duration=1.0)
        assert stats.created and stats.updated and stats.deleted

        def state() -> dict[str, int]:
            return {e.key: e.rv for e in informer.store.entries()}

        expected = {f"{ns}/{name}": rv for ns, name, rv in sim_pods(demo_sim)}
        await until(lambda: state() == expected, "the informer converged")
        assert informer.relists == 1  # only the first sync: the churn went by as watch events
        for node in (f"node-{i}" for i in range(5)):
            scan = {
                f"{ns}/{name}"
                for ns, name, _ in sim_pods(
                    demo_sim, lambda o, n=node: o["spec"].get("nodeName") == n
                )
            }
            assert informer.store.index_keys("spec.nodeName", node) == scan

        # The daemon relists under churn (its upstream history was compacted): it closes our
        # watch; we resume from it, relisting from the daemon if our RV became too old.
        assert daemon.server is not None
        upstream_informer = daemon.server.resources[PODS].informer
        daemon_relists = upstream_informer.relists
        writing = asyncio.create_task(churn_for(demo_sim, rate=400, seed=4).run(duration=1.2))
        await asyncio.sleep(0.3)
        demo_sim.store.create(demo_sim.resource("configmaps"), {"metadata": {"name": "x"}})
        demo_sim.compact()
        demo_sim.end_watches()
        await writing
        expected = {f"{ns}/{name}": rv for ns, name, rv in sim_pods(demo_sim)}
        await until(lambda: state() == expected, "the informer converged after the relist")
        assert upstream_informer.relists == daemon_relists + 1
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await client.aclose()


async def test_a_daemon_in_front_of_a_daemon_answers_what_the_simulator_answers(
    daemon: Daemon, upstream: httpx.AsyncClient, demo_sim: Simulator
) -> None:
    store, pods = demo_sim.store, demo_sim.resource("pods")
    churn_for(demo_sim).step(30)
    async with (
        daemon_for(daemon.url) as outer,
        httpx.AsyncClient(base_url=outer.url, timeout=GUARD) as proxy,
    ):
        assert outer.server is not None
        outer_pods = outer.server.resources[PODS]
        await until(lambda: outer_pods.resource_version >= store.rv, "the outer daemon caught up")
        for path, params in [
            ("/api/v1/pods", {}),
            ("/api/v1/namespaces/ns-1/pods", {"labelSelector": "app in (app-0,app-3)"}),
            ("/api/v1/pods", {"fieldSelector": "spec.nodeName=node-4,status.phase!=Pending"}),
            ("/api/v1/pods", {"labelSelector": "!version"}),
            ("/api/v1/namespaces", {}),
            ("/api/v1/configmaps", {"fieldSelector": "metadata.namespace=ns-0"}),
            ("/apis/apps/v1/deployments", {}),
        ]:
            mine, theirs = (
                await proxy.get(path, params=params),
                await upstream.get(path, params=params),
            )
            assert mine.status_code == theirs.status_code == 200
            assert keys(mine.json()) == keys(theirs.json()), (path, params)
            if path.endswith("/pods"):
                assert mine.json()["metadata"]["resourceVersion"] == str(store.rv)
        namespace, name, _ = sim_pods(demo_sim)[7]
        for path in (
            f"/api/v1/namespaces/{namespace}/pods/{name}",
            "/api/v1/namespaces/ns-2",
            "/apis/apps/v1/namespaces/ns-0/deployments/app-0-frontend",
        ):
            mine, theirs = await proxy.get(path), await upstream.get(path)
            assert mine.status_code == theirs.status_code == 200, path
            expected = theirs.json()
            expected["metadata"].pop("managedFields", None)
            assert mine.json() == expected
        missing = await proxy.get("/api/v1/namespaces/ns-2/pods/nope")
        assert (missing.status_code, missing.json()["reason"]) == (404, "NotFound")

        # One watch from the same RV, through both daemons and from the simulator directly.
        params = {"watch": "1", "resourceVersion": str(store.rv)}
        path = "/api/v1/namespaces/default/pods"
        async with (
            proxy.stream("GET", path, params=params) as via_daemons,
            upstream.stream("GET", path, params=params) as direct,
        ):
            made = store.create(pods, pod("through", hop="2"))
            store.update(pods, relabelled(made, hop="3"))
            store.delete(pods, "default", "through")
            churn_for(demo_sim, seed=5).step(10)  # other namespaces: in neither watch
            store.create(pods, pod("last"))
            streams = [via_daemons.aiter_lines(), direct.aiter_lines()]
            seen: list[list[tuple[str, str, int]]] = [[], []]
            for lines, events in zip(streams, seen, strict=True):
                while not events or events[-1][1] != "last":
                    event = orjson.loads(await asyncio.wait_for(anext(lines), GUARD))
                    obj = event["object"]
                    events.append((event["type"], obj["metadata"]["name"], rv_of(obj)))
        assert seen[0] == seen[1]
        assert [t for t, _, _ in seen[0]] == ["ADDED", "MODIFIED", "DELETED", "ADDED"]
