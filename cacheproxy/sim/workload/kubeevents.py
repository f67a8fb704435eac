"""core/v1 Events the scheduler, a kubelet or a controller records, consistent with what they are
about: a pod's scheduling, image pulls, container starts (as many as the container ran), back-offs
and failing probes, as its status tells; a Job's pods and completion; a Deployment's scaling.

Every Event happened *at* one moment (first and last seen), as :func:`make_pod`'s ``now``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple

from cacheproxy.sim.workload.derive import JsonObject, _hex, _moment, _parse_ts, _ts
from cacheproxy.sim.workload.lifecycle import _pod_ref

__all__ = ["job_events", "make_event", "pod_events", "rollout_events"]

_SCHEDULER = "default-scheduler"


class _Told(NamedTuple):
    """What one Event tells: its type, reason and message, the container it is about (none: the
    whole object) and how many times it happened."""

    type: str
    reason: str
    message: str
    container: str = ""
    times: int = 1


def _reference(obj: JsonObject) -> JsonObject:
    """An ``involvedObject`` naming ``obj`` (its uid and resourceVersion when it has them)."""
    meta = obj["metadata"]
    ref: JsonObject = {"kind": obj.get("kind", "Pod"), "namespace": meta.get("namespace", "")}
    ref["name"] = meta["name"]
    if "uid" in meta:
        ref["uid"] = meta["uid"]
    ref["apiVersion"] = obj.get("apiVersion", "v1")
    if "resourceVersion" in meta:
        ref["resourceVersion"] = meta["resourceVersion"]
    return ref


def _event(
    rng: random.Random,
    involved: JsonObject,
    told: _Told,
    *,
    component: str,
    host: str,
    at: datetime,
) -> JsonObject:
    """One Event about ``involved``, recorded by ``component`` (on ``host``) at ``at``."""
    if told.container:
        involved = involved | {"fieldPath": f"spec.containers{{{told.container}}}"}
    source: JsonObject = {"component": component}
    if host:
        source["host"] = host
    return {
        "kind": "Event",
        "apiVersion": "v1",
        "metadata": {
            "name": f"{involved['name']}.{_hex(rng, 16)}",
            "namespace": involved["namespace"],
        },
        "involvedObject": involved,
        "reason": told.reason,
        "message": told.message,
        "source": source,
        "firstTimestamp": _ts(at),
        "lastTimestamp": _ts(at),
        "count": told.times,
        "type": told.type,
        "eventTime": None,
        "reportingComponent": component,
        "reportingInstance": host,
    }


def _pod_lines(pod: JsonObject) -> list[_Told]:
    """What the scheduler and the kubelet recorded about ``pod``, as its status tells."""
    meta, spec, status = pod["metadata"], pod.get("spec", {}), pod.get("status", {})
    node = spec.get("nodeName", "")
    if not node:
        scheduled: JsonObject = next(
            (c for c in status.get("conditions", []) if c.get("type") == "PodScheduled"), {}
        )
        return [_Told("Warning", "FailedScheduling", scheduled.get("message", ""))]
    where = f"{meta['namespace']}/{meta['name']}"
    lines = [_Told("Normal", "Scheduled", f"Successfully assigned {where} to {node}")]
    images = {c["name"]: c.get("image", "") for c in spec.get("containers", [])}
    for cs in status.get("containerStatuses") or []:
        name, state = cs["name"], cs.get("state", {})
        waiting = state.get("waiting", {}).get("reason")
        image = images.get(name) or cs.get("image", "")
        if waiting == "ContainerCreating":
            if name == next(iter(images), name):  # the kubelet pulls the first image first
                lines.append(_Told("Normal", "Pulling", f'Pulling image "{image}"', name))
            continue
        runs = int(cs.get("restartCount", 0)) + 1
        pulled = f'Container image "{image}" already present on machine'
        lines += [
            _Told("Normal", "Pulled", pulled, name, runs),
            _Told("Normal", "Created", f"Created container: {name}", name, runs),
            _Told("Normal", "Started", f"Started container {name}", name, runs),
        ]
        if waiting == "CrashLoopBackOff":
            message = f"Back-off restarting failed container {name} in pod {_pod_ref(pod)}"
            lines.append(_Told("Warning", "BackOff", message, name))
        elif "running" in state and not cs.get("ready"):
            message = "Readiness probe failed: HTTP probe failed with statuscode: 503"
            lines.append(_Told("Warning", "Unhealthy", message, name))
    return lines


def _pod_event(rng: random.Random, pod: JsonObject, told: _Told, at: datetime) -> JsonObject:
    node = pod.get("spec", {}).get("nodeName", "")
    by_scheduler = told.reason in ("Scheduled", "FailedScheduling")
    component, host = (_SCHEDULER, "") if by_scheduler else ("kubelet", node)
    return _event(rng, _reference(pod), told, component=component, host=host, at=at)


def pod_events(
    rng: random.Random, pod: JsonObject, *, now: datetime | None = None
) -> list[JsonObject]:
    """Every Event the scheduler and the kubelet recorded about ``pod``, as its status tells:
    Scheduled (or FailedScheduling), Pulling an image not there yet; per container that ran,
    Pulled, Created and Started (counted once a run), BackOff while it waits to restart,
    Unhealthy while its readiness probe fails. ``now``: when (default: the pod's start)."""
    at = now if now is not None else _started(rng, pod)
    return [_pod_event(rng, pod, line, at) for line in _pod_lines(pod)]


def make_event(
    rng: random.Random,
    *,
    namespace: str,
    involved_pod: JsonObject,
    now: datetime | None = None,
) -> JsonObject:
    """One of the Events of :func:`pod_events` about ``involved_pod`` (in ``namespace``), drawn."""
    spec = involved_pod.get("spec") or {}
    if not spec.get("containers"):
        spec = spec | {"containers": [{"name": "main", "image": "busybox:1.36"}]}
    meta = involved_pod["metadata"] | {"namespace": namespace}
    pod = involved_pod | {"metadata": meta, "spec": spec}
    at = now if now is not None else _started(rng, pod)
    return _pod_event(rng, pod, rng.choice(_pod_lines(pod)), at)


def _started(rng: random.Random, pod: JsonObject) -> datetime:
    start = pod.get("status", {}).get("startTime")
    return _parse_ts(start) if start else _moment(rng)


def job_events(
    rng: random.Random, job: JsonObject, pods: Sequence[JsonObject], *, now: datetime
) -> list[JsonObject]:
    """The job controller's Events about ``job``: a pod created per pod, and its completion."""
    lines = [
        _Told("Normal", "SuccessfulCreate", f"Created pod: {p['metadata']['name']}") for p in pods
    ]
    if any(c.get("type") == "Complete" for c in job.get("status", {}).get("conditions", [])):
        lines.append(_Told("Normal", "Completed", "Job completed"))
    ref = _reference(job)
    return [_event(rng, ref, line, component="job-controller", host="", at=now) for line in lines]


def rollout_events(
    rng: random.Random,
    deployment: JsonObject,
    *,
    new_rs: JsonObject,
    old_rs: JsonObject,
    now: datetime,
) -> list[JsonObject]:
    """The deployment controller's ScalingReplicaSet Events of a rolling update under way: the
    new ReplicaSet scaled up, the old one down, each to its ``spec.replicas``."""
    lines = [
        _Told(
            "Normal",
            "ScalingReplicaSet",
            f"Scaled {way} replica set {rs['metadata']['name']} to {rs['spec']['replicas']}",
        )
        for way, rs in (("up", new_rs), ("down", old_rs))
    ]
    ref = _reference(deployment)
    return [
        _event(rng, ref, line, component="deployment-controller", host="", at=now) for line in lines
    ]
