"""A pod's status as its kubelet reports it for a phase, and the kubelet's share of its fields.

Containers' states, restarts, image IDs, the five pod conditions, host and pod IPs, and the QoS
class the API server sets on create (:func:`_qos_class`, from the containers' resources).

A status is made *at* one moment, the time the kubelet reports it: every time in it is that
moment, so a pod made at the time the server creates it has no timestamp before its
``creationTimestamp`` and none after now. What happens later (restarts, back-offs, readiness) is
:mod:`~cacheproxy.sim.workload.lifecycle`'s.
"""

from __future__ import annotations

import hashlib
import random
from datetime import datetime

from cacheproxy.sim.workload.derive import JsonObject, _hex, _node_ip, _ts

__all__ = ["PHASES"]

PHASES = ("Pending", "Running", "Succeeded", "Failed")

_EXIT_CODES = {"Completed": 0, "Error": 1, "OOMKilled": 137}
"""The exit code of each reason a container's termination gives (137: SIGKILL, by the OOM killer)."""


def _qos_class(spec: JsonObject) -> str:
    resources = [c.get("resources", {}) for c in spec["containers"]]
    if not any(r.get("limits") or r.get("requests") for r in resources):
        return "BestEffort"
    guaranteed = all(
        set(r.get("limits", {})) >= {"cpu", "memory"}
        and r.get("limits") == r.get("requests", r.get("limits"))
        for r in resources
    )
    return "Guaranteed" if guaranteed else "Burstable"


def _condition(
    kind: str, ok: bool, at: datetime, reason: str = "", message: str = ""
) -> JsonObject:
    c: JsonObject = {"type": kind, "status": "True" if ok else "False", "lastProbeTime": None}
    c["lastTransitionTime"] = _ts(at)
    if reason:
        c["reason"] = reason
    if message:
        c["message"] = message
    return c


def _image_id(image: str) -> str:
    repo = image.rsplit(":", 1)[0]
    return f"{repo}@sha256:{hashlib.sha256(image.encode()).hexdigest()}"


def _container_id(rng: random.Random) -> str:
    return f"containerd://{_hex(rng, 64)}"


def _terminated(
    rng: random.Random, reason: str, *, started: str, at: datetime, container_id: str = ""
) -> JsonObject:
    """A ``terminated`` container state: ``reason`` (Completed, Error, OOMKilled) at ``at``."""
    return {
        "terminated": {
            "exitCode": _EXIT_CODES[reason],
            "reason": reason,
            "startedAt": started,
            "finishedAt": _ts(at),
            "containerID": container_id or _container_id(rng),
        }
    }


def _unready_reason(phase: str, unready: list[str]) -> tuple[str, ...]:
    """The reason and message of a False Ready condition, as the kubelet words them."""
    if phase == "Succeeded":
        return ("PodCompleted",)
    if phase == "Failed":
        return ("PodFailed",)
    return ("ContainersNotReady", f"containers with unready status: [{' '.join(unready)}]")


def _pod_status(
    rng: random.Random,
    spec: JsonObject,
    *,
    phase: str,
    at: datetime,
    pod_ip: str,
    failure: str = "",
) -> JsonObject:
    """Status as the kubelet reports it for ``phase``, every time in it ``at``.

    Running: every container running and ready, now and then one restarted once (its last state
    the termination: Error or OOMKilled). Pending: bound, its containers being created. Succeeded:
    every container Completed. Failed: every container ended in ``failure`` (Error, OOMKilled;
    default: either, drawn).
    """
    if phase not in PHASES:
        raise ValueError(f"unsupported pod phase {phase!r}; expected one of {PHASES}")
    names = [c["name"] for c in spec["containers"]]
    running, done = phase == "Running", phase in ("Succeeded", "Failed")
    stamp = _ts(at)
    host_ip = _node_ip(spec["nodeName"])
    statuses: list[JsonObject] = []
    for c in spec["containers"]:
        st: JsonObject = {"name": c["name"], "state": {}, "lastState": {}}
        restarts = 0
        if running:
            st["state"] = {"running": {"startedAt": stamp}}
            if rng.random() < 0.05:
                restarts = 1
                reason = rng.choice(("Error", "OOMKilled"))
                st["lastState"] = _terminated(rng, reason, started=stamp, at=at)
        elif done:
            reason = "Completed" if phase == "Succeeded" else failure
            reason = reason or rng.choice(("Error", "OOMKilled"))
            st["state"] = _terminated(rng, reason, started=stamp, at=at)
        else:
            st["state"] = {"waiting": {"reason": "ContainerCreating"}}
        st |= {"ready": running, "restartCount": restarts, "image": c["image"]}
        st["imageID"] = "" if phase == "Pending" else _image_id(c["image"])
        if phase != "Pending":
            st["containerID"] = (
                st["state"]["terminated"]["containerID"] if done else _container_id(rng)
            )
        st["started"] = running
        statuses.append(st)
    not_ready = () if running else _unready_reason(phase, names)
    status: JsonObject = {
        "phase": phase,
        "conditions": [
            _condition("PodReadyToStartContainers", phase == "Running", at),
            _condition("Initialized", True, at),
            _condition("Ready", running, at, *not_ready),
            _condition("ContainersReady", running, at, *not_ready),
            _condition("PodScheduled", True, at),
        ],
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
    }
    if phase != "Pending":
        status["podIP"] = pod_ip
        status["podIPs"] = [{"ip": pod_ip}]
    status["startTime"] = stamp
    status["containerStatuses"] = statuses
    status["qosClass"] = _qos_class(spec)
    return status


def _kubelet_fields(status: JsonObject) -> JsonObject:
    # qosClass is set by the API server on create; containerStatuses is atomic (a leaf).
    return {"status": {k: v for k, v in status.items() if k != "qosClass"}}
