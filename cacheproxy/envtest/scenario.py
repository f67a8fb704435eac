"""The control-plane scenario: what kube-controller-manager and kube-scheduler (with a fake
kubelet) must bring about, step by step, one definition for the e2e test and the benchmark.

Each step makes a change as a user would (create, scale, roll out, delete) and then waits for the
cluster to converge: it polls the API server until what the controllers should have done is there
(available replicas, a completed Job, Endpoints listing the ready pods, a computed quota, objects
garbage-collected, a namespace gone). A step records how long that took, or that it did not
converge within its bound, and with what was last seen; nothing here judges a time. The steps run
in order in one namespace, which the last step deletes: a failed step ends the run (later steps
build on it).

``observer`` is whom the steps ask and write through: the benchmark and the test use the API
server itself, so convergence is judged on upstream's state, whichever server the controllers
talk to.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import httpx

from cacheproxy.envtest.convergence import (
    NotFound,
    NotYet,
    ScenarioError,
    ScenarioRun,
    StepResult,
    deleting,
    ready,
)

__all__ = ["CACHED_RESOURCES", "STEPS", "deployment", "run_scenario"]

CACHED_RESOURCES: tuple[str, ...] = (
    "pods",
    "configmaps",
    "secrets",
    "services",
    "endpoints",
    "serviceaccounts",
    "persistentvolumeclaims",
    "persistentvolumes",
    "namespaces",
    "nodes",
    "events",
    "apps/v1/deployments",
    "apps/v1/replicasets",
    "apps/v1/statefulsets",
    "apps/v1/daemonsets",
    "batch/v1/jobs",
    "batch/v1/cronjobs",
    "networking.k8s.io/v1/ingresses",
    "coordination.k8s.io/v1/leases",
    "discovery.k8s.io/v1/endpointslices",
    "policy/v1/poddisruptionbudgets",
    "apps/v1/controllerrevisions",
    "resourcequotas",
    "replicationcontrollers",
    "limitranges",
)
"""What cacheproxy caches in front of the controllers (``resources:``): 25 of the resources
kube-controller-manager and kube-scheduler read and write most; the rest (PodTemplates, Roles,
NetworkPolicies, storage and DRA kinds …) passes through."""

_IMAGE = "registry.k8s.io/pause:3.10"


def deployment(name: str, replicas: int, *, version: str = "1") -> dict[str, Any]:
    """A Deployment of ``replicas`` pods labelled ``app: name`` (10m CPU each; ``version`` is a
    template annotation: a new one rolls the pods out)."""
    labels = {"app": name}
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels, "annotations": {"scenario/version": version}},
                "spec": {
                    "terminationGracePeriodSeconds": 30,
                    "containers": [
                        {
                            "name": "main",
                            "image": _IMAGE,
                            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                        }
                    ],
                },
            },
        },
    }


# ---------------------------------------------------------------------- the steps


async def namespace_created(run: ScenarioRun) -> None:
    await run.create("/api/v1/namespaces", {"metadata": {"name": run.namespace}})

    async def ready() -> None:
        # kube-controller-manager's ServiceAccount controller makes ``default``: pods need it.
        await run.get(run.ns_path("v1", "serviceaccounts", "default"))

    await run.until(ready)


async def deployment_of_5(run: ScenarioRun) -> None:
    await run.create(run.ns_path("apps/v1", "deployments"), deployment("web", 5))
    await run.until(lambda: run.deployment_available("web", 5))


async def _scale(run: ScenarioRun, name: str, replicas: int) -> None:
    await run.patch(run.ns_path("apps/v1", "deployments", name), {"spec": {"replicas": replicas}})
    await run.until(lambda: run.deployment_available(name, replicas))


async def scale_to_10(run: ScenarioRun) -> None:
    await _scale(run, "web", 10)


async def scale_to_2(run: ScenarioRun) -> None:
    await _scale(run, "web", 2)


async def rollout(run: ScenarioRun) -> None:
    path = run.ns_path("apps/v1", "deployments", "web")
    before = {
        rs["metadata"]["name"]
        for rs in await run.items(run.ns_path("apps/v1", "replicasets"), labelSelector="app=web")
    }
    template = deployment("web", 2, version="2")["spec"]["template"]
    await run.patch(path, {"spec": {"template": template}})

    async def rolled() -> None:
        await run.deployment_available("web", 2)
        sets = await run.items(run.ns_path("apps/v1", "replicasets"), labelSelector="app=web")
        new = [rs for rs in sets if rs["metadata"]["name"] not in before]
        old = [rs for rs in sets if rs["metadata"]["name"] in before]
        if len(new) != 1 or new[0].get("status", {}).get("availableReplicas", 0) != 2:
            raise NotYet(f"rollout: new replica sets {[_rs_state(rs) for rs in new]}")
        busy = [
            _rs_state(rs) for rs in old if rs["spec"]["replicas"] or rs["status"].get("replicas")
        ]
        if busy:
            raise NotYet(f"rollout: old replica sets not at 0: {busy}")

    await run.until(rolled)


def _rs_state(rs: Mapping[str, Any]) -> str:
    status = rs.get("status", {})
    return (
        f"{rs['metadata']['name']} spec {rs['spec'].get('replicas')} "
        f"status {status.get('replicas', 0)}/{status.get('availableReplicas', 0)}"
    )


async def job_completes(run: ScenarioRun) -> None:
    job = {
        "metadata": {"name": "once"},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": _IMAGE}],
                }
            },
        },
    }
    await run.create(run.ns_path("batch/v1", "jobs"), job)

    async def complete() -> None:
        status = (await run.get(run.ns_path("batch/v1", "jobs", "once"))).get("status", {})
        done = any(
            c["type"] == "Complete" and c["status"] == "True" for c in status.get("conditions", [])
        )
        if not done or status.get("succeeded") != 1:
            raise NotYet(f"job: succeeded {status.get('succeeded')}, complete {done}")

    await run.until(complete)


async def daemonset_on_every_node(run: ScenarioRun) -> None:
    labels = {"app": "agent"}
    ds = {
        "metadata": {"name": "agent"},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "main", "image": _IMAGE}]},
            },
        },
    }
    await run.create(run.ns_path("apps/v1", "daemonsets"), ds)

    async def ready() -> None:
        d = await run.get(run.ns_path("apps/v1", "daemonsets", "agent"))
        s = d.get("status", {})
        seen = {
            k: s.get(k, 0) for k in ("desiredNumberScheduled", "numberReady", "numberAvailable")
        }
        if s.get("observedGeneration", 0) < d["metadata"]["generation"] or any(
            v != run.nodes for v in seen.values()
        ):
            raise NotYet(f"daemonset: {seen}, want {run.nodes} nodes")

    await run.until(ready)


async def statefulset_of_2(run: ScenarioRun) -> None:
    labels = {"app": "db"}
    service = {
        "metadata": {"name": "db"},
        "spec": {"clusterIP": "None", "selector": labels, "ports": [{"port": 5432}]},
    }
    await run.create(run.ns_path("v1", "services"), service)
    sts = {
        "metadata": {"name": "db"},
        "spec": {
            "serviceName": "db",
            "replicas": 2,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "main", "image": _IMAGE}]},
            },
        },
    }
    await run.create(run.ns_path("apps/v1", "statefulsets"), sts)

    async def ready() -> None:
        s = (await run.get(run.ns_path("apps/v1", "statefulsets", "db"))).get("status", {})
        seen = {k: s.get(k, 0) for k in ("replicas", "readyReplicas", "availableReplicas")}
        if any(v != 2 for v in seen.values()):
            raise NotYet(f"statefulset: {seen}, want 2")

    await run.until(ready)


async def service_endpoints_after_scale_up(run: ScenarioRun) -> None:
    service = {
        "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]},
    }
    await run.create(run.ns_path("v1", "services"), service)
    await run.patch(run.ns_path("apps/v1", "deployments", "web"), {"spec": {"replicas": 4}})

    async def listed() -> None:
        pods = await run.pods("app=web")
        want = sorted(p["status"]["podIP"] for p in pods if ready(p) and p["status"].get("podIP"))
        if len(want) != 4:
            raise NotYet(f"service: {len(want)} ready pods, want 4")
        endpoints = await run.get(run.ns_path("v1", "endpoints", "web"))
        listed = sorted(
            a["ip"]
            for subset in endpoints.get("subsets") or []
            for a in subset.get("addresses", [])
        )
        if listed != want:
            raise NotYet(f"service: endpoints {listed}, ready pods {want}")
        slices = await run.items(
            run.ns_path("discovery.k8s.io/v1", "endpointslices"),
            labelSelector="kubernetes.io/service-name=web",
        )
        in_slices = sorted(
            address
            for s in slices
            for e in s.get("endpoints") or []
            if (e.get("conditions") or {}).get("ready")
            for address in e["addresses"]
        )
        if in_slices != want:
            raise NotYet(f"service: endpoint slices {in_slices}, ready pods {want}")

    await run.until(listed)


async def disruption_budget_and_quota(run: ScenarioRun) -> None:
    pdb = {
        "metadata": {"name": "web"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
    }
    await run.create(run.ns_path("policy/v1", "poddisruptionbudgets"), pdb)
    quota = {"metadata": {"name": "pods"}, "spec": {"hard": {"pods": "100"}}}
    await run.create(run.ns_path("v1", "resourcequotas"), quota)

    async def computed() -> None:
        healthy = sum(map(ready, await run.pods("app=web")))
        budget = await run.get(run.ns_path("policy/v1", "poddisruptionbudgets", "web"))
        status = budget.get("status", {})
        if status.get("observedGeneration", 0) < 1 or status.get("currentHealthy") != healthy:
            raise NotYet(f"pdb: currentHealthy {status.get('currentHealthy')}, want {healthy}")
        everything = await run.items(run.ns_path("v1", "pods"))
        counted = sum(
            1
            for p in everything
            if p.get("status", {}).get("phase") not in ("Succeeded", "Failed") and not deleting(p)
        )
        used = (await run.get(run.ns_path("v1", "resourcequotas", "pods"))).get("status", {})
        if used.get("used", {}).get("pods") != str(counted):
            raise NotYet(f"quota: used {used.get('used')}, want pods {counted}")

    await run.until(computed)


async def background_deletion(run: ScenarioRun) -> None:
    await run.delete(run.ns_path("apps/v1", "deployments", "web"), "Background")

    async def collected() -> None:
        await run.all_gone("background deletion", "app=web")

    await run.until(collected)


async def foreground_deletion(run: ScenarioRun) -> None:
    await run.create(run.ns_path("apps/v1", "deployments"), deployment("front", 2))
    await run.until(lambda: run.deployment_available("front", 2))
    run.restart_clock()  # the time of the deletion only
    path = run.ns_path("apps/v1", "deployments", "front")
    await run.delete(path, "Foreground")

    async def collected() -> None:
        try:
            await run.get(path)
        except NotFound:
            await run.all_gone("foreground deletion", "app=front")
            return
        raise NotYet("foreground deletion: the deployment is still there")

    await run.until(collected)


async def namespace_deleted(run: ScenarioRun) -> None:
    path = f"/api/v1/namespaces/{run.namespace}"
    await run.delete(path)

    async def gone() -> None:
        try:
            ns = await run.get(path)
        except NotFound:
            return
        conditions = [
            f"{c['type']}={c['status']}: {c.get('message', '')}"
            for c in ns.get("status", {}).get("conditions", [])
            if c["status"] == "True"
        ]
        raise NotYet(f"namespace: {ns['status'].get('phase')} {conditions}")

    await run.until(gone)


STEPS: tuple[tuple[str, Callable[[ScenarioRun], Awaitable[None]]], ...] = (
    ("namespace created", namespace_created),
    ("deployment of 5 available", deployment_of_5),
    ("scale 5 to 10", scale_to_10),
    ("scale 10 to 2", scale_to_2),
    ("rollout", rollout),
    ("job completes", job_completes),
    ("daemonset on every node", daemonset_on_every_node),
    ("statefulset of 2 ready", statefulset_of_2),
    ("service endpoints after scale-up", service_endpoints_after_scale_up),
    ("pdb and quota status", disruption_budget_and_quota),
    ("gc: background deletion", background_deletion),
    ("gc: foreground deletion", foreground_deletion),
    ("namespace deleted", namespace_deleted),
)
"""The steps in the order they run, by name (the names of the reports)."""


async def run_scenario(
    observer: httpx.AsyncClient, *, namespace: str, nodes: int, step_timeout: float = 60.0
) -> list[StepResult]:
    """Run :data:`STEPS` in ``namespace`` (which must not exist) through ``observer``, on a
    cluster of ``nodes`` ready nodes; one result per step run, ending at the first that did not
    converge within ``step_timeout`` seconds."""
    run = ScenarioRun(observer, namespace, nodes, step_timeout)
    results: list[StepResult] = []
    for name, step in STEPS:
        run.restart_clock()
        try:
            await step(run)
        except (NotYet, ScenarioError) as exc:
            results.append(StepResult(name, False, time.perf_counter() - run.started, str(exc)))
            break
        results.append(StepResult(name, True, time.perf_counter() - run.started))
    return results
