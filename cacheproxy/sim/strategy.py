"""What a write may change, per kind: the API server's registry strategies, for the simulator.

Every built-in kind with a ``status`` has a ``/status`` subresource, and the two split the object
between them (``PrepareForCreate`` / ``PrepareForUpdate`` of each kind's strategy in
``pkg/registry``):

- a **create** sets the status the server starts with (a pod is ``Pending`` with its QoS class, a
  ReplicaSet has ``replicas: 0``, …) whatever the body says;
- an **update of the main resource** keeps the stored status: ``.status`` in the body is ignored;
- an **update of ``/status``** keeps the stored spec; metadata may change, but for what a kind's
  status strategy protects (a Deployment's labels, a pod's ownerReferences).

Pods also have ``/binding`` (what the scheduler POSTs): a ``Binding`` sets ``spec.nodeName`` once,
with the binding's annotations and the ``PodScheduled`` condition; a bound pod is a 409.

Kinds without a status subresource (ConfigMaps, Secrets, Events, custom resources …) keep whatever
the body says. Objects loaded through the Python API (:meth:`Simulator.load`, the store) bypass
all of this, as objects restored into etcd would.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from cacheproxy.kube import status
from cacheproxy.kube.resources import ResourceType
from cacheproxy.sim import statuses

__all__ = [
    "bind",
    "has_status",
    "prepare_create",
    "prepare_status_update",
    "prepare_update",
    "subresources",
]

Obj = dict[str, Any]

_ZERO_DAEMONSET = {
    "currentNumberScheduled": 0,
    "numberMisscheduled": 0,
    "desiredNumberScheduled": 0,
    "numberReady": 0,
}


def _pod_status(pod: Obj) -> Obj:
    return {"phase": "Pending", "qosClass": qos_class(pod)}


def _kept(pod: Obj) -> Obj:
    """Nodes keep the status they are created with (the kubelet registers with it)."""
    return copy.deepcopy(pod.get("status") or {})


def _fixed(value: Obj) -> Callable[[Obj], Obj]:
    return lambda _: copy.deepcopy(value)


_CREATE_STATUS: dict[tuple[str, str], Callable[[Obj], Obj]] = {
    ("", "pods"): _pod_status,
    ("", "services"): _fixed({"loadBalancer": {}}),
    ("", "persistentvolumeclaims"): _fixed({"phase": "Pending"}),
    ("", "persistentvolumes"): _fixed({"phase": "Pending"}),
    ("", "namespaces"): _fixed({"phase": "Active"}),
    ("", "nodes"): _kept,
    ("", "replicationcontrollers"): _fixed({"replicas": 0}),
    ("", "resourcequotas"): _fixed({}),
    (
        "policy",
        "poddisruptionbudgets",
    ): _fixed(
        {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}
    ),
    ("apps", "deployments"): _fixed({}),
    ("apps", "replicasets"): _fixed({"replicas": 0}),
    ("apps", "statefulsets"): _fixed({"replicas": 0, "availableReplicas": 0}),
    ("apps", "daemonsets"): _fixed(_ZERO_DAEMONSET),
    ("batch", "jobs"): _fixed({}),
    ("batch", "cronjobs"): _fixed({}),
    ("networking.k8s.io", "ingresses"): _fixed({"loadBalancer": {}}),
    ("apiextensions.k8s.io", "customresourcedefinitions"): _fixed({}),
}
"""The kinds with a ``/status`` subresource, and the status a create gives them."""

_STATUS_KEEPS_METADATA: dict[tuple[str, str], tuple[str, ...]] = {
    # podStatusStrategy: old kubelets corrupted owner references; garbage collection needs them.
    ("", "pods"): ("ownerReferences",),
    # deploymentStatusStrategy (1.28 and current): the labels belong to the main resource.
    ("apps", "deployments"): ("labels",),
}

_SUBRESOURCES: dict[tuple[str, str], tuple[str, ...]] = {("", "pods"): ("binding", "status")}


def has_status(rtype: ResourceType) -> bool:
    """Whether ``rtype`` has a ``/status`` subresource."""
    return (rtype.group, rtype.resource) in _CREATE_STATUS


def subresources(rtype: ResourceType) -> tuple[str, ...]:
    """The subresources the simulator serves for ``rtype``, in discovery's (sorted) order."""
    key = (rtype.group, rtype.resource)
    return _SUBRESOURCES.get(key, ("status",) if key in _CREATE_STATUS else ())


def prepare_create(rtype: ResourceType, obj: Obj) -> None:
    """Set the status a new object starts with (in place)."""
    initial = _CREATE_STATUS.get((rtype.group, rtype.resource))
    if initial is not None:
        obj["status"] = initial(obj)


def prepare_update(rtype: ResourceType, new: Obj, old: Obj) -> None:
    """An update of the main resource: the stored status stays (in place)."""
    if has_status(rtype):
        _copy_field(new, old, "status")


def prepare_status_update(rtype: ResourceType, new: Obj, old: Obj) -> None:
    """An update of ``/status``: the stored spec (and what the kind protects) stays (in place)."""
    key = (rtype.group, rtype.resource)
    for field in [k for k in (*new, *old) if k not in ("kind", "apiVersion", "metadata", "status")]:
        _copy_field(new, old, field)
    meta, old_meta = new.setdefault("metadata", {}), old.get("metadata", {})
    for field in _STATUS_KEEPS_METADATA.get(key, ()):
        _copy_field(meta, old_meta, field)


def validate_status(rtype: ResourceType, obj: Obj) -> None:
    """A ``/status`` write's validation that the simulator models (1.32's Services: only a
    LoadBalancer has load-balancer ingress points); a 422 as the API server's."""
    if (rtype.group, rtype.resource) != ("", "services"):
        return
    ingress = ((obj.get("status") or {}).get("loadBalancer") or {}).get("ingress")
    if ingress and (obj.get("spec") or {}).get("type") != "LoadBalancer":
        cause = status.forbidden_cause(
            "status.loadBalancer.ingress", "may only be used when `spec.type` is 'LoadBalancer'"
        )
        name = str((obj.get("metadata") or {}).get("name", ""))
        raise status.invalid(kind=rtype.kind, name=name, causes=[cause])


def _copy_field(new: Obj, old: Obj, field: str) -> None:
    if field in old:
        new[field] = copy.deepcopy(old[field])
    else:
        new.pop(field, None)


def bind(pod: Obj, binding: Any, *, name: str, now: str) -> Obj:
    """The pod bound as ``binding`` asks (``BindingREST.setPodHostAndAnnotations``): a new object
    to store. 400 for a binding of another pod, 409 when the pod is already bound."""
    if not isinstance(binding, dict):
        raise status.bad_request("the request body must be a JSON object")
    meta = binding.get("metadata") or {}
    if meta.get("name", name) != name:
        raise status.bad_request("name in URL does not match name in Binding object")
    target = (binding.get("target") or {}).get("name") or ""
    if not target:
        raise statuses.validation_failure("target.name: Required value")
    bound = copy.deepcopy(pod)
    spec = bound.setdefault("spec", {})
    if spec.get("nodeName"):
        raise statuses.conflict(
            resource="pods/binding",
            name=name,
            why=f'pod {name} is already assigned to node "{spec["nodeName"]}"',
        )
    spec["nodeName"] = target
    annotations = meta.get("annotations") or {}
    if annotations:
        bound["metadata"].setdefault("annotations", {}).update(annotations)
    conditions = bound.setdefault("status", {}).setdefault("conditions", [])
    scheduled = {
        "type": "PodScheduled",
        "status": "True",
        "lastProbeTime": None,
        "lastTransitionTime": now,
    }
    for i, condition in enumerate(conditions):
        if condition.get("type") == "PodScheduled":
            conditions[i] = scheduled
            break
    else:
        conditions.append(scheduled)
    return bound


def qos_class(pod: Obj) -> str:
    """The pod's QoS class (``qos.GetPodQOS``): Guaranteed when every container limits CPU and
    memory and requests what it limits, BestEffort when none requests or limits anything."""
    spec = pod.get("spec") or {}
    containers = [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]
    requests: dict[str, list[str]] = {}
    limits: dict[str, list[str]] = {}
    guaranteed = True
    for container in containers:
        resources = container.get("resources") or {}
        req = {k: str(v) for k, v in (resources.get("requests") or {}).items()}
        lim = {k: str(v) for k, v in (resources.get("limits") or {}).items()}
        for k, v in req.items():
            requests.setdefault(k, []).append(v)
        for k, v in lim.items():
            limits.setdefault(k, []).append(v)
        if not {"cpu", "memory"} <= lim.keys() or any(
            req.get(k, lim[k]) != lim[k] for k in ("cpu", "memory")
        ):
            guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"
