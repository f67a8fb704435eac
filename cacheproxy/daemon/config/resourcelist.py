"""The ``resources`` list read: each entry (:mod:`.entry`) validated into a
:class:`~.entry.ResourceConfig`, every problem located where it was written.

One entry per resource: the server serves one collection per resource on the resource's paths,
so two entries for the same resource (other namespaces or selectors) are refused, naming both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from cacheproxy.daemon.config.entry import (
    ENTRY,
    ENTRY_KEYS,
    FIELD_PATH,
    RESOURCE_GRAMMAR,
    TRANSFORM_KEYS,
    ResourceConfig,
    custom_resource_problems,
    kind_problem,
    split_resource_text,
)
from cacheproxy.daemon.config.settings import UNSET, Invalid, Setting
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
from cacheproxy.informer import Transform
from cacheproxy.kube.fieldpath import compile_field_path
from cacheproxy.kube.fields import parse_field_selector, validate_field_selector
from cacheproxy.kube.labels import parse_label_selector
from cacheproxy.kube.resources import (
    BUILTIN_GROUPS,
    BUILTIN_RESOURCES,
    ResourceRegistry,
    ResourceType,
)

__all__ = ["ResourceReader"]

_STR_TAG: Final = "tag:yaml.org,2002:str"
_BAD: Final = object()
"""A value already reported as a problem."""
_BUILTINS: Final = ResourceRegistry(BUILTIN_RESOURCES)
_BUILTIN_NAMES: Final = [t.config_name for t in BUILTIN_RESOURCES]


def _string_item(node: ScalarNode) -> dict[str, Node] | None:
    """A list item written as a string, as the keys it stands for (marked where the item is)."""
    split = split_resource_text(str(node.value))
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

    def read_list(self, node: Node) -> list[ResourceConfig]:
        if is_null(node):
            return []
        if not isinstance(node, SequenceNode):
            self.problems.at(node, RESOURCES, "expected a list of resources")
            return []
        out: list[ResourceConfig] = []
        seen: dict[str, tuple[str, Node, tuple[str, ...]]] = {}
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
            name = res.rtype.config_name  # a custom resource's kind may be unknown yet
            if name in seen:
                first, first_at, first_key = seen[name]
                self.problems.at(at, path, self._overlap(res, first, first_at, key == first_key))
                continue
            seen[name] = (path, at, key)
            out.append(res)
        return out

    @staticmethod
    def _overlap(res: ResourceConfig, first: str, first_at: Node, same: bool) -> str:
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

    def read_item(self, node: Node, path: str) -> tuple[ResourceConfig, Node] | None:
        fields = self.fields(node, path)
        if fields is None:
            return None
        rtype = self.resource_type(fields, path)
        namespace = self.get(fields, "namespace", path)
        labels = self.selector(fields, "labelSelector", path, rtype)
        field_selector = self.selector(fields, "fieldSelector", path, rtype)
        indexes = self.paths(fields, "indexes", path, fan_out=True)
        history = self.get(fields, "history", path)
        consistent_reads = self.get(fields, "consistentReads", path)
        transform = self.transform(fields.get("transform"), f"{path}.transform")
        # A custom resource's kind and scope, when not written, are upstream's discovery's (the
        # daemon checks the namespace against that scope).
        described = rtype is not None and rtype.kind == ""
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
            or _BAD in (namespace, history, consistent_reads)
        ):
            return None
        resource = ResourceConfig(
            rtype=rtype,
            from_discovery=described,
            namespace=namespace,
            label_selector=labels,
            field_selector=field_selector,
            indexes=tuple(indexes),
            transform=transform,
            history=ENTRY["history"].default if history is None else history,
            consistent_reads=consistent_reads or ENTRY["consistentReads"].default,
        )
        return resource, fields["resource"]

    def fields(self, node: Node, path: str) -> dict[str, Node] | None:
        if isinstance(node, MappingNode):
            fields = mapping(node, path=path, keys=ENTRY_KEYS, problems=self.problems)
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
            # docs/design.md §7: Secrets are cached only when named explicitly, so nothing may stand
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
        bad = custom_resource_problems(name)
        if bad:
            self.problems.at(node, here, f"invalid resource {name!r}: {'; '.join(bad)}")
            return None
        if kind is not None and (problem := kind_problem(kind)) is not None:
            self.problems.at(fields["kind"], f"{path}.kind", problem)
            return None
        group, version, plural = name.split("/")
        if kind is None or namespaced is None:
            if group in BUILTIN_GROUPS:
                self.problems.at(
                    node,
                    here,
                    f"{name} is not a built-in resource{hint} (a custom resource of a built-in "
                    "group needs kind and namespaced)",
                )
                return None
            # A custom resource: its kind and scope come from upstream's discovery, which the
            # daemon asks before serving it. The kind stays "" until then.
            return ResourceType(group, version, plural, "", namespaced=namespaced is not False)
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
                text = node_value(item, FIELD_PATH)
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
        fields = mapping(node, path=path, keys=TRANSFORM_KEYS, problems=self.problems)
        drop = self.paths(fields, "dropFields", path, fan_out=False)
        metadata_only = self.get(fields, "metadataOnly", path, ENTRY["transform.metadataOnly"])
        if drop is None or metadata_only is _BAD:
            return None
        given = "dropFields" in fields and not is_null(fields["dropFields"])
        return Transform(
            drop_fields=tuple(drop) if given else ENTRY["transform.dropFields"].default,
            metadata_only=metadata_only is True,
        )
