"""Server-side ``meta.k8s.io`` Tables (what ``kubectl get`` asks for), DESIGN §4.2.

Pure: objects are decoded JSON dicts, "now" is passed in (ages are relative to it). Cells follow
the API server's ``pkg/printers/internalversion/printers.go`` for the kinds in ``PRINTERS``;
every other kind gets the default Table (``Name``, ``Created At``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson

from cacheproxy.kube import status
from cacheproxy.kube.printers import COLUMNS, Column
from cacheproxy.kube.request import ACCEPTED_MEDIA_TYPES

__all__ = [
    "INCLUDE_OBJECT",
    "WatchTables",
    "column_definitions",
    "human_duration",
    "include_object",
    "negotiate_table",
    "table",
    "table_row",
]

Obj = Mapping[str, Any]
Row = dict[str, Any]
Printer = Callable[[Obj, datetime], list[Any]]

TABLE_VERSIONS = ("v1", "v1beta1")
INCLUDE_OBJECT = ("None", "Metadata", "Object")
NONE = "<none>"
UNKNOWN = "<unknown>"


# --------------------------------------------------------------------------- negotiation


def negotiate_table(accept: str) -> str | None:
    """The Table version (``v1``/``v1beta1``) the Accept header asks for, or None for plain JSON.

    Clauses are taken in order and the first acceptable one wins: a ``meta.k8s.io`` Table in a
    served version, or plain JSON (no ``as=``). Anything else (another ``as=``, YAML, protobuf)
    is skipped; nothing acceptable is a 406.
    """
    if not accept:
        return None
    for clause in accept.split(","):
        media, *raw_params = (p.strip() for p in clause.split(";"))
        if media.lower() not in ("application/json", "application/*", "*/*"):
            continue
        params: dict[str, str] = {}
        for param in raw_params:
            key, _, value = param.partition("=")
            params[key.strip().lower()] = value.strip()
        as_kind = params.get("as")
        if as_kind is None:
            return None
        if (
            as_kind == "Table"
            and params.get("g") == "meta.k8s.io"
            and params.get("v") in TABLE_VERSIONS
        ):
            return params["v"]
    raise status.not_acceptable(ACCEPTED_MEDIA_TYPES)


def include_object(query: Mapping[str, Sequence[str]]) -> str:
    """``includeObject`` (default ``Metadata``); any other value is a 400, as the API server."""
    values = query.get("includeObject")
    value = values[0] if values else ""
    if not value:
        return "Metadata"
    if value not in INCLUDE_OBJECT:
        raise status.bad_request(
            f'includeObject: Unsupported value: "{value}": supported values: '
            '"None", "Metadata", "Object"'
        )
    return value


# --------------------------------------------------------------------------- time


def parse_time(text: object) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def human_duration(seconds_float: float) -> str:
    """apimachinery ``duration.HumanDuration``."""
    seconds = int(seconds_float)
    if seconds_float < 0 and seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        s = seconds % 60
        return f"{minutes}m" if s == 0 else f"{minutes}m{s}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = seconds // 3600
    if hours < 8:
        m = minutes % 60
        return f"{hours}h" if m == 0 else f"{hours}h{m}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        h = hours % 24
        return f"{hours // 24}d" if h == 0 else f"{hours // 24}d{h}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        dy = (hours // 24) % 365
        years = hours // 24 // 365
        return f"{years}y" if dy == 0 else f"{years}y{dy}d"
    return f"{hours // 24 // 365}y"


def since(text: object, now: datetime) -> str:
    """``translateTimestampSince``: the age of an RFC 3339 timestamp, ``<unknown>`` if unset."""
    when = parse_time(text)
    if when is None:
        return UNKNOWN
    return human_duration((now - when).total_seconds())


# --------------------------------------------------------------------------- helpers


def _meta(obj: Obj) -> Obj:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _get(obj: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _name(obj: Obj) -> str:
    return str(_meta(obj).get("name", ""))


def _age(obj: Obj, now: datetime) -> str:
    return since(_meta(obj).get("creationTimestamp"), now)


def selector_string(selector: Any) -> str:
    """``metav1.LabelSelectorAsSelector(sel).String()``: requirements sorted by key."""
    if not isinstance(selector, Mapping):
        return ""
    reqs: list[tuple[str, str]] = []
    for key, value in (selector.get("matchLabels") or {}).items():
        reqs.append((key, f"{key}={value}"))
    for expr in _list(selector.get("matchExpressions")):
        key, op = expr.get("key", ""), expr.get("operator", "")
        values = ",".join(sorted(expr.get("values") or []))
        if op == "In":
            reqs.append((key, f"{key} in ({values})"))
        elif op == "NotIn":
            reqs.append((key, f"{key} notin ({values})"))
        elif op == "Exists":
            reqs.append((key, key))
        elif op == "DoesNotExist":
            reqs.append((key, f"!{key}"))
    return ",".join(text for _, text in sorted(reqs, key=lambda r: r[0]))


def _containers(spec: Any) -> tuple[str, str]:
    containers = _list(_get(spec, "containers"))
    return (
        ",".join(str(c.get("name", "")) for c in containers),
        ",".join(str(c.get("image", "")) for c in containers),
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
    conditions = _list(st.get("conditions"))
    restarts = 0
    sidecar_restarts = 0
    total = len(_list(spec.get("containers")))
    ready = 0
    last_restart: datetime | None = None
    last_sidecar_restart: datetime | None = None
    phase = st.get("phase") or ""
    reason = st.get("reason") or phase
    for cond in conditions:
        if cond.get("type") == "PodScheduled" and cond.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"
    init_specs = {c.get("name"): c for c in _list(spec.get("initContainers"))}
    total += sum(1 for c in init_specs.values() if _is_restartable_init(c))
    init_statuses = _list(st.get("initContainerStatuses"))
    initializing = False
    for i, cs in enumerate(init_statuses):
        restarts += _int(cs.get("restartCount"))
        finished = _get(cs, "lastState", "terminated", "finishedAt")
        last_restart = _later(last_restart, finished)
        sidecar = _is_restartable_init(init_specs.get(cs.get("name")))
        if sidecar:
            sidecar_restarts += _int(cs.get("restartCount"))
            last_sidecar_restart = _later(last_sidecar_restart, finished)
        terminated = _get(cs, "state", "terminated")
        waiting = _get(cs, "state", "waiting")
        if isinstance(terminated, Mapping) and _int(terminated.get("exitCode")) == 0:
            continue
        if sidecar and cs.get("started") is True:
            if cs.get("ready"):
                ready += 1
            continue
        if isinstance(terminated, Mapping):
            if not terminated.get("reason"):
                if _int(terminated.get("signal")):
                    reason = f"Init:Signal:{_int(terminated.get('signal'))}"
                else:
                    reason = f"Init:ExitCode:{_int(terminated.get('exitCode'))}"
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
        for cs in reversed(_list(st.get("containerStatuses"))):
            restarts += _int(cs.get("restartCount"))
            last_restart = _later(last_restart, _get(cs, "lastState", "terminated", "finishedAt"))
            waiting = _get(cs, "state", "waiting")
            terminated = _get(cs, "state", "terminated")
            if isinstance(waiting, Mapping) and waiting.get("reason"):
                reason = waiting["reason"]
            elif isinstance(terminated, Mapping) and terminated.get("reason"):
                reason = terminated["reason"]
            elif isinstance(terminated, Mapping):
                if _int(terminated.get("signal")):
                    reason = f"Signal:{_int(terminated.get('signal'))}"
                else:
                    reason = f"ExitCode:{_int(terminated.get('exitCode'))}"
            elif cs.get("ready") and isinstance(_get(cs, "state", "running"), Mapping):
                has_running = True
                ready += 1
        if reason == "Completed" and has_running:
            reason = "Running" if _condition_true(conditions, "Ready") else "NotReady"
    if _meta(pod).get("deletionTimestamp"):
        if st.get("reason") == "NodeLost":
            reason = "Unknown"
        elif phase not in ("Succeeded", "Failed"):
            reason = "Terminating"
    restarts_text = str(restarts)
    if restarts and last_restart is not None:
        age = human_duration((now - last_restart).total_seconds())
        restarts_text = f"{restarts} ({age} ago)"
    pod_ips = _list(st.get("podIPs"))
    ip = (pod_ips[0].get("ip") if pod_ips else "") or NONE
    gates = _list(spec.get("readinessGates"))
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
        _name(pod),
        f"{ready}/{total}",
        reason,
        restarts_text,
        _age(pod, now),
        ip,
        spec.get("nodeName") or NONE,
        st.get("nominatedNodeName") or NONE,
        gates_text,
    ]


def _pod_conditions(pod: Obj) -> list[dict[str, str]] | None:
    phase = _get(pod, "status", "phase")
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


def print_namespace(ns: Obj, now: datetime) -> list[Any]:
    return [_name(ns), _get(ns, "status", "phase") or "", _age(ns, now)]


def print_configmap(cm: Obj, now: datetime) -> list[Any]:
    count = len(cm.get("data") or {}) + len(cm.get("binaryData") or {})
    return [_name(cm), count, _age(cm, now)]


def print_secret(secret: Obj, now: datetime) -> list[Any]:
    count = len(secret.get("data") or {})
    return [_name(secret), secret.get("type") or "", count, _age(secret, now)]


def print_serviceaccount(sa: Obj, now: datetime) -> list[Any]:
    return [_name(sa), len(_list(sa.get("secrets"))), _age(sa, now)]


def _node_roles(labels: Mapping[str, str]) -> list[str]:
    roles: set[str] = set()
    for key, value in labels.items():
        if key.startswith("node-role.kubernetes.io/"):
            role = key.removeprefix("node-role.kubernetes.io/")
            if role:
                roles.add(role)
        elif key == "kubernetes.io/role" and value:
            roles.add(value)
    return sorted(roles)


def _node_address(node: Obj, kind: str) -> str:
    for address in _list(_get(node, "status", "addresses")):
        if address.get("type") == kind:
            return str(address.get("address", ""))
    return NONE


def print_node(node: Obj, now: datetime) -> list[Any]:
    conditions = {c.get("type"): c for c in _list(_get(node, "status", "conditions"))}
    states: list[str] = []
    ready = conditions.get("Ready")
    if ready is not None:
        states.append("Ready" if ready.get("status") == "True" else "NotReady")
    if not states:
        states.append("Unknown")
    if _get(node, "spec", "unschedulable"):
        states.append("SchedulingDisabled")
    roles = ",".join(_node_roles(_meta(node).get("labels") or {})) or NONE
    info = _get(node, "status", "nodeInfo") or {}
    return [
        _name(node),
        ",".join(states),
        roles,
        _age(node, now),
        info.get("kubeletVersion") or "",
        _node_address(node, "InternalIP"),
        _node_address(node, "ExternalIP"),
        info.get("osImage") or UNKNOWN,
        info.get("kernelVersion") or UNKNOWN,
        info.get("containerRuntimeVersion") or UNKNOWN,
    ]


def print_deployment(dep: Obj, now: datetime) -> list[Any]:
    spec = dep.get("spec") or {}
    st = dep.get("status") or {}
    desired = _int(spec.get("replicas"))
    containers, images = _containers(_get(spec, "template", "spec"))
    return [
        _name(dep),
        f"{_int(st.get('readyReplicas'))}/{desired}",
        _int(st.get("updatedReplicas")),
        _int(st.get("availableReplicas")),
        _age(dep, now),
        containers,
        images,
        selector_string(spec.get("selector")),
    ]


def print_statefulset(sts: Obj, now: datetime) -> list[Any]:
    spec = sts.get("spec") or {}
    containers, images = _containers(_get(spec, "template", "spec"))
    ready = _int(_get(sts, "status", "readyReplicas"))
    return [
        _name(sts),
        f"{ready}/{_int(spec.get('replicas'))}",
        _age(sts, now),
        containers,
        images,
    ]


def print_daemonset(ds: Obj, now: datetime) -> list[Any]:
    spec = ds.get("spec") or {}
    st = ds.get("status") or {}
    node_selector = _get(spec, "template", "spec", "nodeSelector") or {}
    containers, images = _containers(_get(spec, "template", "spec"))
    return [
        _name(ds),
        _int(st.get("desiredNumberScheduled")),
        _int(st.get("currentNumberScheduled")),
        _int(st.get("numberReady")),
        _int(st.get("updatedNumberScheduled")),
        _int(st.get("numberAvailable")),
        ",".join(f"{k}={v}" for k, v in sorted(node_selector.items())) or NONE,
        _age(ds, now),
        containers,
        images,
        selector_string(spec.get("selector")),
    ]


def format_labels(labels: Any) -> str:
    """``labels.FormatLabels``: ``k=v`` sorted by key, ``<none>`` if empty."""
    if not isinstance(labels, Mapping) or not labels:
        return NONE
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def format_label_selector(selector: Any) -> str:
    """``metav1.FormatLabelSelector``: the selector string, ``<none>`` if it selects all/none."""
    return selector_string(selector) or NONE


def _load_balancer_ips(svc: Obj) -> list[str]:
    found: set[str] = set()
    for ingress in _list(_get(svc, "status", "loadBalancer", "ingress")):
        if not isinstance(ingress, Mapping):
            continue
        if ingress.get("ip"):
            found.add(str(ingress["ip"]))
        elif ingress.get("hostname"):
            found.add(str(ingress["hostname"]))
    return sorted(found)


def service_external_ip(svc: Obj) -> str:
    """``getServiceExternalIP`` (wide: load-balancer addresses are not truncated)."""
    spec = svc.get("spec") or {}
    svc_type = spec.get("type")
    external = [str(ip) for ip in _list(spec.get("externalIPs"))]
    if svc_type in ("ClusterIP", "NodePort"):
        return ",".join(external) or NONE
    if svc_type == "LoadBalancer":
        addresses = _load_balancer_ips(svc) + external
        return ",".join(addresses) or "<pending>"
    if svc_type == "ExternalName":
        return str(spec.get("externalName") or "")
    return UNKNOWN


def service_ports(ports: Any) -> str:
    """``makePortString``: ``port/proto`` or ``port:nodePort/proto``, comma-separated."""
    pieces: list[str] = []
    for port in _list(ports):
        protocol = port.get("protocol") or ""
        node_port = _int(port.get("nodePort"))
        if node_port > 0:
            pieces.append(f"{_int(port.get('port'))}:{node_port}/{protocol}")
        else:
            pieces.append(f"{_int(port.get('port'))}/{protocol}")
    return ",".join(pieces)


def print_service(svc: Obj, now: datetime) -> list[Any]:
    spec = svc.get("spec") or {}
    cluster_ips = _list(spec.get("clusterIPs"))
    return [
        _name(svc),
        str(spec.get("type") or ""),
        str(cluster_ips[0]) if cluster_ips else NONE,
        service_external_ip(svc),
        service_ports(spec.get("ports")) or NONE,
        _age(svc, now),
        format_labels(spec.get("selector")),
    ]


_ACCESS_MODES = (
    ("ReadWriteOnce", "RWO"),
    ("ReadOnlyMany", "ROX"),
    ("ReadWriteMany", "RWX"),
    ("ReadWriteOncePod", "RWOP"),
)


def access_modes(modes: Any) -> str:
    """``GetAccessModesAsString``: short names in a fixed order, without duplicates."""
    present = set(_list(modes))
    return ",".join(short for mode, short in _ACCESS_MODES if mode in present)


def print_pvc(pvc: Obj, now: datetime) -> list[Any]:
    spec = pvc.get("spec") or {}
    st = pvc.get("status") or {}
    phase = str(st.get("phase") or "")
    if _meta(pvc).get("deletionTimestamp"):
        phase = "Terminating"
    volume = str(spec.get("volumeName") or "")
    capacity = modes = ""
    if volume:
        modes = access_modes(st.get("accessModes"))
        capacity = str(_get(st, "capacity", "storage") or "0")
    annotations = _meta(pvc).get("annotations") or {}
    storage_class = annotations.get("volume.beta.kubernetes.io/storage-class")
    if storage_class is None:
        storage_class = spec.get("storageClassName") or ""
    return [
        _name(pvc),
        phase,
        volume,
        capacity,
        modes,
        str(storage_class),
        _age(pvc, now),
        str(spec.get("volumeMode") or "<unset>"),
    ]


def print_event(event: Obj, now: datetime) -> list[Any]:
    first = since(event.get("firstTimestamp"), now)
    if parse_time(event.get("firstTimestamp")) is None:
        first = since(event.get("eventTime"), now)
    last = since(event.get("lastTimestamp"), now)
    if parse_time(event.get("lastTimestamp")) is None:
        last = first
    count = _int(event.get("count"))
    series = event.get("series")
    if isinstance(series, Mapping):
        last = since(series.get("lastObservedTime"), now)
        count = _int(series.get("count"))
    elif count == 0:
        count = 1
    involved = event.get("involvedObject") or {}
    kind = str(involved.get("kind") or "").lower()
    target = f"{kind}/{involved['name']}" if involved.get("name") else kind
    source = event.get("source") or {}
    component = source.get("component") or event.get("reportingComponent") or ""
    instance = source.get("host") or event.get("reportingInstance") or ""
    return [
        last,
        str(event.get("type") or ""),
        str(event.get("reason") or ""),
        target,
        str(involved.get("fieldPath") or ""),
        f"{component}, {instance}" if instance else str(component),
        str(event.get("message") or "").strip(),
        first,
        count,
        _name(event),
    ]


def print_job(job: Obj, now: datetime) -> list[Any]:
    spec = job.get("spec") or {}
    st = job.get("status") or {}
    succeeded = _int(st.get("succeeded"))
    if isinstance(spec.get("completions"), int) and not isinstance(spec["completions"], bool):
        completions = f"{succeeded}/{spec['completions']}"
    elif _int(spec.get("parallelism")) > 1:
        completions = f"{succeeded}/1 of {_int(spec.get('parallelism'))}"
    else:
        completions = f"{succeeded}/1"
    start = parse_time(st.get("startTime"))
    end = parse_time(st.get("completionTime"))
    duration = ""
    if start is not None:
        duration = human_duration(((end or now) - start).total_seconds())
    containers, images = _containers(_get(spec, "template", "spec"))
    return [
        _name(job),
        completions,
        duration,
        _age(job, now),
        containers,
        images,
        format_label_selector(spec.get("selector")),
    ]


def print_cronjob(cj: Obj, now: datetime) -> list[Any]:
    spec = cj.get("spec") or {}
    st = cj.get("status") or {}
    suspend = spec.get("suspend")
    last = st.get("lastScheduleTime")
    job_spec = _get(spec, "jobTemplate", "spec")
    containers, images = _containers(_get(job_spec, "template", "spec"))
    return [
        _name(cj),
        str(spec.get("schedule") or ""),
        "<unset>" if not isinstance(suspend, bool) else str(suspend),
        len(_list(st.get("active"))),
        NONE if last is None else since(last, now),
        _age(cj, now),
        containers,
        images,
        format_label_selector(_get(job_spec, "selector")),
    ]


PRINTERS: dict[tuple[str, str], Printer] = {
    ("", "pods"): print_pod,
    ("", "namespaces"): print_namespace,
    ("", "configmaps"): print_configmap,
    ("", "secrets"): print_secret,
    ("", "serviceaccounts"): print_serviceaccount,
    ("", "nodes"): print_node,
    ("apps", "deployments"): print_deployment,
    ("apps", "statefulsets"): print_statefulset,
    ("apps", "daemonsets"): print_daemonset,
    ("", "services"): print_service,
    ("", "persistentvolumeclaims"): print_pvc,
    ("", "events"): print_event,
    ("batch", "jobs"): print_job,
    ("batch", "cronjobs"): print_cronjob,
}
"""Exact printers (one per ``printers.COLUMNS`` entry); other kinds use the default Table."""


def print_default(obj: Obj, now: datetime) -> list[Any]:
    return [_name(obj), _meta(obj).get("creationTimestamp")]


# --------------------------------------------------------------------------- the Table


def _columns_of(group: str, resource: str) -> tuple[Column, ...]:
    if (group, resource) in PRINTERS:
        return COLUMNS[(group, resource)]
    return COLUMNS[("*", "default")]


def column_definitions(group: str, resource: str) -> list[dict[str, Any]]:
    return [
        {"name": n, "type": t, "format": f, "description": d, "priority": p}
        for n, t, f, p, d in _columns_of(group, resource)
    ]


def table_row(
    group: str,
    resource: str,
    obj: Obj,
    *,
    now: datetime,
    version: str = "v1",
    include: str = "Metadata",
) -> Row:
    printer = PRINTERS.get((group, resource), print_default)
    row: Row = {"cells": printer(obj, now)}
    if printer is print_pod:
        conditions = _pod_conditions(obj)
        if conditions:
            row["conditions"] = conditions
    if include == "Metadata":
        row["object"] = {
            "kind": "PartialObjectMetadata",
            "apiVersion": f"meta.k8s.io/{version}",
            "metadata": _meta(obj),
        }
    elif include == "Object":
        row["object"] = obj
    return row


def table(
    group: str,
    resource: str,
    objects: Iterable[Obj],
    *,
    now: datetime | None = None,
    version: str = "v1",
    include: str = "Metadata",
    resource_version: str = "",
    continue_token: str = "",
    remaining: int | None = None,
    with_columns: bool = True,
) -> dict[str, Any]:
    """A ``meta.k8s.io`` Table of ``objects`` (a list page, one object, or one watch event)."""
    when = now or datetime.now(UTC)
    meta: dict[str, Any] = {"resourceVersion": resource_version}
    if continue_token:
        meta["continue"] = continue_token
        if remaining is not None:
            meta["remainingItemCount"] = remaining
    return {
        "kind": "Table",
        "apiVersion": f"meta.k8s.io/{version}",
        "metadata": meta,
        "columnDefinitions": column_definitions(group, resource) if with_columns else [],
        "rows": [
            table_row(group, resource, obj, now=when, version=version, include=include)
            for obj in objects
        ],
    }


class WatchTables:
    """Rewrites watch event lines so each object is a one-row Table (``kubectl get -w``).

    Only the first Table carries ``columnDefinitions``; ERROR (Status) and BOOKMARK events pass
    through unchanged. Feed whole response chunks; a partial trailing line is kept for the next.
    """

    def __init__(
        self,
        group: str,
        resource: str,
        *,
        version: str = "v1",
        include: str = "Metadata",
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.group, self.resource, self.version, self.include = group, resource, version, include
        self.clock = clock
        self.first = True
        self._pending = b""

    def convert(self, chunk: bytes) -> bytes:
        data = self._pending + chunk
        end = data.rfind(b"\n") + 1
        self._pending = data[end:]
        out: list[bytes] = []
        for line in data[:end].splitlines():
            if not line.strip():
                continue
            event = orjson.loads(line)
            obj = event.get("object")
            if event.get("type") in ("ERROR", "BOOKMARK") or not isinstance(obj, dict):
                out.append(line + b"\n")
                continue
            event["object"] = table(
                self.group,
                self.resource,
                [obj],
                now=self.clock(),
                version=self.version,
                include=self.include,
                resource_version=str(_meta(obj).get("resourceVersion", "")),
                with_columns=self.first,
            )
            self.first = False
            out.append(orjson.dumps(event) + b"\n")
        return b"".join(out)
