"""The summary of a configuration for people (``cacheproxy check-config``, the daemon's first log
line): what is cached, where the upstream is, where and how the daemon listens.

Where settings combine into one meaning (how the upstream is found, how clients authenticate) a
sentence says it, and names the settings it shows (:data:`SHOWN`). Every other setting is shown
from its declaration: a section without a sentence (``server.limits``) lists all its settings,
and any other setting that differs from its default is listed on an ``other settings`` line. A
new setting therefore appears without a change here; a test checks each one can be seen.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

from cacheproxy.daemon.config.model import (
    SETTINGS,
    AuthMode,
    DaemonConfig,
    ResourceConfig,
    ServerSettings,
    UpstreamSettings,
)
from cacheproxy.daemon.config.settings import Kind, Setting
from cacheproxy.kube.resources import BUILTIN_RESOURCES

__all__ = ["SHOWN", "describe", "render_value", "value_of"]

SHOWN: Final = frozenset(
    {
        "upstream.kubeconfig",
        "upstream.context",
        "upstream.inCluster",
        "upstream.watchList",
        "upstream.pageSize",
        "upstream.minWatchTimeoutSeconds",
        "upstream.http2",
        "upstream.compression",
        "server.address",
        "server.port",
        "server.tls.clientCAFile",
        "server.auth.mode",
        "server.auth.tokenFile",
        "server.auth.tokenCacheTTLSeconds",
        "server.auth.allowedCacheTTLSeconds",
        "server.auth.deniedCacheTTLSeconds",
        "server.auth.allowAnonymous",
        "server.auth.namespaceFiltering",
        "logging.level",
        "logging.format",
    }
)
"""The settings the sentences below show."""
_LISTED: Final = ("server.limits.",)
"""Sections without a sentence: every setting listed with its value."""


def value_of(config: DaemonConfig, setting: Setting) -> Any:
    """``setting``'s value in ``config`` (None inside a section that is not configured)."""
    value: Any = config
    for attr in setting.attrs:
        if value is None:
            return None
        value = getattr(value, attr)
    return value


def render_value(setting: Setting, value: Any) -> str:
    if value is None:
        return "auto" if setting.kind is Kind.TRISTATE else "none"
    if isinstance(value, bool):
        return str(value).lower()
    if setting.kind is Kind.SECONDS:
        return f"{value:g} s"
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, tuple):
        return ", ".join(str(v) for v in value) or "none"
    if isinstance(value, Path):
        return str(value)
    return str(value)


def _pairs(config: DaemonConfig, settings: Iterable[Setting], *, keys: bool = False) -> str:
    return ", ".join(
        f"{s.key if keys else s.path} {render_value(s, value_of(config, s))}" for s in settings
    )


def _resource(r: ResourceConfig) -> str:
    name = r.rtype.config_name
    if r.from_discovery and r.rtype.builtin:
        name += " (kind and scope from upstream's discovery)"
    elif r.from_discovery:
        name += " (custom, kind and scope from upstream's discovery)"
    elif r.rtype not in BUILTIN_RESOURCES:
        name += f" (custom, kind {r.rtype.kind})"
    parts = [
        (f"namespace {r.namespace}" if r.namespace else "all namespaces")
        if r.rtype.namespaced or r.from_discovery
        else "cluster-scoped"
    ]
    if r.label_selector:
        parts.append(f"labels {r.label_selector}")
    if r.field_selector:
        parts.append(f"fields {r.field_selector}")
    if r.indexes:
        parts.append(f"indexes {', '.join(r.indexes)}")
    if r.transform.metadata_only:
        parts.append("metadata only")
    if r.transform.drop_fields:
        parts.append(f"drops {', '.join(r.transform.drop_fields)}")
    parts.append(f"history {r.history} events")
    return f"{name}: {'; '.join(parts)}"


def _upstream(u: UpstreamSettings) -> str:
    default = "$KUBECONFIG or ~/.kube/config"
    if u.in_cluster is True:
        where = "in-cluster service account"
    elif u.kubeconfig or u.context or u.in_cluster is False:
        where = f"kubeconfig {u.kubeconfig or default}"
        if u.context:
            where += f" (context {u.context})"
    else:
        where = f"in-cluster service account when running in a pod, else {default}"
    sync = f"watch-list, else pages of {u.page_size}" if u.watch_list else f"pages of {u.page_size}"
    transport = "HTTP/2 when offered" if u.http2 else "HTTP/1.1, a connection per watch"
    transport += {
        None: ", gzip only from a distant server",
        True: ", gzip",
        False: ", no compression",
    }[u.compression]
    return (
        f"{where}; first sync by {sync}; watches of at least {u.min_watch_timeout_seconds:g} s; "
        f"{transport}"
    )


def _server(s: ServerSettings) -> str:
    a = s.auth
    cached = (
        f"SubjectAccessReview upstream (allowed cached {a.allowed_cache_ttl_seconds:g} s, "
        f"denied {a.denied_cache_ttl_seconds:g} s)"
    )
    if a.mode is AuthMode.TOKEN:
        auth = f"bearer tokens from {a.token_file}; {cached}"
    elif a.mode is AuthMode.DELEGATED:
        auth = f"TokenReview upstream (cached {a.token_cache_ttl_seconds:g} s); {cached}"
    else:
        auth = "no authentication" + (" (loopback only)" if s.loopback else "")
    if a.mode is not AuthMode.NONE and a.allow_anonymous:
        auth += "; anonymous requests allowed (as system:anonymous)"
    if a.mode is not AuthMode.NONE and a.namespace_filtering:
        auth += "; cluster-wide reads narrowed to the readable namespaces"
    if s.tls and s.tls.client_ca_file:
        needed = "required" if a.mode is AuthMode.NONE else "accepted"
        auth += f"; client certificates signed by {s.tls.client_ca_file} {needed}"
    return f"{s.url}, {auth}"


def describe(config: DaemonConfig) -> str:
    """A summary for people: what is cached, where the upstream is, where and how we listen,
    every limit, and whatever else differs from the defaults."""
    head = config.source
    if config.overridden_by:
        head += f" (overridden by {', '.join(config.overridden_by)})"
    n = len(config.resources)
    lines = [f"{head}: {n} resource{'' if n == 1 else 's'}"]
    lines += [f"  {_resource(r)}" for r in config.resources]
    lines += [
        f"upstream: {_upstream(config.upstream)}",
        f"server: {_server(config.server)}",
    ]
    for prefix in _LISTED:
        listed = [s for s in SETTINGS.values() if s.path.startswith(prefix)]
        name = prefix.rstrip(".").rsplit(".", 1)[-1]
        lines.append(f"{name}: {_pairs(config, listed, keys=True)}")
    others = [
        s
        for s in SETTINGS.values()
        if s.path not in SHOWN
        and not s.path.startswith(_LISTED)
        and value_of(config, s) != s.default
    ]
    if others:
        lines.append(f"other settings: {_pairs(config, others)}")
    lines.append(f"logging: {config.logging.level}, {config.logging.format}")
    lines += [f"WARNING: {w}" for w in config.warnings]
    return "\n".join(lines)
