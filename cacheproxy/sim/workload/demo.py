"""The demo cluster: a :class:`DemoSpec` (how big) and :func:`demo_objects` (what to create)."""

from __future__ import annotations

import random
from dataclasses import dataclass

from cacheproxy.sim.workload.apps import (
    make_configmap,
    make_deployment,
    make_replicaset,
    make_service,
)
from cacheproxy.sim.workload.cluster import make_namespace, make_node
from cacheproxy.sim.workload.derive import JsonObject
from cacheproxy.sim.workload.events import make_event
from cacheproxy.sim.workload.pods import make_pod
from cacheproxy.sim.workload.templates import _app

__all__ = ["DemoSpec", "demo_objects"]


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


def demo_objects(spec: DemoSpec) -> list[tuple[str, JsonObject]]:
    """A small, realistic cluster as ``(resource config name, object)`` in creatable order.

    Namespaces and nodes first, then per namespace the apps' ConfigMaps, Services, Deployments and
    ReplicaSets, then Pods (round-robin over namespaces, apps and nodes, so every combination has
    pods when ``pods`` is a multiple of their product; mostly Running, some Pending or Failed),
    then Events about some pods. Same spec, same objects.
    """
    rng = random.Random(spec.seed)
    namespaces = [f"ns-{i}" for i in range(spec.namespaces)]
    nodes = [f"node-{i}" for i in range(spec.nodes)]
    apps = [f"app-{i}" for i in range(spec.apps)]
    out: list[tuple[str, JsonObject]] = [("namespaces", make_namespace(ns)) for ns in namespaces]
    out += [("nodes", make_node(rng, n, control_plane=i == 0)) for i, n in enumerate(nodes)]
    pods: list[JsonObject] = []
    for i in range(spec.pods):
        ns, app = namespaces[i % spec.namespaces], apps[(i // spec.namespaces) % spec.apps]
        roll = rng.random()
        phase = "Running" if roll < 0.88 else "Pending" if roll < 0.96 else "Failed"
        pods.append(make_pod(rng, namespace=ns, app=app, node=nodes[i % spec.nodes], phase=phase))
    for ns in namespaces:
        for app in apps:
            mine = [
                p
                for p in pods
                if p["metadata"]["namespace"] == ns and p["metadata"]["labels"]["app"] == app
            ]
            versions = {p["metadata"]["labels"]["version"] for p in mine} | {_app(app).current}
            out.append(("configmaps", make_configmap(rng, namespace=ns, name=f"{app}-config")))
            out.append(("services", make_service(rng, namespace=ns, app=app)))
            out.append(
                (
                    "apps/v1/deployments",
                    make_deployment(rng, namespace=ns, app=app, replicas=len(mine)),
                )
            )
            for version in sorted(versions):
                n = sum(1 for p in mine if p["metadata"]["labels"]["version"] == version)
                rs = make_replicaset(rng, namespace=ns, app=app, replicas=n, version=version)
                out.append(("apps/v1/replicasets", rs))
    out += [("pods", p) for p in pods]
    for p in rng.sample(pods, len(pods) // 2):
        out.append(
            ("events", make_event(rng, namespace=p["metadata"]["namespace"], involved_pod=p))
        )
    return out
