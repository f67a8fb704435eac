"""A pod's status as its kubelet reports it for a phase, and the kubelet's share of its fields.

Containers' states, restarts, image IDs, the five pod conditions, host and pod IPs, and the QoS
class the API server sets on create (:func:`_qos_class`, from the containers' resources).
"""

from __future__ import annotations

import hashlib
import random
from datetime import datetime, timedelta

from cacheproxy.sim.workload.derive import JsonObject, _hex, _node_ip, _ts

__all__ = ["PHASES"]

PHASES = ("Pending", "Running", "Succeeded", "Failed")


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


def _pod_status(
    rng: random.Random,
    spec: JsonObject,
    *,
    phase: str,
    start: datetime,
    pod_ip: str,
) -> JsonObject:
    """Status as the kubelet reports it for ``phase``."""
    if phase not in PHASES:
        raise ValueError(f"unsupported pod phase {phase!r}; expected one of {PHASES}")
    names = [c["name"] for c in spec["containers"]]
    running, done = phase == "Running", phase in ("Succeeded", "Failed")
    ready_at = start + timedelta(seconds=rng.randint(2, 40))
    not_ready = {
        "Pending": ("ContainersNotReady", f"containers with unready status: [{' '.join(names)}]"),
        "Succeeded": ("PodCompleted", ""),
        "Failed": ("PodFailed", ""),
    }.get(phase, ("", ""))
    host_ip = _node_ip(spec["nodeName"])
    statuses: list[JsonObject] = []
    for c in spec["containers"]:
        st: JsonObject = {"name": c["name"], "state": {}, "lastState": {}}
        restarts = 0
        if running:
            st["state"] = {"running": {"startedAt": _ts(ready_at)}}
            if rng.random() < 0.15:
                restarts = rng.randint(1, 4)
                st["lastState"] = {
                    "terminated": {
                        "exitCode": rng.choice((1, 137, 143)),
                        "reason": rng.choice(("Error", "OOMKilled")),
                        "startedAt": _ts(start),
                        "finishedAt": _ts(ready_at),
                        "containerID": f"containerd://{_hex(rng, 64)}",
                    }
                }
        elif done:
            code = 0 if phase == "Succeeded" else rng.choice((1, 137))
            st["state"] = {
                "terminated": {
                    "exitCode": code,
                    "reason": {0: "Completed", 1: "Error", 137: "OOMKilled"}[code],
                    "startedAt": _ts(start),
                    "finishedAt": _ts(ready_at),
                    "containerID": f"containerd://{_hex(rng, 64)}",
                }
            }
        else:
            st["state"] = {"waiting": {"reason": "ContainerCreating"}}
        st |= {"ready": running, "restartCount": restarts, "image": c["image"]}
        st["imageID"] = "" if phase == "Pending" else _image_id(c["image"])
        if phase != "Pending":
            st["containerID"] = f"containerd://{_hex(rng, 64)}"
        st["started"] = running
        statuses.append(st)
    status: JsonObject = {
        "phase": phase,
        "conditions": [
            _condition("PodReadyToStartContainers", phase != "Pending", start),
            _condition("Initialized", True, start),
            _condition("Ready", running, ready_at, *not_ready),
            _condition("ContainersReady", running, ready_at, *not_ready),
            _condition("PodScheduled", True, start),
        ],
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
    }
    if phase != "Pending":
        status["podIP"] = pod_ip
        status["podIPs"] = [{"ip": pod_ip}]
    status["startTime"] = _ts(start)
    status["containerStatuses"] = statuses
    status["qosClass"] = _qos_class(spec)
    return status


def _kubelet_fields(status: JsonObject) -> JsonObject:
    # qosClass is set by the API server on create; containerStatuses is atomic (a leaf).
    return {"status": {k: v for k, v in status.items() if k != "qosClass"}}
