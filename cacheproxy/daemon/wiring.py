"""Where each setting reaches the component it configures: a :class:`DaemonConfig` in, the
options of every component out, as plain comparable values (no socket, no task).

This is the one place the daemon reads its settings (:class:`~.runtime.Daemon` builds from a
:class:`Wiring`, the command line configures logging and finds the upstream from it), so a test
can walk every declared setting, change it, and see that :func:`wire` changes: a setting that is
validated and documented but reaches nothing fails that test. Every component option that is a
setting is passed explicitly, never left to the component's own default.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from cacheproxy.daemon.config import (
    AuthMode,
    DaemonConfig,
    LogFormat,
    LogLevel,
    ResourceConfig,
    ServerLimits,
)
from cacheproxy.daemon.config.model import SETTINGS, upstream_loader
from cacheproxy.daemon.warmrestart import PersistenceOptions
from cacheproxy.errors import ConfigError
from cacheproxy.informer import Collection, ReflectorOptions, Storage, Transform
from cacheproxy.kube.fields import WATCH_CACHE_INDEXES
from cacheproxy.kube.resources import BUILTIN_RESOURCES
from cacheproxy.server.access import AccessSettings
from cacheproxy.server.app import ServerOptions
from cacheproxy.server.consistent import ConsistencyOptions
from cacheproxy.server.forwarded import AutoCacheOptions
from cacheproxy.server.passthrough import PassThroughOptions
from cacheproxy.upstream import UpstreamConfig

__all__ = ["Listener", "ResourceWiring", "Wiring", "effective_config", "wire", "wire_resource"]


@dataclass(frozen=True, slots=True)
class ResourceWiring:
    """One cached resource: its informer's options and how the server serves it."""

    collection: Collection
    field_indexes: tuple[str, ...]
    transform: Transform
    storage: Storage
    history: int
    rv_wait: float
    write_settle: float
    """How long a write's answer waits for the cache (0: a resource cached with selectors)."""
    snapshot_ttl: float
    snapshot_entries: int
    consistent_reads: bool
    """Reads with RV unset may ask upstream (modes live and strict; else: served as the cache
    is)…"""
    consistency: ConsistencyOptions
    """…as these say."""


@dataclass(frozen=True, slots=True)
class Listener:
    """The HTTP listener (uvicorn) and its lifecycle."""

    address: str
    port: int
    cert_file: Path | None
    key_file: Path | None
    client_ca_file: Path | None
    client_certificate_required: bool
    self_signed: bool
    """Serve a certificate of the daemon's own making…"""
    self_signed_dir: Path | None
    """…kept in this directory (None: in a temporary one, made at each start)."""
    client_kubeconfig: Path | None
    """Where to write the kubeconfig for the neighbours (``server.clientKubeconfig``)."""
    header_timeout: float
    idle_connection: int
    """Seconds an idle client connection is kept (uvicorn's keep-alive timeout)."""
    graceful_shutdown: int
    """Seconds open lists may take to finish once nothing new is accepted (uvicorn's unit)."""
    shutdown_delay: float


@dataclass(frozen=True, slots=True)
class Wiring:
    """Every component's options, as a configuration sets them."""

    upstream: tuple[Callable[..., UpstreamConfig], tuple[Any, ...]]
    """The loader of the upstream's address and credentials, and its arguments."""
    http2: bool
    compression: bool | None
    reflector: ReflectorOptions
    server: ServerOptions
    access: AccessSettings | None
    """None: no authentication."""
    token_file: Path | None
    listener: Listener
    resources: tuple[ResourceWiring, ...]
    log_level: LogLevel
    log_format: LogFormat
    persistence: PersistenceOptions
    passthrough: PassThroughOptions | None
    """None: read-only (what the cache does not answer is refused)."""
    autocache: AutoCacheOptions | None
    """None: what is read through pass-through is never cached unasked."""
    warnings: tuple[str, ...]
    """Logged at start: legal but risky choices."""

    def load_upstream(self) -> UpstreamConfig:
        loader, args = self.upstream
        return loader(*args)


def wire_resource(spec: ResourceConfig, limits: ServerLimits) -> ResourceWiring:
    return ResourceWiring(
        collection=spec.collection,
        field_indexes=(
            *spec.indexes,
            *(
                path
                for path in WATCH_CACHE_INDEXES.get((spec.rtype.group, spec.rtype.resource), ())
                if path not in spec.indexes
            ),
        ),
        transform=spec.transform,
        storage=spec.storage,
        history=spec.history,
        rv_wait=limits.rv_wait_seconds,
        write_settle=(
            0.0
            if spec.collection.label_selector or spec.collection.field_selector
            else limits.write_settle_seconds
        ),
        snapshot_ttl=limits.continue_token_ttl_seconds,
        snapshot_entries=limits.list_snapshot_entries,
        consistent_reads=spec.consistent_reads != "cache",
        consistency=ConsistencyOptions(
            mode="strict" if spec.consistent_reads == "consistent" else spec.consistent_reads,
            probes_per_second=limits.consistent_probes_per_second,
            timeout=limits.consistent_read_timeout_seconds,
            confirm_after=limits.consistent_read_confirm_after_seconds,
            after_write=limits.consistent_read_after_write_seconds,
            on_timeout=limits.consistent_read_fallback,
        ),
    )


def wire(config: DaemonConfig) -> Wiring:
    """The options ``config`` gives each component. Raises ConfigError for two resources of the
    same type (the server serves one collection per resource: it would keep only the last)."""
    seen: set[object] = set()
    for spec in config.resources:
        if spec.rtype in seen:
            raise ConfigError(
                f"{spec.rtype.config_name} is configured twice: one entry per resource"
            )
        seen.add(spec.rtype)
    upstream, server, limits = config.upstream, config.server, config.server.limits
    auth, tls = server.auth, server.tls
    return Wiring(
        upstream=upstream_loader(upstream),
        http2=upstream.http2,
        compression=upstream.compression,
        reflector=upstream.reflector_options(),
        server=ServerOptions(
            watch_buffer=limits.watch_buffer,
            watch_buffer_bytes=limits.watch_buffer_bytes,
            watch_buffers_total_bytes=limits.watch_buffers_total_bytes,
            watch_stall=limits.watch_stall_seconds,
            bookmark_interval=limits.bookmark_interval_seconds,
            max_watchers=limits.max_watchers,
            max_page_size=limits.max_page_size,
            max_in_flight=limits.max_in_flight,
            max_watchers_per_user=limits.max_watchers_per_user,
            max_url_bytes=limits.max_url_bytes,
            max_header_bytes=limits.max_header_bytes,
            ready_max_staleness=limits.ready_max_staleness_seconds,
            staleness_header=server.staleness_header,
            compression=server.compression.options(),
        ),
        access=None
        if auth.mode is AuthMode.NONE
        else AccessSettings(
            token_ttl=auth.token_cache_ttl_seconds,
            allowed_ttl=auth.allowed_cache_ttl_seconds,
            denied_ttl=auth.denied_cache_ttl_seconds,
            cache_size=auth.cache_size,
            allow_anonymous=auth.allow_anonymous,
            namespace_filtering=auth.namespace_filtering,
            # A local token file is asked directly, so a rotation applies at once.
            cache_tokens=auth.mode is AuthMode.DELEGATED,
        ),
        token_file=auth.token_file if auth.mode is AuthMode.TOKEN else None,
        listener=Listener(
            address=server.address,
            port=server.port,
            cert_file=tls.cert_file if tls else None,
            key_file=tls.key_file if tls else None,
            client_ca_file=tls.client_ca_file if tls else None,
            self_signed=bool(tls and tls.self_signed),
            self_signed_dir=(
                config.persistence.directory / "tls"
                if tls and tls.self_signed and config.persistence.directory
                else None
            ),
            client_kubeconfig=server.client_kubeconfig,
            # Without an auth mode the certificate is the only proof: required. With one, a
            # certificate is an alternative to a bearer token (as the API server).
            client_certificate_required=auth.mode is AuthMode.NONE,
            header_timeout=limits.header_timeout_seconds,
            idle_connection=limits.idle_connection_seconds,
            graceful_shutdown=max(1, round(server.shutdown_grace_seconds)),
            shutdown_delay=server.shutdown_delay_seconds,
        ),
        resources=tuple(wire_resource(spec, limits) for spec in config.resources),
        log_level=config.logging.level,
        log_format=config.logging.format,
        persistence=PersistenceOptions(
            directory=config.persistence.directory,
            interval=config.persistence.interval_seconds,
            serve_stale=config.persistence.serve_stale,
        ),
        passthrough=_passthrough(config),
        autocache=(
            AutoCacheOptions(
                reads_per_minute=config.passthrough.auto_cache_reads_per_minute,
                max_resources=config.passthrough.max_auto_resources,
                idle=config.passthrough.auto_cache_idle_seconds,
            )
            if config.passthrough.enabled and config.passthrough.auto_cache
            else None
        ),
        warnings=config.warnings,
    )


def _passthrough(config: DaemonConfig) -> PassThroughOptions | None:
    settings = config.passthrough
    if not settings.enabled:
        return None
    return PassThroughOptions(
        max_in_flight=settings.max_in_flight,
        max_long_running=settings.max_long_running,
        max_body_bytes=settings.max_body_bytes,
        timeout=settings.timeout_seconds,
        impersonate=settings.impersonate,
        idle_connection=settings.idle_connection_seconds,
    )


def effective_config(config: DaemonConfig, upstream: UpstreamConfig | None) -> dict[str, Any]:
    """The configuration in effect as JSON, for cacheproxy's own API (``/cacheproxy/v1/config``):
    every setting by its name in the file (a section that is not configured, such as ``tls``,
    is null), each resource as an entry, and the upstream as it was resolved. Paths are shown
    as written; what they hold never is — no bearer token, no key, no password of a proxy URL."""
    doc: dict[str, Any] = {"source": config.source, "overriddenBy": list(config.overridden_by)}
    for setting in SETTINGS.values():
        node, value, missing = doc, config, False
        *sections, leaf = setting.path.split(".")
        for section, attr in zip(sections, setting.attrs, strict=False):
            value = getattr(value, attr)
            if value is None:
                node[section], missing = None, True
                break
            node = node.setdefault(section, {})
        if not missing:
            node[leaf] = _json(getattr(value, setting.attrs[-1]))
    doc["resources"] = [_entry(spec) for spec in config.resources]
    if upstream is not None:
        doc["upstream"]["resolved"] = {
            "server": upstream.server,
            "source": upstream.source,
            "inCluster": upstream.in_cluster,
            "caFile": _json(upstream.ca_file),
            "insecureSkipTLSVerify": not upstream.verify,
            "clientCertificateFile": _json(upstream.client_cert),
            "clientKeyFile": _json(upstream.client_key),
            "tlsServerName": upstream.tls_server_name,
            "proxy": _without_password(upstream.proxy),
        }
    return doc


def _entry(spec: ResourceConfig) -> dict[str, Any]:
    rtype = spec.rtype
    entry: dict[str, Any] = {"resource": rtype.config_name}
    if rtype not in BUILTIN_RESOURCES:
        entry |= {"kind": rtype.kind, "namespaced": rtype.namespaced}
    return entry | {
        "namespace": spec.namespace,
        "labelSelector": spec.label_selector,
        "fieldSelector": spec.field_selector,
        "indexes": list(spec.indexes),
        "transform": {
            "dropFields": list(spec.transform.drop_fields),
            "metadataOnly": spec.transform.metadata_only,
        },
        "storage": {
            "compressed": spec.storage.compressed,
            "level": spec.storage.level,
            "dictionaryBytes": spec.storage.dictionary_bytes,
            "trainingBytes": spec.storage.training_bytes,
            "blockObjects": spec.storage.block_objects,
        },
        "history": spec.history,
    }


def _json(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, tuple):
        return [_json(v) for v in value]
    return value


def _without_password(url: str | None) -> str | None:
    """A proxy URL without the credentials it may carry (``http://user:secret@proxy``)."""
    if not url:
        return url
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit(parts._replace(netloc=netloc))
