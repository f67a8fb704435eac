"""Where the upstream API server is and how to prove who we are to it.

The ``kubernetes`` package's loaders read kubeconfig files and the in-cluster service account —
we never parse kubeconfig ourselves, so every auth method they support (tokens, token files,
client certificates, inline ``*-data``, exec credential plugins, auth providers) works here as in
the official Python client. What they produce, a ``kubernetes.client.Configuration``, is turned
into an :class:`UpstreamConfig`: a frozen record of the server URL, TLS material and proxy, plus
a :class:`TokenSource` for the bearer token, which may change while we run.

Which source is used (:func:`load_upstream`): an explicit kubeconfig (or context); else the
in-cluster service account when ``KUBERNETES_SERVICE_HOST``/``_PORT`` are set, as in a pod; else
``$KUBECONFIG`` (a ``:``-separated list, merged) or ``~/.kube/config``. Every failure is a
:class:`~cacheproxy.errors.ConfigError` naming the file and context.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import ipaddress
import logging
import os
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from cacheproxy.errors import ConfigError

__all__ = [
    "SERVICE_ACCOUNT_CA",
    "SERVICE_ACCOUNT_TOKEN",
    "TokenSource",
    "UpstreamConfig",
    "environment_proxy",
    "load_incluster",
    "load_kubeconfig",
    "load_upstream",
]

SERVICE_ACCOUNT_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
SERVICE_ACCOUNT_CA = Path("/var/run/secrets/kubernetes.io/serviceaccount/ca.crt")
_DEFAULT_KUBECONFIG = "~/.kube/config"


def _loader_errors() -> tuple[type[BaseException], ...]:
    """What the kubernetes loaders raise on a missing, malformed or incomplete kubeconfig.

    The ``kubernetes`` package is imported only when a loader runs (here and below): importing
    it costs ~0.15 s, which every command and test importing this module would otherwise pay."""
    from kubernetes.config.config_exception import ConfigException

    return (
        ConfigException,
        OSError,
        yaml.YAMLError,
        KeyError,
        TypeError,
        ValueError,
        AttributeError,
    )


class TokenSource:
    """The bearer token to send on the next request.

    Backed by the ``kubernetes.client.Configuration`` a loader filled in. When the loader installed
    a ``refresh_api_key_hook`` — an exec credential plugin (re-run once its credential nears
    expiry) or the in-cluster loader (re-reads the projected token file every minute, so kubelet's
    rotation is picked up) — every :meth:`token` call runs the hook first, in a worker thread
    (it may start a process or read a file) and one at a time. Without a hook the token is fixed.
    """

    def __init__(self, configuration: Any = None, *, token: str | None = None) -> None:
        self._configuration = configuration
        self._static = token
        self._lock = asyncio.Lock()

    @classmethod
    def static(cls, token: str | None) -> TokenSource:
        """A fixed token (or none: requests go without ``Authorization``)."""
        return cls(token=token)

    @property
    def refreshes(self) -> bool:
        """Whether the loader installed a refresh hook: always in-cluster and for exec plugins,
        and (cheaply, a no-op until an expiry) for any kubeconfig token."""
        return getattr(self._configuration, "refresh_api_key_hook", None) is not None

    async def token(self) -> str | None:
        if self._configuration is None:
            return self._static
        if not self.refreshes:
            return _bearer(self._configuration.api_key.get("BearerToken"))
        async with self._lock:
            return await asyncio.to_thread(self._refresh)

    def _refresh(self) -> str | None:
        try:
            self._configuration.refresh_api_key_hook(self._configuration)
        except _loader_errors() as exc:
            raise ConfigError(f"cannot refresh the upstream credentials: {exc}") from exc
        return _bearer(self._configuration.api_key.get("BearerToken"))

    def __repr__(self) -> str:
        kind = "refreshing" if self.refreshes else "static"
        return f"TokenSource({kind})"


def _bearer(value: str | None) -> str | None:
    """The token of a loader's ``"Bearer <token>"`` (the in-cluster loader writes ``bearer``,
    and a token file may end in a newline)."""
    if not value:
        return None
    scheme, _, token = value.strip().partition(" ")
    if scheme.lower() != "bearer":
        # username/password in a kubeconfig: basic auth, removed from Kubernetes in 1.19.
        raise ConfigError(
            "the credentials use HTTP basic auth, which Kubernetes no longer accepts; "
            "use a token, a client certificate or an exec plugin"
        )
    return token.strip() or None


@dataclass(frozen=True, slots=True)
class UpstreamConfig:
    """How to reach one API server. Paths point at PEM files (the kubernetes loaders write inline
    ``*-data`` to temporary files, removed when the process exits)."""

    server: str
    """``https://host:port`` (no trailing slash)."""
    ca_file: Path | None = None
    """CA bundle to verify the server with; None = the system's trust store."""
    verify: bool = True
    """False for ``insecure-skip-tls-verify``: any server certificate is accepted."""
    client_cert: Path | None = None
    client_key: Path | None = None
    tls_server_name: str | None = None
    """Name to verify the server certificate against (and send as SNI) instead of the host."""
    proxy: str | None = None
    """The kubeconfig's ``proxy-url``, else ``HTTPS_PROXY``/``HTTP_PROXY`` unless ``NO_PROXY``
    or a loopback host exempts the server (Go's ``http.ProxyFromEnvironment``)."""
    token_source: TokenSource = field(default_factory=TokenSource, compare=False)
    source: str = ""
    """Where this came from, for messages: ``kubeconfig /path (context x)`` or ``in-cluster``."""
    in_cluster: bool = False
    """Loaded from the pod's service account (the API server is one hop away)."""

    @property
    def nearby(self) -> bool:
        """The API server is on a fast link: in-cluster, or on this machine (loopback)."""
        return self.in_cluster or _is_local_host(urlsplit(self.server).hostname or "")


# ---------------------------------------------------------------------------- loading


def load_upstream(kubeconfig: Path | None = None, context: str | None = None) -> UpstreamConfig:
    """The upstream from an explicit kubeconfig or context, else in-cluster when running in a pod,
    else ``$KUBECONFIG`` / ``~/.kube/config``. A ``context`` alone means the default kubeconfig."""
    if kubeconfig is not None or context is not None:
        return load_kubeconfig(kubeconfig, context)
    if _in_cluster():
        return load_incluster()
    return load_kubeconfig(None, None)


def load_kubeconfig(path: Path | None = None, context: str | None = None) -> UpstreamConfig:
    """Load ``path`` (default: ``$KUBECONFIG``, else ``~/.kube/config``) at ``context`` (default:
    its ``current-context``) with ``kubernetes.config.load_kube_config``."""
    if path is not None:
        files = str(path)
        where = f"kubeconfig {path}"
        if not path.is_file():
            raise ConfigError(f"{where} does not exist or is not a file")
    else:
        files = os.environ.get("KUBECONFIG") or _DEFAULT_KUBECONFIG
        where = f"kubeconfig {files}" + (
            " (from $KUBECONFIG)" if "KUBECONFIG" in os.environ else ""
        )
        existing = [p for p in files.split(os.pathsep) if p and Path(p).expanduser().is_file()]
        if not existing:
            raise ConfigError(
                f"no upstream configured: {where} does not exist, and this is not a pod "
                "(KUBERNETES_SERVICE_HOST is not set); pass a kubeconfig"
            )
    if context is not None:
        where += f" (context {context!r})"
    import kubernetes.config

    cfg = _fresh_configuration()
    try:
        with _logged_loader_errors() as logged:
            kubernetes.config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=files, context=context, client_configuration=cfg, persist_config=False
            )
    except _loader_errors() as exc:
        raise ConfigError(f"{where}: {_loader_message(exc, files, context)}") from exc
    if logged:
        raise ConfigError(f"{where}: {'; '.join(logged)}")
    return _upstream_config(cfg, where)


def load_incluster(
    *, token_file: Path = SERVICE_ACCOUNT_TOKEN, ca_file: Path = SERVICE_ACCOUNT_CA
) -> UpstreamConfig:
    """The pod's service account: ``https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT``,
    its CA and its token, re-read every minute (``kubernetes.config.load_incluster_config``; the
    files are the standard mount unless given)."""
    from kubernetes.config.incluster_config import InClusterConfigLoader

    cfg = _fresh_configuration()
    loader = InClusterConfigLoader(  # type: ignore[no-untyped-call]
        token_filename=str(token_file), cert_filename=str(ca_file), try_refresh_token=True
    )
    try:
        loader.load_and_set(cfg)  # type: ignore[no-untyped-call]
    except _loader_errors() as exc:
        raise ConfigError(
            f"in-cluster config (token {token_file}, CA {ca_file}): {_loader_message(exc)}"
        ) from exc
    return dataclasses.replace(_upstream_config(cfg, "in-cluster service account"), in_cluster=True)


def _in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and bool(
        os.environ.get("KUBERNETES_SERVICE_PORT")
    )


def _fresh_configuration() -> Any:
    """A new ``Configuration``, never the package's global default. ``host`` and ``proxy`` are
    cleared so we see exactly what the kubeconfig set (recent packages pre-fill the proxy from the
    environment; we resolve that ourselves, with ``NO_PROXY``)."""
    import kubernetes.client

    cfg = kubernetes.client.Configuration()
    cfg.proxy = None
    cfg.host = ""
    return cfg


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.pathname.endswith(("kube_config.py", "exec_provider.py")):
            self.messages.append(record.getMessage())


@contextlib.contextmanager
def _logged_loader_errors() -> Iterator[list[str]]:
    """Errors the kubeconfig loader only logs instead of raising — notably a failing exec
    credential plugin, after which it would carry on without credentials."""
    handler = _Collect()
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield handler.messages
    finally:
        root.removeHandler(handler)


def _loader_message(exc: BaseException, files: str = "", context: str | None = None) -> str:
    text = str(exc) or type(exc).__name__
    if isinstance(exc, (KeyError, TypeError, AttributeError)):
        # The loader assumes the document's shape; these mean it is not a kubeconfig.
        return f"not a valid kubeconfig (a mapping of clusters, contexts and users): {text}"
    if context is not None and "contexts" in text:
        import kubernetes.config

        try:
            contexts, _ = kubernetes.config.list_kube_config_contexts(  # type: ignore[no-untyped-call]
                config_file=files
            )
        except _loader_errors():
            return text
        names = ", ".join(str(c.get("name")) for c in contexts) or "none"
        return f"no context named {context!r} (contexts: {names})"
    return text


def _upstream_config(cfg: Any, where: str) -> UpstreamConfig:
    server = (cfg.host or "").rstrip("/")
    scheme = urlsplit(server).scheme
    if scheme not in ("http", "https") or not urlsplit(server).hostname:
        raise ConfigError(f"{where}: the cluster has no usable server URL (got {server!r})")
    source = TokenSource(cfg)
    try:
        # Fail now, not on the first request, if the credentials are unusable (basic auth).
        _bearer(cfg.api_key.get("BearerToken"))
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return UpstreamConfig(
        server=server,
        ca_file=_path(cfg.ssl_ca_cert) if scheme == "https" else None,
        verify=bool(cfg.verify_ssl),
        client_cert=_path(cfg.cert_file),
        client_key=_path(cfg.key_file),
        tls_server_name=cfg.tls_server_name or None,
        proxy=cfg.proxy or environment_proxy(server),
        token_source=source,
        source=where,
    )


def _path(value: str | None) -> Path | None:
    return Path(value) if value else None


def environment_proxy(server: str) -> str | None:
    """The proxy the environment names for ``server``, as Go's ``http.ProxyFromEnvironment``:
    ``HTTPS_PROXY`` for https, ``HTTP_PROXY`` for http, none for hosts in ``NO_PROXY`` and none
    for loopback hosts."""
    parts = urlsplit(server)
    host = parts.hostname or ""
    if _is_local_host(host):
        return None
    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(parts.scheme)
    if not proxy:
        return None
    # proxy_bypass_environment is public but missing from typeshed.
    if urllib.request.proxy_bypass_environment(parts.netloc, proxies):  # type: ignore[attr-defined]
        return None
    return proxy


def _is_local_host(host: str) -> bool:
    return host == "localhost" or _is_loopback(host)


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
