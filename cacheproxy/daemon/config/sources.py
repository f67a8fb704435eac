"""Where configuration values come from, and where each was written: the file, environment
variables and ``--set`` flags, as YAML nodes that remember their place.

Why the node API: ``yaml.compose`` keeps the line and column of every value, so each problem is
reported where it is (``config.yaml:12:9: resources[2].indexes[0]: …``). Every value from the
environment or a flag becomes a node too, marked with the variable or flag (and, for a YAML
value such as ``CACHEPROXY_RESOURCES='[…]'``, with the line and column inside it), so one
validator serves all sources. :class:`Problems` collects everything found, to be reported at
once, file first in line order.
"""

from __future__ import annotations

import difflib
import io
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final

import yaml
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from cacheproxy.daemon.config.settings import UNSET, Invalid, Setting, env_var_name

__all__ = [
    "RESOURCES",
    "TEXT_TAG",
    "Problems",
    "env_texts",
    "flag_texts",
    "is_null",
    "mapping",
    "node_value",
    "read_file",
    "suggest",
    "text_source",
    "where",
]

RESOURCES: Final = "resources"
TEXT_TAG: Final = "tag:cacheproxy,2024:text"
"""The tag of a value from an environment variable or flag: text to convert, not YAML."""
_NULL_TAG: Final = "tag:yaml.org,2002:null"
_STR_TAG: Final = "tag:yaml.org,2002:str"

# The variables Kubernetes injects for a Service (``enableServiceLinks``): a Service named
# cacheproxy-server yields CACHEPROXY_SERVER_SERVICE_HOST, CACHEPROXY_SERVER_PORT=tcp://….
_SERVICE_LINK_NAME: Final = re.compile(
    r".*(_SERVICE_HOST|_SERVICE_PORT(_\w+)?|_PORT(_\d+_(TCP|UDP|SCTP)(_\w+)?)?)"
)
_SERVICE_LINK_VALUE: Final = re.compile(r"(tcp|udp|sctp)://\S+")


def suggest(word: str, choices: list[str]) -> str | None:
    """The choice ``word`` was probably meant to be: same letters ignoring case, ``_`` and
    ``-``, else the closest by difflib."""
    norm = {c.lower().replace("_", "").replace("-", ""): c for c in choices}
    key = word.lower().replace("_", "").replace("-", "")
    if key in norm:
        return norm[key]
    close = difflib.get_close_matches(key, list(norm), n=1, cutoff=0.6)
    return norm[close[0]] if close else None


def where(node: Node) -> str:
    mark = node.start_mark
    if mark.line < 0:  # a whole environment variable or flag
        return str(mark.name)
    return f"{mark.name}:{mark.line + 1}:{mark.column + 1}"


def is_null(node: Node) -> bool:
    return isinstance(node, ScalarNode) and node.tag == _NULL_TAG


class Problems:
    """Every problem found, listed file first (in line order), then environment and flags."""

    def __init__(self, file: str | None) -> None:
        self._file = file
        self._found: list[tuple[tuple[int, int, int], str]] = []

    def __len__(self) -> int:
        return len(self._found)

    def at(self, node: Node, path: str, message: str) -> None:
        mark = node.start_mark
        in_file = mark.name == self._file and mark.line >= 0
        self._add((0, mark.line, mark.column) if in_file else None, where(node), path, message)

    def add(self, location: str, path: str, message: str) -> None:
        self._add(None, location, path, message)

    def _add(self, key: tuple[int, int, int] | None, location: str, path: str, text: str) -> None:
        line = f"{location}: {path}: {text}" if path else f"{location}: {text}"
        self._found.append((key or (1, len(self._found), 0), line))

    @property
    def lines(self) -> list[str]:
        return [text for _, text in sorted(self._found, key=lambda found: found[0])]


def _construct(node: ScalarNode) -> object:
    """The Python value of a scalar from YAML (a fresh constructor: it caches what it builds)."""
    try:
        return SafeConstructor().construct_object(node)
    except ConstructorError:
        raise Invalid(f"unsupported YAML tag {node.tag}") from None


def node_value(node: Node, setting: Setting) -> Any:
    """``setting``'s value written at ``node``; ``UNSET`` for a YAML null; raises ``Invalid``."""
    if isinstance(node, ScalarNode):
        if node.tag == TEXT_TAG:
            return setting.convert(node.value, text=True)
        value = _construct(node)
        return UNSET if value is None else setting.convert(value, text=False)
    got = "a list" if isinstance(node, SequenceNode) else "a mapping"
    raise Invalid(f"expected {setting.expected}, got {got}")


def is_text(node: Node) -> bool:
    """Whether ``node`` is a string (or text from a variable or flag)."""
    if not isinstance(node, ScalarNode):
        return False
    try:
        return node.tag == TEXT_TAG or isinstance(_construct(node), str)
    except Invalid:
        return False


def mapping(node: Node, *, path: str, keys: list[str], problems: Problems) -> dict[str, Node]:
    """The entries of a mapping node whose keys are all in ``keys``; reports the others."""
    if is_null(node):
        return {}
    if not isinstance(node, MappingNode):
        problems.at(node, path or "configuration", "expected a mapping")
        return {}
    out: dict[str, Node] = {}
    for knode, vnode in node.value:
        key = knode.value if isinstance(knode, ScalarNode) else None
        here = f"{path}.{key}" if path else str(key)
        if not isinstance(key, str):
            problems.at(knode, path, "keys must be strings")
        elif key in out:
            problems.at(
                knode, here, f"duplicate key (first at line {out[key].start_mark.line + 1})"
            )
        elif key not in keys:
            guess = suggest(key, keys)
            hint = f'did you mean "{guess}"?' if guess else f"expected one of: {', '.join(keys)}"
            problems.at(knode, here, f"unknown key; {hint}")
        else:
            out[key] = vnode
    return out


def walk(root: Node, *, paths: Iterable[str], problems: Problems) -> dict[str, Node]:
    """The nodes of ``paths`` (dotted) found under the mapping ``root``, unknown keys reported.
    A path's node is taken whole, whatever it holds (``resources``: a list)."""
    known = list(paths)
    found: dict[str, Node] = {}

    def visit(node: Node, prefix: str) -> None:
        keys = list(
            dict.fromkeys(p[len(prefix) :].split(".")[0] for p in known if p.startswith(prefix))
        )
        here = mapping(node, path=prefix.rstrip("."), keys=keys, problems=problems)
        for key, value in here.items():
            path = prefix + key
            if path in known:
                found[path] = value
            else:
                visit(value, path + ".")

    visit(root, "")
    return found


def _compose(stream: io.TextIOBase, label: str, problems: Problems) -> Node | None:
    try:
        return yaml.compose(stream, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at = f"{label}:{mark.line + 1}:{mark.column + 1}" if mark else label
        problems.add(at, "", f"not valid YAML: {exc.problem or exc.context}")
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        problems.add(label, "", f"not valid YAML: {exc}")
    return None


def read_file(path: Path, problems: Problems) -> Node | None:
    try:
        with open(os.fspath(path), encoding="utf-8") as stream:  # marks name the path as given
            return _compose(stream, str(path), problems)
    except OSError as exc:
        problems.add(str(path), "", f"cannot read the configuration: {exc.strerror or exc}")
        return None


def text_source(setting: str, text: str, *, label: str, problems: Problems) -> Node | None:
    """The node of one environment variable or flag value (None once reported)."""
    if _SERVICE_LINK_VALUE.fullmatch(text.strip()):
        problems.add(
            label,
            setting,
            f"{text!r} is a Kubernetes service link variable, not a setting: a Service named "
            "like this variable's prefix sets it; use enableServiceLinks: false in the pod spec "
            "or rename the Service",
        )
        return None
    if setting != RESOURCES:
        mark = yaml.Mark(label, 0, -1, -1, None, 0)
        return ScalarNode(TEXT_TAG, text, mark, mark)
    if text.lstrip().startswith("["):
        stream = io.StringIO(text)
        stream.name = label  # every node's mark names the variable or flag
        return _compose(stream, label, problems)
    items: list[Node] = []
    offset = 0
    for part in text.split(","):
        name = part.strip()
        if name:
            column = offset + part.index(name)
            mark = yaml.Mark(label, column, 0, column, None, 0)
            items.append(ScalarNode(_STR_TAG, name, mark, mark))
        offset += len(part) + 1
    start = yaml.Mark(label, 0, 0, 0, None, 0)
    return SequenceNode("tag:yaml.org,2002:seq", items, start, start)


def env_texts(
    env: Mapping[str, str], *, paths: list[str], problems: Problems
) -> list[tuple[str, str, str]]:
    """``(label, setting, text)`` of each ``CACHEPROXY_*`` variable naming a setting. Unknown
    names in a section's namespace are reported; other ``CACHEPROXY_*`` names belong to other
    commands (``CACHEPROXY_SIM_*``) or are Kubernetes service links, and are left alone."""
    known = {env_var_name(s): s for s in paths}
    sections = tuple(dict.fromkeys(env_var_name(p.split(".")[0]) + "_" for p in paths))
    for name in sorted(env):
        if name in known or not name.startswith(sections):
            continue
        if not _SERVICE_LINK_NAME.fullmatch(name):
            guess = suggest(name, list(known))
            hint = f"; did you mean ${guess}?" if guess else ""
            problems.add(f"${name}", "", f"unknown setting{hint}")
    return [(f"${name}", s, env[name]) for name, s in known.items() if name in env]


def flag_texts(
    overrides: Mapping[str, str], *, paths: list[str], problems: Problems
) -> list[tuple[str, str, str]]:
    out = []
    for key, text in overrides.items():
        if key in paths:
            out.append((f"--set {key}", key, text))
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
    return out
