"""One etcd and one kube-apiserver on loopback, with users, RBAC and kubeconfigs, and on request
the API server's audit log."""

from __future__ import annotations

import atexit
import base64
import contextlib
import json
import os
import secrets
import shutil
import signal
import ssl
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import httpx
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from cacheproxy.envtest.assets import Assets
from cacheproxy.envtest.creation import create_all
from cacheproxy.envtest.process import EnvtestError, Process, free_port
from cacheproxy.sim.testpki import generate_pki

__all__ = ["AUDIT_POLICY", "Cluster", "User"]

_START_TIMEOUT = 60.0
AUDIT_POLICY: dict[str, Any] = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    # One event per request, when its answer is complete (or started, for a long-running one).
    "omitStages": ["RequestReceived"],
    "rules": [{"level": "Metadata"}],
}
"""The audit policy of an audited cluster: who did what to which object, and its answer's code
(``Metadata``: no bodies), for every request."""
_C = TypeVar("_C", httpx.Client, httpx.AsyncClient)


@dataclass(frozen=True)
class User:
    """A user of the cluster, authenticated by a static bearer token."""

    name: str
    token: str
    groups: tuple[str, ...]
    kubeconfig: Path

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


@dataclass
class Cluster:
    """One etcd + kube-apiserver on loopback. Not started until :meth:`start`.

    ``feature_gates`` are passed to kube-apiserver (``{"WatchList": True}``);
    ``extra_args`` are appended to its command line (``--etcd-compaction-interval=1m``);
    ``audit``: the API server writes an audit log (:data:`AUDIT_POLICY`), read with
    :meth:`audit_events`.

    Users (:attr:`users`, each with a static token and a kubeconfig): ``admin``
    (``system:masters``), ``reader`` (get/list/watch in :attr:`reader_namespace`), ``nobody``
    (authenticated, no grants) and ``cacheproxy`` (get/list/watch on everything, and the
    TokenReviews and SubjectAccessReviews of delegated authentication: what a daemon's own
    identity needs, and no writes).
    """

    assets: Assets
    feature_gates: dict[str, bool] = field(default_factory=dict)
    extra_args: Sequence[str] = ()
    audit: bool = False
    reader_namespace: str = "team-a"
    workdir: Path | None = None
    url: str = ""
    ca_file: Path = Path()
    users: dict[str, User] = field(default_factory=dict)
    _owned_dir: tempfile.TemporaryDirectory[str] | None = None
    _etcd: Process | None = None
    _apiserver: Process | None = None
    _apiserver_port: int = 0
    _etcd_url: str = ""
    _etcd_paused: bool = False

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> Cluster:
        """Start etcd and kube-apiserver, wait until ready, set up the users' RBAC."""
        if self.workdir is None:
            self._owned_dir = tempfile.TemporaryDirectory(prefix="cacheproxy-envtest-")
            self.workdir = Path(self._owned_dir.name)
        self.workdir.mkdir(parents=True, exist_ok=True)
        atexit.register(self.stop)
        self._write_pki_and_users()
        for attempt in range(3):  # a free port may be taken between choosing and binding it
            try:
                self._start_etcd()
                self._start_apiserver()
                break
            except EnvtestError:
                self._stop_processes()
                if attempt == 2:
                    raise
        self._set_up_rbac()
        return self

    def stop(self) -> None:
        """Stop both processes and remove the work directory if it was ours. Idempotent."""
        self._stop_processes()
        if self._owned_dir is not None:
            self._owned_dir.cleanup()
            self._owned_dir = None
        atexit.unregister(self.stop)

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _stop_processes(self) -> None:
        if self._etcd_paused:
            self.resume_etcd()
        for process in (self._apiserver, self._etcd):
            if process is not None:
                process.stop()

    @property
    def apiserver_pid(self) -> int:
        assert self._apiserver is not None
        return self._apiserver.pid

    @property
    def etcd_pid(self) -> int:
        assert self._etcd is not None
        return self._etcd.pid

    @property
    def etcd_url(self) -> str:
        """etcd's client URL (``http://127.0.0.1:PORT``)."""
        return self._etcd_url

    @property
    def audit_log(self) -> Path:
        """The API server's audit log (JSON lines), when :attr:`audit` is set."""
        assert self.workdir is not None
        return self.workdir / "audit.log"

    def audit_end(self) -> int:
        """Where the audit log ends now: :meth:`audit_events` from here are the later ones."""
        assert self.audit, "the cluster was started without an audit log"
        try:
            return self.audit_log.stat().st_size
        except FileNotFoundError:
            return 0

    def audit_events(self, *, since: int = 0) -> list[dict[str, Any]]:
        """The audit events (``audit.k8s.io/v1`` Event) written from byte ``since`` of the log
        (:meth:`audit_end`) on, oldest first. The API server writes a request's event as its
        answer completes, maybe after the client has read it: callers wait for what they look
        for. A line still being written is left for the next call, one ``since`` falls in
        skipped."""
        assert self.audit, "the cluster was started without an audit log"
        try:
            with self.audit_log.open("rb") as log:
                log.seek(max(since - 1, 0))
                data = log.read()
        except FileNotFoundError:
            return []
        if since > 0:
            data = data.partition(b"\n")[2]  # from the first line that begins at ``since`` on
        complete, _, _ = data.rpartition(b"\n")
        return [json.loads(line) for line in complete.splitlines() if line.strip()]

    def compact(self, revision: int) -> None:
        """Compact etcd's history up to ``revision``, as the API server's periodic compaction
        does: lists at an older exact RV and continue tokens from before it get 410."""
        response = httpx.post(
            f"{self._etcd_url}/v3/kv/compaction",
            json={"revision": str(revision), "physical": True},
            timeout=30,
        )
        if response.status_code != 200:
            raise EnvtestError(f"etcd compaction to {revision}: {response.text}")

    def bump_revision(self) -> None:
        """One write to etcd outside the API server's keys: its revision moves on, as when other
        resources change (a watch resumed from before it on a restarted API server is 410)."""
        key = base64.b64encode(b"/cacheproxy-envtest/bump").decode()
        value = base64.b64encode(secrets.token_bytes(8)).decode()
        response = httpx.post(
            f"{self._etcd_url}/v3/kv/put", json={"key": key, "value": value}, timeout=30
        )
        if response.status_code != 200:
            raise EnvtestError(f"etcd put: {response.text}")

    def pause_etcd(self) -> None:
        """Freeze etcd (SIGSTOP), as a stuck disk or a partition would: its connections stay
        open and every request to it hangs until :meth:`resume_etcd`. Stopping the cluster
        resumes it first."""
        os.kill(self.etcd_pid, signal.SIGSTOP)
        self._etcd_paused = True

    def resume_etcd(self) -> None:
        """Let a paused etcd go on (SIGCONT)."""
        os.kill(self.etcd_pid, signal.SIGCONT)
        self._etcd_paused = False

    def restart_apiserver(self, sig: int = signal.SIGTERM, *, bump_revision: bool = False) -> None:
        """Stop kube-apiserver (``SIGKILL`` for a crash) and start it again on the same port,
        over the same etcd; returns once it is ready. ``bump_revision``: etcd's revision moves
        on while it is down, so its new watch caches begin after every RV clients hold (their
        resumed watches are 410, and they relist)."""
        assert self._apiserver is not None
        self._apiserver.stop(sig)
        if bump_revision:
            self.bump_revision()
        self._apiserver.start()
        self._wait_ready(self._apiserver)

    # ------------------------------------------------------------------ clients

    @property
    def admin(self) -> User:
        return self.users["admin"]

    def client(self, user: str | None = "admin", **kwargs: Any) -> httpx.Client:
        """A synchronous HTTP/1.1 client for the API server, as ``user`` (None: anonymous)."""
        return self._client(httpx.Client, user, kwargs)

    def async_client(self, user: str | None = "admin", **kwargs: Any) -> httpx.AsyncClient:
        """An asynchronous HTTP/1.1 client for the API server, as ``user`` (None: anonymous)."""
        return self._client(httpx.AsyncClient, user, kwargs)

    def _client(self, cls: type[_C], user: str | None, kwargs: dict[str, Any]) -> _C:
        """A ``cls`` for the API server's URL and CA, with ``user``'s headers (before any given)
        and a 30 s timeout unless given."""
        return cls(
            base_url=self.url,
            verify=self.ssl_context(),
            headers={**(self.users[user].headers if user else {}), **kwargs.pop("headers", {})},
            timeout=kwargs.pop("timeout", 30.0),
            **kwargs,
        )

    def ssl_context(self) -> ssl.SSLContext:
        """A client TLS context that trusts the cluster's CA."""
        return ssl.create_default_context(cafile=str(self.ca_file))

    async def load(
        self, objects: Iterable[tuple[str, Mapping[str, Any]]], *, concurrency: int = 16
    ) -> None:
        """Create ``objects`` (resource config name such as ``pods`` or ``apps/v1/deployments``,
        object) as admin: their namespaces (with the ``default`` ServiceAccount) first, then each
        resource's objects concurrently, in the order the resources first appear. An object's
        ``status`` is written after it through the ``/status`` subresource, as controllers and
        kubelets write it; what the API server sets itself (uid, resourceVersion, timestamps,
        managedFields) is dropped. Objects that exist already are left as they are."""
        limits = httpx.Limits(max_connections=concurrency)
        async with self.async_client(limits=limits) as client:
            await create_all(client, objects, concurrency=concurrency)

    def create_namespace(self, name: str) -> None:
        """Create namespace ``name`` (if missing) and its ``default`` ServiceAccount, which no
        controller creates here and pods need."""
        with self.client() as c:
            for path, body in (
                ("/api/v1/namespaces", {"metadata": {"name": name}}),
                (f"/api/v1/namespaces/{name}/serviceaccounts", {"metadata": {"name": "default"}}),
            ):
                response = c.post(path, json=body)
                if response.status_code not in (201, 409):
                    raise EnvtestError(f"POST {path}: {response.status_code} {response.text}")

    # ------------------------------------------------------------------ setup

    def _write_pki_and_users(self) -> None:
        assert self.workdir is not None
        pki = generate_pki(self.workdir / "pki", hosts=("127.0.0.1",))
        self.ca_file = pki.ca_cert
        sa_key = ec.generate_private_key(ec.SECP256R1())
        (self.workdir / "sa.key").write_bytes(
            sa_key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        (self.workdir / "sa.pub").write_bytes(
            sa_key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
        people = {"admin": ("system:masters",), "reader": (), "nobody": (), "cacheproxy": ()}
        lines = []
        for uid, (name, groups) in enumerate(people.items()):
            token = secrets.token_hex(16)
            group_field = f',"{",".join(groups)}"' if groups else ""
            lines.append(f"{token},{name},{uid + 1}{group_field}")
            self.users[name] = User(name, token, groups, self.workdir / f"{name}.kubeconfig")
        (self.workdir / "tokens.csv").write_text("\n".join(lines) + "\n")

    def _write_kubeconfigs(self) -> None:
        for user in self.users.values():
            doc = {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "envtest",
                        "cluster": {"server": self.url, "certificate-authority": str(self.ca_file)},
                    }
                ],
                "users": [{"name": user.name, "user": {"token": user.token}}],
                "contexts": [
                    {"name": user.name, "context": {"cluster": "envtest", "user": user.name}}
                ],
                "current-context": user.name,
            }
            user.kubeconfig.write_text(yaml.safe_dump(doc))

    def _start_etcd(self) -> None:
        assert self.workdir is not None
        client_port, peer_port = free_port(), free_port()
        data = self.workdir / "etcd"
        shutil.rmtree(data, ignore_errors=True)
        self._etcd_url = f"http://127.0.0.1:{client_port}"
        self._etcd = Process(
            "etcd",
            [
                str(self.assets.etcd),
                "--data-dir",
                str(data),
                "--listen-client-urls",
                self._etcd_url,
                "--advertise-client-urls",
                self._etcd_url,
                "--listen-peer-urls",
                f"http://127.0.0.1:{peer_port}",
                "--initial-advertise-peer-urls",
                f"http://127.0.0.1:{peer_port}",
                "--initial-cluster",
                f"default=http://127.0.0.1:{peer_port}",
                "--quota-backend-bytes",
                str(8 << 30),
                # etcd's own binary; the small launcher beside a newer API server has no such flag
                # (an fsync costs ~1 ms a write here either way).
                *(["--unsafe-no-fsync"] if "unsafe-no-fsync" in self.assets.etcd_flags else []),
            ],
            self.workdir / "etcd.log",
        )
        self._etcd.start()
        deadline = time.monotonic() + _START_TIMEOUT
        while time.monotonic() < deadline:
            if not self._etcd.alive():
                raise EnvtestError(f"etcd exited at start:\n{self._etcd.tail()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self._etcd_url}/health", timeout=1).status_code == 200:
                    return
            time.sleep(0.05)
        raise EnvtestError(f"etcd not healthy within {_START_TIMEOUT:.0f} s:\n{self._etcd.tail()}")

    def _start_apiserver(self) -> None:
        assert self.workdir is not None
        self._apiserver_port = free_port()
        self.url = f"https://127.0.0.1:{self._apiserver_port}"
        pki = self.workdir / "pki"
        argv = [
            str(self.assets.kube_apiserver),
            "--etcd-servers",
            self._etcd_url,
            "--secure-port",
            str(self._apiserver_port),
            "--bind-address",
            "127.0.0.1",
            "--advertise-address",
            "127.0.0.1",
            "--service-cluster-ip-range",
            "10.96.0.0/12",
            "--token-auth-file",
            str(self.workdir / "tokens.csv"),
            "--authorization-mode",
            "RBAC",
            "--client-ca-file",
            str(pki / "ca.crt"),
            "--tls-cert-file",
            str(pki / "server.crt"),
            "--tls-private-key-file",
            str(pki / "server.key"),
            "--service-account-issuer",
            "https://kubernetes.default.svc",
            "--service-account-key-file",
            str(self.workdir / "sa.pub"),
            "--service-account-signing-key-file",
            str(self.workdir / "sa.key"),
            "--cert-dir",
            str(self.workdir / "certs"),
        ]
        if self.audit:
            policy = self.workdir / "audit-policy.yaml"
            policy.write_text(yaml.safe_dump(AUDIT_POLICY))
            # No rotation (maxsize 0): one file to read; blocking: written in the request's path.
            argv += [
                "--audit-policy-file",
                str(policy),
                "--audit-log-path",
                str(self.audit_log),
                "--audit-log-format",
                "json",
                "--audit-log-mode",
                "blocking",
                "--audit-log-maxsize",
                "0",
            ]
        if self.feature_gates:
            gates = ",".join(f"{k}={str(v).lower()}" for k, v in sorted(self.feature_gates.items()))
            argv += ["--feature-gates", gates]
        argv += list(self.extra_args)
        self._apiserver = Process("kube-apiserver", argv, self.workdir / "kube-apiserver.log")
        self._apiserver.start()
        self._write_kubeconfigs()
        self._wait_ready(self._apiserver)

    def _wait_ready(self, process: Process) -> None:
        deadline = time.monotonic() + _START_TIMEOUT
        with self.client(timeout=2.0) as c:
            while time.monotonic() < deadline:
                if not process.alive():
                    raise EnvtestError(f"kube-apiserver exited at start:\n{process.tail()}")
                with contextlib.suppress(httpx.HTTPError):
                    if c.get("/readyz").status_code == 200:
                        return
                time.sleep(0.1)
        raise EnvtestError(
            f"kube-apiserver not ready within {_START_TIMEOUT:.0f} s:\n{process.tail()}"
        )

    def _set_up_rbac(self) -> None:
        """``reader`` may get/list/watch everything in :attr:`reader_namespace`; ``cacheproxy``
        everything everywhere, and create TokenReviews and SubjectAccessReviews."""
        ns = self.reader_namespace
        self.create_namespace(ns)
        read = {"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list", "watch"]}
        reviews = [
            {"apiGroups": [f"{group}.k8s.io"], "resources": [resource], "verbs": ["create"]}
            for group, resource in (
                ("authentication", "tokenreviews"),
                ("authorization", "subjectaccessreviews"),
            )
        ]
        rbac = "/apis/rbac.authorization.k8s.io/v1"
        with self.client() as c:
            for user, kind, where, rules in (
                ("reader", "Role", f"/namespaces/{ns}", [read]),
                ("cacheproxy", "ClusterRole", "", [read, *reviews]),
            ):
                meta = {"name": user, **({"namespace": ns} if where else {})}
                binding = {
                    "metadata": meta,
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": kind,
                        "name": user,
                    },
                    "subjects": [
                        {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}
                    ],
                }
                for path, body in (
                    (f"{rbac}{where}/{kind.lower()}s", {"metadata": meta, "rules": rules}),
                    (f"{rbac}{where}/{kind.lower()}bindings", binding),
                ):
                    response = c.post(path, json=body)
                    if response.status_code not in (201, 409):
                        raise EnvtestError(f"POST {path}: {response.status_code} {response.text}")
