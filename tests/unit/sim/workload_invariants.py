"""What a healthy cluster's objects agree on, as checks: each returns the problems it finds, in
words (an empty list: none), so a failing test says what is wrong with which object.

- :func:`pod_problems`: one pod's times (none after now, none before its creation) and states
  (restart counts and last states, CrashLoopBackOff and its back-off, phase and containers,
  readiness and its conditions);
- :func:`cluster_problems`: a whole set of objects (the demo's): every pod's, Deployments,
  ReplicaSets and Jobs counting their pods, Nodes Ready, Events about what happened.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

Obj = dict[str, Any]

EXIT_CODES = {"Completed": 0, "Error": 1, "OOMKilled": 137}
BACK_OFF = re.compile(r"^back-off (\d+)s restarting failed container=(\S+) pod=\S+$")


def parse_ts(value: str) -> datetime:
    return datetime.fromisoformat(value)


def back_off(restarts: int) -> int:
    """The kubelet's back-off after the crash of a container restarted ``restarts`` times."""
    return min(10 * 2 ** max(restarts - 1, 0), 300)


def _times(node: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """Every RFC 3339 time in ``node``, with where it is."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _times(value, f"{path}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _times(value, f"{path}[{i}]")
    elif isinstance(node, str) and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", node):
        yield path, node


def name_of(obj: Obj) -> str:
    meta = obj.get("metadata", {})
    return f"{obj.get('kind', '?')} {meta.get('namespace', '')}/{meta.get('name', '')}"


def time_problems(obj: Obj, *, now: datetime, created: datetime | None) -> list[str]:
    """Times after ``now``, or before ``created`` (the object's creation, when known)."""
    problems = []
    for where, text in _times({k: v for k, v in obj.items() if k != "metadata"}):
        when = parse_ts(text)
        if when > now:
            problems.append(f"{name_of(obj)}: {where} {text} is after now ({now:%H:%M:%S})")
        if created is not None and when < created:
            problems.append(f"{name_of(obj)}: {where} {text} is before its creation")
    for entry in obj.get("metadata", {}).get("managedFields", []):
        when = parse_ts(entry["time"])
        if when > now or (created is not None and when < created):
            problems.append(f"{name_of(obj)}: {entry['manager']}'s write at {entry['time']}")
    return problems


def _condition(pod: Obj, kind: str) -> Obj:
    conditions = pod.get("status", {}).get("conditions", [])
    return next((c for c in conditions if c.get("type") == kind), {})


def _container_problems(pod: Obj, cs: Obj) -> list[str]:
    who = f"{name_of(pod)} container {cs.get('name')}"
    problems = []
    restarts = cs.get("restartCount", 0)
    state, last = cs.get("state", {}), cs.get("lastState", {}).get("terminated")
    if restarts < 0:
        problems.append(f"{who}: restartCount {restarts}")
    if last is not None:
        if restarts < 1:
            problems.append(f"{who}: last state {last.get('reason')} but no restart")
        if parse_ts(last["startedAt"]) > parse_ts(last["finishedAt"]):
            problems.append(f"{who}: its last run ended before it started")
        if EXIT_CODES.get(last.get("reason", "")) != last.get("exitCode"):
            problems.append(f"{who}: last state {last.get('reason')} exit {last.get('exitCode')}")
    elif restarts:
        problems.append(f"{who}: {restarts} restarts and no last state to date them")
    if len(state) != 1:
        problems.append(f"{who}: states {sorted(state)}")
    running = state.get("running")
    if (
        running is not None
        and last is not None
        and parse_ts(running["startedAt"]) < parse_ts(last["finishedAt"])
    ):
        problems.append(f"{who}: running since before its last run ended")
    waiting = state.get("waiting", {})
    if waiting.get("reason") == "CrashLoopBackOff":
        match = BACK_OFF.match(waiting.get("message", ""))
        if restarts < 1 or last is None:
            problems.append(f"{who}: CrashLoopBackOff without a restart and its last state")
        elif match is None or match[2] != cs.get("name"):
            problems.append(f"{who}: CrashLoopBackOff message {waiting.get('message')!r}")
        elif int(match[1]) != back_off(restarts):
            problems.append(f"{who}: back-off {match[1]}s after {restarts} restarts")
    if cs.get("ready") and running is None:
        problems.append(f"{who}: ready but not running")
    if cs.get("started") != (running is not None):
        problems.append(f"{who}: started {cs.get('started')} while {sorted(state)}")
    if restarts and pod.get("spec", {}).get("restartPolicy") == "Never":
        problems.append(f"{who}: restarted under restartPolicy Never")
    return problems


def pod_problems(pod: Obj, *, now: datetime, created: datetime | None = None) -> list[str]:
    """What is wrong with ``pod`` at ``now`` (``created``: default its creationTimestamp)."""
    meta, spec, status = pod["metadata"], pod.get("spec", {}), pod.get("status", {})
    if created is None and meta.get("creationTimestamp"):
        created = parse_ts(meta["creationTimestamp"])
    problems = time_problems(pod, now=now, created=created)
    phase = status.get("phase")
    statuses = status.get("containerStatuses") or []
    who = name_of(pod)
    for cs in statuses:
        problems += _container_problems(pod, cs)
    states = [next(iter(cs.get("state") or {"?": {}})) for cs in statuses]
    reasons = [
        cs.get("state", {}).get(state, {}).get("reason")
        for cs, state in zip(statuses, states, strict=True)
    ]
    if not spec.get("nodeName"):
        scheduled = _condition(pod, "PodScheduled")
        if phase != "Pending" or statuses or scheduled.get("reason") != "Unschedulable":
            problems.append(f"{who}: unbound but {phase}, scheduled {scheduled.get('reason')}")
    elif phase == "Pending":
        if set(reasons) != {"ContainerCreating"} or "podIP" in status:
            problems.append(f"{who}: Pending with containers {reasons}")
    elif phase == "Running":
        if len(statuses) != len(spec.get("containers", [])):
            problems.append(f"{who}: Running with {len(statuses)} container statuses")
        if not all(
            s == "running" or r == "CrashLoopBackOff" for s, r in zip(states, reasons, strict=True)
        ):
            problems.append(f"{who}: Running with containers {states} {reasons}")
    elif phase == "Succeeded":
        if set(reasons) != {"Completed"}:
            problems.append(f"{who}: Succeeded with containers {reasons}")
    elif phase == "Failed":
        if set(states) != {"terminated"} or set(reasons) <= {"Completed"}:
            problems.append(f"{who}: Failed with containers {reasons}")
    else:
        problems.append(f"{who}: phase {phase}")
    all_ready = bool(statuses) and all(cs.get("ready") for cs in statuses)
    for kind in ("Ready", "ContainersReady"):
        condition = _condition(pod, kind)
        if condition and (condition.get("status") == "True") != all_ready:
            problems.append(
                f"{who}: {kind} {condition.get('status')}, containers ready {all_ready}"
            )
    return problems


def _by_kind(objects: Iterable[Obj]) -> dict[str, list[Obj]]:
    out: dict[str, list[Obj]] = {}
    for obj in objects:
        out.setdefault(obj["kind"], []).append(obj)
    return out


def _ready(pod: Obj) -> bool:
    return _condition(pod, "Ready").get("status") == "True"


def _owned(pods: list[Obj], kind: str, namespace: str, name: str) -> list[Obj]:
    return [
        p
        for p in pods
        if p["metadata"]["namespace"] == namespace
        and any(o["kind"] == kind and o["name"] == name for o in p["metadata"]["ownerReferences"])
    ]


def controller_problems(objects: Iterable[Obj]) -> list[str]:
    """Deployments, ReplicaSets and Jobs whose counts are not their pods'."""
    kinds = _by_kind(objects)
    pods = kinds.get("Pod", [])
    problems = []
    replicasets = kinds.get("ReplicaSet", [])
    for rs in replicasets:
        meta, status = rs["metadata"], rs["status"]
        mine = _owned(pods, "ReplicaSet", meta["namespace"], meta["name"])
        ready = sum(map(_ready, mine))
        counted = (
            rs["spec"]["replicas"],
            status.get("replicas", 0),
            status.get("readyReplicas", 0),
        )
        if counted != (len(mine), len(mine), ready):
            problems.append(f"{name_of(rs)}: counts {counted}, pods {len(mine)} ({ready} ready)")
    for deploy in kinds.get("Deployment", []):
        meta, status = deploy["metadata"], deploy["status"]
        owned = [
            rs
            for rs in replicasets
            if rs["metadata"]["namespace"] == meta["namespace"]
            and rs["metadata"]["ownerReferences"][0]["name"] == meta["name"]
        ]
        mine = [
            p
            for rs in owned
            for p in _owned(pods, "ReplicaSet", meta["namespace"], rs["metadata"]["name"])
        ]
        ready = sum(map(_ready, mine))
        version = deploy["spec"]["template"]["metadata"]["labels"].get("version")
        updated = sum(1 for p in mine if p["metadata"]["labels"].get("version") == version)
        counted = (
            deploy["spec"]["replicas"],
            status.get("replicas", 0),
            status.get("readyReplicas", 0),
            status.get("availableReplicas", 0),
            status.get("updatedReplicas", 0),
        )
        if counted != (len(mine), len(mine), ready, ready, updated):
            problems.append(
                f"{name_of(deploy)}: counts {counted}, pods {len(mine)} ({ready} ready, "
                f"{updated} up to date)"
            )
    for job in kinds.get("Job", []):
        meta, status = job["metadata"], job["status"]
        mine = _owned(pods, "Job", meta["namespace"], meta["name"])
        phases = [p["status"]["phase"] for p in mine]
        counted = (status.get("succeeded", 0), status.get("failed", 0))
        if counted != (phases.count("Succeeded"), phases.count("Failed")):
            problems.append(f"{name_of(job)}: counts {counted}, pods {phases}")
        complete = any(c["type"] == "Complete" for c in status.get("conditions", []))
        if complete != (status.get("succeeded", 0) >= job["spec"].get("completions", 1)):
            problems.append(f"{name_of(job)}: Complete {complete}, {counted[0]} succeeded")
    return problems


def event_problems(objects: Iterable[Obj]) -> list[str]:
    """Events about objects that are not there, or that tell what the object does not show; and
    failures no Event tells."""
    kinds = _by_kind(objects)
    known = {
        (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o
        for objs in kinds.values()
        for o in objs
    }
    problems = []
    told: set[tuple[str, str, str]] = set()
    for ev in kinds.get("Event", []):
        ref = ev["involvedObject"]
        obj = known.get((ref["kind"], ref.get("namespace", ""), ref["name"]))
        about = f"Event {ev['reason']} about {ref['kind']} {ref.get('namespace')}/{ref['name']}"
        if obj is None:
            problems.append(f"{about}: no such object")
            continue
        if parse_ts(ev["firstTimestamp"]) > parse_ts(ev["lastTimestamp"]):
            problems.append(f"{about}: last seen before first seen")
        if ref["kind"] != "Pod":
            continue
        container = re.fullmatch(r"spec\.containers\{(.+)\}", ref.get("fieldPath", ""))
        cs = next(
            (
                s
                for s in obj.get("status", {}).get("containerStatuses") or []
                if container and s["name"] == container[1]
            ),
            {},
        )
        state = cs.get("state", {})
        reason = ev["reason"]
        told.add((reason, ref["namespace"], ref["name"]))
        if reason == "FailedScheduling":
            ok = not obj["spec"].get("nodeName")
        elif reason == "Scheduled":
            ok = ev["message"].endswith(f" to {obj['spec'].get('nodeName')}")
        elif reason == "Pulling":
            ok = state.get("waiting", {}).get("reason") == "ContainerCreating"
        elif reason in ("Pulled", "Created", "Started"):
            ok = (bool(cs) and "waiting" not in state) or _crash_looping(cs)
            ok = ok and ev["count"] == cs.get("restartCount", 0) + 1
        elif reason == "BackOff":
            ok = _crash_looping(cs)
        elif reason == "Unhealthy":
            ok = "running" in state and not cs.get("ready")
        else:
            ok = False
        if not ok:
            problems.append(f"{about}: the pod does not show it (count {ev['count']})")
    for pod in kinds.get("Pod", []):
        meta = pod["metadata"]
        for cs in pod.get("status", {}).get("containerStatuses") or []:
            if _crash_looping(cs) and ("BackOff", meta["namespace"], meta["name"]) not in told:
                problems.append(f"{name_of(pod)}: backing off and no BackOff Event")
        unscheduled = not pod["spec"].get("nodeName")
        if unscheduled and ("FailedScheduling", meta["namespace"], meta["name"]) not in told:
            problems.append(f"{name_of(pod)}: unscheduled and no FailedScheduling Event")
    return problems


def _crash_looping(cs: Obj) -> bool:
    return bool(cs.get("state", {}).get("waiting", {}).get("reason") == "CrashLoopBackOff")


def cluster_problems(objects: Iterable[Obj], *, now: datetime) -> list[str]:
    """Everything wrong with a set of objects at ``now``, each created at its
    ``creationTimestamp`` (or, without one, at ``now``: as the demo is loaded)."""
    objects = list(objects)
    problems = []
    for obj in objects:
        created_at = obj["metadata"].get("creationTimestamp")
        created = parse_ts(created_at) if created_at else now
        if obj["kind"] == "Pod":
            problems += pod_problems(obj, now=now, created=created)
        else:
            problems += time_problems(obj, now=now, created=created)
        if obj["kind"] == "Node":
            ready = next(c for c in obj["status"]["conditions"] if c["type"] == "Ready")
            if ready["status"] != "True":
                problems.append(f"{name_of(obj)}: not Ready")
    return problems + controller_problems(objects) + event_problems(objects)
