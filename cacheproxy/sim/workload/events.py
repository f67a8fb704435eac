"""core/v1 Events the scheduler or a kubelet records about a pod."""

from __future__ import annotations

import random
from datetime import timedelta

from cacheproxy.sim.workload.derive import JsonObject, _hex, _moment, _parse_ts, _ts

__all__ = ["make_event"]


def make_event(rng: random.Random, *, namespace: str, involved_pod: JsonObject) -> JsonObject:
    """A core/v1 Event the scheduler or kubelet would record about ``involved_pod``."""
    meta = involved_pod["metadata"]
    pod, spec = meta["name"], involved_pod.get("spec", {})
    node = spec.get("nodeName", "")
    containers = spec.get("containers") or [{"name": "main", "image": "busybox:1.36"}]
    c = rng.choice(containers)
    choices: list[tuple[str, str, str]] = [
        ("Normal", "Scheduled", f"Successfully assigned {namespace}/{pod} to {node}"),
        ("Normal", "Pulled", f'Container image "{c["image"]}" already present on machine'),
        ("Normal", "Created", f"Created container: {c['name']}"),
        ("Normal", "Started", f"Started container {c['name']}"),
        ("Warning", "Unhealthy", "Readiness probe failed: HTTP probe failed with statuscode: 503"),
        ("Warning", "BackOff", f"Back-off restarting failed container {c['name']} in pod {pod}"),
    ]
    kind, reason, message = rng.choice(choices)
    involved: JsonObject = {"kind": "Pod", "namespace": namespace, "name": pod}
    if "uid" in meta:
        involved["uid"] = meta["uid"]
    involved["apiVersion"] = "v1"
    if "resourceVersion" in meta:
        involved["resourceVersion"] = meta["resourceVersion"]
    if reason != "Scheduled":
        involved["fieldPath"] = f"spec.containers{{{c['name']}}}"
    start = involved_pod.get("status", {}).get("startTime")
    first = _parse_ts(start) if start else _moment(rng)
    count = rng.randint(2, 30) if kind == "Warning" else 1
    last = first + timedelta(seconds=rng.randint(0, 600) if count > 1 else 0)
    source = (
        {"component": "default-scheduler"}
        if reason == "Scheduled"
        else {"component": "kubelet", "host": node}
    )
    return {
        "kind": "Event",
        "apiVersion": "v1",
        "metadata": {"name": f"{pod}.{_hex(rng, 16)}", "namespace": namespace},
        "involvedObject": involved,
        "reason": reason,
        "message": message,
        "source": source,
        "firstTimestamp": _ts(first),
        "lastTimestamp": _ts(last),
        "count": count,
        "type": kind,
        "eventTime": None,
        "reportingComponent": source["component"],
        "reportingInstance": node if reason != "Scheduled" else "",
    }
