"""Workloads: deployments, replicasets, statefulsets, daemonsets, jobs, cronjobs, replication
controllers, pod templates and controller revisions."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from cacheproxy.kube.printers.cells import (
    NONE,
    Obj,
    age,
    as_int,
    as_list,
    containers,
    dig,
    format_label_selector,
    format_labels,
    human_duration,
    metadata,
    name_of,
    parse_time,
    selector_string,
    since,
)


def print_deployment(dep: Obj, now: datetime) -> list[Any]:
    spec = dep.get("spec") or {}
    st = dep.get("status") or {}
    desired = as_int(spec.get("replicas"))
    names, images = containers(dig(spec, "template", "spec"))
    return [
        name_of(dep),
        f"{as_int(st.get('readyReplicas'))}/{desired}",
        as_int(st.get("updatedReplicas")),
        as_int(st.get("availableReplicas")),
        age(dep, now),
        names,
        images,
        selector_string(spec.get("selector")),
    ]


def print_statefulset(sts: Obj, now: datetime) -> list[Any]:
    spec = sts.get("spec") or {}
    names, images = containers(dig(spec, "template", "spec"))
    ready = as_int(dig(sts, "status", "readyReplicas"))
    return [
        name_of(sts),
        f"{ready}/{as_int(spec.get('replicas'))}",
        age(sts, now),
        names,
        images,
    ]


def print_daemonset(ds: Obj, now: datetime) -> list[Any]:
    spec = ds.get("spec") or {}
    st = ds.get("status") or {}
    node_selector = dig(spec, "template", "spec", "nodeSelector") or {}
    names, images = containers(dig(spec, "template", "spec"))
    return [
        name_of(ds),
        as_int(st.get("desiredNumberScheduled")),
        as_int(st.get("currentNumberScheduled")),
        as_int(st.get("numberReady")),
        as_int(st.get("updatedNumberScheduled")),
        as_int(st.get("numberAvailable")),
        ",".join(f"{k}={v}" for k, v in sorted(node_selector.items())) or NONE,
        age(ds, now),
        names,
        images,
        selector_string(spec.get("selector")),
    ]


def print_job(job: Obj, now: datetime) -> list[Any]:
    spec = job.get("spec") or {}
    st = job.get("status") or {}
    succeeded = as_int(st.get("succeeded"))
    if isinstance(spec.get("completions"), int) and not isinstance(spec["completions"], bool):
        completions = f"{succeeded}/{spec['completions']}"
    elif as_int(spec.get("parallelism")) > 1:
        completions = f"{succeeded}/1 of {as_int(spec.get('parallelism'))}"
    else:
        completions = f"{succeeded}/1"
    start = parse_time(st.get("startTime"))
    end = parse_time(st.get("completionTime"))
    duration = ""
    if start is not None:
        duration = human_duration(((end or now) - start).total_seconds())
    names, images = containers(dig(spec, "template", "spec"))
    return [
        name_of(job),
        _job_status(job),
        completions,
        duration,
        age(job, now),
        names,
        images,
        format_label_selector(spec.get("selector")),
    ]


def _job_status(job: Obj) -> str:
    """What a Job came to (1.32's Status column): its first true condition of these, in order."""
    true = {
        str(c.get("type"))
        for c in as_list(dig(job, "status", "conditions"))
        if isinstance(c, dict) and c.get("status") == "True"
    }
    if "Complete" in true:
        return "Complete"
    if "Failed" in true:
        return "Failed"
    if dig(job, "metadata", "deletionTimestamp"):
        return "Terminating"
    for kind in ("Suspended", "FailureTarget", "SuccessCriteriaMet"):
        if kind in true:
            return kind
    return "Running"


def print_cronjob(cj: Obj, now: datetime) -> list[Any]:
    spec = cj.get("spec") or {}
    st = cj.get("status") or {}
    suspend = spec.get("suspend")
    last = st.get("lastScheduleTime")
    job_spec = dig(spec, "jobTemplate", "spec")
    names, images = containers(dig(job_spec, "template", "spec"))
    return [
        name_of(cj),
        str(spec.get("schedule") or ""),
        NONE if spec.get("timeZone") is None else str(spec["timeZone"]),
        "<unset>" if not isinstance(suspend, bool) else str(suspend),
        len(as_list(st.get("active"))),
        NONE if last is None else since(last, now),
        age(cj, now),
        names,
        images,
        format_label_selector(dig(job_spec, "selector")),
    ]


def print_replicaset(rs: Obj, now: datetime) -> list[Any]:
    spec = rs.get("spec") or {}
    st = rs.get("status") or {}
    names, images = containers(dig(spec, "template", "spec"))
    return [
        name_of(rs),
        as_int(spec.get("replicas")),
        as_int(st.get("replicas")),
        as_int(st.get("readyReplicas")),
        age(rs, now),
        names,
        images,
        format_label_selector(spec.get("selector")),
    ]


def print_replicationcontroller(rc: Obj, now: datetime) -> list[Any]:
    """``printReplicationController``: a ReplicaSet's columns, its selector a plain label map."""
    spec = rc.get("spec") or {}
    st = rc.get("status") or {}
    names, images = containers(dig(spec, "template", "spec"))
    return [
        name_of(rc),
        as_int(spec.get("replicas")),
        as_int(st.get("replicas")),
        as_int(st.get("readyReplicas")),
        age(rc, now),
        names,
        images,
        format_labels(spec.get("selector")),
    ]


def print_podtemplate(template: Obj, now: datetime) -> list[Any]:
    """``printPodTemplate``: no age; the template's containers and pod labels."""
    inner = template.get("template") or {}
    names, images = containers(inner.get("spec"))
    return [name_of(template), names, images, format_labels(dig(inner, "metadata", "labels"))]


def print_controllerrevision(revision: Obj, now: datetime) -> list[Any]:
    """``printControllerRevision``: the controller as ``kind.group/name`` (lower-case kind and
    group, ``formatResourceName``), ``<none>`` without one."""
    controller = NONE
    for ref in as_list(metadata(revision).get("ownerReferences")):
        if isinstance(ref, dict) and ref.get("controller") is True:
            api_version = str(ref.get("apiVersion", ""))
            group = api_version.split("/")[0] if "/" in api_version else ""
            kind = str(ref.get("kind", ""))
            group_kind = f"{kind}.{group}" if group else kind
            name = str(ref.get("name", ""))
            controller = f"{group_kind.lower()}/{name}" if group_kind else name
            break
    return [name_of(revision), controller, as_int(revision.get("revision")), age(revision, now)]
