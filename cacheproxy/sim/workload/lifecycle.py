"""What happens to a pod after it is made: the scheduler fails to place it, its kubelet starts its
containers, restarts one that crashed or backs off (``CrashLoopBackOff``), readiness flaps.

Each step changes a pod (a dict, in place) *at* a given moment and writes only that moment, so a
pod whose steps are taken at the server's time never has a timestamp after now, nor (made when
created) one before its ``creationTimestamp``. The steps keep what kubectl shows consistent:

- a container's ``restartCount`` counts its restarts; one that restarted has a ``lastState``
  saying how its previous run ended (Error, OOMKilled) and when, no later than its current start;
- a crashed container that was restarted within the back-off window waits in
  ``CrashLoopBackOff`` for the kubelet's back-off (10 s, doubling per restart, at most 5 min:
  ``pkg/kubelet/kubelet.go`` ``MaxContainerBackOff``), then starts again, and only then is its
  ``restartCount`` one more;
- the pod's Ready and ContainersReady conditions say whether every container is ready, and
  change their ``lastTransitionTime`` only when they flip.

:mod:`~cacheproxy.sim.workload.democluster` uses the steps to set up its few failures,
:func:`~cacheproxy.sim.workload.mutate_pod` (the churn) to move pods on.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta

from cacheproxy.sim.workload.derive import JsonObject, _parse_ts, _ts
from cacheproxy.sim.workload.managed_fields import _managed, _touch_manager
from cacheproxy.sim.workload.pod_status import (
    _condition,
    _container_id,
    _pod_status,
    _terminated,
    _unready_reason,
)

_BACK_OFF = 10
"""The kubelet's first back-off before restarting a crashed container (seconds)."""
_MAX_BACK_OFF = 300
"""``MaxContainerBackOff``: the back-off doubles per restart up to 5 minutes."""
_BACK_OFF_RESET = timedelta(seconds=2 * _MAX_BACK_OFF)
"""A container that last crashed longer ago than this is restarted at once (the kubelet forgets
its back-off after twice the maximum)."""


def _back_off(restarts: int) -> int:
    """Seconds a container that has restarted ``restarts`` times waits after its next crash."""
    return min(_BACK_OFF << min(max(restarts - 1, 0), 8), _MAX_BACK_OFF)


def _pod_ref(pod: JsonObject) -> str:
    """A pod as the kubelet names it in messages (``format.Pod``: ``name_namespace(uid)``)."""
    meta = pod.get("metadata", {})
    ref = f"{meta.get('name', '')}_{meta.get('namespace', '')}"
    return f"{ref}({meta['uid']})" if meta.get("uid") else ref


def _last_finish(cs: JsonObject) -> datetime | None:
    finished = cs.get("lastState", {}).get("terminated", {}).get("finishedAt")
    return _parse_ts(finished) if finished else None


def _statuses(pod: JsonObject) -> list[JsonObject]:
    statuses: list[JsonObject] = pod.get("status", {}).get("containerStatuses") or []
    return statuses


def _is_crash_looping(cs: JsonObject) -> bool:
    reason: str = cs.get("state", {}).get("waiting", {}).get("reason", "")
    return reason == "CrashLoopBackOff"


def _refresh_readiness(pod: JsonObject, at: datetime) -> None:
    """The Ready and ContainersReady conditions as the containers' readiness says, flipped at
    ``at`` (a condition that keeps its status keeps its ``lastTransitionTime``)."""
    status = pod["status"]
    unready = [s["name"] for s in _statuses(pod) if not s.get("ready")]
    ok = not unready
    why = () if ok else _unready_reason(status.get("phase", ""), unready)
    conditions = []
    for c in status.get("conditions", []):
        if c.get("type") in ("Ready", "ContainersReady"):
            was = c.get("status") == "True"
            since = at if was != ok else _parse_ts(c["lastTransitionTime"])
            c = _condition(c["type"], ok, since, *why)
        conditions.append(c)
    status["conditions"] = conditions


def _crash(
    rng: random.Random, pod: JsonObject, container: str, *, at: datetime, reason: str = "Error"
) -> None:
    """Container ``container`` (running) ends at ``at`` with ``reason`` (Error, OOMKilled).

    The kubelet restarts it at once (``restartCount`` + 1) unless it was restarted within the
    back-off window: then it waits in CrashLoopBackOff, not ready, and :func:`_restart_backed_off`
    starts it when the back-off is over.
    """
    cs = next(s for s in _statuses(pod) if s["name"] == container)
    started = cs.get("state", {}).get("running", {}).get("startedAt", _ts(at))
    previous = _last_finish(cs)
    restarts = int(cs.get("restartCount", 0))
    cs["lastState"] = _terminated(
        rng, reason, started=started, at=at, container_id=cs.get("containerID", "")
    )
    if restarts and previous is not None and at - previous < _BACK_OFF_RESET:
        message = (
            f"back-off {_back_off(restarts)}s restarting failed container={container} "
            f"pod={_pod_ref(pod)}"
        )
        cs["state"] = {"waiting": {"reason": "CrashLoopBackOff", "message": message}}
        cs["ready"] = cs["started"] = False
    else:
        cs["state"] = {"running": {"startedAt": _ts(at)}}
        cs["restartCount"] = restarts + 1
        cs["containerID"] = _container_id(rng)
        cs["ready"] = cs["started"] = True
    _refresh_readiness(pod, at)


def _restart_backed_off(rng: random.Random, pod: JsonObject, *, at: datetime) -> bool:
    """Start every container whose CrashLoopBackOff is over by ``at``, at the moment it ended
    (``restartCount`` + 1); True if one was."""
    changed = False
    for cs in _statuses(pod):
        finished = _last_finish(cs)
        if not _is_crash_looping(cs) or finished is None:
            continue
        restarts = int(cs.get("restartCount", 0))
        due = finished + timedelta(seconds=_back_off(restarts))
        if due > at:
            continue
        cs["state"] = {"running": {"startedAt": _ts(due)}}
        cs["restartCount"] = restarts + 1
        cs["containerID"] = _container_id(rng)
        cs["ready"] = cs["started"] = True
        changed = True
    if changed:
        _refresh_readiness(pod, at)
    return changed


def _start(rng: random.Random, pod: JsonObject, *, at: datetime, pod_ip: str) -> None:
    """A bound Pending pod's containers are created and start at ``at``: it is Running."""
    began = pod["status"].get("startTime")
    status = _pod_status(rng, pod["spec"], phase="Running", at=at, pod_ip=pod_ip)
    for cs in status["containerStatuses"]:  # a fresh start: nothing ran before
        cs["lastState"], cs["restartCount"] = {}, 0
    if began:
        status["startTime"] = began
        for c in status["conditions"]:
            if c["type"] in ("Initialized", "PodScheduled"):
                c["lastTransitionTime"] = began
    pod["status"] = status


def _flap_readiness(rng: random.Random, pod: JsonObject, *, at: datetime) -> None:
    """A readiness probe fails (one ready container becomes unready) or, with one unready,
    every running container passes again."""
    statuses = [s for s in _statuses(pod) if "running" in s.get("state", {})]
    if not statuses:
        return
    if all(s.get("ready") for s in statuses):
        rng.choice(statuses)["ready"] = False
    else:
        for s in statuses:
            s["ready"] = True
    _refresh_readiness(pod, at)


def _unschedule(pod: JsonObject, *, at: datetime, nodes: int) -> None:
    """The scheduler finds no node for ``pod`` at ``at`` (all ``nodes`` lack the CPU it asks
    for): unbound, Pending, its PodScheduled condition False and why, no container status."""
    pod["spec"].pop("nodeName", None)
    message = (
        f"0/{nodes} nodes are available: {nodes} Insufficient cpu. preemption: 0/{nodes} nodes "
        f"are available: {nodes} No preemption victims found for incoming pod."
    )
    condition = _condition("PodScheduled", False, at, "Unschedulable", message)
    pod["status"] = {
        "phase": "Pending",
        "conditions": [condition],
        "qosClass": pod["status"].get("qosClass", "BestEffort"),
    }
    meta = pod["metadata"]
    if "managedFields" in meta:
        meta["managedFields"] = [m for m in meta["managedFields"] if m.get("manager") != "kubelet"]
        _touch_manager(
            meta,
            _managed("kube-scheduler", at, {"status": {"conditions": [condition]}}, sub="status"),
        )
