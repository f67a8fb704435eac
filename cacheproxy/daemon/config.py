"""The daemon's configuration: one YAML file, environment variables and flags, validated at once.

What it owns: the shape of the configuration (frozen dataclasses grouped by concern: what is
cached, how the upstream is reached, how the server listens, how it logs), its defaults, and the
rules a configuration must obey before anything starts (DESIGN §5, §7). Nothing here opens a
socket or reads a credential; :func:`resolve_upstream` is the one bridge to the kubeconfig loaders.

Sources, highest precedence first: flags (``overrides``: dotted paths such as ``server.port``),
environment variables (``CACHEPROXY_`` + the path in upper snake case:
``CACHEPROXY_SERVER_PORT``), the file, the defaults. ``resources`` is replaced as a whole by
``CACHEPROXY_RESOURCES`` / ``resources=``: a comma-separated list (``pods,apps/v1/deployments``)
or a YAML flow sequence (``[{resource: pods, indexes: [spec.nodeName]}]``).

Why the node API: ``yaml.compose`` keeps the line and column of every value, so each problem is
reported where it is (``config.yaml:12:9: resources[2].indexes[0]: …``). Every value from the
environment or a flag becomes a node too, marked with the variable or flag, so one validator
serves all sources. All problems are collected and raised together as one ``ConfigError``.
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import io
import ipaddress
import os
import re
import sys
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from cacheproxy.errors import ApiError, ConfigError
from cacheproxy.informer.factory import Collection
from cacheproxy.informer.reflector import ReflectorOptions
from cacheproxy.informer.store import Transform
from cacheproxy.kube.fieldpath import compile_field_path
from cacheproxy.kube.fields import parse_field_selector, validate_field_selector
from cacheproxy.kube.labels import parse_label_selector
from cacheproxy.kube.resources import BUILTIN_RESOURCES, ResourceRegistry, ResourceType
from cacheproxy.upstream.config import (
    UpstreamConfig,
    load_incluster,
    load_kubeconfig,
    load_upstream,
)

__all__ = [
    "SETTING_PATHS",
    "AuthMode",
    "AuthSettings",
    "CachedResource",
    "DaemonConfig",
    "LogFormat",
    "LoggingSettings",
    "ServerLimits",
    "ServerSettings",
    "TLSSettings",
    "UpstreamSettings",
    "check_config_main",
    "describe",
    "env_var_name",
    "load_config",
    "resolve_upstream",
]

# ------------------------------------------------------------------------------------ the model


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


@dataclass(frozen=True, slots=True)
class CachedResource:
    """One collection to list and watch upstream, and how to keep it."""

    rtype: ResourceType
    namespace: str | None = None
    """Only this namespace (namespaced resources only); None = all namespaces."""
    label_selector: str = ""
    """Applied upstream (server-side filtering), as written."""
    field_selector: str = ""
    indexes: tuple[str, ...] = ()
    """Field paths indexed in the store (``spec.nodeName``, ``metadata.ownerReferences[*].uid``)."""
    transform: Transform = dataclasses.field(default_factory=Transform)
    history: int = 100_000
    """EventLog size: events kept for watch resume."""

    @property
    def collection(self) -> Collection:
        """The informer factory's key for this collection."""
        return Collection(self.rtype, self.namespace, self.label_selector, self.field_selector)

    @property
    def is_secret(self) -> bool:
        return self.rtype.group == "" and self.rtype.resource == "secrets"


@dataclass(frozen=True, slots=True)
class UpstreamSettings:
    """Where the upstream API server is (the loaders of :mod:`cacheproxy.upstream.config`) and
    how the reflectors talk to it."""

    kubeconfig: Path | None = None
    context: str | None = None
    in_cluster: bool | None = None
    """True: the pod's service account; False: a kubeconfig; None: in-cluster when running in a
    pod (``KUBERNETES_SERVICE_HOST`` set) unless a kubeconfig or context is given."""
    watch_list: bool = True
    watch_list_timeout_seconds: float = 10.0
    page_size: int = 500
    min_watch_timeout_seconds: float = 300.0
    http2: bool = False
    compression: bool | None = None
    """Ask upstream for gzip: True, False, or None (auto: unless in-cluster or loopback)."""

    def reflector_options(self) -> ReflectorOptions:
        return ReflectorOptions(
            page_size=self.page_size,
            watch_list=self.watch_list,
            watch_list_timeout=self.watch_list_timeout_seconds,
            min_watch_timeout=self.min_watch_timeout_seconds,
        )


@dataclass(frozen=True, slots=True)
class TLSSettings:
    cert_file: Path
    key_file: Path
    client_ca_file: Path | None = None
    """When set, every client must present a certificate signed by this CA (required, not
    optional): this counts as authentication for the non-loopback rule."""


@dataclass(frozen=True, slots=True)
class AuthSettings:
    mode: AuthMode = AuthMode.NONE
    token_file: Path | None = None
    """The static tokens (mode ``token`` only)."""
    token_cache_ttl_seconds: float = 120.0
    """How long a TokenReview answer is reused (a negative one at most 10 s)."""
    allowed_cache_ttl_seconds: float = 300.0
    """How long an allowing SubjectAccessReview answer is reused."""
    denied_cache_ttl_seconds: float = 30.0
    """How long a denying SubjectAccessReview answer is reused."""
    cache_size: int = 10_000
    """Answers kept per cache (tokens, decisions), least recently used dropped first."""
    allow_anonymous: bool = False
    """Requests without credentials as ``system:anonymous`` (RBAC decides) instead of 401."""
    namespace_filtering: bool = False
    """A cluster-wide list/watch the user may not make returns just the namespaces they may
    read (an extension of the API server's behaviour, which answers 403)."""


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """Bounds that keep one client from hurting the others (DESIGN §7: every buffer bounded)."""

    max_watchers: int = 10_000
    watch_buffer: int = 1_000
    """Events queued per watcher; a watcher whose buffer is full is closed."""
    watch_stall_seconds: float = 10.0
    """A watch whose client takes no bytes for this long while events wait for it is closed."""
    rv_wait_seconds: float = 3.0
    """How long a read at a resourceVersion newer than the cache waits (as the apiserver)."""
    bookmark_interval_seconds: float = 60.0
    continue_token_ttl_seconds: float = 300.0
    """How long a paged list's snapshot at an older RV is kept after its last page, for the next
    continue token (etcd's default compaction interval: a token lives about as long as against
    the real API server). Past it the state is rebuilt from the event history while that still
    reaches the token's RV, else the token gets 410."""
    list_snapshot_entries: int = 1_000_000
    """Objects the snapshots kept for paged lists may reference together, per resource (least
    recently used dropped first; 0: none kept, every page rebuilds its state)."""
    max_page_size: int = 10_000
    """A larger ``limit`` is served in pages of this size (the API lets a server return fewer)."""
    max_in_flight: int = 400
    """Requests other than watches served at once; more get 429 with Retry-After."""
    max_watchers_per_user: int = 1_000
    """Open watches per authenticated user; more get 429."""
    max_url_bytes: int = 8_192
    max_header_bytes: int = 65_536
    ready_max_staleness_seconds: float = 0.0
    """``/readyz`` fails while a resource has not heard from upstream for longer than this
    (0: stay ready once synced; the cache keeps serving the last state either way)."""
    header_timeout_seconds: float = 10.0
    """A connection that has not sent a request's complete headers this long after it opened
    (or after the request began) is closed: slow clients do not hold connections."""


@dataclass(frozen=True, slots=True)
class ServerSettings:
    address: str = "127.0.0.1"
    port: int = 8080
    """0: any free port."""
    tls: TLSSettings | None = None
    auth: AuthSettings = dataclasses.field(default_factory=AuthSettings)
    allow_unauthenticated_non_loopback: bool = False
    staleness_header: bool = False
    """``X-Cacheproxy-Staleness-Seconds`` on list, get and watch responses."""
    shutdown_delay_seconds: float = 0.0
    """On SIGTERM, how long to keep serving while ``/readyz`` already fails, so load balancers
    and Service endpoints stop sending new requests first."""
    shutdown_grace_seconds: float = 20.0
    """Then, how long open lists may take to finish before they are cut."""
    limits: ServerLimits = dataclasses.field(default_factory=ServerLimits)

    @property
    def loopback(self) -> bool:
        return _is_loopback(self.address)

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


@dataclass(frozen=True, slots=True)
class LoggingSettings:
    level: str = "info"
    """``debug``, ``info``, ``warning`` or ``error``."""
    format: LogFormat = LogFormat.TEXT


@dataclass(frozen=True, slots=True)
class DaemonConfig:
    """Everything the daemon needs to start, validated."""

    resources: tuple[CachedResource, ...]
    upstream: UpstreamSettings = dataclasses.field(default_factory=UpstreamSettings)
    server: ServerSettings = dataclasses.field(default_factory=ServerSettings)
    logging: LoggingSettings = dataclasses.field(default_factory=LoggingSettings)
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


# ------------------------------------------------------------------------- settings and sources


class _Invalid(Exception):
    """A value that cannot be used; the message says why."""


_UNSET: Final = object()
_TEXT_TAG: Final = "tag:cacheproxy,2024:text"
"""The tag of a value from an environment variable or flag: text to convert, not YAML."""


def _construct(node: ScalarNode) -> object:
    """The Python value of a scalar from YAML (a fresh constructor: it caches what it builds)."""
    try:
        return SafeConstructor().construct_object(node)
    except yaml.constructor.ConstructorError:
        raise _Invalid(f"unsupported YAML tag {node.tag}") from None


def _kind_of(value: object) -> str:
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, int | float):
        return f"a number ({value})"
    if isinstance(value, str):
        return f"a string ({value!r})"
    return type(value).__name__


class _Conv:
    """Turns a scalar (YAML-typed, or text when ``text``) into a setting's value."""

    expected = "a value"

    def __call__(self, value: object, text: bool) -> Any:
        raise NotImplementedError


def _num(x: float) -> str:
    return str(int(x)) if x == int(x) else str(x)


class _Number(_Conv):
    """An integer, or a number of seconds (int or float), within ``lo``..``hi``."""

    def __init__(self, lo: float, hi: float, *, seconds: bool = False) -> None:
        self.lo, self.hi, self.seconds = lo, hi, seconds
        self.expected = "a number of seconds" if seconds else "an integer"

    def __call__(self, value: object, text: bool) -> Any:
        parse: type[int] | type[float] = float if self.seconds else int
        if text and isinstance(value, str):
            try:
                value = parse(value.strip())
            except ValueError:
                raise _Invalid(f"expected {self.expected}, got {value!r}") from None
        accepted = (int, float) if self.seconds else (int,)
        if isinstance(value, bool) or not isinstance(value, accepted):
            raise _Invalid(f"expected {self.expected}, got {_kind_of(value)}")
        if not self.lo <= value <= self.hi:
            unit = " seconds" if self.seconds else ""
            raise _Invalid(
                f"must be between {_num(self.lo)} and {_num(self.hi)}{unit}, got {_num(value)}"
            )
        return parse(value)


_TRUE_TEXT = frozenset({"true", "1", "yes", "on"})
_FALSE_TEXT = frozenset({"false", "0", "no", "off"})


class _Bool(_Conv):
    expected = "true or false"

    def __call__(self, value: object, text: bool) -> Any:
        if text and isinstance(value, str):
            lowered = value.strip().lower()
            if lowered in _TRUE_TEXT | _FALSE_TEXT:
                return lowered in _TRUE_TEXT
            raise _Invalid(f"expected true or false, got {value!r}")
        if not isinstance(value, bool):
            raise _Invalid(f"expected true or false, got {_kind_of(value)}")
        return value


class _Str(_Conv):
    expected = "a string"

    def __init__(self, check: Callable[[str], str | None] | None = None) -> None:
        self.check = check

    def __call__(self, value: object, text: bool) -> Any:
        if not isinstance(value, str):
            raise _Invalid(f"expected a string, got {_kind_of(value)}; quote it")
        value = value.strip()
        if not value:
            return None if text else _UNSET
        problem = self.check(value) if self.check else None
        if problem:
            raise _Invalid(problem)
        return value


class _Choice(_Conv):
    def __init__(self, *choices: str, booleans: bool = False) -> None:
        self.choices = choices
        self.booleans = booleans
        self.expected = " or ".join(choices)

    def __call__(self, value: object, text: bool) -> Any:
        if self.booleans and isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in self.choices:
            return value.strip().lower()
        raise _Invalid(f"expected one of {', '.join(self.choices)}; got {_kind_of(value)}")


def _check_address(text: str) -> str | None:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        if text.startswith("["):
            return f"write an IPv6 address without brackets, got {text!r}"
        if not _DNS_SUBDOMAIN.fullmatch(text.lower()):
            return f"expected an IP address or a host name, got {text!r}"
    return None


def _is_loopback(address: str) -> bool:
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(
    r"(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
)
_VERSION = re.compile(r"v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?")
_KIND = re.compile(r"[A-Z][A-Za-z0-9]*")
_LOG_LEVELS = ("debug", "info", "warning", "error")


@dataclass(frozen=True, slots=True)
class _Setting:
    conv: _Conv
    default: Any
    is_path: bool = False


_PATH = _Str()
_SETTINGS: Final[dict[str, _Setting]] = {
    "upstream.kubeconfig": _Setting(_PATH, None, is_path=True),
    "upstream.context": _Setting(_Str(), None),
    "upstream.inCluster": _Setting(_Choice("auto", "true", "false", booleans=True), "auto"),
    "upstream.watchList": _Setting(_Bool(), True),
    "upstream.watchListTimeoutSeconds": _Setting(_Number(1, 3600, seconds=True), 10.0),
    "upstream.http2": _Setting(_Bool(), False),
    "upstream.compression": _Setting(_Choice("auto", "true", "false", booleans=True), "auto"),
    "upstream.pageSize": _Setting(_Number(1, 100_000), 500),
    "upstream.minWatchTimeoutSeconds": _Setting(_Number(10, 3600, seconds=True), 300.0),
    "server.address": _Setting(_Str(_check_address), "127.0.0.1"),
    "server.port": _Setting(_Number(0, 65535), 8080),
    "server.allowUnauthenticatedNonLoopback": _Setting(_Bool(), False),
    "server.tls.certFile": _Setting(_PATH, None, is_path=True),
    "server.tls.keyFile": _Setting(_PATH, None, is_path=True),
    "server.tls.clientCAFile": _Setting(_PATH, None, is_path=True),
    "server.auth.mode": _Setting(_Choice(*AuthMode), "none"),
    "server.auth.tokenFile": _Setting(_PATH, None, is_path=True),
    "server.auth.tokenCacheTTLSeconds": _Setting(_Number(0, 3600, seconds=True), 120.0),
    "server.auth.allowedCacheTTLSeconds": _Setting(_Number(0, 3600, seconds=True), 300.0),
    "server.auth.deniedCacheTTLSeconds": _Setting(_Number(0, 3600, seconds=True), 30.0),
    "server.auth.cacheSize": _Setting(_Number(1, 10_000_000), 10_000),
    "server.auth.allowAnonymous": _Setting(_Bool(), False),
    "server.auth.namespaceFiltering": _Setting(_Bool(), False),
    "server.limits.maxWatchers": _Setting(_Number(1, 1_000_000), 10_000),
    "server.limits.watchBuffer": _Setting(_Number(1, 1_000_000), 1_000),
    "server.limits.watchStallSeconds": _Setting(_Number(0.1, 3600, seconds=True), 10.0),
    "server.limits.rvWaitSeconds": _Setting(_Number(0.1, 60, seconds=True), 3.0),
    "server.limits.bookmarkIntervalSeconds": _Setting(_Number(1, 3600, seconds=True), 60.0),
    "server.limits.continueTokenTTLSeconds": _Setting(_Number(1, 86_400, seconds=True), 300.0),
    "server.limits.listSnapshotEntries": _Setting(_Number(0, 1_000_000_000), 1_000_000),
    "server.limits.maxPageSize": _Setting(_Number(1, 1_000_000), 10_000),
    "server.limits.maxInFlight": _Setting(_Number(1, 1_000_000), 400),
    "server.limits.maxWatchersPerUser": _Setting(_Number(1, 1_000_000), 1_000),
    "server.limits.maxURLBytes": _Setting(_Number(256, 1_048_576), 8_192),
    "server.limits.maxHeaderBytes": _Setting(_Number(1_024, 16_777_216), 65_536),
    "server.limits.headerTimeoutSeconds": _Setting(_Number(0.1, 600, seconds=True), 10.0),
    "server.limits.readyMaxStalenessSeconds": _Setting(_Number(0, 86_400, seconds=True), 0.0),
    "server.stalenessHeader": _Setting(_Bool(), False),
    "server.shutdownDelaySeconds": _Setting(_Number(0, 600, seconds=True), 0.0),
    "server.shutdownGraceSeconds": _Setting(_Number(0, 600, seconds=True), 20.0),
    "logging.level": _Setting(_Choice(*_LOG_LEVELS), "info"),
    "logging.format": _Setting(_Choice(*LogFormat), "text"),
}
_RESOURCES: Final = "resources"
SETTING_PATHS: Final[tuple[str, ...]] = (_RESOURCES, *_SETTINGS)
"""Every dotted path a flag or environment variable can set."""


def env_var_name(path: str) -> str:
    """``server.limits.maxWatchers`` → ``CACHEPROXY_SERVER_LIMITS_MAX_WATCHERS``."""
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", path)
    return "CACHEPROXY_" + snake.replace(".", "_").upper()


_ENV_SECTIONS = tuple(f"CACHEPROXY_{s}_" for s in ("UPSTREAM", "SERVER", "LOGGING", "RESOURCES"))
# The variables Kubernetes injects for a Service (``enableServiceLinks``): a Service named
# cacheproxy-server yields CACHEPROXY_SERVER_SERVICE_HOST, CACHEPROXY_SERVER_PORT=tcp://….
_SERVICE_LINK_NAME = re.compile(
    r".*(_SERVICE_HOST|_SERVICE_PORT(_\w+)?|_PORT(_\d+_(TCP|UDP|SCTP)(_\w+)?)?)"
)
_SERVICE_LINK_VALUE = re.compile(r"(tcp|udp|sctp)://\S+")


def _suggest(word: str, choices: list[str]) -> str | None:
    """The choice ``word`` was probably meant to be: same letters ignoring case, ``_`` and
    ``-``, else the closest by difflib."""
    norm = {c.lower().replace("_", "").replace("-", ""): c for c in choices}
    key = word.lower().replace("_", "").replace("-", "")
    if key in norm:
        return norm[key]
    close = difflib.get_close_matches(key, list(norm), n=1, cutoff=0.6)
    return norm[close[0]] if close else None


def _where(node: Node) -> str:
    mark = node.start_mark
    if mark.line < 0:  # a whole environment variable or flag
        return str(mark.name)
    return f"{mark.name}:{mark.line + 1}:{mark.column + 1}"


def _text_node(text: str, label: str) -> ScalarNode:
    mark = yaml.Mark(label, 0, -1, -1, None, 0)
    return ScalarNode(_TEXT_TAG, text, mark, mark)


class _Problems:
    """Every problem found, listed file first (in line order), then environment and flags."""

    def __init__(self, file: str | None) -> None:
        self._file = file
        self._found: list[tuple[tuple[int, int, int], str]] = []

    def __len__(self) -> int:
        return len(self._found)

    def at(self, node: Node, path: str, message: str) -> None:
        mark = node.start_mark
        in_file = mark.name == self._file and mark.line >= 0
        self._add((0, mark.line, mark.column) if in_file else None, _where(node), path, message)

    def add(self, where: str, path: str, message: str) -> None:
        self._add(None, where, path, message)

    def _add(self, key: tuple[int, int, int] | None, where: str, path: str, message: str) -> None:
        text = f"{where}: {path}: {message}" if path else f"{where}: {message}"
        self._found.append((key or (1, len(self._found), 0), text))

    @property
    def lines(self) -> list[str]:
        return [text for _, text in sorted(self._found, key=lambda found: found[0])]


def _value(node: Node, conv: _Conv) -> Any:
    """The converted value of ``node``; ``_UNSET`` for a YAML null; raises ``_Invalid``."""
    if isinstance(node, ScalarNode):
        if node.tag == _TEXT_TAG:
            return conv(node.value, True)
        value = _construct(node)
        return _UNSET if value is None else conv(value, False)
    got = "a list" if isinstance(node, SequenceNode) else "a mapping"
    raise _Invalid(f"expected {conv.expected}, got {got}")


def _mapping(node: Node, path: str, keys: list[str], problems: _Problems) -> dict[str, Node]:
    """The entries of a mapping node whose keys are all in ``keys``; reports the others."""
    if isinstance(node, ScalarNode) and node.tag == "tag:yaml.org,2002:null":
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
            guess = _suggest(key, keys)
            hint = f'did you mean "{guess}"?' if guess else f"expected one of: {', '.join(keys)}"
            problems.at(knode, here, f"unknown key; {hint}")
        else:
            out[key] = vnode
    return out


def _walk_file(root: Node, problems: _Problems) -> tuple[dict[str, Node], Node | None]:
    """The file's setting nodes by dotted path, and its ``resources`` node."""
    found: dict[str, Node] = {}
    resources: Node | None = None

    def walk(node: Node, prefix: str) -> None:
        nonlocal resources
        keys = list(
            dict.fromkeys(
                p[len(prefix) :].split(".")[0] for p in SETTING_PATHS if p.startswith(prefix)
            )
        )
        for key, value in _mapping(node, prefix.rstrip("."), keys, problems).items():
            path = prefix + key
            if path == _RESOURCES:
                resources = value
            elif path in _SETTINGS:
                found[path] = value
            else:
                walk(value, path + ".")

    walk(root, "")
    return found, resources


# ------------------------------------------------------------------------------------ resources

_NULL_TAG: Final = "tag:yaml.org,2002:null"
_STR_TAG: Final = "tag:yaml.org,2002:str"
_BAD: Final = object()
"""A value already reported as a problem."""
_BUILTINS: Final = ResourceRegistry(BUILTIN_RESOURCES)
_BUILTIN_NAMES: Final = [t.config_name for t in BUILTIN_RESOURCES]
_RESOURCE_KEYS: Final = [
    "resource",
    "kind",
    "namespaced",
    "namespace",
    "labelSelector",
    "fieldSelector",
    "indexes",
    "transform",
    "history",
]
_TRANSFORM_KEYS: Final = ["dropFields", "metadataOnly"]
_SHORTHAND = "NAME or GROUP/VERSION/PLURAL:Kind:namespaced|cluster"


def _is_null(node: Node) -> bool:
    return isinstance(node, ScalarNode) and node.tag == _NULL_TAG


def _is_text(node: Node) -> bool:
    """Whether ``node`` is a string (or text from a variable or flag)."""
    if not isinstance(node, ScalarNode):
        return False
    try:
        return node.tag == _TEXT_TAG or isinstance(_construct(node), str)
    except _Invalid:
        return False


def _check_namespace(text: str) -> str | None:
    if _DNS_LABEL.fullmatch(text):
        return None
    return f"invalid namespace {text!r}: expected a lower-case DNS label (a-z, 0-9, -; at most 63)"


def _string_item(node: ScalarNode) -> dict[str, Node] | None:
    """A list item written ``NAME`` or ``GROUP/VERSION/PLURAL:Kind:namespaced|cluster``, as the
    keys it stands for (all marked where the item is)."""
    name, *rest = str(node.value).split(":")
    if len(rest) not in (0, 2) or (rest and rest[1].strip() not in ("namespaced", "cluster")):
        return None
    mark = node.start_mark
    fields: dict[str, Node] = {"resource": ScalarNode(_STR_TAG, name.strip(), mark, mark)}
    if rest:
        fields["kind"] = ScalarNode(_STR_TAG, rest[0].strip(), mark, mark)
        scope = str(rest[1].strip() == "namespaced")
        fields["namespaced"] = ScalarNode(_TEXT_TAG, scope, mark, mark)
    return fields


class _ResourceReader:
    """Validates a ``resources`` list; every problem goes to ``problems`` with its location."""

    def __init__(self, problems: _Problems) -> None:
        self.problems = problems

    def read_list(self, node: Node) -> list[CachedResource]:
        if _is_null(node):
            return []
        if not isinstance(node, SequenceNode):
            self.problems.at(node, _RESOURCES, "expected a list of resources")
            return []
        out: list[CachedResource] = []
        seen: dict[tuple[str, ...], tuple[str, Node]] = {}
        for i, item in enumerate(node.value):
            path = f"{_RESOURCES}[{i}]"
            read = self.read_item(item, path)
            if read is None:
                continue
            res, at = read
            key = (
                res.rtype.config_name,
                res.namespace or "",
                str(parse_label_selector(res.label_selector)),
                str(parse_field_selector(res.field_selector)),
            )
            if key in seen:
                first, first_at = seen[key]
                self.problems.at(
                    at,
                    path,
                    f"caches the same collection as {first} ({_where(first_at)}): "
                    "same resource, namespace and selectors",
                )
                continue
            seen[key] = (path, at)
            out.append(res)
        return out

    def read_item(self, node: Node, path: str) -> tuple[CachedResource, Node] | None:
        fields = self.fields(node, path)
        if fields is None:
            return None
        rtype = self.resource_type(fields, path)
        namespace = self.get(fields, "namespace", path, _Str(_check_namespace))
        labels = self.selector(fields, "labelSelector", path, rtype)
        field_selector = self.selector(fields, "fieldSelector", path, rtype)
        indexes = self.paths(fields, "indexes", path, fan_out=True)
        history = self.get(fields, "history", path, _Number(1_000, 10_000_000))
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
            history=100_000 if history is None else history,
        )
        return resource, fields["resource"]

    def fields(self, node: Node, path: str) -> dict[str, Node] | None:
        if isinstance(node, MappingNode):
            fields = _mapping(node, path, _RESOURCE_KEYS, self.problems)
            if "resource" not in fields:
                self.problems.at(node, path, 'missing key "resource"')
                return None
            return fields
        if isinstance(node, ScalarNode) and _is_text(node):
            fields_or_none = _string_item(node)
            if fields_or_none is None:
                self.problems.at(node, path, f"expected {_SHORTHAND}, got {node.value!r}")
            return fields_or_none
        self.problems.at(node, path, 'expected a resource name or a mapping with a "resource" key')
        return None

    def get(self, fields: Mapping[str, Node], key: str, path: str, conv: _Conv) -> Any:
        """The value of ``key``: None when absent or null, ``_BAD`` once reported."""
        node = fields.get(key)
        if node is None:
            return None
        try:
            value = _value(node, conv)
        except _Invalid as exc:
            self.problems.at(node, f"{path}.{key}", str(exc))
            return _BAD
        return None if value is _UNSET else value

    def resource_type(self, fields: Mapping[str, Node], path: str) -> ResourceType | None:
        node, here = fields["resource"], f"{path}.resource"
        name = self.get(fields, "resource", path, _Str())
        kind = self.get(fields, "kind", path, _Str())
        namespaced = self.get(fields, "namespaced", path, _Bool())
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
        guess = _suggest(name, _BUILTIN_NAMES)
        hint = f'; did you mean "{guess}"?' if guess else ""
        parts = name.split("/")
        if len(parts) != 3:
            self.problems.at(
                node,
                here,
                f"unknown resource {name!r}{hint} (custom resources are GROUP/VERSION/PLURAL)",
            )
            return None
        group, version, plural = parts
        bad = [
            why
            for why, ok in (
                (f"group {group!r} is not a DNS subdomain", _DNS_SUBDOMAIN.fullmatch(group)),
                (f"version {version!r} is not like v1 or v1beta1", _VERSION.fullmatch(version)),
                (f"plural {plural!r} is not a lower-case DNS label", _DNS_LABEL.fullmatch(plural)),
            )
            if not ok
        ]
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
        if not _KIND.fullmatch(kind):
            self.problems.at(
                fields["kind"],
                f"{path}.kind",
                f"expected a CamelCase kind like Widget, got {kind!r}",
            )
            return None
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
        text = self.get(fields, key, path, _Str())
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
        if node is None or _is_null(node):
            return []
        if not isinstance(node, SequenceNode):
            self.problems.at(node, f"{path}.{key}", "expected a list of field paths")
            return None
        out: list[str] = []
        ok = True
        for i, item in enumerate(node.value):
            try:
                text = _value(item, _Str())
                if text is _UNSET or text is None:
                    raise _Invalid("expected a field path, got nothing")
                compile_field_path(text)
                if not fan_out and "[*]" in text:
                    raise _Invalid(f"{text!r}: a dropped field cannot fan out over a list ([*])")
                if text in out:
                    raise _Invalid(f"{text!r} is listed twice")
            except (_Invalid, ConfigError) as exc:
                self.problems.at(item, f"{path}.{key}[{i}]", str(exc))
                ok = False
                continue
            out.append(text)
        return out if ok else None

    def transform(self, node: Node | None, path: str) -> Transform | None:
        if node is None or _is_null(node):
            return Transform()
        if not isinstance(node, MappingNode):
            self.problems.at(node, path, "expected a mapping (dropFields, metadataOnly)")
            return None
        fields = _mapping(node, path, _TRANSFORM_KEYS, self.problems)
        drop = self.paths(fields, "dropFields", path, fan_out=False)
        metadata_only = self.get(fields, "metadataOnly", path, _Bool())
        if drop is None or metadata_only is _BAD:
            return None
        given = "dropFields" in fields and not _is_null(fields["dropFields"])
        return Transform(
            drop_fields=tuple(drop) if given else Transform().drop_fields,
            metadata_only=metadata_only is True,
        )


# -------------------------------------------------------------------------------------- loading

_NO_OVERRIDES: Final[Mapping[str, str]] = types.MappingProxyType({})


def _compose(stream: io.TextIOBase, where: str, problems: _Problems) -> Node | None:
    try:
        return yaml.compose(stream, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at = f"{where}:{mark.line + 1}:{mark.column + 1}" if mark else where
        problems.add(at, "", f"not valid YAML: {exc.problem or exc.context}")
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        problems.add(where, "", f"not valid YAML: {exc}")
    return None


def _read_file(path: Path, problems: _Problems) -> Node | None:
    try:
        with open(os.fspath(path), encoding="utf-8") as stream:  # marks name the path as given
            return _compose(stream, str(path), problems)
    except OSError as exc:
        problems.add(str(path), "", f"cannot read the configuration: {exc.strerror or exc}")
        return None


def _text_source(setting: str, text: str, label: str, problems: _Problems) -> Node | None:
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
    if setting != _RESOURCES:
        return _text_node(text, label)
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


def _env_texts(env: Mapping[str, str], problems: _Problems) -> list[tuple[str, str, str]]:
    """``(label, setting, text)`` of each ``CACHEPROXY_*`` variable naming a setting. Unknown
    names in a section's namespace are reported; other ``CACHEPROXY_*`` names belong to other
    commands (``CACHEPROXY_SIM_*``) or are Kubernetes service links, and are left alone."""
    known = {env_var_name(s): s for s in SETTING_PATHS}
    for name in sorted(env):
        if name in known or not name.startswith(_ENV_SECTIONS):
            continue
        if not _SERVICE_LINK_NAME.fullmatch(name):
            guess = _suggest(name, list(known))
            hint = f"; did you mean ${guess}?" if guess else ""
            problems.add(f"${name}", "", f"unknown setting{hint}")
    return [(f"${name}", s, env[name]) for name, s in known.items() if name in env]


def _flag_texts(overrides: Mapping[str, str], problems: _Problems) -> list[tuple[str, str, str]]:
    out = []
    for key, text in overrides.items():
        if key in SETTING_PATHS:
            out.append((f"--set {key}", key, text))
        else:
            guess = _suggest(key, list(SETTING_PATHS))
            hint = f'; did you mean "{guess}"?' if guess else ""
            problems.add(f"--set {key}", "", f"unknown setting{hint}")
    return out


def load_config(
    path: Path | None,
    *,
    env: Mapping[str, str] = os.environ,
    overrides: Mapping[str, str] = _NO_OVERRIDES,
) -> DaemonConfig:
    """Read ``path`` (None: no file), apply ``env`` and ``overrides`` (flags: dotted path →
    value), validate. Every problem found is listed in one ConfigError, each with its location
    (``file:line:column``, ``$VARIABLE`` or ``--set path``) and the setting's path."""
    problems = _Problems(str(path) if path is not None else None)
    nodes: dict[str, Node] = {}
    resources: Node | None = None
    file_ok = True
    if path is not None:
        root = _read_file(path, problems)
        file_ok = not problems and (root is None or isinstance(root, MappingNode))
        if root is not None:
            nodes, resources = _walk_file(root, problems)
    texts = _env_texts(env, problems) + _flag_texts(overrides, problems)
    overridden: dict[str, str] = {}
    for label, setting, text in texts:  # environment first, then flags: the last one wins
        node = _text_source(setting, text, label, problems)
        if node is None:
            continue
        overridden[setting] = label
        if setting == _RESOURCES:
            resources = node
        else:
            nodes[setting] = node
    values = _settings(nodes, path, problems)
    cached = _ResourceReader(problems).read_list(resources) if resources is not None else []
    if file_ok and (
        resources is None
        or _is_null(resources)
        or (isinstance(resources, SequenceNode) and not resources.value)
    ):
        problems.add(
            _where(resources) if resources is not None else str(path or "configuration"),
            _RESOURCES,
            "nothing to cache: list at least one resource (in the file, $CACHEPROXY_RESOURCES "
            "or --set resources=pods,apps/v1/deployments)",
        )
    config = _assemble(values, nodes, problems)
    lines = problems.lines
    if len(lines) == 1:
        raise ConfigError(lines[0])
    if lines:
        raise ConfigError(f"{len(lines)} problems in the configuration:\n  " + "\n  ".join(lines))
    return dataclasses.replace(
        config,
        resources=tuple(cached),
        source=str(path) if path is not None else "defaults",
        overridden_by=tuple(dict.fromkeys(overridden.values())),
    )


def _settings(nodes: Mapping[str, Node], path: Path | None, problems: _Problems) -> dict[str, Any]:
    """Every scalar setting's value: its node's, else its default."""
    values: dict[str, Any] = {}
    for key, setting in _SETTINGS.items():
        values[key] = setting.default
        node = nodes.get(key)
        if node is None:
            continue
        try:
            value = _value(node, setting.conv)
        except _Invalid as exc:
            problems.at(node, key, str(exc))
            continue
        if value is None and setting.default is not None:
            problems.at(node, key, "must not be empty")
            continue
        if value is _UNSET:
            continue
        if setting.is_path and value is not None:
            value = Path(value).expanduser()
            if path is not None and node.tag != _TEXT_TAG and not value.is_absolute():
                value = path.parent / value  # relative to the file, as kubeconfig does
        values[key] = value
    return values


def _assemble(
    values: Mapping[str, Any], nodes: Mapping[str, Node], problems: _Problems
) -> DaemonConfig:
    """The settings as dataclasses, after the rules between them (DESIGN §7)."""
    v = values
    upstream = UpstreamSettings(
        kubeconfig=v["upstream.kubeconfig"],
        context=v["upstream.context"],
        in_cluster=_tristate(v["upstream.inCluster"]),
        watch_list=v["upstream.watchList"],
        watch_list_timeout_seconds=v["upstream.watchListTimeoutSeconds"],
        page_size=v["upstream.pageSize"],
        min_watch_timeout_seconds=v["upstream.minWatchTimeoutSeconds"],
        http2=v["upstream.http2"],
        compression=_tristate(v["upstream.compression"]),
    )
    if upstream.in_cluster is True and (upstream.kubeconfig or upstream.context):
        problems.at(
            nodes["upstream.inCluster"],
            "upstream.inCluster",
            "true conflicts with upstream.kubeconfig / upstream.context: choose one",
        )
    cert, key, client_ca = (v[f"server.tls.{k}"] for k in ("certFile", "keyFile", "clientCAFile"))
    tls = TLSSettings(cert, key, client_ca) if cert and key else None
    for have, lacking in (("certFile", "keyFile"), ("keyFile", "certFile")):
        if v[f"server.tls.{have}"] and not v[f"server.tls.{lacking}"]:
            problems.at(
                nodes[f"server.tls.{have}"], f"server.tls.{have}", f"needs server.tls.{lacking} too"
            )
    if client_ca and not (cert and key):
        problems.at(
            nodes["server.tls.clientCAFile"],
            "server.tls.clientCAFile",
            "client certificates need TLS: set server.tls.certFile and keyFile",
        )
    auth = AuthSettings(
        mode=AuthMode(v["server.auth.mode"]),
        token_file=v["server.auth.tokenFile"],
        token_cache_ttl_seconds=v["server.auth.tokenCacheTTLSeconds"],
        allowed_cache_ttl_seconds=v["server.auth.allowedCacheTTLSeconds"],
        denied_cache_ttl_seconds=v["server.auth.deniedCacheTTLSeconds"],
        cache_size=v["server.auth.cacheSize"],
        allow_anonymous=v["server.auth.allowAnonymous"],
        namespace_filtering=v["server.auth.namespaceFiltering"],
    )
    if auth.mode is AuthMode.TOKEN and auth.token_file is None:
        problems.at(
            nodes["server.auth.mode"], "server.auth.mode", "token needs server.auth.tokenFile"
        )
    if auth.mode is not AuthMode.TOKEN and auth.token_file is not None:
        problems.at(
            nodes["server.auth.tokenFile"],
            "server.auth.tokenFile",
            f"is only read with server.auth.mode: token (the mode is {auth.mode})",
        )
    limits = ServerLimits(
        max_watchers=v["server.limits.maxWatchers"],
        watch_buffer=v["server.limits.watchBuffer"],
        watch_stall_seconds=v["server.limits.watchStallSeconds"],
        rv_wait_seconds=v["server.limits.rvWaitSeconds"],
        bookmark_interval_seconds=v["server.limits.bookmarkIntervalSeconds"],
        continue_token_ttl_seconds=v["server.limits.continueTokenTTLSeconds"],
        list_snapshot_entries=v["server.limits.listSnapshotEntries"],
        max_page_size=v["server.limits.maxPageSize"],
        max_in_flight=v["server.limits.maxInFlight"],
        max_watchers_per_user=v["server.limits.maxWatchersPerUser"],
        max_url_bytes=v["server.limits.maxURLBytes"],
        max_header_bytes=v["server.limits.maxHeaderBytes"],
        header_timeout_seconds=v["server.limits.headerTimeoutSeconds"],
        ready_max_staleness_seconds=v["server.limits.readyMaxStalenessSeconds"],
    )
    server = ServerSettings(
        address=v["server.address"],
        port=v["server.port"],
        tls=tls,
        auth=auth,
        allow_unauthenticated_non_loopback=v["server.allowUnauthenticatedNonLoopback"],
        staleness_header=v["server.stalenessHeader"],
        shutdown_delay_seconds=v["server.shutdownDelaySeconds"],
        shutdown_grace_seconds=v["server.shutdownGraceSeconds"],
        limits=limits,
    )
    if (
        not server.loopback
        and not server.authenticated
        and not server.allow_unauthenticated_non_loopback
    ):
        # DESIGN §7: binding beyond loopback requires an auth mode unless explicitly overridden.
        problems.at(
            nodes["server.address"],
            "server.address",
            f"{server.address} is not a loopback address: anyone who can reach it could read "
            "the cache; set server.auth.mode (token or delegated), or require client "
            "certificates (server.tls.clientCAFile), or set "
            "server.allowUnauthenticatedNonLoopback: true",
        )
    logging = LoggingSettings(level=v["logging.level"], format=LogFormat(v["logging.format"]))
    return DaemonConfig(resources=(), upstream=upstream, server=server, logging=logging)


def _tristate(value: bool | str) -> bool | None:
    """A ``auto | true | false`` setting: True/False from YAML booleans or the text, else None."""
    if isinstance(value, str):
        return {"true": True, "false": False}.get(value)  # "auto": None
    return value


def resolve_upstream(settings: UpstreamSettings) -> UpstreamConfig:
    """Load the upstream's address and credentials as ``settings`` say (kubernetes loaders)."""
    if settings.in_cluster is True:
        return load_incluster()
    if settings.in_cluster is False:
        return load_kubeconfig(settings.kubeconfig, settings.context)
    return load_upstream(settings.kubeconfig, settings.context)


# ----------------------------------------------------------------------------------- describing


def _describe_resource(r: CachedResource) -> str:
    name = r.rtype.config_name
    if r.rtype not in BUILTIN_RESOURCES:
        name += f" (custom, kind {r.rtype.kind})"
    parts = [
        (f"namespace {r.namespace}" if r.namespace else "all namespaces")
        if r.rtype.namespaced
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


def _describe_upstream(u: UpstreamSettings) -> str:
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


def _describe_server(s: ServerSettings) -> str:
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
    """A summary for people: what is cached, where the upstream is, where and how we listen."""
    head = config.source
    if config.overridden_by:
        head += f" (overridden by {', '.join(config.overridden_by)})"
    n = len(config.resources)
    lines = [f"{head}: {n} resource{'' if n == 1 else 's'}"]
    lines += [f"  {_describe_resource(r)}" for r in config.resources]
    lim = config.server.limits
    lines += [
        f"upstream: {_describe_upstream(config.upstream)}",
        f"server: {_describe_server(config.server)}",
        f"limits: {lim.max_in_flight} requests in flight, {lim.max_watchers} watchers per "
        f"resource and {lim.max_watchers_per_user} per user, {lim.watch_buffer} events buffered "
        f"per watcher, watchers that take nothing dropped after {lim.watch_stall_seconds:g} s, "
        f"resourceVersion waits {lim.rv_wait_seconds:g} s, bookmarks every "
        f"{lim.bookmark_interval_seconds:g} s, continue tokens {lim.continue_token_ttl_seconds:g} s "
        f"(older states kept for them: {lim.list_snapshot_entries} objects a resource), "
        f"pages of at most {lim.max_page_size}, URLs of {lim.max_url_bytes} bytes, headers of "
        f"{lim.max_header_bytes} bytes within {lim.header_timeout_seconds:g} s",
        f"logging: {config.logging.level}, {config.logging.format}",
    ]
    lines += [f"WARNING: {w}" for w in config.warnings]
    return "\n".join(lines)


def check_config_main(
    path: Path | None,
    *,
    env: Mapping[str, str] = os.environ,
    overrides: Mapping[str, str] = _NO_OVERRIDES,
) -> int:
    """``cacheproxy check-config FILE``: print ``OK: `` and the summary (0), or every problem (1)."""
    try:
        config = load_config(path, env=env, overrides=overrides)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 1
    print(f"OK: {describe(config)}")
    return 0
