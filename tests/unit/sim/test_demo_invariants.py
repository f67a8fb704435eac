"""The demo looks like a healthy cluster with a few realistic failures, consistent across its
objects, for any seed and size; and the churn keeps it so as it creates, updates and deletes pods
at the server's time (a virtual clock here)."""

from __future__ import annotations

import random
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cacheproxy.kube.printers import print_pod
from cacheproxy.kube.resources import BUILTIN_RESOURCES, ResourceRegistry, builtin
from cacheproxy.sim.churn import ChurnDriver
from cacheproxy.sim.storage import SimStore
from cacheproxy.sim.workload import DemoSpec, demo_objects, make_pod, mutate_pod
from tests.unit.sim.workload_invariants import cluster_problems, pod_problems

NOW = datetime(2026, 12, 1, 18, 0, 0, tzinfo=UTC)
PODS = builtin("pods")


def objects(spec: DemoSpec, now: datetime = NOW) -> list[dict[str, Any]]:
    return [obj for _, obj in demo_objects(spec, now=now)]


def kubectl_status(pod: dict[str, Any]) -> str:
    """The STATUS column of ``kubectl get pods``."""
    return str(print_pod(pod, NOW)[2])


# ---------------------------------------------------------------------------- the demo


def test_the_default_demo_is_a_consistent_cluster() -> None:
    assert cluster_problems(objects(DemoSpec()), now=NOW) == []


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    namespaces=st.integers(1, 4),
    nodes=st.integers(1, 6),
    apps=st.integers(1, 5),
    pods=st.integers(0, 120),
)
def test_any_demo_is_a_consistent_cluster(
    seed: int, namespaces: int, nodes: int, apps: int, pods: int
) -> None:
    spec = DemoSpec(namespaces=namespaces, nodes=nodes, apps=apps, pods=pods, seed=seed)
    assert cluster_problems(objects(spec), now=NOW) == []


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32))
def test_every_default_demo_shows_a_few_realistic_failures_among_healthy_pods(seed: int) -> None:
    everything = objects(DemoSpec(seed=seed))
    pods = [o for o in everything if o["kind"] == "Pod"]
    shown = Counter(kubectl_status(p) for p in pods)
    assert shown["Running"] >= 50
    for failure in ("CrashLoopBackOff", "ContainerCreating", "Pending", "Error"):
        assert shown[failure] == 1, (failure, shown)
    assert shown["Completed"] == 3  # a migration Job per namespace
    assert set(shown) <= {
        "Running",
        "CrashLoopBackOff",
        "ContainerCreating",
        "Pending",
        "Completed",
        "Error",
    }
    deployments = [o for o in everything if o["kind"] == "Deployment"]
    not_ready = [
        d for d in deployments if d["status"].get("readyReplicas") != d["spec"]["replicas"]
    ]
    assert len(not_ready) == 3  # the crash loop's, the rollout's and the unschedulable pod's
    assert all(d["status"].get("readyReplicas", 0) > 0 for d in not_ready)
    nodes = [o for o in everything if o["kind"] == "Node"]
    assert all(
        c["status"] == "True"
        for n in nodes
        for c in n["status"]["conditions"]
        if c["type"] == "Ready"
    )


def test_a_restarted_container_says_how_its_last_run_ended() -> None:
    restarted = [
        cs
        for seed in range(10)
        for o in objects(DemoSpec(seed=seed))
        if o["kind"] == "Pod"
        for cs in o["status"].get("containerStatuses", [])
        if cs["restartCount"]
    ]
    reasons = Counter(cs["lastState"]["terminated"]["reason"] for cs in restarted)
    assert {"Error", "OOMKilled"} <= set(reasons)
    assert all(cs["restartCount"] >= 1 for cs in restarted)


def test_the_demos_times_are_all_the_moment_it_is_made() -> None:
    later = NOW + timedelta(days=3, seconds=11)
    assert cluster_problems(objects(DemoSpec(seed=3), now=later), now=later) == []
    assert cluster_problems(objects(DemoSpec(seed=3), now=later), now=NOW) != []


# ---------------------------------------------------------------------------- under churn


class Clock:
    """The server's clock, moved on by the test."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> str:
        return self.now.strftime("%Y-%m-%dT%H:%M:%SZ")


def churned(demo_seed: int, churn_seed: int) -> tuple[SimStore, ChurnDriver, Clock]:
    """A store holding the demo, loaded at the clock's start, and a churn driver over it."""
    clock = Clock(NOW)
    store = SimStore(ResourceRegistry(BUILTIN_RESOURCES), clock=clock)
    spec = DemoSpec(seed=demo_seed)
    for name, obj in demo_objects(spec, now=clock.now):
        store.create(builtin(name), obj)
    driver = ChurnDriver(
        store,
        rate=0,
        rng=random.Random(churn_seed),
        namespaces=[f"ns-{i}" for i in range(spec.namespaces)],
        nodes=[f"node-{i}" for i in range(spec.nodes)],
        apps=[f"app-{i}" for i in range(spec.apps)],
        max_pods=2 * spec.pods,
    )
    return store, driver, clock


def live_pods(store: SimStore) -> list[dict[str, Any]]:
    pods = (store.get(PODS, ns, name) for ns, name in store.names(PODS))
    return [p for p in pods if p is not None]


@settings(max_examples=20, deadline=None)
@given(
    demo_seed=st.integers(0, 2**16),
    churn_seed=st.integers(0, 2**32),
    steps=st.lists(st.tuples(st.integers(0, 400), st.integers(1, 40)), min_size=1, max_size=12),
)
def test_churn_keeps_every_pod_consistent_with_its_age_and_now(
    demo_seed: int, churn_seed: int, steps: list[tuple[int, int]]
) -> None:
    store, driver, clock = churned(demo_seed, churn_seed)
    for seconds, writes in steps:
        clock.now += timedelta(seconds=seconds)
        driver.step(writes)
        problems = [p for pod in live_pods(store) for p in pod_problems(pod, now=clock.now)]
        assert problems == []


def test_churn_restarts_backs_off_and_starts_pods_over_time() -> None:
    store, driver, clock = churned(1, 7)
    seen: Counter[str] = Counter()
    restarts_before = 0
    for _ in range(240):  # two hours, a write every few seconds
        clock.now += timedelta(seconds=30)
        driver.step(10)
        pods = live_pods(store)
        assert [p for pod in pods for p in pod_problems(pod, now=clock.now)] == []
        seen.update(kubectl_status(p) for p in pods)
        restarts = sum(
            cs["restartCount"] for p in pods for cs in p["status"].get("containerStatuses", [])
        )
        seen["more restarts"] += restarts > restarts_before
        restarts_before = restarts
    assert seen["CrashLoopBackOff"] > 0
    assert seen["ContainerCreating"] > 0
    assert seen["more restarts"] > 10
    assert seen["Running"] > 10 * seen["CrashLoopBackOff"]


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    phase=st.sampled_from(("Pending", "Running")),
    gaps=st.lists(st.integers(0, 900), min_size=1, max_size=30),
)
def test_mutating_a_pod_at_the_servers_time_keeps_it_consistent(
    seed: int, phase: str, gaps: list[int]
) -> None:
    rng = random.Random(seed)
    now = NOW
    pod = make_pod(rng, namespace="ns-0", app="app-1", node="node-1", phase=phase, now=now)
    pod["metadata"]["creationTimestamp"] = NOW.strftime("%Y-%m-%dT%H:%M:%SZ")
    for gap in gaps:
        now += timedelta(seconds=gap)
        pod = mutate_pod(rng, pod, now=now)
        assert pod_problems(pod, now=now) == []
