"""An app's objects besides its pods: its ConfigMap, Service, Deployment and ReplicaSets.

Each selects, owns or is mounted by the app's pods (:mod:`~cacheproxy.sim.workload.pods`) because
both are derived from the same app template (:mod:`~cacheproxy.sim.workload.templates`).
"""

from __future__ import annotations

import random

from cacheproxy.sim.workload.derive import _EPOCH, JsonObject, _hex, _moment, _ts, _uid
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


def make_deployment(
    rng: random.Random, *, namespace: str, app: str, replicas: int, containers: int = 2
) -> JsonObject:
    """``app``'s Deployment (``<app>-<tier>``), at its current version, fully rolled out."""
    a = _app(app)
    template = _pod_template(namespace, a, a.current, containers)
    template["metadata"]["labels"].pop("pod-template-hash")
    at = _moment(rng)
    conditions = [
        {
            "type": "Available",
            "status": "True",
            "lastUpdateTime": _ts(at),
            "lastTransitionTime": _ts(at),
            "reason": "MinimumReplicasAvailable",
            "message": "Deployment has minimum availability.",
        },
        {
            "type": "Progressing",
            "status": "True",
            "lastUpdateTime": _ts(at),
            "lastTransitionTime": _ts(_EPOCH),
            "reason": "NewReplicaSetAvailable",
            "message": f'ReplicaSet "{a.deployment}-{template_hash(namespace, app, a.current)}" '
            "has successfully progressed.",
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
        "labels": {"app": app, "team": a.team, "tier": a.tier},
        "annotations": {"deployment.kubernetes.io/revision": "2"},
    }
    meta["managedFields"] = [
        _managed(
            "helm",
            _EPOCH,
            {"metadata": {"labels": meta["labels"]}, "spec": spec},
            api_version="apps/v1",
        ),
    ]
    status = {
        "observedGeneration": 1,
        "replicas": replicas,
        "updatedReplicas": replicas,
        "readyReplicas": replicas,
        "availableReplicas": replicas,
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
) -> JsonObject:
    """The ReplicaSet owning ``app``'s pods of ``version`` (default: current; revision 2)."""
    a = _app(app)
    version = version or a.current
    template = _pod_template(namespace, a, version, containers)
    labels = template["metadata"]["labels"]
    name = f"{a.deployment}-{labels['pod-template-hash']}"
    ready = replicas if rng.random() < 0.8 else max(0, replicas - 1)
    meta: JsonObject = {
        "name": name,
        "namespace": namespace,
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
            "replicas": replicas,
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
            "replicas": replicas,
            "fullyLabeledReplicas": replicas,
            "readyReplicas": ready,
            "availableReplicas": ready,
            "observedGeneration": 1,
        },
    }
