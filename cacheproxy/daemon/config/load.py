"""Loading: the file, then environment variables, then flags, merged, validated and assembled
into a :class:`~.model.DaemonConfig`, after the rules between settings (docs/design.md §5, §7).

Sources, highest precedence first: flags (``overrides``: dotted paths such as ``server.port``),
environment variables (``CACHEPROXY_`` + the path in upper snake case:
``CACHEPROXY_SERVER_PORT``), the file, the defaults. ``resources`` is replaced as a whole by
``CACHEPROXY_RESOURCES`` / ``resources=``: a comma-separated list (``pods,apps/v1/deployments``)
or a YAML flow sequence (``[{resource: pods, indexes: [spec.nodeName]}]``). Every problem found
is listed in one :class:`~cacheproxy.errors.ConfigError`, each where it was written.
"""

from __future__ import annotations

import dataclasses
import os
import types
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final

from yaml.nodes import MappingNode, Node, SequenceNode

from cacheproxy.daemon.config.model import (
    SETTINGS,
    AuthMode,
    DaemonConfig,
    LoggingSettings,
)
from cacheproxy.daemon.config.resourcelist import ResourceReader
from cacheproxy.daemon.config.settings import UNSET, Invalid, Kind, assemble
from cacheproxy.daemon.config.sources import (
    RESOURCES,
    TEXT_TAG,
    Problems,
    env_texts,
    flag_texts,
    is_null,
    node_value,
    read_file,
    text_source,
    walk,
    where,
)
from cacheproxy.errors import ConfigError

__all__ = ["SETTING_PATHS", "load_config", "load_logging"]

SETTING_PATHS: Final[tuple[str, ...]] = (RESOURCES, *SETTINGS)
"""Every dotted path a flag or environment variable can set."""
_NO_OVERRIDES: Final[Mapping[str, str]] = types.MappingProxyType({})

Values = Mapping[str, Any]
Rule = Callable[[Values, DaemonConfig], Iterator[tuple[str, str]]]


def load_config(
    path: Path | None,
    *,
    env: Mapping[str, str] = os.environ,
    overrides: Mapping[str, str] = _NO_OVERRIDES,
) -> DaemonConfig:
    """Read ``path`` (None: no file), apply ``env`` and ``overrides`` (flags: dotted path →
    value), validate. Every problem found is listed in one ConfigError, each with its location
    (``file:line:column``, ``$VARIABLE`` or ``--set path``) and the setting's path."""
    problems = Problems(str(path) if path is not None else None)
    nodes: dict[str, Node] = {}
    file_ok = True
    if path is not None:
        root = read_file(path, problems)
        file_ok = not problems and (root is None or isinstance(root, MappingNode))
        if root is not None:
            nodes = walk(root, paths=SETTING_PATHS, problems=problems)
    given = _given(env, overrides, paths=list(SETTING_PATHS), problems=problems)
    nodes.update({setting: node for setting, (_, node) in given.items()})
    resources = nodes.pop(RESOURCES, None)
    values = _values(nodes, path, problems)
    cached = ResourceReader(problems).read_list(resources) if resources is not None else []
    if file_ok and (
        resources is None
        or is_null(resources)
        or (isinstance(resources, SequenceNode) and not resources.value)
    ):
        problems.add(
            where(resources) if resources is not None else str(path or "configuration"),
            RESOURCES,
            "nothing to cache: list at least one resource (in the file, $CACHEPROXY_RESOURCES "
            "or --set resources=pods,apps/v1/deployments)",
        )
    config: DaemonConfig = assemble(
        DaemonConfig,
        {SETTINGS[key].attrs: value for key, value in values.items()},
        resources=tuple(cached),
        source=str(path) if path is not None else "defaults",
        overridden_by=tuple(dict.fromkeys(label for label, _ in given.values())),
    )
    for rule in RULES:
        for setting, message in rule(values, config):
            if setting in nodes:
                problems.at(nodes[setting], setting, message)
            else:
                problems.add("configuration", setting, message)
    _raise(problems)
    return config


def load_logging(
    *, env: Mapping[str, str] = os.environ, overrides: Mapping[str, str] = _NO_OVERRIDES
) -> LoggingSettings:
    """The ``logging`` settings from the environment and flags alone, for the commands that have
    no configuration file (``sim``, ``demo``): the same names, precedence and checks."""
    problems = Problems(None)
    paths = [p for p in SETTINGS if p.startswith("logging.")]
    given = _given(env, overrides, paths=paths, problems=problems)
    values = _values({s: node for s, (_, node) in given.items()}, None, problems, paths)
    _raise(problems)
    return LoggingSettings(**{SETTINGS[p].attrs[-1]: values[p] for p in paths})


def _given(
    env: Mapping[str, str], overrides: Mapping[str, str], *, paths: list[str], problems: Problems
) -> dict[str, tuple[str, Node]]:
    """The variable or flag (its label) and node of each of ``paths`` they set: environment
    first, then flags, so a flag wins."""
    texts = env_texts(env, paths=paths, problems=problems)
    texts += flag_texts(overrides, paths=paths, problems=problems)
    given: dict[str, tuple[str, Node]] = {}
    for label, setting, text in texts:
        node = text_source(setting, text, label=label, problems=problems)
        if node is not None:
            given[setting] = (label, node)
    return given


def _raise(problems: Problems) -> None:
    lines = problems.lines
    if len(lines) == 1:
        raise ConfigError(lines[0])
    if lines:
        raise ConfigError(f"{len(lines)} problems in the configuration:\n  " + "\n  ".join(lines))


def _values(
    nodes: Mapping[str, Node],
    path: Path | None,
    problems: Problems,
    keys: list[str] | None = None,
) -> dict[str, Any]:
    """Every scalar setting's value: its node's, else its default (None when required)."""
    values: dict[str, Any] = {}
    for key in keys or list(SETTINGS):
        setting = SETTINGS[key]
        default = setting.default
        values[key] = None if default is dataclasses.MISSING else default
        node = nodes.get(key)
        if node is None:
            continue
        try:
            value = node_value(node, setting)
        except Invalid as exc:
            problems.at(node, key, str(exc))
            continue
        if value is None and not setting.optional:
            problems.at(node, key, "must not be empty")
            continue
        if value is UNSET:
            continue
        if setting.kind is Kind.PATH and value is not None:
            value = Path(value).expanduser()
            if path is not None and node.tag != TEXT_TAG and not value.is_absolute():
                value = path.parent / value  # relative to the file, as kubeconfig does
        values[key] = value
    return values


# ----------------------------------------------------------------- the rules between settings


def _one_upstream_source(v: Values, config: DaemonConfig) -> Iterator[tuple[str, str]]:
    u = config.upstream
    if u.in_cluster is True and (u.kubeconfig or u.context):
        yield (
            "upstream.inCluster",
            "true conflicts with upstream.kubeconfig / upstream.context: choose one",
        )


def _tls_pairs(v: Values, config: DaemonConfig) -> Iterator[tuple[str, str]]:
    for have, lacking in (("certFile", "keyFile"), ("keyFile", "certFile")):
        if v[f"server.tls.{have}"] and not v[f"server.tls.{lacking}"]:
            yield f"server.tls.{have}", f"needs server.tls.{lacking} too"
    serving = v["server.tls.certFile"] or v["server.tls.selfSigned"]
    if v["server.tls.clientCAFile"] and not serving:
        yield (
            "server.tls.clientCAFile",
            "client certificates need TLS: set server.tls.certFile and keyFile, or "
            "server.tls.selfSigned: true",
        )
    if v["server.tls.selfSigned"] and (v["server.tls.certFile"] or v["server.tls.keyFile"]):
        yield (
            "server.tls.selfSigned",
            "conflicts with server.tls.certFile / keyFile: the daemon makes its own "
            "certificate, or serves yours; choose one",
        )


def _token_file_with_token_mode(v: Values, config: DaemonConfig) -> Iterator[tuple[str, str]]:
    auth = config.server.auth
    if auth.mode is AuthMode.TOKEN and auth.token_file is None:
        yield "server.auth.mode", "token needs server.auth.tokenFile"
    if auth.mode is not AuthMode.TOKEN and auth.token_file is not None:
        yield (
            "server.auth.tokenFile",
            f"is only read with server.auth.mode: token (the mode is {auth.mode})",
        )


def _authenticated_off_loopback(v: Values, config: DaemonConfig) -> Iterator[tuple[str, str]]:
    server = config.server
    if (
        not server.loopback
        and not server.authenticated
        and not server.allow_unauthenticated_non_loopback
    ):
        # docs/design.md §7: binding beyond loopback requires an auth mode unless explicitly overridden.
        yield (
            "server.address",
            f"{server.address} is not a loopback address: anyone who can reach it could read "
            "the cache; set server.auth.mode (token or delegated), or require client "
            "certificates (server.tls.clientCAFile), or set "
            "server.allowUnauthenticatedNonLoopback: true",
        )


RULES: Final[tuple[Rule, ...]] = (
    _one_upstream_source,
    _tls_pairs,
    _token_file_with_token_mode,
    _authenticated_off_loopback,
)
"""Each yields ``(setting, problem)``; the problem is reported where the setting was written."""
