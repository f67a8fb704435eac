"""What a sidecar gives the containers beside it: a serving certificate they can trust
(``server.tls.selfSigned``) and a kubeconfig naming the daemon as their one server
(``server.clientKubeconfig``)."""

from __future__ import annotations

import base64
import contextlib
import logging
import os
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import yaml

from cacheproxy.serving.certificates import ServingFiles, self_signed

__all__ = [
    "SERVICE_ACCOUNT_TOKEN",
    "neighbours_url",
    "self_signed_files",
    "serving_hosts",
    "write_client_kubeconfig",
]

log = logging.getLogger("cacheproxy.daemon")

SERVICE_ACCOUNT_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
"""Where the kubelet mounts a pod's ServiceAccount token (every container of the pod sees it)."""

_WILDCARDS = frozenset({"0.0.0.0", "::", ""})


def serving_hosts(address: str) -> tuple[str, ...]:
    """The names a self-signed certificate covers: loopback, the host name and ``address``
    (unless it is a wildcard)."""
    hosts = ["127.0.0.1", "::1", "localhost"]
    for name in (socket.gethostname(), address):
        if name and name not in _WILDCARDS and name not in hosts:
            hosts.append(name)
    return tuple(hosts)


@contextlib.contextmanager
def self_signed_files(directory: Path | None, address: str) -> Iterator[ServingFiles]:
    """The self-signed serving files: kept in ``directory``, or in a temporary one removed
    when the context ends."""
    if directory is not None:
        files = self_signed(directory, serving_hosts(address))
        log.info(
            "%s self-signed serving certificate %s (CA %s)",
            "made the" if files.made else "serving the kept",
            files.cert,
            files.ca,
        )
        yield files
        return
    with tempfile.TemporaryDirectory(prefix="cacheproxy-tls-") as temporary:
        files = self_signed(Path(temporary), serving_hosts(address))
        log.info(
            "made a self-signed serving certificate for this run (set persistence.dir to keep it)"
        )
        yield files


def neighbours_url(address: str, port: int, *, https: bool) -> str:
    """The URL the containers beside the daemon reach it at (loopback when it listens on
    every interface)."""
    host = {"0.0.0.0": "127.0.0.1", "::": "[::1]"}.get(address)
    if host is None:
        host = f"[{address}]" if ":" in address else address
    return f"{'https' if https else 'http'}://{host}:{port}"


def write_client_kubeconfig(
    path: Path, url: str, ca: Path | None, *, token_file: Path = SERVICE_ACCOUNT_TOKEN
) -> None:
    """Write (atomically) a kubeconfig whose only server is ``url``, trusting ``ca``, with a
    user that reads its bearer token from ``token_file`` (re-read by clients as it rotates)."""
    cluster: dict[str, object] = {"server": url}
    if ca is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca.read_bytes()).decode()
    user: dict[str, object] = {}
    if token_file.exists():
        user["tokenFile"] = str(token_file)
    else:
        log.warning(
            "server.clientKubeconfig: %s does not exist (not in a pod?): the kubeconfig's user "
            "has no token, and its clients reach the API server anonymous",
            token_file,
        )
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "cacheproxy", "cluster": cluster}],
        "users": [{"name": "cacheproxy-client", "user": user}],
        "contexts": [
            {
                "name": "cacheproxy",
                "context": {"cluster": "cacheproxy", "user": "cacheproxy-client"},
            }
        ],
        "current-context": "cacheproxy",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            yaml.safe_dump(doc, f, sort_keys=False)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    log.info("wrote a kubeconfig for the neighbours to %s (server %s)", path, url)
