"""One item of ``resources``: the record the daemon caches from (:class:`ResourceConfig`), what an
entry may say (:class:`ResourceEntry`, each key declared once: the reader, the reference table
and the wiring test read it), and the one grammar of a resource written as a string, shared by
the configuration and ``cacheproxy sim --crd``:
``NAME`` or ``GROUP/VERSION/PLURAL:Kind[:namespaced|cluster]`` (namespaced unless ``:cluster``).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Annotated, Final, Literal

from pydantic import AfterValidator, Field

from cacheproxy.daemon.config.settings import Shown, library_default, settings_of
from cacheproxy.informer import Collection, SharedInformerFactory, Transform
from cacheproxy.kube.resources import ResourceType

__all__ = [
    "DEFAULT_CONSISTENT_READS",
    "ENTRY",
    "ENTRY_KEYS",
    "FIELD_PATH",
    "RESOURCE_GRAMMAR",
    "TRANSFORM_KEYS",
    "ConsistentReadsPolicy",
    "ResourceConfig",
    "ResourceEntry",
    "TransformEntry",
    "custom_resource_problems",
    "kind_problem",
    "parse_custom_resource",
    "split_resource_text",
]

_DNS_LABEL: Final = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_DNS_SUBDOMAIN: Final = re.compile(
    r"(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
)
_VERSION: Final = re.compile(r"v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?")
_KIND: Final = re.compile(r"[A-Z][A-Za-z0-9]*")
ConsistentReadsPolicy = Literal["live", "strict", "cache", "consistent"]
DEFAULT_CONSISTENT_READS: Final = "live"
"""The default :data:`ConsistentReadsPolicy`: reads with RV unset are served from the cache its
live upstream watch keeps, once it holds every write made through the daemon."""
RESOURCE_GRAMMAR: Final = "NAME or GROUP/VERSION/PLURAL:Kind[:namespaced|cluster]"


def _namespace(text: str) -> str:
    if _DNS_LABEL.fullmatch(text):
        return text
    raise ValueError(
        f"invalid namespace {text!r}: expected a lower-case DNS label (a-z, 0-9, -; at most 63)"
    )


@dataclass(frozen=True, slots=True)
class ResourceConfig:
    """One collection to list and watch upstream, and how to keep it (one item of
    ``resources``; what an entry may say is :class:`ResourceEntry`)."""

    rtype: ResourceType
    from_discovery: bool = False
    """A custom resource named without its kind or scope (``rtype.kind`` is ""): upstream's
    discovery says them, and the daemon asks it before serving the resource."""
    namespace: str | None = None
    """Only this namespace (namespaced resources only); None = all namespaces."""
    label_selector: str = ""
    """Applied upstream (server-side filtering), as written."""
    field_selector: str = ""
    indexes: tuple[str, ...] = ()
    """Field paths indexed in the store (``spec.nodeName``, ``metadata.ownerReferences[*].uid``)."""
    transform: Transform = dataclasses.field(default_factory=Transform)
    history: int = library_default(SharedInformerFactory.informer, "history")
    """EventLog size: events kept for watch resume."""
    consistent_reads: ConsistentReadsPolicy = DEFAULT_CONSISTENT_READS
    """How lists and gets with resourceVersion unset are answered (:class:`ResourceEntry`)."""

    @property
    def collection(self) -> Collection:
        """The informer factory's key for this collection."""
        return Collection(self.rtype, self.namespace, self.label_selector, self.field_selector)

    @property
    def is_secret(self) -> bool:
        return self.rtype.group == "" and self.rtype.resource == "secrets"


@dataclass(frozen=True, slots=True)
class TransformEntry:
    """``resources[].transform``: what is kept of each object."""

    drop_fields: tuple[str, ...] = library_default(Transform, "drop_fields")
    """Fields removed before storing. `[]` keeps everything. No `[*]`."""
    metadata_only: bool = library_default(Transform, "metadata_only")
    """Keep only `kind`, `apiVersion` and `metadata` (like PartialObjectMetadata)."""


@dataclass(frozen=True, slots=True)
class ResourceEntry:
    """One item of ``resources``, as written (the reader makes a ResourceConfig of it)."""

    resource: Annotated[str, Shown(default="required")]
    """`pods`, `apps/v1/deployments`, or `GROUP/VERSION/PLURAL` for a custom resource. Built-in
    names are also accepted by short name, singular or `plural.group` (`po`, `deploy`,
    `deployments.apps`)."""
    kind: str | None = None
    """Custom resources only: the Kind, e.g. `Widget`. Without it (or without `namespaced`),
    both are read from upstream's discovery before the resource is served, with its short
    names and categories."""
    namespaced: bool | None = None
    """Custom resources only: whether the resource lives in namespaces (upstream's discovery
    says when not written)."""
    namespace: (
        Annotated[str, AfterValidator(_namespace), Shown(default="all namespaces")] | None
    ) = None
    """Only this namespace (not allowed for cluster-scoped resources)."""
    label_selector: Annotated[str, Shown(default="everything")] = ""
    """Label selector applied **upstream** (server-side filtering), Kubernetes syntax."""
    field_selector: Annotated[str, Shown(default="everything")] = ""
    """Field selector applied upstream. For built-in resources only the fields the API server
    supports for that kind are accepted (pods: `spec.nodeName`, `status.phase`, …); for custom
    resources only the syntax is checked (CRDs may declare `selectableFields`)."""
    indexes: tuple[str, ...] = ()
    """Fields indexed in memory, answered without a scan: `spec.nodeName`,
    `metadata.labels.app`, `metadata.ownerReferences[*].uid` (`[*]` indexes every element of a
    list). In a YAML flow list (`[…]`) quote paths containing `[*]`."""
    transform: TransformEntry = dataclasses.field(default_factory=TransformEntry)
    history: Annotated[int, Field(ge=1_000, le=10_000_000)] = library_default(
        ResourceConfig, "history"
    )
    """Events kept for watch resume; a client resuming from an older resourceVersion gets 410
    Gone and relists."""
    consistent_reads: ConsistentReadsPolicy = DEFAULT_CONSISTENT_READS
    """Lists, gets and watches with `resourceVersion` unset (what kubectl and client libraries
    send by default). `live`: from the cache, at once, while its upstream watch is live (open and
    heard from), once the cache holds every write made through this daemon (read-your-writes):
    a write made elsewhere shows after the watch's delivery lag (milliseconds; the metric
    `cacheproxy_watch_live` says when the watch is down, and reads are then proven as in
    `strict`). `strict`: linearizable, as on the API server: a get is passed through to upstream
    as its caller; a list waits until the cache reached upstream's current resourceVersion (one
    `limit=1` probe, shared by the reads that wait together: see
    `server.limits.consistentProbesPerSecond`), and one whose cache stays behind after
    `consistentReadConfirmAfterSeconds` (a quiet resource) is passed through; where a read cannot
    be passed through (pass-through off, or a caller with no credentials), a metadata list of the
    resource (a get: a metadata get of its object) confirms the cache. A read not proven within
    `consistentReadTimeoutSeconds` is answered as `consistentReadFallback` says. `cache`: from the
    cache as it is, at once, with no upstream request (as `resourceVersion=0`). `consistent` is
    the former name of `strict`."""


ENTRY: Final = {s.path: s for s in settings_of(ResourceEntry)}
"""The keys of one entry by (dotted) path: ``history``, ``transform.dropFields``."""
ENTRY_KEYS: Final = list(dict.fromkeys(p.split(".")[0] for p in ENTRY))
TRANSFORM_KEYS: Final = [p.split(".", 1)[1] for p in ENTRY if p.startswith("transform.")]
FIELD_PATH: Final = dataclasses.replace(ENTRY["resource"], path="item")


def split_resource_text(text: str) -> tuple[str, str | None, bool | None] | None:
    """``NAME`` or ``GROUP/VERSION/PLURAL:Kind[:namespaced|cluster]`` → name, kind, namespaced
    (a kind without a scope is namespaced); None when the text has neither form."""
    name, *rest = (part.strip() for part in text.split(":"))
    if not rest:
        return name, None, None
    if len(rest) > 2 or (len(rest) == 2 and rest[1] not in ("namespaced", "cluster")):
        return None
    return name, rest[0], len(rest) == 1 or rest[1] == "namespaced"


def custom_resource_problems(name: str) -> list[str]:
    """What is wrong with ``GROUP/VERSION/PLURAL`` as a custom resource's name."""
    group, version, plural = name.split("/")
    return [
        why
        for why, ok in (
            (f"group {group!r} is not a DNS subdomain", _DNS_SUBDOMAIN.fullmatch(group)),
            (f"version {version!r} is not like v1 or v1beta1", _VERSION.fullmatch(version)),
            (f"plural {plural!r} is not a lower-case DNS label", _DNS_LABEL.fullmatch(plural)),
        )
        if not ok
    ]


def kind_problem(kind: str) -> str | None:
    return None if _KIND.fullmatch(kind) else f"expected a CamelCase kind like Widget, got {kind!r}"


def parse_custom_resource(text: str) -> ResourceType:
    """``GROUP/VERSION/PLURAL:Kind[:namespaced|cluster]`` → a custom resource type (the grammar
    of ``resources`` entries written as strings). Raises ValueError saying what is wrong."""
    name, kind, namespaced = split_resource_text(text) or ("", None, None)
    if kind is None or name.count("/") != 2:
        raise ValueError(f"{text!r}: expected GROUP/VERSION/PLURAL:Kind[:namespaced|cluster]")
    problems = custom_resource_problems(name)
    if (problem := kind_problem(kind)) is not None:
        problems.append(problem)
    if problems:
        raise ValueError(f"{text!r}: {'; '.join(problems)}")
    group, version, plural = name.split("/")
    return ResourceType(group, version, plural, kind, namespaced=namespaced is not False)
