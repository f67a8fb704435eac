"""One item of ``resources``: the record the daemon caches from (:class:`ResourceConfig`), what an
entry may say and how it is checked (:class:`ResourceEntry`, each key declared once: the reader,
the reference table and the wiring test read it), and the one grammar of a resource written as a
string, shared by the configuration and ``cacheproxy sim --crd``:
``NAME`` or ``GROUP/VERSION/PLURAL:Kind[:namespaced|cluster]`` (namespaced unless ``:cluster``).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    PrivateAttr,
    field_validator,
    model_validator,
)

from cacheproxy.daemon.config.settings import (
    Section,
    Shown,
    kind_of,
    library_default,
    located,
    settings_of,
    suggest,
)
from cacheproxy.errors import ApiError, ConfigError
from cacheproxy.informer import Collection, SharedInformerFactory, Storage, Transform
from cacheproxy.informer.packing import MAX_BLOCK_OBJECTS
from cacheproxy.kube.fieldpath import compile_field_path
from cacheproxy.kube.fields import parse_field_selector, validate_field_selector
from cacheproxy.kube.labels import parse_label_selector
from cacheproxy.kube.resources import (
    BUILTIN_GROUPS,
    BUILTIN_RESOURCES,
    ResourceRegistry,
    ResourceType,
)

__all__ = [
    "DEFAULT_CONSISTENT_READS",
    "ENTRY",
    "RESOURCE_GRAMMAR",
    "ConsistentReadsPolicy",
    "ResourceConfig",
    "ResourceEntry",
    "StorageEntry",
    "TransformEntry",
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
Problem = tuple[tuple[str | int, ...], str]
"""A problem with a value and the key it is at (``("kind",)``)."""


def _namespace(text: str | None) -> str | None:
    if text is None or _DNS_LABEL.fullmatch(text):
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
    """A resource the built-in table does not describe, named without its kind or scope, or of
    a built-in group (``rtype.kind`` is ""): upstream's discovery says them, and the daemon asks
    it before serving the resource."""
    written_kind: str | None = None
    """The kind the configuration wrote for a resource described by discovery: served only if
    discovery agrees."""
    written_namespaced: bool | None = None
    """Likewise its scope."""
    namespace: str | None = None
    """Only this namespace (namespaced resources only); None = all namespaces."""
    label_selector: str = ""
    """Applied upstream (server-side filtering), as written."""
    field_selector: str = ""
    indexes: tuple[str, ...] = ()
    """Field paths indexed in the store (``spec.nodeName``, ``metadata.ownerReferences[*].uid``)."""
    transform: Transform = dataclasses.field(default_factory=Transform)
    storage: Storage = dataclasses.field(default_factory=Storage)
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


def _field_path(*, fan_out: bool) -> BeforeValidator:
    """A field path to index or drop, checked as the informer will use it."""

    def check(value: object) -> str:
        if value is not None and not isinstance(value, str):
            raise ValueError(f"expected a string, got {kind_of(value)}; quote it")
        text = (value or "").strip()
        if not text:
            raise ValueError("expected a field path, got nothing")
        try:
            compile_field_path(text)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        if not fan_out and "[*]" in text:
            raise ValueError(f"{text!r}: a dropped field cannot fan out over a list ([*])")
        return text

    return BeforeValidator(check)


def _listed_once(paths: tuple[str, ...]) -> tuple[str, ...]:
    twice: list[Problem] = [
        ((i,), f"{p!r} is listed twice") for i, p in enumerate(paths) if p in paths[:i]
    ]
    if twice:
        raise located(twice)
    return paths


def _selector(parse: Any) -> AfterValidator:
    def check(text: str) -> str:
        try:
            parse(text)
        except ApiError as exc:
            raise ValueError(f"invalid selector {text!r}: {exc.message}") from None
        return text

    return AfterValidator(check)


class TransformEntry(Section):
    """``resources[].transform``: what is kept of each object."""

    drop_fields: Annotated[
        tuple[Annotated[str, _field_path(fan_out=False)], ...], AfterValidator(_listed_once)
    ] = library_default(Transform, "drop_fields")
    """Fields removed before storing. `[]` keeps everything. No `[*]`."""
    metadata_only: bool = library_default(Transform, "metadata_only")
    """Keep only `kind`, `apiVersion` and `metadata` (like PartialObjectMetadata)."""


class StorageEntry(Section):
    """``resources[].storage``: how the objects are kept in memory. Also written as a string:
    `compressed` or `plain`."""

    compressed: bool = library_default(Storage, "compressed")
    """Keep each object zstd-compressed with a dictionary trained on this resource's own
    objects: pods take about 0.25x their JSON instead of 1.2x. Lists then decompress what they
    send (about 1.6x the time of a plain list on 2 cores), a GET its object's block (~10 µs);
    selection and watches cost about the same (docs/operations.md, "Compressed storage"). Objects are kept as they come
    until the first list ends (or, for a collection that starts empty, until `trainingBytes`
    of them were seen), then packed; fewer than 32 objects stay as they are."""
    level: Annotated[int, Field(ge=1, le=19)] = library_default(Storage, "level")
    """zstd level of each object."""
    dictionary_bytes: Annotated[int, Field(ge=1024, le=1 << 20)] = library_default(
        Storage, "dictionary_bytes"
    )
    """Size of the dictionary trained for this resource."""
    training_bytes: Annotated[int, Field(ge=65_536, le=1 << 30)] = library_default(
        Storage, "training_bytes"
    )
    """Object bytes the dictionary is trained on."""
    block_objects: Annotated[int, Field(ge=1, le=MAX_BLOCK_OBJECTS)] = library_default(
        Storage, "block_objects"
    )
    """Objects of a list compressed together (neighbours by name): more pack smaller and make
    long lists cheaper, each GET a little dearer. `1` compresses each object alone."""


class ResourceEntry(Section):
    """One item of ``resources``, as written (the reader makes a ResourceConfig of it)."""

    resource: Annotated[str, Shown(default="required")]
    """`pods`, `apps/v1/deployments`, or `GROUP/VERSION/PLURAL` for any resource upstream serves
    with list and watch (`coordination.k8s.io/v1/leases`, a custom resource). Names of the
    built-in table are also accepted by short name, singular or `plural.group` (`po`, `rc`,
    `deployments.apps`)."""
    kind: str | None = None
    """The Kind, e.g. `Widget`; never needed. Without it (or without `namespaced`), and for a
    kind of a built-in group the built-in table lacks, both are read from upstream's discovery
    before the resource is served, with its short names and categories; when written too,
    discovery must agree or the resource is not served."""
    namespaced: bool | None = None
    """Whether the resource lives in namespaces (upstream's discovery says when not written)."""
    namespace: Annotated[
        str | None, AfterValidator(_namespace), Shown(default="all namespaces")
    ] = None
    """Only this namespace (not allowed for cluster-scoped resources)."""
    label_selector: Annotated[str, _selector(parse_label_selector), Shown(default="everything")] = (
        ""
    )
    """Label selector applied **upstream** (server-side filtering), Kubernetes syntax."""
    field_selector: Annotated[str, _selector(parse_field_selector), Shown(default="everything")] = (
        ""
    )
    """Field selector applied upstream. For built-in resources only the fields the API server
    supports for that kind are accepted (pods: `spec.nodeName`, `status.phase`, …); for custom
    resources only the syntax is checked (CRDs may declare `selectableFields`)."""
    indexes: Annotated[
        tuple[Annotated[str, _field_path(fan_out=True)], ...], AfterValidator(_listed_once)
    ] = ()
    """Fields indexed in memory, answered without a scan: `spec.nodeName`,
    `metadata.labels.app`, `metadata.ownerReferences[*].uid` (`[*]` indexes every element of a
    list). In a YAML flow list (`[…]`) quote paths containing `[*]`."""
    transform: TransformEntry = TransformEntry()
    storage: StorageEntry = StorageEntry()
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

    _rtype: ResourceType = PrivateAttr()

    @model_validator(mode="before")
    @classmethod
    def _written(cls, value: Any) -> Any:
        """An entry written as a string stands for the keys it names."""
        if isinstance(value, str):
            split = split_resource_text(value)
            if split is None:
                raise ValueError(f"expected {RESOURCE_GRAMMAR}, got {value!r}")
            name, kind, namespaced = split
            scope = {"kind": kind, "namespaced": namespaced} if kind is not None else {}
            return {"resource": name, **scope}
        if not isinstance(value, dict | ResourceEntry):
            raise ValueError('expected a resource name or a mapping with a "resource" key')
        return value

    @field_validator("transform", mode="before")
    @classmethod
    def _transform_is_a_mapping(cls, value: Any) -> Any:
        if not isinstance(value, dict | TransformEntry):
            raise ValueError("expected a mapping (dropFields, metadataOnly)")
        return value

    @field_validator("storage", mode="before")
    @classmethod
    def _storage_as_written(cls, value: Any) -> Any:
        if value in ("compressed", "plain"):
            return {"compressed": value == "compressed"}
        if not isinstance(value, dict | StorageEntry):
            raise ValueError(
                'expected "compressed", "plain" or a mapping '
                "(compressed, level, dictionaryBytes, trainingBytes, blockObjects)"
            )
        return value

    @model_validator(mode="after")
    def _resolved(self) -> ResourceEntry:
        """The resource type the keys name, checked against the namespace and field selector."""
        rtype, problems = _resource_type(self)
        if rtype is not None and self.namespace is not None and not rtype.namespaced:
            why = f"{rtype.config_name} is cluster-scoped: it has no namespace"
            problems.append((("namespace",), why))
        if rtype is not None and rtype in BUILTIN_RESOURCES and self.field_selector:
            # A built-in kind's field labels are known; a CRD may declare selectableFields.
            try:
                validate_field_selector(rtype, parse_field_selector(self.field_selector))
            except ApiError as exc:
                why = f"invalid selector {self.field_selector!r}: {exc.message}"
                problems.append((("fieldSelector",), why))
        if problems:
            raise located(problems)
        assert rtype is not None
        self._rtype = rtype
        return self

    def config(self) -> ResourceConfig:
        """The daemon's record of this entry."""
        return ResourceConfig(
            rtype=self._rtype,
            from_discovery=self._rtype.kind == "",
            written_kind=self.kind if self._rtype.kind == "" else None,
            written_namespaced=self.namespaced if self._rtype.kind == "" else None,
            namespace=self.namespace,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            indexes=self.indexes,
            transform=Transform(self.transform.drop_fields, self.transform.metadata_only),
            storage=Storage(
                compressed=self.storage.compressed,
                level=self.storage.level,
                dictionary_bytes=self.storage.dictionary_bytes,
                training_bytes=self.storage.training_bytes,
                block_objects=self.storage.block_objects,
            ),
            history=self.history,
            consistent_reads=self.consistent_reads,
        )


ENTRY: Final = {s.path: s for s in settings_of(ResourceEntry)}
"""The keys of one entry by (dotted) path: ``history``, ``transform.dropFields``."""
_BUILTINS: Final = ResourceRegistry(BUILTIN_RESOURCES)
_BUILTIN_NAMES: Final = [t.config_name for t in BUILTIN_RESOURCES]


def split_resource_text(text: str) -> tuple[str, str | None, bool | None] | None:
    """``NAME`` or ``GROUP/VERSION/PLURAL:Kind[:namespaced|cluster]`` → name, kind, namespaced
    (a kind without a scope is namespaced); None when the text has neither form."""
    name, *rest = (part.strip() for part in text.split(":"))
    if not rest:
        return name, None, None
    if len(rest) > 2 or (len(rest) == 2 and rest[1] not in ("namespaced", "cluster")):
        return None
    return name, rest[0], len(rest) == 1 or rest[1] == "namespaced"


def _resource_type(entry: ResourceEntry) -> tuple[ResourceType | None, list[Problem]]:
    """The type ``resource``, ``kind`` and ``namespaced`` name, or the problem with them."""
    name, kind, namespaced = entry.resource, entry.kind, entry.namespaced
    if "*" in name or name.lower() == "all":
        # docs/design.md §7: Secrets are cached only when named explicitly, so nothing may stand
        # for "every resource".
        why = f"{name!r}: wildcards are refused; list each resource by name (Secrets are cached only when named explicitly)"
        return None, [(("resource",), why)]
    builtin = _BUILTINS.resolve(name)
    if builtin is not None:
        if kind is not None and kind != builtin.kind:
            why = f"{builtin.config_name} is built in: its kind is {builtin.kind}"
            return None, [(("kind",), why)]
        if namespaced is not None and namespaced != builtin.namespaced:
            scope = "namespaced" if builtin.namespaced else "cluster-scoped"
            return None, [(("namespaced",), f"{builtin.config_name} is built in and {scope}")]
        return builtin, []
    guess = suggest(name, _BUILTIN_NAMES)
    hint = f'; did you mean "{guess}"?' if guess else ""
    if name.count("/") != 2:
        why = f"unknown resource {name!r}{hint} (any other resource is GROUP/VERSION/PLURAL)"
        return None, [(("resource",), why)]
    if bad := custom_resource_problems(name):
        return None, [(("resource",), f"invalid resource {name!r}: {'; '.join(bad)}")]
    if kind is not None and (problem := kind_problem(kind)) is not None:
        return None, [(("kind",), problem)]
    group, version, plural = name.split("/")
    if kind is not None and namespaced is not None and group not in BUILTIN_GROUPS:
        return ResourceType(group, version, plural, kind, namespaced=namespaced), []
    # A kind of a built-in group outside the table, or a custom resource without its kind or
    # scope: upstream's discovery says them (and what was written must agree), which the daemon
    # asks before serving it. The kind stays "" until then.
    return ResourceType(group, version, plural, "", namespaced=namespaced is not False), []


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
