"""An app's database migration Job (``<app>-db-migrate``) and the pods it ran.

The Job is what a client sends (its pod template labelled ``app`` only: the API server generates
its selector and the ``controller-uid`` labels, and refuses a selector it did not generate), with
the status the job controller writes from its pods. Its pods are the ones the job controller made:
``restartPolicy: Never``, one ``migrate`` container, labelled and owned as that controller does
(the uid derived from the Job's name, as a ReplicaSet's pods' owner uid is).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import datetime

from cacheproxy.sim.workload.derive import JsonObject, _moment, _pod_cidr_prefix, _suffix, _ts, _uid
from cacheproxy.sim.workload.managed_fields import _managed
from cacheproxy.sim.workload.pod_status import _kubelet_fields, _pod_status
from cacheproxy.sim.workload.replicapods import _admitted_spec
from cacheproxy.sim.workload.templates import _CONTAINER_TAIL, _app

__all__ = ["job_name", "make_job", "make_job_pod"]


def job_name(app: str) -> str:
    """The name of ``app``'s migration Job."""
    return f"{app}-db-migrate"


def _template_spec(namespace: str, app: str) -> JsonObject:
    a = _app(app)
    migrate = {
        "name": "migrate",
        "image": f"{a.image}:{a.current[1:]}",
        "args": ["migrate", "--to=latest"],
        "env": [
            {
                "name": "DATABASE_URL",
                "value": f"postgres://{app}@db-0.{namespace}.svc:5432/{app}",
            }
        ],
        "resources": {
            "limits": {"memory": "256Mi"},
            "requests": {"cpu": "100m", "memory": "128Mi"},
        },
        **_CONTAINER_TAIL,
    }
    return {
        "volumes": [],
        "containers": [migrate],
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "securityContext": {},
        "schedulerName": "default-scheduler",
    }


def make_job(
    rng: random.Random,
    *,
    namespace: str,
    app: str,
    pods: Sequence[JsonObject],
    now: datetime | None = None,
) -> JsonObject:
    """``app``'s migration Job, its status counting ``pods`` (those it ran: succeeded, failed,
    active); Complete once one succeeded. ``now``: when it started (and completed)."""
    at = _ts(now if now is not None else _moment(rng))
    name = job_name(app)
    template_spec = _template_spec(namespace, app)
    template_spec.pop("volumes")
    phases = [p.get("status", {}).get("phase") for p in pods]
    succeeded, failed = phases.count("Succeeded"), phases.count("Failed")
    active = len(phases) - succeeded - failed
    status: JsonObject = {}
    if succeeded:
        # As the job controller writes them since 1.31; 1.32's API server refuses Complete
        # without SuccessCriteriaMet.
        status["conditions"] = [
            {"type": kind, "status": "True", "lastProbeTime": at, "lastTransitionTime": at}
            for kind in ("SuccessCriteriaMet", "Complete")
        ]
    status["startTime"] = at
    if succeeded:
        status["completionTime"] = at
    status |= {k: v for k, v in (("active", active), ("succeeded", succeeded)) if v}
    if failed:
        status["failed"] = failed
    status |= {"uncountedTerminatedPods": {}, "ready": 0}
    return {
        "kind": "Job",
        "apiVersion": "batch/v1",
        # The uid its pods' owner references and its Events name (kept by the simulator, which
        # takes a uid a create gives; a real API server assigns its own).
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app": app},
            "uid": _uid(namespace, name),
        },
        "spec": {
            "parallelism": 1,
            "completions": 1,
            "backoffLimit": 6,
            "template": {
                "metadata": {"creationTimestamp": None, "labels": {"app": app}},
                "spec": template_spec,
            },
            "completionMode": "NonIndexed",
            "suspend": False,
        },
        "status": status,
    }


def make_job_pod(
    rng: random.Random,
    *,
    namespace: str,
    app: str,
    node: str,
    phase: str = "Succeeded",
    failure: str = "Error",
    now: datetime | None = None,
) -> JsonObject:
    """A pod of ``app``'s migration Job on ``node``: by ``phase``, its ``migrate`` container
    Completed (Succeeded), ended in ``failure`` (Failed), running or being created. ``now``: when
    it ran (as :func:`~cacheproxy.sim.workload.make_pod`'s)."""
    name = job_name(app)
    uid = _uid(namespace, name)
    labels = {
        "app": app,
        "batch.kubernetes.io/controller-uid": uid,
        "batch.kubernetes.io/job-name": name,
        "controller-uid": uid,
        "job-name": name,
    }
    sent: JsonObject = {
        "generateName": f"{name}-",
        "labels": labels,
        "ownerReferences": [
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": name,
                "uid": uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    meta: JsonObject = {"name": f"{name}-{_suffix(rng)}", "namespace": namespace} | sent
    template = _template_spec(namespace, app)
    spec = _admitted_spec(template, node, f"kube-api-access-{_suffix(rng)}")
    template.pop("volumes")
    at = now if now is not None else _moment(rng)
    pod_ip = f"{_pod_cidr_prefix(node)}.{rng.randint(2, 254)}"
    status = _pod_status(rng, spec, phase=phase, at=at, pod_ip=pod_ip, failure=failure)
    meta["managedFields"] = [
        _managed("kube-controller-manager", at, {"metadata": sent, "spec": template}),
        _managed("kubelet", at, _kubelet_fields(status), sub="status"),
    ]
    return {"kind": "Pod", "apiVersion": "v1", "metadata": meta, "spec": spec, "status": status}
