"""Per-kind Table cells, as the API server's ``pkg/printers/internalversion/printers.go`` (1.28).

Each printer is a pure function of one object (its JSON) and the time "now" (for ages) returning
the row's cells in the order of :data:`cacheproxy.kube.columns.COLUMNS`. The API server renders
Tables as ``-o wide`` would (``GenerateOptions{Wide: true}``): priority-1 columns are always
filled and kubectl hides them unless asked. Kinds without a printer get :func:`print_default`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from cacheproxy.kube.printers.admin import (
    print_csidriver,
    print_csinode,
    print_lease,
    print_poddisruptionbudget,
    print_resourcequota,
    print_storageclass,
)
from cacheproxy.kube.printers.cells import Obj, Printer, human_duration, metadata, name_of
from cacheproxy.kube.printers.core import (
    print_configmap,
    print_event,
    print_namespace,
    print_node,
    print_node_with_architecture,
    print_pv,
    print_pvc,
    print_secret,
    print_serviceaccount,
)
from cacheproxy.kube.printers.network import (
    print_endpoints,
    print_endpointslice,
    print_ingress,
    print_service,
)
from cacheproxy.kube.printers.pods import pod_conditions, print_pod
from cacheproxy.kube.printers.workloads import (
    print_controllerrevision,
    print_cronjob,
    print_daemonset,
    print_deployment,
    print_job,
    print_podtemplate,
    print_replicaset,
    print_replicationcontroller,
    print_statefulset,
)

__all__ = [
    "PRINTERS",
    "PRINTERS_1_36",
    "Obj",
    "Printer",
    "human_duration",
    "metadata",
    "pod_conditions",
    "print_default",
    "print_pod",
]


def print_default(obj: Obj, now: datetime) -> list[Any]:
    """The API server's default Table for kinds without a printer: Name, Created At."""
    return [name_of(obj), metadata(obj).get("creationTimestamp")]


PRINTERS: dict[tuple[str, str], Printer] = {
    ("", "pods"): print_pod,
    ("", "namespaces"): print_namespace,
    ("", "configmaps"): print_configmap,
    ("", "secrets"): print_secret,
    ("", "serviceaccounts"): print_serviceaccount,
    ("", "nodes"): print_node,
    ("", "services"): print_service,
    ("", "endpoints"): print_endpoints,
    ("", "persistentvolumeclaims"): print_pvc,
    ("", "persistentvolumes"): print_pv,
    ("", "events"): print_event,
    ("apps", "deployments"): print_deployment,
    ("apps", "replicasets"): print_replicaset,
    ("apps", "statefulsets"): print_statefulset,
    ("apps", "daemonsets"): print_daemonset,
    ("batch", "jobs"): print_job,
    ("batch", "cronjobs"): print_cronjob,
    ("networking.k8s.io", "ingresses"): print_ingress,
    ("", "replicationcontrollers"): print_replicationcontroller,
    ("", "resourcequotas"): print_resourcequota,
    ("", "limitranges"): print_default,
    ("", "podtemplates"): print_podtemplate,
    ("apps", "controllerrevisions"): print_controllerrevision,
    ("discovery.k8s.io", "endpointslices"): print_endpointslice,
    ("coordination.k8s.io", "leases"): print_lease,
    ("policy", "poddisruptionbudgets"): print_poddisruptionbudget,
    ("storage.k8s.io", "storageclasses"): print_storageclass,
    ("storage.k8s.io", "csinodes"): print_csinode,
    ("storage.k8s.io", "csidrivers"): print_csidriver,
    ("rbac.authorization.k8s.io", "clusterroles"): print_default,
    ("apiextensions.k8s.io", "customresourcedefinitions"): print_default,
}
"""Exact printers (one per ``columns.COLUMNS`` entry); other kinds use the default Table."""

PRINTERS_1_36: dict[tuple[str, str], Printer] = {
    **PRINTERS,
    ("", "nodes"): print_node_with_architecture,
}
"""The printers of 1.36, where its cells differ from 1.32's (the same columns otherwise)."""
