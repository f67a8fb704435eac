"""Pods as a ReplicaSet's pods look in a real cluster, and realistic updates of them.

:func:`make_pod` builds a pod as the ReplicaSet controller creates it, after admission (the
ServiceAccount token volume, default tolerations) and binding to a node, with the status its
kubelet reports (:mod:`~cacheproxy.sim.workload.pod_status`) and both managers' managedFields.
:func:`mutate_pod` is what a running cluster does to it next (a controller's annotation,
readiness flaps, restarts and back-offs, a Pending pod starting); :mod:`cacheproxy.sim.churn`
drives it.
"""

from __future__ import annotations

import functools
import random
from datetime import datetime, timedelta

import orjson

from cacheproxy.sim.workload.derive import (
    _EPOCH,
    JsonObject,
    _digest,
    _moment,
    _parse_ts,
    _pod_cidr_prefix,
    _suffix,
    _uid,
)
from cacheproxy.sim.workload.lifecycle import (
    _crash,
    _flap_readiness,
    _is_crash_looping,
    _restart_backed_off,
    _start,
)
from cacheproxy.sim.workload.managed_fields import _entry, _field_set, _managed, _touch_manager
from cacheproxy.sim.workload.pod_status import _kubelet_fields, _pod_status
from cacheproxy.sim.workload.templates import (
    _App,
    _app,
    _template_labels,
    _template_spec,
    template_hash,
)

__all__ = ["make_pod", "mutate_pod"]

_SA_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
_CHURN_ANNOTATION = "sim.cacheproxy.dev/revision"
_CHURN_MANAGER = "cacheproxy-churn"


# ---------------------------------------------------------------------------- admission


def _admitted_spec(spec: JsonObject, node: str, sa_volume: str) -> JsonObject:
    """The spec after admission (ServiceAccount token volume, default tolerations) and binding."""
    mount = {"name": sa_volume, "readOnly": True, "mountPath": _SA_MOUNT}
    containers = [
        _reorder_container(c | {"volumeMounts": [*c.get("volumeMounts", []), mount]})
        for c in spec["containers"]
    ]
    token = {
        "name": sa_volume,
        "projected": {
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {
                    "configMap": {
                        "name": "kube-root-ca.crt",
                        "items": [{"key": "ca.crt", "path": "ca.crt"}],
                    }
                },
                {
                    "downwardAPI": {
                        "items": [
                            {
                                "path": "namespace",
                                "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                            }
                        ]
                    }
                },
            ],
            "defaultMode": 420,
        },
    }
    toleration = {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
    return {
        "volumes": [*spec["volumes"], token],
        "containers": containers,
        "restartPolicy": spec["restartPolicy"],
        "terminationGracePeriodSeconds": spec["terminationGracePeriodSeconds"],
        "dnsPolicy": spec["dnsPolicy"],
        "serviceAccountName": "default",
        "serviceAccount": "default",
        "nodeName": node,
        "securityContext": spec["securityContext"],
        "schedulerName": spec["schedulerName"],
        "tolerations": [
            {"key": "node.kubernetes.io/not-ready", **toleration},
            {"key": "node.kubernetes.io/unreachable", **toleration},
        ],
        "priority": 0,
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
    }


_CONTAINER_ORDER = (
    "name",
    "image",
    "command",
    "args",
    "ports",
    "env",
    "resources",
    "volumeMounts",
    "livenessProbe",
    "readinessProbe",
    "terminationMessagePath",
    "terminationMessagePolicy",
    "imagePullPolicy",
)


def _reorder_container(c: JsonObject) -> JsonObject:
    """Container keys in the Go struct's order, as the API server serialises them."""
    return {k: c[k] for k in _CONTAINER_ORDER if k in c} | c


# ---------------------------------------------------------------------------- creation


def _controller_meta(namespace: str, a: _App, version: str) -> JsonObject:
    """The metadata the ReplicaSet controller gives each pod of ``version`` (all but the name)."""
    rs_name = f"{a.deployment}-{template_hash(namespace, a.name, version)}"
    return {
        "generateName": f"{rs_name}-",
        "namespace": namespace,
        "labels": _template_labels(a, namespace, version),
        "annotations": {
            "checksum/config": _digest("config", namespace, a.name, version).hex(),
            "prometheus.io/port": "9090",
            "prometheus.io/scrape": "true",
        },
        "ownerReferences": [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": rs_name,
                "uid": _uid(namespace, rs_name),
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }


@functools.lru_cache(maxsize=1024)
def _controller_fields(namespace: str, app: str, version: str, containers: int) -> bytes:
    """The controller's field set, the same for every pod of a template: computed once, kept as
    JSON so that each pod gets its own copy cheaply (deriving it is most of a pod's cost)."""
    a = _app(app)
    sent = {k: v for k, v in _controller_meta(namespace, a, version).items() if k != "namespace"}
    spec = _template_spec(namespace, a, version, containers)
    return orjson.dumps(_field_set({"metadata": sent, "spec": spec}))


def make_pod(
    rng: random.Random,
    *,
    namespace: str,
    app: str,
    node: str,
    name: str | None = None,
    containers: int = 2,
    with_managed_fields: bool = True,
    phase: str = "Running",
    version: str | None = None,
    now: datetime | None = None,
) -> JsonObject:
    """A Pod of ``app``'s ReplicaSet, bound to ``node``, as pod.json shows one (~5-10 KB of JSON).

    ``version`` defaults to the app's current version, or (one pod in five) its previous one, as
    during a rollout. The name is ``<deployment>-<pod-template-hash>-<5 chars>`` unless given.
    ``now`` is when the pod is made: every time in it (its controller's and kubelet's writes, its
    start, its containers' starts) is ``now``. Pass the server's time to create it now; without
    it, a moment in the hour after a fixed epoch is drawn, so that the seed alone reproduces it.
    """
    if containers < 1:
        raise ValueError("a pod has at least one container")
    a = _app(app)
    if version is None:
        version = a.previous if rng.random() < 0.2 else a.current
    rs_name = f"{a.deployment}-{template_hash(namespace, app, version)}"
    meta: JsonObject = {"name": name or f"{rs_name}-{_suffix(rng)}"}
    meta |= _controller_meta(namespace, a, version)
    template = _template_spec(namespace, a, version, containers)
    spec = _admitted_spec(template, node, f"kube-api-access-{_suffix(rng)}")
    at = now if now is not None else _moment(rng)
    pod_ip = f"{_pod_cidr_prefix(node)}.{rng.randint(2, 254)}"
    status = _pod_status(rng, spec, phase=phase, at=at, pod_ip=pod_ip)
    if with_managed_fields:
        owned = orjson.loads(_controller_fields(namespace, app, version, containers))
        meta["managedFields"] = [
            _entry("kube-controller-manager", at, owned),
            _managed("kubelet", at, _kubelet_fields(status), sub="status"),
        ]
    return {"kind": "Pod", "apiVersion": "v1", "metadata": meta, "spec": spec, "status": status}


# ---------------------------------------------------------------------------- updates


def _latest(pod: JsonObject) -> datetime:
    stamps = [m.get("time", "") for m in pod.get("metadata", {}).get("managedFields", [])]
    stamps += [
        pod.get("status", {}).get("startTime", ""),
        pod["metadata"].get("creationTimestamp", ""),
    ]
    return max((_parse_ts(s) for s in stamps if s), default=_EPOCH)


def mutate_pod(rng: random.Random, pod: JsonObject, *, now: datetime | None = None) -> JsonObject:
    """A realistic update of ``pod`` at ``now``, as a new dict (``pod`` is not modified).

    Always bumps a revision annotation (a controller touching the pod); then, by chance, what its
    kubelet would report next (:mod:`~cacheproxy.sim.workload.lifecycle`): a bound Pending pod
    starts; in a Running pod, a container whose CrashLoopBackOff is over starts again, one that
    keeps crashing crashes again, readiness flaps, or a container crashes (restarted at once, or
    backing off when it crashed recently). An unscheduled pod stays Pending. Identity and
    ``resourceVersion`` are kept, so the result can be PUT.

    ``now`` is the time of the update (pass the server's time): the only time written. Without
    it, a moment up to 90 s after the pod's latest timestamp (virtual time, for generators
    without a clock).
    """
    new: JsonObject = orjson.loads(orjson.dumps(pod))  # a deep copy, ~10x faster than deepcopy
    meta = new.setdefault("metadata", {})
    at = now if now is not None else _latest(new) + timedelta(seconds=rng.randint(1, 90))
    annotations = meta.setdefault("annotations", {})
    annotations[_CHURN_ANNOTATION] = str(int(annotations.get(_CHURN_ANNOTATION, "0")) + 1)
    meta["annotations"] = dict(sorted(annotations.items()))
    # Another manager owns the annotations map itself: this one owns only its key (no ".").
    owned: JsonObject = {"f:metadata": {"f:annotations": {f"f:{_CHURN_ANNOTATION}": {}}}}
    _touch_manager(meta, _entry(_CHURN_MANAGER, at, owned))
    status, spec = new.get("status"), new.get("spec")
    if not isinstance(status, dict) or not isinstance(spec, dict) or "containers" not in spec:
        return new
    if not _kubelet_step(rng, new, at):
        return new
    _touch_manager(meta, _managed("kubelet", at, _kubelet_fields(new["status"]), sub="status"))
    return new


def _kubelet_step(rng: random.Random, pod: JsonObject, at: datetime) -> bool:
    """What the pod's kubelet reports next, at ``at``, by chance; True if the status changed."""
    status, spec = pod["status"], pod["spec"]
    phase, roll = status.get("phase"), rng.random()
    statuses = status.get("containerStatuses") or []
    if phase == "Pending" and spec.get("nodeName") and statuses:
        if roll >= 0.6:
            return False
        prefix = _pod_cidr_prefix(spec["nodeName"])
        _start(rng, pod, at=at, pod_ip=f"{prefix}.{rng.randint(2, 254)}")
        return True
    if phase != "Running" or not statuses:
        return False
    if _restart_backed_off(rng, pod, at=at):
        return True
    running = [s for s in statuses if "running" in s.get("state", {})]
    if not running or any(_is_crash_looping(s) for s in statuses):
        return False
    looping = [s for s in running if int(s.get("restartCount", 0)) >= 2]
    if looping and roll < 0.6:  # a container that keeps crashing crashes again
        _crash(rng, pod, rng.choice(looping)["name"], at=at)
    elif roll < 0.45:
        _flap_readiness(rng, pod, at=at)
    elif roll < 0.6:
        reason = rng.choice(("Error", "OOMKilled"))
        _crash(rng, pod, rng.choice(running)["name"], at=at, reason=reason)
    else:
        return False
    return True
