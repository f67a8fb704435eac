"""An app's objects besides its pods: its ConfigMap, Service, Deployment and ReplicaSets.

Each selects, owns or is mounted by the app's pods (:mod:`~cacheproxy.sim.workload.replicapods`) because
both are derived from the same app template (:mod:`~cacheproxy.sim.workload.templates`).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import datetime

from cacheproxy.sim.workload.derive import JsonObject, _hex, _moment, _ts, _uid
from cacheproxy.sim.workload.managed_fields import _managed
from cacheproxy.sim.workload.templates import _app, _pod_template, template_hash

__all__ = ["make_configmap", "make_deployment", "make_replicaset", "make_service"]


def make_configmap(rng: random.Random, *, namespace: str, name: str) -> JsonObject:
    """An app's configuration; ``<app>-config`` is what that app's pods mount."""
    app = name.removesuffix("-config")
    settings = "\n".join(f"  key{i}: {_hex(rng, 8)}" for i in range(rng.randint(2, 6)))
    return {
        "kind": "ConfigMap",
        "apiVersion": "v1",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": app}},
        "data": {
            "FEATURE_FLAGS": ",".join(
                rng.sample(("beta-ui", "fast-path", "new-cache", "v2-api"), 2)
            ),
            "LOG_LEVEL": rng.choice(("info", "debug", "warn")),
            "application.yaml": f"server:\n  port: 8080\nsettings:\n{settings}\n",
        },
    }


def make_service(rng: random.Random, *, namespace: str, app: str) -> JsonObject:
    """A ClusterIP Service named ``app``, selecting the app's pods."""
    a = _app(app)
    ip = f"10.96.{rng.randint(0, 255)}.{rng.randint(1, 254)}"
    return {
        "kind": "Service",
        "apiVersion": "v1",
        "metadata": {"name": app, "namespace": namespace, "labels": {"app": app, "team": a.team}},
        "spec": {
            "ports": [
                {"name": "http", "protocol": "TCP", "port": 80, "targetPort": "http"},
                {"name": "metrics", "protocol": "TCP", "port": 9090, "targetPort": 9090},
            ],
            "selector": {"app": app, "tier": a.tier},
            "clusterIP": ip,
            "clusterIPs": [ip],
            "type": "ClusterIP",
            "sessionAffinity": "None",
            "ipFamilies": ["IPv4"],
            "ipFamilyPolicy": "SingleStack",
            "internalTrafficPolicy": "Cluster",
        },
        "status": {"loadBalancer": {}},
    }


def _ready(pod: JsonObject) -> bool:
    conditions = pod.get("status", {}).get("conditions", [])
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _max_unavailable(replicas: int) -> int:
    """``maxUnavailable: 25%`` of ``replicas``, rounded down; at least 1 when ``maxSurge: 25%``
    rounds to 0 too (``deploymentutil.ResolveFenceposts``)."""
    unavailable, surge = replicas // 4, -(-replicas // 4)
    return 1 if unavailable == 0 and surge == 0 else unavailable


def _nonzero(**counts: int) -> JsonObject:
    """Counts as the API server serialises them: ``omitempty`` drops the zeros."""
    return {k: v for k, v in counts.items() if v}


def make_deployment(
    rng: random.Random,
    *,
    namespace: str,
    app: str,
    replicas: int,
    containers: int = 2,
    pods: Sequence[JsonObject] | None = None,
    now: datetime | None = None,
) -> JsonObject:
    """``app``'s Deployment (``<app>-<tier>``) of ``replicas``, at its current version.

    Its status counts ``pods``, the pods of its ReplicaSets, as the deployment controller does:
    those of the current version are up to date, the Ready ones ready and available; it is
    Available while no more than ``maxUnavailable`` are not, and Progressing is complete once
    every pod is up to date and available. Without ``pods``: ``replicas`` pods, all ready and
    up to date. ``now``: when its controller last wrote it (as :func:`make_pod`'s ``now``).
    """
    a = _app(app)
    template = _pod_template(namespace, a, a.current, containers)
    template["metadata"]["labels"].pop("pod-template-hash")
    at = now if now is not None else _moment(rng)
    if pods is None:
        total = updated = ready = replicas
    else:
        total = len(pods)
        updated = sum(1 for p in pods if p["metadata"]["labels"].get("version") == a.current)
        ready = sum(1 for p in pods if _ready(p))
    available = ready >= replicas - _max_unavailable(replicas)
    complete = updated == replicas == total and ready == updated
    new_rs = f"{a.deployment}-{template_hash(namespace, app, a.current)}"
    conditions = [
        {
            "type": "Available",
            "status": "True" if available else "False",
            "lastUpdateTime": _ts(at),
            "lastTransitionTime": _ts(at),
            "reason": "MinimumReplicasAvailable" if available else "MinimumReplicasUnavailable",
            "message": "Deployment has minimum availability."
            if available
            else "Deployment does not have minimum availability.",
        },
        {
            "type": "Progressing",
            "status": "True",
            "lastUpdateTime": _ts(at),
            "lastTransitionTime": _ts(at),
            "reason": "NewReplicaSetAvailable" if complete else "ReplicaSetUpdated",
            "message": f'ReplicaSet "{new_rs}" has successfully progressed.'
            if complete
            else f'ReplicaSet "{new_rs}" is progressing.',
        },
    ]
    spec: JsonObject = {
        "replicas": replicas,
        "selector": {"matchLabels": {"app": app, "tier": a.tier}},
        "template": template,
        "strategy": {
            "type": "RollingUpdate",
            "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"},
        },
        "revisionHistoryLimit": 10,
        "progressDeadlineSeconds": 600,
    }
    meta: JsonObject = {
        "name": a.deployment,
        "namespace": namespace,
        # What its ReplicaSets' owner references name (kept when the simulator loads it).
        "uid": _uid(namespace, a.deployment),
        "labels": {"app": app, "team": a.team, "tier": a.tier},
        "annotations": {"deployment.kubernetes.io/revision": "2"},
    }
    meta["managedFields"] = [
        _managed(
            "helm",
            at,
            {"metadata": {"labels": meta["labels"]}, "spec": spec},
            api_version="apps/v1",
        ),
    ]
    status = {
        "observedGeneration": 1,
        **_nonzero(
            replicas=total,
            updatedReplicas=updated,
            readyReplicas=ready,
            availableReplicas=ready,
            unavailableReplicas=max(total - ready, 0),
        ),
        "conditions": conditions,
    }
    return {
        "kind": "Deployment",
        "apiVersion": "apps/v1",
        "metadata": meta,
        "spec": spec,
        "status": status,
    }


def make_replicaset(
    rng: random.Random,
    *,
    namespace: str,
    app: str,
    replicas: int,
    version: str | None = None,
    containers: int = 2,
    pods: Sequence[JsonObject] | None = None,
) -> JsonObject:
    """The ReplicaSet owning ``app``'s pods of ``version`` (default: current; revision 2) in a
    Deployment of ``replicas``.

    It owns ``pods`` (its ``spec.replicas``; status: how many are Ready), by default
    ``replicas`` ready pods; an older revision's ReplicaSet kept at 0 owns none.
    """
    a = _app(app)
    version = version or a.current
    template = _pod_template(namespace, a, version, containers)
    labels = template["metadata"]["labels"]
    name = f"{a.deployment}-{labels['pod-template-hash']}"
    if pods is None:
        owned = ready = replicas
    else:
        owned, ready = len(pods), sum(1 for p in pods if _ready(p))
    meta: JsonObject = {
        "name": name,
        "namespace": namespace,
        "uid": _uid(namespace, name),  # what its pods' owner references name
        "labels": dict(labels),
        "annotations": {
            "deployment.kubernetes.io/desired-replicas": str(replicas),
            "deployment.kubernetes.io/max-replicas": str(replicas + (replicas + 3) // 4),
            "deployment.kubernetes.io/revision": "2" if version == a.current else "1",
        },
        "ownerReferences": [
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "name": a.deployment,
                "uid": _uid(namespace, a.deployment),
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    return {
        "kind": "ReplicaSet",
        "apiVersion": "apps/v1",
        "metadata": meta,
        "spec": {
            "replicas": owned,
            "selector": {
                "matchLabels": {
                    "app": app,
                    "pod-template-hash": labels["pod-template-hash"],
                    "tier": a.tier,
                }
            },
            "template": template,
        },
        "status": {
            "replicas": owned,
            **_nonzero(fullyLabeledReplicas=owned, readyReplicas=ready, availableReplicas=ready),
            "observedGeneration": 1,
        },
    }
