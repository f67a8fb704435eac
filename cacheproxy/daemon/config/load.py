"""Loading: the file, then environment variables, then flags, merged by pydantic-settings,
validated by the models, and assembled into a :class:`~.model.DaemonConfig` after the rules
between settings (docs/design.md §5, §7).

Sources, highest precedence first: flags (``overrides``: dotted paths such as ``server.port``),
environment variables (``CACHEPROXY_`` + the path in upper snake case:
``CACHEPROXY_SERVER_PORT``), the file, the defaults. ``resources`` is replaced as a whole by
``CACHEPROXY_RESOURCES`` / ``resources=``: a comma-separated list (``pods,apps/v1/deployments``)
or a YAML flow sequence (``[{resource: pods, indexes: [spec.nodeName]}]``). Every problem found
is listed in one :class:`~cacheproxy.errors.ConfigError`, each where it was written: pydantic
reports every wrong value of a pass, and :class:`DaemonSettings` drops them (their defaults
apply) and validates again until nothing more is wrong, so that checks which need valid values
(an entry's resource type, the rules) still run and report too.
"""

from __future__ import annotations

import os
import types
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any, Final

from pydantic import BeforeValidator, TypeAdapter, ValidationError, field_validator
from pydantic_core import ErrorDetails
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from cacheproxy.daemon.config.entry import ENTRY, ResourceEntry
from cacheproxy.daemon.config.model import (
    SETTINGS,
    AuthMode,
    DaemonConfig,
    LoggingSettings,
    Sections,
    TLSSettings,
)
from cacheproxy.daemon.config.settings import suggest, wording
from cacheproxy.daemon.config.sources import (
    RESOURCES,
    EnvSource,
    FileSource,
    FlagSource,
    Loc,
    Problems,
    Source,
    dotted,
    where,
)
from cacheproxy.errors import ConfigError
from cacheproxy.kube.fields import parse_field_selector
from cacheproxy.kube.labels import parse_label_selector

__all__ = ["SETTING_PATHS", "DaemonSettings", "load_config", "load_logging"]

SETTING_PATHS: Final[tuple[str, ...]] = (RESOURCES, *SETTINGS)
"""Every dotted path a flag or environment variable can set."""
_NO_OVERRIDES: Final[Mapping[str, str]] = types.MappingProxyType({})
_SOURCES: ContextVar[tuple[Source, ...]] = ContextVar("_SOURCES")
"""The sources of the :class:`DaemonSettings` being built, highest precedence first."""
_DROPPED: Final = object()
"""An entry of ``resources`` found wrong: left in place (as None) so the others keep their index."""


def _entry_or_dropped(item: Any) -> Any:
    if item is None:
        raise ValueError('expected a resource name or a mapping with a "resource" key')
    return None if item is _DROPPED else item


_ENTRIES: Final = TypeAdapter(
    tuple[Annotated[ResourceEntry | None, BeforeValidator(_entry_or_dropped)], ...]
)


class DaemonSettings(BaseSettings):
    """The values the sources give, merged by pydantic-settings in the order
    :meth:`settings_customise_sources` gives (a flag beats a variable, which beats the file).
    Validated apart (:func:`_validated`), by the keys people write alone (``by_name=False``)."""

    model_config = SettingsConfigDict(extra="allow", case_sensitive=True)

    @classmethod
    def settings_customise_sources(
        cls, settings_cls: type[BaseSettings], *args: Any, **kwargs: Any
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return _SOURCES.get()


class _Read(Sections):
    """The sections and the ``resources`` entries, as read (None: an entry found wrong)."""

    resources: Any = ()

    @field_validator("resources")
    @classmethod
    def _entries(cls, value: Any) -> tuple[ResourceEntry | None, ...]:
        if not isinstance(value, list | tuple):
            raise ValueError("expected a list of resources")
        return _ENTRIES.validate_python(tuple(value), by_name=False)

    @property
    def entries(self) -> list[tuple[int, ResourceEntry]]:
        return [(i, e) for i, e in enumerate(self.resources) if e is not None]


def _validated(data: dict[str, Any]) -> tuple[_Read, list[ErrorDetails]]:
    """The settings in ``data``, and every problem with them. A wrong value is dropped (its
    default applies) and the rest validated again until nothing more is wrong, so that checks
    which need valid values (an entry's type, the rules) still run, and report too."""
    found: list[ErrorDetails] = []
    while True:
        try:
            return _Read.model_validate(data, by_name=False), found
        except ValidationError as exc:
            errors = exc.errors()
            seen = {(e["loc"], e["msg"]) for e in found}
            found += [
                e
                for e in errors
                if not seen or (e["type"] != "missing" and (e["loc"], e["msg"]) not in seen)
            ]
            dropped = [_drop(data, e["loc"]) for e in reversed(errors)]  # every one
            if not all(dropped):
                raise  # pragma: no cover - every problem has a place to drop


def _drop(data: Any, loc: Loc) -> bool:
    """Take the value at ``loc`` out of ``data`` (an entry of ``resources``: set it aside), or,
    when there is none (a missing key), its enclosing value."""
    if not loc:
        return False
    *parents, last = loc
    node = data
    for part in parents:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return _drop(data, tuple(parents))
    if len(loc) == 2 and loc[0] == RESOURCES and isinstance(node, list) and isinstance(last, int):
        node[last] = _DROPPED
        return True
    if isinstance(node, dict) and last in node:
        del node[last]
        return True
    if isinstance(node, list) and isinstance(last, int) and last < len(node):
        del node[last]
        return True
    return _drop(data, tuple(parents))


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
    settings, sources = _settings(problems, path, env, overrides, list(SETTING_PATHS))
    flags, variables, *file = sources
    raw = next((s.data[RESOURCES] for s in sources if RESOURCES in s.data), None)
    if all(isinstance(f, FileSource) and f.read_ok for f in file) and not raw:
        mark = next((m for s in sources if (m := s.mark((RESOURCES,), exact=True))), None)
        problems.add(
            where(mark) if mark else str(path or "configuration"),
            RESOURCES,
            "nothing to cache: list at least one resource (in the file, $CACHEPROXY_RESOURCES "
            "or --set resources=pods,apps/v1/deployments)",
        )
    cached: dict[str, tuple[int, ResourceEntry]] = {}
    for i, entry in settings.entries:
        _overlap(entry, i, cached, sources, problems)
    given = variables.labels | flags.labels
    config = DaemonConfig(
        resources=tuple(entry.config() for _, entry in cached.values()),
        **{name: getattr(settings, name) for name in Sections.model_fields},
        source=str(path) if path is not None else "defaults",
        overridden_by=tuple(dict.fromkeys(given.values())),
    )
    for setting, message in _rules(config):
        mark = next((m for s in sources if (m := s.mark(_loc(setting), exact=True))), None)
        if mark is not None:
            problems.at(mark, setting, message)
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
    settings, _ = _settings(problems, None, env, overrides, paths)
    _raise(problems)
    return settings.logging


def _settings(
    problems: Problems,
    path: Path | None,
    env: Mapping[str, str],
    overrides: Mapping[str, str],
    paths: list[str],
) -> tuple[_Read, tuple[Source, ...]]:
    """The settings from the sources, their problems reported, and the sources (flags, the
    environment, the file)."""
    file = () if path is None else (FileSource(DaemonSettings, problems, path, SETTINGS),)
    variables = EnvSource(DaemonSettings, problems, env, paths)
    sources = (FlagSource(DaemonSettings, problems, overrides, paths), variables, *file)
    token = _SOURCES.set(sources)
    try:
        data = DaemonSettings().model_extra or {}
    finally:
        _SOURCES.reset(token)
    settings, errors = _validated(data)
    for error in errors:
        loc, message = _problem(error)
        mark = next((m for s in sources if (m := s.mark(loc, key=_unknown(error)))), None)
        if mark is None:  # pragma: no cover - every value given was written somewhere
            problems.add("configuration", dotted(loc), message)
        else:
            problems.at(mark, dotted(loc) or "configuration", message)
    return settings, sources


def _unknown(error: ErrorDetails) -> bool:
    return error["type"] == "extra_forbidden"


def _problem(error: ErrorDetails) -> tuple[Loc, str]:
    """Where a validation error is, and what it says, as the configuration words it."""
    loc, kind = tuple(error["loc"]), error["type"]
    if kind == "missing":
        return loc[:-1], f'missing key "{loc[-1]}"'
    if kind == "extra_forbidden":
        keys = _keys(loc[:-1])
        guess = suggest(str(loc[-1]), keys)
        hint = f'did you mean "{guess}"?' if guess else f"expected one of: {', '.join(keys)}"
        return loc, f"unknown key; {hint}"
    if kind in ("model_type", "model_attributes_type"):
        return loc, "expected a mapping"
    if loc[:1] == (RESOURCES,):
        setting = ENTRY.get(".".join(p for p in loc[2:] if isinstance(p, str)))
    else:
        setting = SETTINGS.get(".".join(str(p) for p in loc))
    return loc, setting.wording(error) if setting is not None else wording(error)


def _keys(loc: Loc) -> list[str]:
    """The keys a mapping at ``loc`` may have."""
    inside = loc[2:] if loc[:1] == (RESOURCES,) else loc
    paths = ENTRY if loc[:1] == (RESOURCES,) else SETTING_PATHS
    prefix = "".join(f"{p}." for p in inside)
    return list(
        dict.fromkeys(p[len(prefix) :].split(".")[0] for p in paths if p.startswith(prefix))
    )


def _loc(path: str) -> Loc:
    return tuple(path.split("."))


def _overlap(
    entry: ResourceEntry,
    i: int,
    cached: dict[str, tuple[int, ResourceEntry]],
    sources: tuple[Source, ...],
    problems: Problems,
) -> None:
    """One entry per resource: the server serves one collection per resource on the resource's
    paths, so a second entry for a resource (other namespaces or selectors) is refused, naming
    the first."""
    name = entry.config().rtype.config_name  # a custom resource's kind may be unknown yet
    if name not in cached:
        cached[name] = (i, entry)
        return
    first, other = cached[name]

    def mark(at: int) -> Any:
        return next(m for s in sources if (m := s.mark((RESOURCES, at, "resource"))))

    def key(e: ResourceEntry) -> tuple[str, str, str]:
        labels, fields = (
            parse_label_selector(e.label_selector),
            parse_field_selector(e.field_selector),
        )
        return e.namespace or "", str(labels), str(fields)

    there = f"resources[{first}] ({where(mark(first))})"
    if key(entry) == key(other):
        why = f"caches the same collection as {there}: same resource, namespace and selectors"
    else:
        why = (
            f"caches {name} again: {there} caches it with another namespace or selectors, and "
            "the server serves one collection per resource; keep one entry whose namespace and "
            "selectors cover both"
        )
    problems.at(mark(i), f"resources[{i}]", why)


def _raise(problems: Problems) -> None:
    lines = problems.lines
    if len(lines) == 1:
        raise ConfigError(lines[0])
    if lines:
        raise ConfigError(f"{len(lines)} problems in the configuration:\n  " + "\n  ".join(lines))


def _rules(config: DaemonConfig) -> Iterator[tuple[str, str]]:
    """The rules between settings: each ``(setting, problem)``, the problem reported where the
    setting was written. Checked here, not by the models, so that code may build any
    combination (a test's TLS without a key)."""
    u = config.upstream
    if u.in_cluster is True and (u.kubeconfig or u.context):
        yield (
            "upstream.inCluster",
            "true conflicts with upstream.kubeconfig / upstream.context: choose one",
        )
    tls = config.server.tls or TLSSettings()
    if tls.cert_file and not tls.key_file:
        yield "server.tls.certFile", "needs server.tls.keyFile too"
    if tls.key_file and not tls.cert_file:
        yield "server.tls.keyFile", "needs server.tls.certFile too"
    if tls.client_ca_file and not (tls.cert_file or tls.self_signed):
        yield (
            "server.tls.clientCAFile",
            "client certificates need TLS: set server.tls.certFile and keyFile, or "
            "server.tls.selfSigned: true",
        )
    if tls.self_signed and (tls.cert_file or tls.key_file):
        yield (
            "server.tls.selfSigned",
            "conflicts with server.tls.certFile / keyFile: the daemon makes its own "
            "certificate, or serves yours; choose one",
        )
    server, auth = config.server, config.server.auth
    if auth.mode is AuthMode.TOKEN and auth.token_file is None:
        yield "server.auth.mode", "token needs server.auth.tokenFile"
    if auth.mode is not AuthMode.TOKEN and auth.token_file is not None:
        yield (
            "server.auth.tokenFile",
            f"is only read with server.auth.mode: token (the mode is {auth.mode})",
        )
    if not (server.loopback or server.authenticated or server.allow_unauthenticated_non_loopback):
        # docs/design.md §7: binding beyond loopback requires an auth mode unless explicitly overridden.
        yield (
            "server.address",
            f"{server.address} is not a loopback address: anyone who can reach it could read "
            "the cache; set server.auth.mode (token or delegated), or require client "
            "certificates (server.tls.clientCAFile), or set "
            "server.allowUnauthenticatedNonLoopback: true",
        )
