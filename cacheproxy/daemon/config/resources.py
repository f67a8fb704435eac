"""The ``resources`` list: what an entry may say (:class:`ResourceEntry`, declared once), the one
grammar of a resource written as a string (also ``cacheproxy sim --crd``), and the reader that
turns a list of entries into :class:`~.model.CachedResource` records, every problem located.

One entry per resource: the server serves one collection per resource on the resource's paths,
so two entries for the same resource (other namespaces or selectors) are refused, naming both.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Final

from pydantic import AfterValidator, Field
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from cacheproxy.daemon.config.model import CachedResource
from cacheproxy.daemon.config.settings import (
    UNSET,
    Invalid,
    Setting,
    Shown,
    library_default,
    settings_of,
)
from cacheproxy.daemon.config.sources import (
    RESOURCES,
    TEXT_TAG,
    Problems,
    is_null,
    is_text,
    mapping,
    node_value,
    suggest,
    where,
)
from cacheproxy.errors import ApiError, ConfigError
from cacheproxy.informer.store import Transform
from cacheproxy.kube.fieldpath import compile_field_path
from cacheproxy.kube.fields import parse_field_selector, validate_field_selector
from cacheproxy.kube.labels import parse_label_selector
from cacheproxy.kube.resources import BUILTIN_RESOURCES, ResourceRegistry, ResourceType

__all__ = [
    "ENTRY",
    "RESOURCE_GRAMMAR",
    "ResourceEntry",
    "ResourceReader",
    "TransformEntry",
    "parse_custom_resource",
]

_DNS_LABEL: Final = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_DNS_SUBDOMAIN: Final = re.compile(
    r"(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
)
_VERSION: Final = re.compile(r"v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?")
_KIND: Final = re.compile(r"[A-Z][A-Za-z0-9]*")
RESOURCE_GRAMMAR: Final = "NAME or GROUP/VERSION/PLURAL:Kind[:namespaced|cluster]"
_STR_TAG: Final = "tag:yaml.org,2002:str"
_BAD: Final = object()
"""A value already reported as a problem."""
_BUILTINS: Final = ResourceRegistry(BUILTIN_RESOURCES)
_BUILTIN_NAMES: Final = [t.config_name for t in BUILTIN_RESOURCES]


def _namespace(text: str) -> str:
    if _DNS_LABEL.fullmatch(text):
        return text
    raise ValueError(
        f"invalid namespace {text!r}: expected a lower-case DNS label (a-z, 0-9, -; at most 63)"
    )


@dataclass(frozen=True, slots=True)
class TransformEntry:
    """``resources[].transform``: what is kept of each object."""

    drop_fields: tuple[str, ...] = library_default(Transform, "drop_fields")
    """Fields removed before storing. `[]` keeps everything. No `[*]`."""
    metadata_only: bool = library_default(Transform, "metadata_only")
    """Keep only `kind`, `apiVersion` and `metadata` (like PartialObjectMetadata)."""


@dataclass(frozen=True, slots=True)
class ResourceEntry:
    """One item of ``resources``, as written (the reader makes a CachedResource of it)."""

    resource: Annotated[str, Shown(default="required")]
    """`pods`, `apps/v1/deployments`, or `GROUP/VERSION/PLURAL` for a custom resource. Built-in
    names are also accepted by short name, singular or `plural.group` (`po`, `deploy`,
    `deployments.apps`)."""
    kind: str | None = None
    """Custom resources only (required for them): the Kind, e.g. `Widget`."""
    namespaced: bool | None = None
    """Custom resources only (required for them): whether the resource lives in namespaces."""
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
        CachedResource, "history"
    )
    """Events kept for watch resume; a client resuming from an older resourceVersion gets 410
    Gone and relists."""


ENTRY: Final = {s.path: s for s in settings_of(ResourceEntry)}
"""The keys of one entry by (dotted) path: ``history``, ``transform.dropFields``."""
_ENTRY_KEYS: Final = list(dict.fromkeys(p.split(".")[0] for p in ENTRY))
_TRANSFORM_KEYS: Final = [p.split(".", 1)[1] for p in ENTRY if p.startswith("transform.")]
_FIELD_PATH: Final = dataclasses.replace(ENTRY["resource"], path="item")


def _split(text: str) -> tuple[str, str | None, bool | None] | None:
    """``NAME`` or ``GROUP/VERSION/PLURAL:Kind[:namespaced|cluster]`` → name, kind, namespaced
    (a kind without a scope is namespaced); None when the text has neither form."""
    name, *rest = (part.strip() for part in text.split(":"))
    if not rest:
        return name, None, None
    if len(rest) > 2 or (len(rest) == 2 and rest[1] not in ("namespaced", "cluster")):
        return None
    return name, rest[0], len(rest) == 1 or rest[1] == "namespaced"


def _custom_problems(name: str) -> list[str]:
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


def _kind_problem(kind: str) -> str | None:
    return None if _KIND.fullmatch(kind) else f"expected a CamelCase kind like Widget, got {kind!r}"


def parse_custom_resource(text: str) -> ResourceType:
    """``GROUP/VERSION/PLURAL:Kind[:namespaced|cluster]`` → a custom resource type (the grammar
    of ``resources`` entries written as strings). Raises ValueError saying what is wrong."""
    name, kind, namespaced = _split(text) or ("", None, None)
    if kind is None or name.count("/") != 2:
        raise ValueError(f"{text!r}: expected GROUP/VERSION/PLURAL:Kind[:namespaced|cluster]")
    problems = _custom_problems(name)
    if (problem := _kind_problem(kind)) is not None:
        problems.append(problem)
    if problems:
        raise ValueError(f"{text!r}: {'; '.join(problems)}")
    group, version, plural = name.split("/")
    return ResourceType(group, version, plural, kind, namespaced=namespaced is not False)


def _string_item(node: ScalarNode) -> dict[str, Node] | None:
    """A list item written as a string, as the keys it stands for (marked where the item is)."""
    split = _split(str(node.value))
    if split is None:
        return None
    name, kind, namespaced = split
    mark = node.start_mark
    fields: dict[str, Node] = {"resource": ScalarNode(_STR_TAG, name, mark, mark)}
    if kind is not None:
        fields["kind"] = ScalarNode(_STR_TAG, kind, mark, mark)
        fields["namespaced"] = ScalarNode(TEXT_TAG, str(namespaced), mark, mark)
    return fields


class ResourceReader:
    """Validates a ``resources`` list; every problem goes to ``problems`` with its location."""

    def __init__(self, problems: Problems) -> None:
        self.problems = problems

    def read_list(self, node: Node) -> list[CachedResource]:
        if is_null(node):
            return []
        if not isinstance(node, SequenceNode):
            self.problems.at(node, RESOURCES, "expected a list of resources")
            return []
        out: list[CachedResource] = []
        seen: dict[ResourceType, tuple[str, Node, tuple[str, ...]]] = {}
        for i, item in enumerate(node.value):
            path = f"{RESOURCES}[{i}]"
            read = self.read_item(item, path)
            if read is None:
                continue
            res, at = read
            key = (
                res.namespace or "",
                str(parse_label_selector(res.label_selector)),
                str(parse_field_selector(res.field_selector)),
            )
            if res.rtype in seen:
                first, first_at, first_key = seen[res.rtype]
                self.problems.at(at, path, self._overlap(res, first, first_at, key == first_key))
                continue
            seen[res.rtype] = (path, at, key)
            out.append(res)
        return out

    @staticmethod
    def _overlap(res: CachedResource, first: str, first_at: Node, same: bool) -> str:
        if same:
            return (
                f"caches the same collection as {first} ({where(first_at)}): "
                "same resource, namespace and selectors"
            )
        return (
            f"caches {res.rtype.config_name} again: {first} ({where(first_at)}) caches it with "
            "another namespace or selectors, and the server serves one collection per resource; "
            "keep one entry whose namespace and selectors cover both"
        )

    def read_item(self, node: Node, path: str) -> tuple[CachedResource, Node] | None:
        fields = self.fields(node, path)
        if fields is None:
            return None
        rtype = self.resource_type(fields, path)
        namespace = self.get(fields, "namespace", path)
        labels = self.selector(fields, "labelSelector", path, rtype)
        field_selector = self.selector(fields, "fieldSelector", path, rtype)
        indexes = self.paths(fields, "indexes", path, fan_out=True)
        history = self.get(fields, "history", path)
        transform = self.transform(fields.get("transform"), f"{path}.transform")
        if namespace not in (None, _BAD) and rtype is not None and not rtype.namespaced:
            self.problems.at(
                fields["namespace"],
                f"{path}.namespace",
                f"{rtype.config_name} is cluster-scoped: it has no namespace",
            )
            return None
        if (
            rtype is None
            or labels is None
            or field_selector is None
            or indexes is None
            or transform is None
            or _BAD in (namespace, history)
        ):
            return None
        resource = CachedResource(
            rtype=rtype,
            namespace=namespace,
            label_selector=labels,
            field_selector=field_selector,
            indexes=tuple(indexes),
            transform=transform,
            history=ENTRY["history"].default if history is None else history,
        )
        return resource, fields["resource"]

    def fields(self, node: Node, path: str) -> dict[str, Node] | None:
        if isinstance(node, MappingNode):
            fields = mapping(node, path, _ENTRY_KEYS, self.problems)
            if "resource" not in fields:
                self.problems.at(node, path, 'missing key "resource"')
                return None
            return fields
        if isinstance(node, ScalarNode) and is_text(node):
            fields_or_none = _string_item(node)
            if fields_or_none is None:
                self.problems.at(node, path, f"expected {RESOURCE_GRAMMAR}, got {node.value!r}")
            return fields_or_none
        self.problems.at(node, path, 'expected a resource name or a mapping with a "resource" key')
        return None

    def get(
        self, fields: Mapping[str, Node], key: str, path: str, setting: Setting | None = None
    ) -> Any:
        """The value of ``key``: None when absent or null, ``_BAD`` once reported."""
        node = fields.get(key)
        if node is None:
            return None
        try:
            value = node_value(node, setting or ENTRY[key])
        except Invalid as exc:
            self.problems.at(node, f"{path}.{key}", str(exc))
            return _BAD
        return None if value is UNSET else value

    def resource_type(self, fields: Mapping[str, Node], path: str) -> ResourceType | None:
        node, here = fields["resource"], f"{path}.resource"
        name = self.get(fields, "resource", path)
        kind = self.get(fields, "kind", path)
        namespaced = self.get(fields, "namespaced", path)
        if name is None:
            self.problems.at(node, here, "must not be empty")
        if name is None or _BAD in (name, kind, namespaced):
            return None
        if "*" in name or name.lower() == "all":
            # DESIGN §7: Secrets are cached only when named explicitly, so nothing may stand
            # for "every resource".
            self.problems.at(
                node,
                here,
                f"{name!r}: wildcards are refused; list each resource by name "
                "(Secrets are cached only when named explicitly)",
            )
            return None
        builtin = _BUILTINS.resolve(name)
        if builtin is not None:
            return self.check_builtin(builtin, fields, path, kind, namespaced)
        guess = suggest(name, _BUILTIN_NAMES)
        hint = f'; did you mean "{guess}"?' if guess else ""
        if name.count("/") != 2:
            self.problems.at(
                node,
                here,
                f"unknown resource {name!r}{hint} (custom resources are GROUP/VERSION/PLURAL)",
            )
            return None
        bad = _custom_problems(name)
        if bad:
            self.problems.at(node, here, f"invalid resource {name!r}: {'; '.join(bad)}")
            return None
        if kind is None or namespaced is None:
            missing = " and ".join(
                k for k, v in (("kind", kind), ("namespaced", namespaced)) if v is None
            )
            self.problems.at(
                node,
                here,
                f"{name} is not a built-in resource{hint}: a custom resource needs {missing} "
                "(e.g. kind: Widget, namespaced: true)",
            )
            return None
        if (problem := _kind_problem(kind)) is not None:
            self.problems.at(fields["kind"], f"{path}.kind", problem)
            return None
        group, version, plural = name.split("/")
        return ResourceType(group, version, plural, kind, namespaced=namespaced)

    def check_builtin(
        self,
        builtin: ResourceType,
        fields: Mapping[str, Node],
        path: str,
        kind: str | None,
        namespaced: bool | None,
    ) -> ResourceType | None:
        if kind is not None and kind != builtin.kind:
            self.problems.at(
                fields["kind"],
                f"{path}.kind",
                f"{builtin.config_name} is built in: its kind is {builtin.kind}",
            )
            return None
        if namespaced is not None and namespaced != builtin.namespaced:
            scope = "namespaced" if builtin.namespaced else "cluster-scoped"
            self.problems.at(
                fields["namespaced"],
                f"{path}.namespaced",
                f"{builtin.config_name} is built in and {scope}",
            )
            return None
        return builtin

    def selector(
        self, fields: Mapping[str, Node], key: str, path: str, rtype: ResourceType | None
    ) -> str | None:
        """The selector as written ("" when absent), or None once reported."""
        text = self.get(fields, key, path)
        if text is _BAD:
            return None
        if text is None:
            return ""
        try:
            if key == "labelSelector":
                parse_label_selector(text)
            else:
                selector = parse_field_selector(text)
                # A built-in kind's field labels are known; a CRD may declare selectableFields.
                if rtype is not None and rtype in BUILTIN_RESOURCES:
                    validate_field_selector(rtype, selector)
        except ApiError as exc:
            self.problems.at(
                fields[key], f"{path}.{key}", f"invalid selector {text!r}: {exc.message}"
            )
            return None
        return str(text)

    def paths(
        self, fields: Mapping[str, Node], key: str, path: str, *, fan_out: bool
    ) -> list[str] | None:
        """The field paths listed under ``key`` ([] when absent), or None once reported."""
        node = fields.get(key)
        if node is None or is_null(node):
            return []
        if not isinstance(node, SequenceNode):
            self.problems.at(node, f"{path}.{key}", "expected a list of field paths")
            return None
        out: list[str] = []
        ok = True
        for i, item in enumerate(node.value):
            try:
                text = node_value(item, _FIELD_PATH)
                if text is UNSET or text is None:
                    raise Invalid("expected a field path, got nothing")
                compile_field_path(text)
                if not fan_out and "[*]" in text:
                    raise Invalid(f"{text!r}: a dropped field cannot fan out over a list ([*])")
                if text in out:
                    raise Invalid(f"{text!r} is listed twice")
            except (Invalid, ConfigError) as exc:
                self.problems.at(item, f"{path}.{key}[{i}]", str(exc))
                ok = False
                continue
            out.append(text)
        return out if ok else None

    def transform(self, node: Node | None, path: str) -> Transform | None:
        if node is None or is_null(node):
            return Transform()
        if not isinstance(node, MappingNode):
            self.problems.at(node, path, "expected a mapping (dropFields, metadataOnly)")
            return None
        fields = mapping(node, path, _TRANSFORM_KEYS, self.problems)
        drop = self.paths(fields, "dropFields", path, fan_out=False)
        metadata_only = self.get(fields, "metadataOnly", path, ENTRY["transform.metadataOnly"])
        if drop is None or metadata_only is _BAD:
            return None
        given = "dropFields" in fields and not is_null(fields["dropFields"])
        return Transform(
            drop_fields=tuple(drop) if given else ENTRY["transform.dropFields"].default,
            metadata_only=metadata_only is True,
        )
