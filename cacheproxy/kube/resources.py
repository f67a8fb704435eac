"""The resource model: what a Kubernetes resource type is, and the built-in ones we know.

A :class:`ResourceType` is the discovery entry of one resource at one group/version: its plural
name (the path segment), Kind, scope, singular and short names. ``BUILTIN_RESOURCES`` lists the
kinds the simulator serves, with Table printers of their own, that a configuration may name
offline (``rc``, ``leases``); every other resource (a built-in kind outside it, a custom resource)
is described by upstream's discovery or by the caller (``ResourceType(group="example.com", …)``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

__all__ = [
    "BUILTIN_GROUPS",
    "BUILTIN_RESOURCES",
    "GroupVersion",
    "ResourceRegistry",
    "ResourceType",
    "builtin",
]


# The groups the API server itself serves; any other group is a custom resource. Exact names, not
# a ".k8s.io" suffix: CRDs such as gateway.networking.k8s.io live under it too. No CRD defines a
# resource of these groups (those without a dot cannot be a CRD's group at all, and the API
# server's own handlers answer the others' paths), so the daemon never watches a CRD for them,
# for Table columns or otherwise. Discovery does not say which groups CRDs serve, hence the list.
BUILTIN_GROUPS = frozenset(
    {
        "",
        "admissionregistration.k8s.io",
        "apiextensions.k8s.io",
        "apiregistration.k8s.io",
        "apps",
        "authentication.k8s.io",
        "authorization.k8s.io",
        "autoscaling",
        "batch",
        "certificates.k8s.io",
        "coordination.k8s.io",
        "discovery.k8s.io",
        "events.k8s.io",
        "extensions",
        "flowcontrol.apiserver.k8s.io",
        "internal.apiserver.k8s.io",
        "networking.k8s.io",
        "node.k8s.io",
        "policy",
        "rbac.authorization.k8s.io",
        "resource.k8s.io",
        "scheduling.k8s.io",
        "storage.k8s.io",
        "storagemigration.k8s.io",
    }
)


@dataclass(frozen=True, slots=True)
class GroupVersion:
    """An API group at one version (``""`` is the core group)."""

    group: str
    version: str

    @property
    def api_version(self) -> str:
        """``v1`` for the core group, else ``group/version``."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def path(self) -> str:
        """URL prefix: ``/api/v1`` or ``/apis/group/version``."""
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"


@dataclass(frozen=True, slots=True)
class ResourceType:
    """One resource at one group/version, as discovery describes it. Two types are the same
    resource when their group, version, plural, kind and scope are: the names clients find it
    by (singular, short names, categories) and its storage version hash describe it, and a
    custom resource's are learnt from upstream after it is configured."""

    group: str
    version: str
    resource: str
    """Plural, lower case: the path segment (``pods``)."""
    kind: str
    namespaced: bool
    singular: str = field(default="", compare=False)
    short_names: tuple[str, ...] = field(default=(), compare=False)
    categories: tuple[str, ...] = field(default=(), compare=False)
    list_kind: str = field(default="")
    storage_version_hash: str = field(default="", compare=False)
    """Discovery's ``storageVersionHash`` as upstream says it (a custom resource's comes from its
    CRD's storage version); "" to work it out from the served version (built-in kinds)."""

    def __post_init__(self) -> None:
        if not self.singular:
            object.__setattr__(self, "singular", self.kind.lower())
        if not self.list_kind:
            object.__setattr__(self, "list_kind", f"{self.kind}List")

    @property
    def group_version(self) -> GroupVersion:
        return GroupVersion(self.group, self.version)

    @property
    def builtin(self) -> bool:
        """Served by the API server itself (not a custom resource): its typed lists carry items
        without ``kind``/``apiVersion``."""
        return self.group in BUILTIN_GROUPS

    @property
    def api_version(self) -> str:
        return self.group_version.api_version

    @property
    def qualified(self) -> str:
        """``pods`` or ``deployments.apps``: the API server's name for it in messages."""
        return f"{self.resource}.{self.group}" if self.group else self.resource

    @property
    def scope(self) -> str:
        """Aggregated discovery's scope: ``Namespaced`` or ``Cluster``."""
        return "Namespaced" if self.namespaced else "Cluster"

    @property
    def config_name(self) -> str:
        """How configuration names it: ``pods`` for core, ``apps/v1/deployments`` otherwise."""
        return f"{self.group}/{self.version}/{self.resource}" if self.group else self.resource

    def collection_path(self, namespace: str | None = None) -> str:
        base = self.group_version.path
        if self.namespaced and namespace:
            return f"{base}/namespaces/{namespace}/{self.resource}"
        return f"{base}/{self.resource}"

    def object_path(self, name: str, namespace: str | None = None) -> str:
        return f"{self.collection_path(namespace)}/{name}"


def _core(
    resource: str,
    kind: str,
    *,
    namespaced: bool = True,
    short: tuple[str, ...] = (),
    cat: bool = False,
) -> ResourceType:
    return ResourceType(
        group="",
        version="v1",
        resource=resource,
        kind=kind,
        namespaced=namespaced,
        short_names=short,
        categories=("all",) if cat else (),
    )


def _grouped(
    group: str,
    version: str,
    resource: str,
    kind: str,
    *,
    namespaced: bool = True,
    short: tuple[str, ...] = (),
    cat: bool = False,
    categories: tuple[str, ...] = (),
) -> ResourceType:
    return ResourceType(
        group=group,
        version=version,
        resource=resource,
        kind=kind,
        namespaced=namespaced,
        short_names=short,
        categories=("all",) if cat else categories,
    )


BUILTIN_RESOURCES: tuple[ResourceType, ...] = (
    _core("pods", "Pod", short=("po",), cat=True),
    _core("configmaps", "ConfigMap", short=("cm",)),
    _core("secrets", "Secret"),
    _core("services", "Service", short=("svc",), cat=True),
    _core("endpoints", "Endpoints", short=("ep",)),
    _core("serviceaccounts", "ServiceAccount", short=("sa",)),
    _core("persistentvolumeclaims", "PersistentVolumeClaim", short=("pvc",)),
    _core("persistentvolumes", "PersistentVolume", namespaced=False, short=("pv",)),
    _core("namespaces", "Namespace", namespaced=False, short=("ns",)),
    _core("nodes", "Node", namespaced=False, short=("no",)),
    _core("events", "Event", short=("ev",)),
    _core("replicationcontrollers", "ReplicationController", short=("rc",), cat=True),
    _core("resourcequotas", "ResourceQuota", short=("quota",)),
    _core("limitranges", "LimitRange", short=("limits",)),
    _core("podtemplates", "PodTemplate"),
    _grouped("apps", "v1", "deployments", "Deployment", short=("deploy",), cat=True),
    _grouped("apps", "v1", "replicasets", "ReplicaSet", short=("rs",), cat=True),
    _grouped("apps", "v1", "statefulsets", "StatefulSet", short=("sts",), cat=True),
    _grouped("apps", "v1", "daemonsets", "DaemonSet", short=("ds",), cat=True),
    _grouped("apps", "v1", "controllerrevisions", "ControllerRevision"),
    _grouped("batch", "v1", "jobs", "Job", cat=True),
    _grouped("batch", "v1", "cronjobs", "CronJob", short=("cj",), cat=True),
    _grouped("networking.k8s.io", "v1", "ingresses", "Ingress", short=("ing",)),
    _grouped("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice"),
    _grouped("coordination.k8s.io", "v1", "leases", "Lease"),
    _grouped("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", short=("pdb",)),
    _grouped(
        "storage.k8s.io", "v1", "storageclasses", "StorageClass", namespaced=False, short=("sc",)
    ),
    _grouped("storage.k8s.io", "v1", "csinodes", "CSINode", namespaced=False),
    _grouped("storage.k8s.io", "v1", "csidrivers", "CSIDriver", namespaced=False),
    _grouped("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False),
    _grouped(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        namespaced=False,
        short=("crd", "crds"),
        categories=("api-extensions",),
    ),
)


def builtin(name: str) -> ResourceType:
    """The built-in resource named ``pods``, ``po``, ``apps/v1/deployments`` or ``deployments``."""
    found = ResourceRegistry(BUILTIN_RESOURCES).resolve(name)
    if found is None:
        raise KeyError(name)
    return found


class ResourceRegistry(Mapping[tuple[str, str, str], ResourceType]):
    """Resource types keyed by ``(group, version, resource)``, with name resolution."""

    def __init__(self, types: Iterable[ResourceType] = ()) -> None:
        self._by_gvr: dict[tuple[str, str, str], ResourceType] = {}
        self._by_gv: dict[GroupVersion, list[ResourceType]] = {}
        """The types of each group/version (asked on every request; changes are rare)."""
        for t in types:
            self.add(t)

    def add(self, rtype: ResourceType) -> None:
        self._by_gvr[(rtype.group, rtype.version, rtype.resource)] = rtype
        self._regroup()

    def remove(self, rtype: ResourceType) -> None:
        self._by_gvr.pop((rtype.group, rtype.version, rtype.resource), None)
        self._regroup()

    def _regroup(self) -> None:
        by_gv: dict[GroupVersion, list[ResourceType]] = {}
        for t in self._by_gvr.values():
            by_gv.setdefault(t.group_version, []).append(t)
        self._by_gv = by_gv

    def __getitem__(self, key: tuple[str, str, str]) -> ResourceType:
        return self._by_gvr[key]

    def __iter__(self) -> Iterator[tuple[str, str, str]]:
        return iter(self._by_gvr)

    def __len__(self) -> int:
        return len(self._by_gvr)

    def get_gvr(self, group: str, version: str, resource: str) -> ResourceType | None:
        return self._by_gvr.get((group, version, resource))

    def group_versions(self) -> list[GroupVersion]:
        """Every group/version served, core first, then groups in registration order."""
        seen: dict[GroupVersion, None] = {}
        for t in self._by_gvr.values():
            seen.setdefault(t.group_version, None)
        return sorted(seen, key=lambda gv: gv.group != "")

    def in_group_version(self, gv: GroupVersion) -> list[ResourceType]:
        return list(self._by_gv.get(gv, ()))

    def resolve(self, name: str) -> ResourceType | None:
        """Find a type by ``group/version/resource``, ``resource.group``, plural, singular or short name."""
        parts = name.split("/")
        if len(parts) == 3:
            return self._by_gvr.get((parts[0], parts[1], parts[2]))
        if len(parts) == 2:  # "v1/pods" (core) is the only two-part form
            return self._by_gvr.get(("", parts[0], parts[1]))
        lowered = name.lower()
        for t in self._by_gvr.values():
            if lowered in (t.resource, t.singular, t.qualified, *t.short_names):
                return t
        return None
