"""The demo cluster: a :class:`DemoSpec` (how big) and :func:`demo_objects` (what to create).

What a newcomer sees first (``make run``, then ``kubectl get pods -A``): a healthy cluster that
has just come up, with a few realistic failures, each consistent across the objects that show it:

- most pods Running and ready; now and then one whose container restarted once (its last state
  Error or OOMKilled);
- one Deployment with a pod in CrashLoopBackOff (restarted, backing off; a BackOff Event), so it is
  not fully ready;
- one Deployment mid-rollout: its old ReplicaSet's pods still running, its new one's last pod
  still being created (pulling its image);
- one Deployment with a pod the scheduler cannot place (Pending, a FailedScheduling Event);
- a database migration Job per namespace, Completed (one after a first attempt in Error).

Every object is made *at* ``now``, the moment it is loaded: the server stamps the same moment as
``creationTimestamp``, so no timestamp is before an object's creation or after now, and what
happens next (restarts, back-offs, readiness) is the churn's (:mod:`cacheproxy.sim.churn`), at the
server's time.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime

from cacheproxy.sim.workload.apps import (
    make_configmap,
    make_deployment,
    make_replicaset,
    make_service,
)
from cacheproxy.sim.workload.derive import JsonObject, _suffix, _uid
from cacheproxy.sim.workload.jobs import make_job, make_job_pod
from cacheproxy.sim.workload.kubeevents import job_events, make_event, pod_events, rollout_events
from cacheproxy.sim.workload.lifecycle import _crash, _unschedule
from cacheproxy.sim.workload.replicapods import make_pod
from cacheproxy.sim.workload.templates import _app
from cacheproxy.sim.workload.topology import make_namespace, make_node

__all__ = ["DemoSpec", "demo_objects"]

_STORIES = ("crash-loop", "rollout", "unschedulable")
"""The Deployments' failures, each given to one (namespace, app) with two pods or more."""


@dataclass(frozen=True)
class DemoSpec:
    """A demo cluster's size: ``ns-<i>``, ``node-<i>``, ``app-<i>``, and pods spread over them."""

    namespaces: int = 3
    nodes: int = 5
    apps: int = 4
    pods: int = 60
    seed: int = 1

    def __post_init__(self) -> None:
        if min(self.namespaces, self.nodes, self.apps, self.pods) < 0:
            raise ValueError("DemoSpec counts must not be negative")
        if self.pods and not (self.namespaces and self.nodes and self.apps):
            raise ValueError("pods need at least one namespace, node and app")

    @property
    def job_pods(self) -> int:
        """How many of the pods are the migration Jobs' (one Job per namespace, the first with a
        failed attempt too), when there are pods enough for every app in every namespace twice."""
        enough = self.pods >= 2 * self.namespaces * self.apps
        return self.namespaces + 1 if enough else 0


def demo_objects(spec: DemoSpec, *, now: datetime | None = None) -> list[tuple[str, JsonObject]]:
    """A small, realistic cluster as ``(resource config name, object)`` in creatable order.

    Namespaces and nodes first, then per namespace the apps' ConfigMaps, Services, Deployments and
    ReplicaSets (the current revision's and the previous one's), then the Jobs, then Pods
    (round-robin over namespaces, apps and nodes, so every combination has pods when ``pods`` is a
    multiple of their product; the last few the Jobs'), then Events about them.

    ``now`` is when they are loaded (default: now): every timestamp in them is that moment, to
    the second. Same spec and ``now``, same objects; another ``now`` moves the times only.
    """
    at = (now if now is not None else datetime.now(UTC)).replace(microsecond=0)
    rng = random.Random(spec.seed)
    namespaces = [f"ns-{i}" for i in range(spec.namespaces)]
    nodes = [f"node-{i}" for i in range(spec.nodes)]
    apps = [f"app-{i}" for i in range(spec.apps)]
    out: list[tuple[str, JsonObject]] = [("namespaces", make_namespace(ns)) for ns in namespaces]
    out += [("nodes", make_node(rng, n, control_plane=i == 0, now=at)) for i, n in enumerate(nodes)]
    slots = [
        (
            namespaces[i % spec.namespaces],
            apps[(i // spec.namespaces) % spec.apps],
            nodes[i % spec.nodes],
        )
        for i in range(spec.pods)
    ]
    split = len(slots) - spec.job_pods
    by_app: dict[tuple[str, str], list[int]] = {}
    for i, (ns, app, _) in enumerate(slots[:split]):
        by_app.setdefault((ns, app), []).append(i)
    crowded = [key for key, members in by_app.items() if len(members) >= 2]
    stories = dict(
        zip(rng.sample(crowded, min(len(_STORIES), len(crowded))), _STORIES, strict=False)
    )

    taken: set[tuple[str, str]] = set()
    pods: list[JsonObject] = []
    # Each (namespace, app)'s pods in order, grouped as made: a scan of all pods per pair grew as
    # pods x apps x namespaces (minutes at 200 000 pods of 400 apps).
    pods_of: dict[tuple[str, str], list[JsonObject]] = {}
    noted: list[JsonObject] = []  # pods with something to tell: every Event of theirs is there
    for ns, app, node in slots[:split]:
        members = by_app[(ns, app)]
        mine = pods_of.setdefault((ns, app), [])
        pod = _replicaset_pod(
            rng,
            stories.get((ns, app), ""),
            len(mine),
            len(members),
            namespace=ns,
            app=app,
            node=node,
            nodes=len(nodes),
            at=at,
        )
        _name_uniquely(rng, pod, taken)
        pods.append(pod)
        mine.append(pod)
        if not _quiet(pod):
            noted.append(pod)

    jobs: list[tuple[JsonObject, list[JsonObject]]] = []
    for ns in namespaces:
        places = [(app, node) for ns_, app, node in slots[split:] if ns_ == ns]
        if not places:
            continue
        app = places[0][0]
        ran = [
            make_job_pod(
                rng,
                namespace=ns,
                app=app,
                node=node,
                phase="Succeeded" if k == len(places) - 1 else "Failed",
                now=at,
            )
            for k, (_, node) in enumerate(places)
        ]
        for p in ran:
            _name_uniquely(rng, p, taken)
        jobs.append((make_job(rng, namespace=ns, app=app, pods=ran, now=at), ran))

    events: list[JsonObject] = []
    for ns in namespaces:
        for app in apps:
            mine = pods_of.get((ns, app), [])
            out.append(("configmaps", make_configmap(rng, namespace=ns, name=f"{app}-config")))
            out.append(("services", make_service(rng, namespace=ns, app=app)))
            deployment = make_deployment(
                rng, namespace=ns, app=app, replicas=len(mine), pods=mine, now=at
            )
            out.append(("apps/v1/deployments", deployment))
            a = _app(app)
            old, new = (
                make_replicaset(
                    rng,
                    namespace=ns,
                    app=app,
                    replicas=len(mine),
                    version=version,
                    pods=[p for p in mine if p["metadata"]["labels"]["version"] == version],
                )
                for version in (a.previous, a.current)
            )
            out += [("apps/v1/replicasets", old), ("apps/v1/replicasets", new)]
            if stories.get((ns, app)) == "rollout":
                events += rollout_events(rng, deployment, new_rs=new, old_rs=old, now=at)
    out += [("batch/v1/jobs", job) for job, _ in jobs]
    out += [("pods", p) for p in pods]
    for job, ran in jobs:
        out += [("pods", p) for p in ran]
        events += job_events(rng, job, ran, now=at)
        for p in ran:
            events += pod_events(rng, p, now=at)
    for p in noted:
        events += pod_events(rng, p, now=at)
    quiet = [p for p in pods if _quiet(p)]
    for p in rng.sample(quiet, len(quiet) // 3):
        events.append(make_event(rng, namespace=p["metadata"]["namespace"], involved_pod=p, now=at))
    out += [("events", e) for e in events]
    return out


def _replicaset_pod(
    rng: random.Random,
    story: str,
    index: int,
    members: int,
    *,
    namespace: str,
    app: str,
    node: str,
    nodes: int,
    at: datetime,
) -> JsonObject:
    """Pod ``index`` of the ``members`` of ``app`` in ``namespace``, as its Deployment's
    ``story`` (one of :data:`_STORIES`, or none: Running) has it."""
    a = _app(app)
    last = index == members - 1
    version = a.current
    phase = "Running"
    if story == "rollout":
        version = a.previous if index < members // 2 else a.current
        phase = "Pending" if last else "Running"
    elif story == "unschedulable" and last:
        phase = "Pending"
    pod = make_pod(
        rng, namespace=namespace, app=app, node=node, phase=phase, version=version, now=at
    )
    if story == "unschedulable" and last:
        _unschedule(pod, at=at, nodes=nodes)
    elif story == "crash-loop" and last:
        for s in pod["status"]["containerStatuses"]:  # a clean start, then main crashes twice
            s["lastState"], s["restartCount"] = {}, 0
        _crash(rng, pod, "main", at=at)  # restarted at once
        _crash(rng, pod, "main", at=at)  # restarted recently: backs off
    return pod


def _name_uniquely(rng: random.Random, pod: JsonObject, taken: set[tuple[str, str]]) -> None:
    """Draw ``pod``'s name suffix again while another pod has its name (five characters
    collide from a few thousand pods of one ReplicaSet on), and give it the uid its Events
    and the store name it by."""
    meta = pod["metadata"]
    base = meta["name"].rsplit("-", 1)[0]
    while (meta["namespace"], meta["name"]) in taken:
        meta["name"] = f"{base}-{_suffix(rng)}"
    taken.add((meta["namespace"], meta["name"]))
    meta["uid"] = _uid("pod", meta["namespace"], meta["name"])


def _quiet(pod: JsonObject) -> bool:
    """Running, every container ready and never restarted: nothing to tell."""
    statuses = pod["status"].get("containerStatuses") or []
    return (
        pod["status"].get("phase") == "Running"
        and bool(statuses)
        and all(s.get("ready") and not s.get("restartCount") for s in statuses)
    )
