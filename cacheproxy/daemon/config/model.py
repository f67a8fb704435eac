"""What the daemon is configured with: frozen pydantic models grouped by concern, each setting
declared once (type, default, bounds, checks, doc) as :mod:`.settings` describes.

A default that a component of the library already has (the reflector's page size, the server's
watch buffer) is taken from that component with :func:`library_default`, so the number lives in
one place; the daemon still passes every value explicitly (:mod:`cacheproxy.daemon.wiring`).
The docstrings are the reference's words (``docs/configuration.md`` is generated from them).
Nothing here opens a socket or reads a credential; :func:`resolve_upstream` is the one bridge to
the kubeconfig loaders.
"""

from __future__ import annotations

import enum
import ipaddress
import re
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Final, Literal

from pydantic import AfterValidator, Field, InstanceOf, field_validator

from cacheproxy.daemon.config.entry import ResourceConfig
from cacheproxy.daemon.config.limits import ServerLimits
from cacheproxy.daemon.config.settings import TRISTATE, Section, Shown, library_default, settings_of
from cacheproxy.daemon.warmrestart import PersistenceOptions
from cacheproxy.informer import ReflectorOptions
from cacheproxy.server.access import AccessSettings
from cacheproxy.server.app import ServerOptions
from cacheproxy.server.consistent import ConsistencyOptions
from cacheproxy.server.forwarded import AutoCacheOptions
from cacheproxy.server.passthrough import PassThroughOptions
from cacheproxy.serving.compression import Compression
from cacheproxy.upstream import (
    UpstreamConfig,
    build_client,
    load_incluster,
    load_kubeconfig,
    load_upstream,
)

__all__ = [
    "SETTINGS",
    "AuthMode",
    "AuthSettings",
    "CompressionSettings",
    "DaemonConfig",
    "LogFormat",
    "LogLevel",
    "LoggingSettings",
    "PassthroughSettings",
    "PersistenceSettings",
    "ResourceConfig",
    "Sections",
    "ServerLimits",
    "ServerSettings",
    "TLSSettings",
    "UpstreamSettings",
    "is_loopback",
    "resolve_upstream",
    "upstream_loader",
]

_DNS_SUBDOMAIN: Final = re.compile(
    r"(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
)


def _address(text: str) -> str:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        if text.startswith("["):
            raise ValueError(f"write an IPv6 address without brackets, got {text!r}") from None
        if not _DNS_SUBDOMAIN.fullmatch(text.lower()):
            raise ValueError(f"expected an IP address or a host name, got {text!r}") from None
    return text


def is_loopback(address: str) -> bool:
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


class AuthMode(enum.StrEnum):
    NONE = "none"
    """No authentication: for a loopback sidecar."""
    TOKEN = "token"
    """Static bearer tokens read from ``tokenFile``."""
    DELEGATED = "delegated"
    """TokenReview + SubjectAccessReview against the upstream, answers cached."""


class LogFormat(enum.StrEnum):
    TEXT = "text"
    JSON = "json"


LogLevel = Literal["debug", "info", "warning", "error"]


_REFLECTOR: Final = ReflectorOptions
_SERVER: Final = ServerOptions
_ACCESS: Final = AccessSettings
_CONSISTENCY: Final = ConsistencyOptions


class UpstreamSettings(Section):
    """``upstream``: where the API server is and how the reflectors talk to it."""

    kubeconfig: Path | None = None
    """A kubeconfig file."""
    context: Annotated[str | None, Shown(default="its current context")] = None
    """A context of the kubeconfig."""
    in_cluster: Annotated[bool | None, TRISTATE] = None
    """`true`: the pod's service account. `false`: a kubeconfig (`kubeconfig`, else
    `$KUBECONFIG`, else `~/.kube/config`). `auto`: a given `kubeconfig`/`context` wins; else the
    service account when running in a pod (`KUBERNETES_SERVICE_HOST` set); else `$KUBECONFIG` /
    `~/.kube/config`. `true` together with `kubeconfig` or `context` is an error."""
    watch_list: bool = library_default(_REFLECTOR, "watch_list")
    """First sync (and relists) by a streaming watch-list when the upstream serves it (else a
    paged list). Against 1.32 it synced 13-21 % sooner than a list, at the daemon's peak memory
    and 1.2-1.5x its CPU, without the API server's transient memory for the list
    (docs/operations.md, "The first sync")."""
    watch_list_timeout_seconds: Annotated[float, Field(ge=1, le=3600)] = library_default(
        _REFLECTOR, "watch_list_timeout"
    )
    """A watch-list whose initial events have stopped but whose `initial-events-end` bookmark
    has not come within this long is given up for a paged list, and that resource syncs by lists
    from then on (kube-apiserver 1.27 to 1.30 sends that bookmark only after the next write to the
    resource)."""
    http2: bool = library_default(build_client, "http2")
    """Use HTTP/2 when the API server offers it (every list and watch multiplexed on one
    connection). Off by default: see [the upstream transport](#the-upstream-transport)."""
    compression: Annotated[bool | None, TRISTATE] = library_default(build_client, "compression")
    """Ask the API server for gzip. It compresses every response over 128 KiB: a 70 MB list costs
    it about a second of CPU (and the daemon a tenth to undo), worth it on a slow link, a loss on
    a fast one. `auto`: gzip unless the upstream is in-cluster (service account) or on
    loopback."""
    page_size: Annotated[int, Field(ge=1, le=100_000)] = library_default(_REFLECTOR, "page_size")
    """Items per page of an upstream list."""
    min_watch_timeout_seconds: Annotated[float, Field(ge=10, le=3600)] = library_default(
        _REFLECTOR, "min_watch_timeout"
    )
    """Upstream watches ask for a timeout between this and twice this (as client-go)."""
    watch_live_silence_seconds: Annotated[float, Field(ge=0, le=3600)] = library_default(
        _REFLECTOR, "live_silence"
    )
    """A resource's upstream watch counts as live while its stream is open; with this set, only
    while it also sent an event or a bookmark within this long. Reads with `resourceVersion`
    unset of a resource in `consistentReads: live` are served from the cache only while it is
    live (`cacheproxy_watch_live`); otherwise they are proven as in `strict`. `0`: open is
    enough (a quiet collection's watch may say nothing until its timeout: kube-apiserver 1.28
    sent no bookmark in 150 s to a watch of quiet pods)."""

    def reflector_options(self) -> ReflectorOptions:
        """The reflectors' options: every one that is a setting, passed explicitly."""
        return ReflectorOptions(
            page_size=self.page_size,
            watch_list=self.watch_list,
            watch_list_timeout=self.watch_list_timeout_seconds,
            min_watch_timeout=self.min_watch_timeout_seconds,
            live_silence=self.watch_live_silence_seconds,
        )


class TLSSettings(Section):
    """``server.tls``: HTTPS (None: plain HTTP)."""

    cert_file: Path | None = None
    """Serve HTTPS with this certificate (PEM)…"""
    key_file: Path | None = None
    """…and this key. Both or neither."""
    self_signed: bool = False
    """Instead of `certFile`/`keyFile`: serve HTTPS with a certificate of the daemon's own
    making, for `127.0.0.1`, `::1`, `localhost`, the host name and `server.address`, signed by
    a CA of its own whose key is never written. Kept in `persistence.dir` (under `tls/`) and
    reused while valid, else made at each start; clients trust it through the CA in
    `server.clientKubeconfig`. For a sidecar: kubectl and client-go send a bearer token only
    over HTTPS."""
    client_ca_file: Annotated[Path | None, Field(alias="clientCAFile")] = None
    """Client certificates signed by this CA authenticate (CommonName = user, Organizations =
    groups, as the API server maps them). With `auth.mode: none` every client must present one;
    with `token`/`delegated` a certificate is an alternative to a bearer token. Needs
    `certFile`/`keyFile`. The certificate and key files are re-read when they change on disk;
    TLS 1.2 or newer."""


class AuthSettings(Section):
    """``server.auth``: who clients are, and what they may read."""

    mode: AuthMode = AuthMode.NONE
    """`none`: no authentication (a loopback sidecar). `token`: static bearer tokens from
    `tokenFile`. `delegated`: each request's bearer token is checked by the upstream
    (TokenReview). With `token` and `delegated` every request but the health checks is
    authorized by the upstream (SubjectAccessReview), so a client reads through the proxy only
    what its RBAC lets it read directly; denied → the API server's 403. The daemon's own
    credentials need `create` on `tokenreviews` and `subjectaccessreviews` (`cacheproxy rbac`
    adds them)."""
    token_file: Path | None = None
    """The static tokens, in the API server's `--token-auth-file` format:
    `token,user,uid[,"group1,group2"]` per line. Re-read when it changes. Required with
    `mode: token`, refused otherwise."""
    token_cache_ttl_seconds: Annotated[
        float, Field(ge=0, le=3600, alias="tokenCacheTTLSeconds")
    ] = library_default(_ACCESS, "token_ttl")
    """How long a TokenReview answer is reused (a negative one at most 10 s)."""
    allowed_cache_ttl_seconds: Annotated[
        float, Field(ge=0, le=3600, alias="allowedCacheTTLSeconds")
    ] = library_default(_ACCESS, "allowed_ttl")
    """How long an allowing SubjectAccessReview answer is reused (the API server's webhook
    default)."""
    denied_cache_ttl_seconds: Annotated[
        float, Field(ge=0, le=3600, alias="deniedCacheTTLSeconds")
    ] = library_default(_ACCESS, "denied_ttl")
    """How long a denying answer is reused."""
    cache_size: Annotated[int, Field(ge=1, le=10_000_000)] = library_default(_ACCESS, "cache_size")
    """Answers kept per cache (tokens, decisions); least recently used dropped first."""
    namespace_filtering: bool = library_default(_ACCESS, "namespace_filtering")
    """An extension, off by default: a cluster-wide list or watch of a namespaced resource that
    the user may not make returns the objects of the namespaces they may read (one
    SubjectAccessReview per namespace holding objects, cached), instead of the API server's 403.
    Resource versions, paging and watch semantics are unchanged; the set of namespaces is fixed
    when the request starts."""
    allow_anonymous: bool = library_default(_ACCESS, "allow_anonymous")
    """Requests without credentials are `system:anonymous` (RBAC decides) instead of 401.
    Health checks (`/healthz`, `/livez`, `/readyz`) always answer everyone."""


class CompressionSettings(Section):
    """``server.compression``: gzip of large answers, as the API server."""

    enabled: Annotated[bool | None, TRISTATE] = library_default(Compression, "enabled")
    """Gzip list and get answers whose body is longer than `minBytes` for clients that send
    `Accept-Encoding: gzip` (kubectl, client-go, the Python client), with
    `Content-Encoding: gzip`, as the API server does. Compressed in a worker thread and sent as
    it is made; watches are sent uncompressed (as the API server's). `auto`: for every such
    client except those on this machine (loopback: a sidecar's program), for which deflating a
    large list takes far longer than sending it; `true`: for every client."""
    min_bytes: Annotated[int, Field(ge=0, le=1 << 30)] = library_default(Compression, "min_bytes")
    """Smaller bodies go out as they are (the API server's threshold: 128 KiB)."""
    level: Annotated[int, Field(ge=1, le=9)] = library_default(Compression, "level")
    """zlib's compression level: `1` is the fastest (the API server's), `9` the smallest."""

    def options(self) -> Compression:
        return Compression(enabled=self.enabled, min_bytes=self.min_bytes, level=self.level)


class ServerSettings(Section):
    """``server``: where and how the daemon listens."""

    address: Annotated[str, AfterValidator(_address), Shown(type="IP address or host name")] = (
        "127.0.0.1"
    )
    """Where to listen. `0.0.0.0` / `::` = every interface."""
    port: Annotated[int, Field(ge=0, le=65535)] = 8080
    """`0` = any free port."""
    allow_unauthenticated_non_loopback: bool = False
    """See the rule below."""
    shutdown_delay_seconds: Annotated[float, Field(ge=0, le=600)] = 0.0
    """On SIGTERM, keep serving this long while `/readyz` already answers 503, so Service
    endpoints and load balancers stop sending new requests first."""
    shutdown_grace_seconds: Annotated[float, Field(ge=0, le=600)] = 20.0
    """Then, after watches are ended cleanly and no new connection is accepted, how long open
    lists may take to finish. Keep delay + grace below the pod's
    `terminationGracePeriodSeconds`."""
    staleness_header: bool = library_default(_SERVER, "staleness_header")
    """Add `X-Cacheproxy-Staleness-Seconds` (seconds since upstream last moved that resource's
    cache) to list, get and watch responses."""
    tls: TLSSettings | None = None
    client_kubeconfig: Path | None = None
    """Write a kubeconfig here at start (a volume shared with the containers beside the
    daemon) whose only server is this daemon: its URL as bound (the port chosen when `port` is
    0), with `server.tls.selfSigned` its CA inline (with `certFile` the system's trust applies),
    and a user whose `tokenFile` is the pod's ServiceAccount token
    (`/var/run/secrets/kubernetes.io/serviceaccount/token`). An app that honours `KUBECONFIG`
    (client-go, controller-runtime, the Python client, kopf, client-node, kubectl) then reads
    and writes through the daemon with its own identity. Over plain HTTP clients send no
    credentials (they reach upstream anonymous): set `server.tls` for theirs to be forwarded."""
    auth: AuthSettings = AuthSettings()
    limits: ServerLimits = ServerLimits()
    compression: CompressionSettings = CompressionSettings()

    @field_validator("tls")
    @classmethod
    def _tls_when_asked(cls, tls: TLSSettings | None) -> TLSSettings | None:
        """A ``tls`` section that changes nothing (``selfSigned: false``) is no TLS."""
        return None if tls == TLSSettings() else tls

    @property
    def loopback(self) -> bool:
        return is_loopback(self.address)

    @property
    def authenticated(self) -> bool:
        """Whether clients must prove who they are (an auth mode or required client certificates)."""
        return self.auth.mode is not AuthMode.NONE or (
            self.tls is not None and self.tls.client_ca_file is not None
        )

    @property
    def url(self) -> str:
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}"


class LoggingSettings(Section):
    """``logging``: what the daemon logs, and how."""

    level: LogLevel = "info"
    """The least severe messages logged. `--log-level` (before or after the command) is the
    same as `--set logging.level`."""
    format: LogFormat = LogFormat.TEXT
    """`json`: one JSON object per line."""


class PersistenceSettings(Section):
    """``persistence``: warm restarts from each resource's state on disk (docs/operations.md)."""

    directory: Annotated[Path | None, Field(alias="dir")] = None
    """A directory for a snapshot of each cached resource (its objects as stored, their
    resourceVersion, a format version, what it was cached from and a checksum), written
    atomically every `intervalSeconds` and at shutdown, in the background. At start a valid
    snapshot is loaded and the watch resumes from its resourceVersion, without a list (a 410
    relists); a corrupt, truncated, older-format or another configuration's snapshot is logged
    and ignored. Unset: off."""
    interval_seconds: Annotated[float, Field(ge=1, le=86_400)] = library_default(
        PersistenceOptions, "interval"
    )
    """How often the snapshots are written (one whose resource did not change is not)."""
    serve_stale: bool = library_default(PersistenceOptions, "serve_stale")
    """Serve a restored state at once. `false`: lists and watches answer 429 and `/readyz` 503
    until upstream has confirmed it (the resumed watch was accepted), as before a first sync."""


class PassthroughSettings(Section):
    """``passthrough``: what the cache does not answer goes to the API server as its caller sent
    it (docs/operations.md, "What passes through")."""

    enabled: bool = True
    """Forward every request the cache does not answer — writes, subresources (`status`,
    `scale`, `log`, `exec`, …), resources that are not cached, discovery, non-resource paths —
    to the API server unchanged, with the caller's own credentials (never the daemon's), and
    relay its answer. `false`: the read-only answers (405 for writes, 501 for `log`/`exec`/…,
    404 for what is not cached)."""
    impersonate: bool = library_default(PassThroughOptions, "impersonate")
    """Forward callers cacheproxy authenticated by a client certificate or a static token (the
    API server cannot check those) by impersonation: the daemon's identity with
    `Impersonate-User`/`-Group`/`-Uid` of the verified user, any the caller sent dropped (RBAC
    `impersonate` on `users`, `groups`, `uids` needed). Else such callers get 401."""
    max_in_flight: Annotated[int, Field(ge=1, le=1_000_000)] = library_default(
        PassThroughOptions, "max_in_flight"
    )
    """Forwarded requests at once (long-running ones apart); more get 429."""
    max_long_running: Annotated[int, Field(ge=1, le=1_000_000)] = library_default(
        PassThroughOptions, "max_long_running"
    )
    """Forwarded watches, logs, exec, attach, port-forward and proxy requests at once; more
    get 429."""
    max_body_bytes: Annotated[int, Field(ge=1_024, le=1_073_741_824)] = library_default(
        PassThroughOptions, "max_body_bytes"
    )
    """A request body larger than this gets 413 and is not forwarded (the API server refuses
    most bodies over 3 MiB itself)."""
    timeout_seconds: Annotated[float, Field(ge=1, le=3600)] = library_default(
        PassThroughOptions, "timeout"
    )
    """How long a forwarded request other than a long-running one may take, its answer
    included, before 504 (the API server ends its own at 60 s)."""
    idle_connection_seconds: Annotated[float, Field(ge=1, le=3600)] = library_default(
        PassThroughOptions, "idle_connection"
    )
    """How long a connection to the API server that forwarded a request is kept for the next
    one. Below the API server's own 90 s, so that it is never the one to close a connection a
    request is being sent on; each new one costs a TLS handshake."""
    auto_cache: bool = False
    """Cache what is read often though not configured: a resource read through pass-through
    (get, list or watch) at least `autoCacheReadsPerMinute` times in a minute gets an informer
    of its own with the default settings, and is answered from the cache once synced (read
    upstream until then; it does not count for readiness). Logged, and listed on `/status`
    under `autoCached`. Never Secrets; only what upstream's discovery says may be listed and
    watched; one that does not sync within a minute (the daemon's RBAC) is given up. With
    `server.auth.mode: none` a cached resource is readable by everyone who reaches the daemon,
    as any configured one: enable this where that holds for what is read."""
    auto_cache_reads_per_minute: Annotated[int, Field(ge=1, le=1_000_000)] = library_default(
        AutoCacheOptions, "reads_per_minute"
    )
    """How many forwarded reads of one resource in the last minute make it cached."""
    max_auto_resources: Annotated[int, Field(ge=1, le=100)] = library_default(
        AutoCacheOptions, "max_resources"
    )
    """How many resources `autoCache` caches at most at once."""
    auto_cache_idle_seconds: Annotated[float, Field(ge=10, le=86_400)] = library_default(
        AutoCacheOptions, "idle"
    )
    """A resource `autoCache` cached is dropped again (its informer stopped, its reads
    forwarded) once nobody read it for this long."""


class Sections(Section):
    """The settings' sections: what the file, the environment and flags can set, ``resources``
    apart (:class:`~.entry.ResourceEntry`)."""

    upstream: UpstreamSettings = UpstreamSettings()
    server: ServerSettings = ServerSettings()
    logging: LoggingSettings = LoggingSettings()
    persistence: PersistenceSettings = PersistenceSettings()
    passthrough: PassthroughSettings = PassthroughSettings()


class DaemonConfig(Sections):
    """Everything the daemon needs to start, validated."""

    resources: tuple[InstanceOf[ResourceConfig], ...]
    source: str = "defaults"
    """The file read, or ``defaults`` when there was none."""
    overridden_by: tuple[str, ...] = ()
    """The environment variables and flags that changed a value (``$CACHEPROXY_SERVER_PORT``)."""

    @property
    def caches_secrets(self) -> bool:
        return any(r.is_secret for r in self.resources)

    @property
    def warnings(self) -> tuple[str, ...]:
        """Legal but risky choices, for the daemon to log at WARNING on start."""
        out: list[str] = []
        server = self.server
        if self.caches_secrets and server.auth.mode is AuthMode.DELEGATED:
            out.append("Secrets are cached in memory (clients read those their RBAC allows)")
        elif self.caches_secrets:
            out.append("Secrets are cached: every client of this proxy can read them")
        if not server.loopback and not server.authenticated:
            out.append(
                f"serving {server.address} without authentication "
                "(server.allowUnauthenticatedNonLoopback is true)"
            )
        if not server.loopback and server.auth.mode is not AuthMode.NONE and server.tls is None:
            out.append(
                f"bearer tokens travel in clear text: {server.auth.mode} auth off loopback "
                "without TLS (set server.tls)"
            )
        return tuple(out)


SETTINGS: Final = {s.path: s for s in settings_of(Sections)}
"""Every scalar setting by dotted path, in declaration order (``resources`` is read apart)."""


def upstream_loader(
    settings: UpstreamSettings,
) -> tuple[Callable[..., UpstreamConfig], tuple[Any, ...]]:
    """Which loader :func:`resolve_upstream` calls, with which arguments."""
    if settings.in_cluster is True:
        return load_incluster, ()
    if settings.in_cluster is False:
        return load_kubeconfig, (settings.kubeconfig, settings.context)
    return load_upstream, (settings.kubeconfig, settings.context)


def resolve_upstream(settings: UpstreamSettings) -> UpstreamConfig:
    """Load the upstream's address and credentials as ``settings`` say (kubernetes loaders)."""
    loader, args = upstream_loader(settings)
    return loader(*args)
