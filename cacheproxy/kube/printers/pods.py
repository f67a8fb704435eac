"""Pods: READY, STATUS (waiting/terminated reasons), RESTARTS, IP, NODE, gates (``printPod``)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from cacheproxy.kube.printers.cells import (
    NONE,
    Obj,
    age,
    as_int,
    as_list,
    dig,
    human_duration,
    metadata,
    name_of,
    parse_time,
)

# --------------------------------------------------------------------------- printers


def _is_restartable_init(container: Any) -> bool:
    return isinstance(container, Mapping) and container.get("restartPolicy") == "Always"


def _later(current: datetime | None, text: Any) -> datetime | None:
    when = parse_time(text)
    if when is None:
        return current
    return when if current is None or when > current else current


def _condition_true(conditions: list[Any], ctype: str) -> bool:
    return any(c.get("type") == ctype and c.get("status") == "True" for c in conditions)


def print_pod(pod: Obj, now: datetime) -> list[Any]:
    spec = pod.get("spec") or {}
    st = pod.get("status") or {}
    conditions = as_list(st.get("conditions"))
    restarts = 0
    sidecar_restarts = 0
    total = len(as_list(spec.get("containers")))
    ready = 0
    last_restart: datetime | None = None
    last_sidecar_restart: datetime | None = None
    phase = st.get("phase") or ""
    reason = st.get("reason") or phase
    for cond in conditions:
        if cond.get("type") == "PodScheduled" and cond.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"
    init_specs = {c.get("name"): c for c in as_list(spec.get("initContainers"))}
    total += sum(1 for c in init_specs.values() if _is_restartable_init(c))
    init_statuses = as_list(st.get("initContainerStatuses"))
    initializing = False
    for i, cs in enumerate(init_statuses):
        restarts += as_int(cs.get("restartCount"))
        finished = dig(cs, "lastState", "terminated", "finishedAt")
        last_restart = _later(last_restart, finished)
        sidecar = _is_restartable_init(init_specs.get(cs.get("name")))
        if sidecar:
            sidecar_restarts += as_int(cs.get("restartCount"))
            last_sidecar_restart = _later(last_sidecar_restart, finished)
        terminated = dig(cs, "state", "terminated")
        waiting = dig(cs, "state", "waiting")
        if isinstance(terminated, Mapping) and as_int(terminated.get("exitCode")) == 0:
            continue
        if sidecar and cs.get("started") is True:
            if cs.get("ready"):
                ready += 1
            continue
        if isinstance(terminated, Mapping):
            if not terminated.get("reason"):
                if as_int(terminated.get("signal")):
                    reason = f"Init:Signal:{as_int(terminated.get('signal'))}"
                else:
                    reason = f"Init:ExitCode:{as_int(terminated.get('exitCode'))}"
            else:
                reason = f"Init:{terminated['reason']}"
        elif (
            isinstance(waiting, Mapping)
            and waiting.get("reason")
            and waiting.get("reason") != "PodInitializing"
        ):
            reason = f"Init:{waiting['reason']}"
        else:
            reason = f"Init:{i}/{len(init_specs)}"
        initializing = True
        break
    if not initializing or _condition_true(conditions, "Initialized"):
        restarts = sidecar_restarts
        last_restart = last_sidecar_restart
        has_running = False
        for cs in reversed(as_list(st.get("containerStatuses"))):
            restarts += as_int(cs.get("restartCount"))
            last_restart = _later(last_restart, dig(cs, "lastState", "terminated", "finishedAt"))
            waiting = dig(cs, "state", "waiting")
            terminated = dig(cs, "state", "terminated")
            if isinstance(waiting, Mapping) and waiting.get("reason"):
                reason = waiting["reason"]
            elif isinstance(terminated, Mapping) and terminated.get("reason"):
                reason = terminated["reason"]
            elif isinstance(terminated, Mapping):
                if as_int(terminated.get("signal")):
                    reason = f"Signal:{as_int(terminated.get('signal'))}"
                else:
                    reason = f"ExitCode:{as_int(terminated.get('exitCode'))}"
            elif cs.get("ready") and isinstance(dig(cs, "state", "running"), Mapping):
                has_running = True
                ready += 1
        if reason == "Completed" and has_running:
            reason = "Running" if _condition_true(conditions, "Ready") else "NotReady"
    if metadata(pod).get("deletionTimestamp"):
        if st.get("reason") == "NodeLost":
            reason = "Unknown"
        elif phase not in ("Succeeded", "Failed"):
            reason = "Terminating"
    restarts_text = str(restarts)
    if restarts and last_restart is not None:
        ago = human_duration((now - last_restart).total_seconds())
        restarts_text = f"{restarts} ({ago} ago)"
    pod_ips = as_list(st.get("podIPs"))
    ip = (pod_ips[0].get("ip") if pod_ips else "") or NONE
    gates = as_list(spec.get("readinessGates"))
    gates_text = NONE
    if gates:
        true = 0
        for gate in gates:
            for cond in conditions:
                if cond.get("type") == gate.get("conditionType"):
                    true += cond.get("status") == "True"
                    break
        gates_text = f"{true}/{len(gates)}"
    return [
        name_of(pod),
        f"{ready}/{total}",
        reason,
        restarts_text,
        age(pod, now),
        ip,
        spec.get("nodeName") or NONE,
        st.get("nominatedNodeName") or NONE,
        gates_text,
    ]


def pod_conditions(pod: Obj) -> list[dict[str, str]] | None:
    phase = dig(pod, "status", "phase")
    if phase == "Succeeded":
        return [
            {
                "type": "Completed",
                "status": "True",
                "reason": "Succeeded",
                "message": "The pod has completed successfully.",
            }
        ]
    if phase == "Failed":
        return [
            {
                "type": "Completed",
                "status": "True",
                "reason": "Failed",
                "message": "The pod failed.",
            }
        ]
    return None
