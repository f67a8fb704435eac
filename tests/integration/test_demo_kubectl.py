"""What a newcomer sees first: ``kubectl get pods/deploy/events -A`` against the demo simulator
(the demo loaded as ``cacheproxy demo`` loads it, then churned) shows no ``<invalid>`` time and no
restart older than its pod; and the simulator's Tables for pods, deployments, nodes, events and
jobs are the daemon's for the same objects (one set of printers), under the API server's columns.
"""

from __future__ import annotations

import random
import re
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path

import httpx
import pytest

from cacheproxy.daemon.config import ResourceConfig
from cacheproxy.kube.resources import builtin
from cacheproxy.sim import SimConfig, SimServer, Simulator
from cacheproxy.sim.churn import ChurnDriver
from cacheproxy.sim.workload import DemoSpec, demo_objects
from tests.integration.clients import kubectl_binary, run_kubectl
from tests.integration.daemon_support import daemon_for
from tests.support import serving

pytestmark = pytest.mark.kubectl

SPEC = DemoSpec()
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
KINDS = {
    "pods": ("/api/v1/pods", "kubectl_pods.txt"),
    "deployments": ("/apis/apps/v1/deployments", "kubectl_deployments.txt"),
    "nodes": ("/api/v1/nodes", "kubectl_nodes.txt"),
    "events": ("/api/v1/events", "kubectl_events.txt"),
    "jobs": ("/apis/batch/v1/jobs", "kubectl_jobs.txt"),
}
"""Each kind the test reads: its collection, and what ``kubectl get`` printed for it from a real
kube-apiserver (``k8s-samples/tables``)."""
SAMPLES_VERSION = "v1.28.7"
"""The API server the samples are from: the demo answers as it, so its Tables are comparable."""
DURATION = re.compile(r"^(?:(\d+)y)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")
RESTARTS = re.compile(r"^(\d+)(?: \((.+) ago\))?$")


def seconds(text: str) -> int:
    """A ``kubectl`` age (apimachinery ``HumanDuration``: ``5s``, ``2m3s``, ``3h``, ``2d4h``…)."""
    match = DURATION.match(text)
    assert match is not None and text, f"not a duration: {text!r}"
    units = (365 * 86400, 86400, 3600, 60, 1)
    return sum(int(n or 0) * unit for n, unit in zip(match.groups(), units, strict=True))


def demo_simulator() -> Simulator:
    """The demo loaded at once, as ``cacheproxy demo`` loads it, made at the second the server
    stamps as its creation (retried in the rare case where the load straddles a second: its
    objects would then be dated one second before their creation)."""
    for _ in range(5):
        sim = Simulator(config=SimConfig(git_version=SAMPLES_VERSION))
        now = datetime.fromisoformat(sim.store.now())
        sim.load(demo_objects(SPEC, now=now))
        created = {
            stored.obj["metadata"]["creationTimestamp"]
            for stored in sim.store.iter_range(sim.resource("pods"), None)
        }
        if created == {sim.store.now()} == {now.strftime("%Y-%m-%dT%H:%M:%SZ")}:
            return sim
    raise AssertionError("the demo never loaded within one second")


def churn(sim: Simulator, writes: int) -> None:
    """``writes`` of the demo's churn, at the server's time."""
    ChurnDriver(
        sim.store,
        rate=0,
        rng=random.Random(SPEC.seed),
        namespaces=[f"ns-{i}" for i in range(SPEC.namespaces)],
        nodes=[f"node-{i}" for i in range(SPEC.nodes)],
        apps=[f"app-{i}" for i in range(SPEC.apps)],
        max_pods=2 * SPEC.pods,
    ).step(writes)


@pytest.fixture
async def demo() -> AsyncIterator[SimServer]:
    async with serving(demo_simulator()) as (server, _):
        yield server


@pytest.fixture
async def churned() -> AsyncIterator[SimServer]:
    sim = demo_simulator()
    churn(sim, 400)
    async with serving(sim) as (server, _):
        yield server


async def kubectl_get(server: SimServer, tmp_path: Path, *args: str) -> list[list[str]]:
    """The rows ``kubectl get ARGS`` prints (1.33), header first, split on its column gaps."""
    code, out, err = await run_kubectl(kubectl_binary("1.33"), server.url, tmp_path, "get", *args)
    assert code == 0, err
    assert "<invalid>" not in out
    return [re.split(r"\s{2,}", line.strip()) for line in out.splitlines()]


def restarts_and_ages(rows: list[list[str]]) -> list[tuple[str, int, int | None, int]]:
    """(name, restarts, seconds since the last restart or None, age) of each pod row."""
    header = rows[0]
    assert header[:1] + header[2:] == ["NAMESPACE", "READY", "STATUS", "RESTARTS", "AGE"]
    out = []
    for row in rows[1:]:
        values = dict(zip(header, row, strict=True))
        match = RESTARTS.match(values["RESTARTS"])
        assert match is not None, row
        ago = seconds(match[2]) if match[2] else None
        out.append((values["NAME"], int(match[1]), ago, seconds(values["AGE"])))
    return out


async def test_get_pods_shows_restarts_no_older_than_their_pods_and_a_few_failures(
    demo: SimServer, tmp_path: Path
) -> None:
    rows = await kubectl_get(demo, tmp_path, "pods", "-A")
    pods = restarts_and_ages(rows)
    assert len(pods) == SPEC.pods
    for name, restarts, ago, age in pods:
        assert (restarts > 0) == (ago is not None), name
        assert ago is None or ago <= age, f"{name} restarted {ago}s ago, {age}s old"
    statuses = [row[3] for row in rows[1:]]
    assert statuses.count("Running") >= 50
    for shown in ("CrashLoopBackOff", "ContainerCreating", "Pending", "Error", "Completed"):
        assert shown in statuses, shown
    crashing = next(row for row in rows[1:] if row[3] == "CrashLoopBackOff")
    assert crashing[4].startswith("1 (") and crashing[2] == "1/2"


async def test_get_pods_after_churn_still_dates_every_restart_within_its_pods_age(
    churned: SimServer, tmp_path: Path
) -> None:
    pods = restarts_and_ages(await kubectl_get(churned, tmp_path, "pods", "-A"))
    assert pods
    for name, restarts, ago, age in pods:
        assert (restarts > 0) == (ago is not None), name
        assert ago is None or ago <= age, f"{name} restarted {ago}s ago, {age}s old"


async def test_get_deployments_counts_their_ready_pods(demo: SimServer, tmp_path: Path) -> None:
    deployments = await kubectl_get(demo, tmp_path, "deployments", "-A")
    assert deployments[0] == ["NAMESPACE", "NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    pods = await kubectl_get(demo, tmp_path, "pods", "-A")
    for namespace, name, ready, _, available, age in deployments[1:]:
        seconds(age)
        mine = [
            row
            for row in pods[1:]
            if row[0] == namespace and re.fullmatch(rf"{name}-[0-9a-f]{{10}}-\w{{5}}", row[1])
        ]
        full = [row for row in mine if row[2].split("/")[0] == row[2].split("/")[1]]
        assert ready == f"{len(full)}/{len(mine)}", (namespace, name)
        assert int(available) == len(full)
    assert (
        sum(ready.split("/")[0] != ready.split("/")[1] for _, _, ready, *_ in deployments[1:]) == 3
    )


async def test_get_events_dates_them_and_tells_the_failures(
    demo: SimServer, tmp_path: Path
) -> None:
    events = await kubectl_get(demo, tmp_path, "events", "-A")
    assert events[0] == ["NAMESPACE", "LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    for row in events[1:]:
        seconds(row[1])
    reasons = {(row[2], row[3]) for row in events[1:]}
    for told in (
        ("Warning", "BackOff"),
        ("Warning", "FailedScheduling"),
        ("Normal", "Pulling"),
        ("Normal", "Pulled"),
        ("Normal", "Started"),
        ("Normal", "Completed"),
        ("Normal", "ScalingReplicaSet"),
    ):
        assert told in reasons, told


@pytest.fixture
async def both(demo: SimServer) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient]]:
    """The demo simulator, and the daemon caching every kind read here from it."""
    resources = tuple(
        ResourceConfig(rtype=builtin(name))
        for name in ("pods", "apps/v1/deployments", "nodes", "events", "batch/v1/jobs")
    )
    async with (
        daemon_for(demo.url, resources=resources) as daemon,
        httpx.AsyncClient(base_url=demo.url, timeout=10) as sim,
        httpx.AsyncClient(base_url=daemon.url, timeout=10) as proxy,
    ):
        yield sim, proxy


@pytest.mark.parametrize("kind", KINDS)
async def test_the_simulators_tables_are_the_daemons_under_the_api_servers_columns(
    both: tuple[httpx.AsyncClient, httpx.AsyncClient],
    kind: str,
    samples_dir: Path,
    demo: SimServer,
    tmp_path: Path,
) -> None:
    sim, proxy = both
    path, sample = KINDS[kind]
    for _ in range(3):  # ages are worked out per request: retry across a second boundary
        direct = (await sim.get(path, headers={"Accept": TABLE})).json()
        cached = (await proxy.get(path, headers={"Accept": TABLE})).json()
        if [r["cells"] for r in direct["rows"]] == [r["cells"] for r in cached["rows"]]:
            break
    assert direct["columnDefinitions"] == cached["columnDefinitions"]
    assert [r["cells"] for r in direct["rows"]] == [r["cells"] for r in cached["rows"]]
    assert direct["rows"], "the demo has some"
    printed = await kubectl_get(demo, tmp_path, kind, "-A")
    reference = (samples_dir / "tables" / sample).read_text().splitlines()[0]
    namespaced = ["NAMESPACE"] if kind != "nodes" else []
    assert printed[0] == namespaced + re.split(r"\s{2,}", reference.strip())


async def test_describe_pod_through_the_daemon_shows_the_pods_events(
    both: tuple[httpx.AsyncClient, httpx.AsyncClient], tmp_path: Path
) -> None:
    # kubectl describe lists the events whose involvedObject is the pod (name, namespace, uid):
    # the demo's events carry their pod's uid, and the daemon answers that field selector.
    sim, proxy = both
    events = (await sim.get("/api/v1/events")).json()["items"]
    about = next(e["involvedObject"] for e in events if e["involvedObject"]["kind"] == "Pod")
    reasons = {e["reason"] for e in events if e["involvedObject"]["uid"] == about["uid"]}
    code, out, err = await run_kubectl(
        kubectl_binary("1.33"),
        str(proxy.base_url),
        tmp_path,
        "describe",
        "pod",
        "-n",
        about["namespace"],
        about["name"],
    )
    assert code == 0, err
    shown = out[out.index("\nEvents:") :]
    assert "<none>" not in shown.splitlines()[0]
    assert reasons and all(reason in shown for reason in reasons), (reasons, shown)
