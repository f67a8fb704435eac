"""Where configuration values come from, and where each was written: the file, ``CACHEPROXY_*``
environment variables and ``--set`` flags, as pydantic-settings sources.

Why not pydantic-settings' own YAML and environment sources: each value must remember its
place, so that every problem is reported where it is (``config.yaml:12:9: resources[2]…``).
``yaml.compose`` keeps the line and column of every node; each source turns its nodes (or the
text of a variable or flag, which are :class:`~.settings.Text`) into plain data, and keeps the
mark of each value by its place (``("server", "port")``). Variable names are the dotted path in
upper snake case (``CACHEPROXY_SERVER_LIMITS_MAX_WATCHERS``): no nesting delimiter can say that,
since names hold ``_`` too. :class:`Problems` collects everything found, to be reported at once,
file first in line order.
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import yaml
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from cacheproxy.daemon.config.settings import Kind, Setting, Text, env_var_name, suggest

__all__ = [
    "RESOURCES",
    "EnvSource",
    "FileSource",
    "FlagSource",
    "Loc",
    "Problems",
    "Source",
    "dotted",
    "where",
]

RESOURCES: Final = "resources"
Loc = tuple[str | int, ...]

# The variables Kubernetes injects for a Service (``enableServiceLinks``): a Service named
# cacheproxy-server yields CACHEPROXY_SERVER_SERVICE_HOST, CACHEPROXY_SERVER_PORT=tcp://….
_SERVICE_LINK_NAME: Final = re.compile(
    r".*(_SERVICE_HOST|_SERVICE_PORT(_\w+)?|_PORT(_\d+_(TCP|UDP|SCTP)(_\w+)?)?)"
)
_SERVICE_LINK_VALUE: Final = re.compile(r"(tcp|udp|sctp)://\S+")


def dotted(loc: Loc) -> str:
    """``("resources", 2, "indexes", 0)`` → ``resources[2].indexes[0]``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}" if out else part
    return out


def where(mark: yaml.Mark) -> str:
    if mark.line < 0:  # a whole environment variable or flag
        return str(mark.name)
    return f"{mark.name}:{mark.line + 1}:{mark.column + 1}"


class Problems:
    """Every problem found, listed file first (in line order), then environment and flags."""

    def __init__(self, file: str | None) -> None:
        self._file = file
        self._found: list[tuple[tuple[int, int, int], str]] = []

    def __len__(self) -> int:
        return len(self._found)

    def at(self, mark: yaml.Mark, path: str, message: str) -> None:
        in_file = mark.name == self._file and mark.line >= 0
        self._add((0, mark.line, mark.column) if in_file else None, where(mark), path, message)

    def add(self, location: str, path: str, message: str) -> None:
        self._add(None, location, path, message)

    def _add(self, key: tuple[int, int, int] | None, location: str, path: str, text: str) -> None:
        line = f"{location}: {path}: {text}" if path else f"{location}: {text}"
        self._found.append((key or (1, len(self._found), 0), line))

    @property
    def lines(self) -> list[str]:
        return [text for _, text in sorted(self._found, key=lambda found: found[0])]


class Source(PydanticBaseSettingsSource):
    """One source's values (:attr:`data`, nested as in the file) and where each was written."""

    def __init__(self, settings_cls: type[BaseSettings], problems: Problems) -> None:
        super().__init__(settings_cls)
        self.problems = problems
        self.data: dict[str, Any] = {}
        self.marks: dict[Loc, yaml.Mark] = {}
        """Where each value (and each mapping, and each list item) was written."""
        self.keys: dict[Loc, yaml.Mark] = {}
        """Where each key of a mapping was written."""
        self.labels: dict[str, str] = {}
        """The variable or flag of each setting given by one (``$CACHEPROXY_SERVER_PORT``)."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return self.data.get(field.alias or field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return self.data

    def mark(self, loc: Loc, *, exact: bool = False, key: bool = False) -> yaml.Mark | None:
        """Where the value at ``loc`` was written (with ``key``: its key), else its nearest
        enclosing value (unless ``exact``)."""
        if key and loc in self.keys:
            return self.keys[loc]
        for end in range(len(loc), len(loc) - 1 if exact else 0, -1):
            if loc[:end] in self.marks:
                return self.marks[loc[:end]]
        return None

    def node_data(self, node: Node, loc: Loc) -> Any:
        """The plain value of ``node``, every mark kept. A null in a mapping is left out (the
        default applies); a key given twice is reported."""
        self.marks[loc] = node.start_mark
        if isinstance(node, SequenceNode):
            return [self.node_data(item, (*loc, i)) for i, item in enumerate(node.value)]
        if not isinstance(node, MappingNode):
            try:
                return SafeConstructor().construct_object(node)  # a fresh one: it caches
            except ConstructorError:
                self.problems.at(node.start_mark, dotted(loc), f"unsupported YAML tag {node.tag}")
                return None
        out: dict[str, Any] = {}
        for knode, vnode in node.value:
            key = knode.value if isinstance(knode, ScalarNode) else None
            here = (*loc, str(key))
            if not isinstance(key, str):
                self.problems.at(knode.start_mark, dotted(loc), "keys must be strings")
            elif here in self.keys:
                first = self.keys[here].line + 1
                self.problems.at(
                    knode.start_mark, dotted(here), f"duplicate key (first at line {first})"
                )
            else:
                self.keys[here] = knode.start_mark
                value = self.node_data(vnode, here)
                if value is not None:
                    out[key] = value
        return out

    def compose(self, stream: io.TextIOBase, label: str) -> Node | None:
        try:
            return yaml.compose(stream, Loader=yaml.SafeLoader)
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            at = f"{label}:{mark.line + 1}:{mark.column + 1}" if mark else label
            self.problems.add(at, "", f"not valid YAML: {exc.problem or exc.context}")
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            self.problems.add(label, "", f"not valid YAML: {exc}")
        return None


class FileSource(Source):
    """The YAML file. A relative path in it is relative to the file, as kubeconfig does."""

    def __init__(
        self,
        settings_cls: type[BaseSettings],
        problems: Problems,
        path: Path,
        settings: Mapping[str, Setting],
    ) -> None:
        super().__init__(settings_cls, problems)
        self.read_ok = False
        try:
            with open(os.fspath(path), encoding="utf-8") as stream:  # marks name it as given
                root = self.compose(stream, str(path))
        except OSError as exc:
            problems.add(str(path), "", f"cannot read the configuration: {exc.strerror or exc}")
            return
        self.read_ok = not problems and (root is None or isinstance(root, MappingNode))
        if root is not None and not isinstance(root, MappingNode):
            problems.at(root.start_mark, "configuration", "expected a mapping")
        elif root is not None:
            self.data = self.node_data(root, ())
        for setting in settings.values():
            if setting.kind is Kind.PATH:
                self._relative(path.parent, setting.path.split("."))

    def _relative(self, folder: Path, keys: list[str]) -> None:
        *sections, key = keys
        node: Any = self.data
        for section in sections:
            node = node.get(section) if isinstance(node, dict) else None
        if isinstance(node, dict) and isinstance(node.get(key), str) and node[key].strip():
            node[key] = folder / Path(node[key].strip()).expanduser()


class _TextSource(Source):
    """Settings given as text (variables or flags), each by its dotted path."""

    def given(self, label: str, path: str, text: str) -> None:
        if _SERVICE_LINK_VALUE.fullmatch(text.strip()):
            self.problems.add(
                label,
                path,
                f"{text!r} is a Kubernetes service link variable, not a setting: a Service named "
                "like this variable's prefix sets it; use enableServiceLinks: false in the pod "
                "spec or rename the Service",
            )
            return
        *sections, key = path.split(".")
        node = self.data
        for section in sections:
            node = node.setdefault(section, {})
        loc: Loc = tuple(path.split("."))
        self.labels[path] = label
        self.marks[loc] = yaml.Mark(label, 0, -1, -1, None, 0)
        if path != RESOURCES:
            node[key] = Text(text)
        elif text.lstrip().startswith("["):  # a YAML flow sequence, marked inside the text
            stream = io.StringIO(text)
            stream.name = label
            root = self.compose(stream, label)
            if root is not None:
                node[key] = self.node_data(root, loc)
        else:  # a comma-separated list, each name marked at its column
            node[key], offset = [], 0
            self.marks[loc] = yaml.Mark(label, 0, 0, 0, None, 0)
            for part in text.split(","):
                if name := part.strip():
                    column = offset + part.index(name)
                    self.marks[(*loc, len(node[key]))] = yaml.Mark(
                        label, column, 0, column, None, 0
                    )
                    node[key].append(name)
                offset += len(part) + 1


class EnvSource(_TextSource):
    """``CACHEPROXY_*`` variables naming a setting. Unknown names in a section's namespace are
    reported; other ``CACHEPROXY_*`` names belong to other commands (``CACHEPROXY_SIM_*``) or
    are Kubernetes service links, and are left alone."""

    def __init__(
        self,
        settings_cls: type[BaseSettings],
        problems: Problems,
        env: Mapping[str, str],
        paths: list[str],
    ) -> None:
        super().__init__(settings_cls, problems)
        known = {env_var_name(s): s for s in paths}
        sections = tuple(dict.fromkeys(env_var_name(p.split(".")[0]) + "_" for p in paths))
        for name in sorted(env):
            if name in known or not name.startswith(sections) or _SERVICE_LINK_NAME.fullmatch(name):
                continue
            guess = suggest(name, list(known))
            hint = f"; did you mean ${guess}?" if guess else ""
            problems.add(f"${name}", "", f"unknown setting{hint}")
        for name, path in known.items():
            if name in env:
                self.given(f"${name}", path, env[name])


class FlagSource(_TextSource):
    """``--set path=value`` flags (and the flags that stand for one)."""

    def __init__(
        self,
        settings_cls: type[BaseSettings],
        problems: Problems,
        overrides: Mapping[str, str],
        paths: list[str],
    ) -> None:
        super().__init__(settings_cls, problems)
        for key, text in overrides.items():
            if key in paths:
                self.given(f"--set {key}", key, text)
            elif key.startswith(("resources[", "resources.")):
                problems.add(
                    f"--set {key}",
                    "",
                    "one resource entry cannot be set alone: set resources as a whole, e.g. "
                    "--set 'resources=[{resource: pods, indexes: [spec.nodeName]}, configmaps]'",
                )
            else:
                guess = suggest(key, paths)
                hint = f'; did you mean "{guess}"?' if guess else ""
                problems.add(f"--set {key}", "", f"unknown setting{hint}")
