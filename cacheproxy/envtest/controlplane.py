"""kube-controller-manager and kube-scheduler against one API server: the rest of a control plane,
for tests and benchmarks that need real controllers (``1.36/`` ships both beside its
kube-apiserver).

:class:`ControlPlane` writes a kubeconfig (server URL, CA, bearer token: the API server itself or
cacheproxy in front of it), starts both with ``--leader-elect=false`` on free loopback ports,
their logs in files, and waits until each answers ``/healthz``. kube-controller-manager runs every
controller (``--controllers=*``) at ``-v=2``, which is where it logs its conflicts and stale
caches, with ``--node-monitor-grace-period=1h`` so that a fake kubelet's Nodes never go stale
during a run. Stopping sends SIGTERM to the scheduler, then to kube-controller-manager.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import httpx
import yaml

from cacheproxy.envtest.assets import Assets
from cacheproxy.envtest.process import EnvtestError, Process, free_port

__all__ = ["ControlPlane", "write_token_kubeconfig"]

_START_TIMEOUT = 60.0


def write_token_kubeconfig(path: Path, *, server: str, ca_file: Path, token: str) -> Path:
    """A kubeconfig whose only cluster is ``server`` (trusted through ``ca_file``) and whose only
    user sends ``token``."""
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "only", "cluster": {"server": server, "certificate-authority": str(ca_file)}}
        ],
        "users": [{"name": "only", "user": {"token": token}}],
        "contexts": [{"name": "only", "context": {"cluster": "only", "user": "only"}}],
        "current-context": "only",
    }
    path.write_text(yaml.safe_dump(doc))
    return path


@dataclass
class ControlPlane:
    """kube-controller-manager and kube-scheduler of ``assets`` (which must have them), talking
    to ``server`` only. Not started until :meth:`start`.

    ``ca_file`` trusts ``server``'s certificate; ``token`` is a ``system:masters`` user's;
    ``service_account_key`` signs the tokens of ServiceAccounts (the API server's
    ``--service-account-signing-key-file``); ``root_ca`` is the CA published to every namespace
    (``kube-root-ca.crt``). ``workdir`` receives the kubeconfig and the two logs;
    ``extra_kcm_args`` are appended to kube-controller-manager's command line.
    """

    assets: Assets
    workdir: Path
    server: str
    ca_file: Path
    token: str
    service_account_key: Path
    root_ca: Path
    extra_kcm_args: Sequence[str] = ()
    kcm: Process | None = None
    scheduler: Process | None = None
    _ports: dict[str, int] = field(default_factory=dict)

    @property
    def kcm_log(self) -> Path:
        return self.workdir / "kube-controller-manager.log"

    @property
    def scheduler_log(self) -> Path:
        return self.workdir / "kube-scheduler.log"

    @property
    def pids(self) -> dict[str, int]:
        """The running processes' ids by name (``kube-controller-manager``, ``kube-scheduler``)."""
        return {p.name: p.pid for p in (self.kcm, self.scheduler) if p is not None and p.alive()}

    def start(self) -> ControlPlane:
        """Start both and wait until each is healthy; raises :class:`EnvtestError` with the end
        of the log of the one that did not come up. From a coroutine (a server on the same
        event loop must answer them meanwhile), await :meth:`start_async` instead."""
        return asyncio.run(self.start_async())

    async def start_async(self) -> ControlPlane:
        """:meth:`start` without blocking the event loop: the processes are started on the
        calling thread (the main one, so that they die with this process), their health is
        awaited in a worker thread."""
        kcm_binary, scheduler_binary = (
            self.assets.kube_controller_manager,
            self.assets.kube_scheduler,
        )
        if kcm_binary is None or scheduler_binary is None:
            raise EnvtestError(
                f"no kube-controller-manager and kube-scheduler beside "
                f"{self.assets.kube_apiserver}: a control plane needs a folder that has them"
            )
        self.workdir.mkdir(parents=True, exist_ok=True)
        kubeconfig = write_token_kubeconfig(
            self.workdir / "control-plane.kubeconfig",
            server=self.server,
            ca_file=self.ca_file,
            token=self.token,
        )
        common = [
            "--kubeconfig",
            str(kubeconfig),
            "--leader-elect=false",
            "--bind-address",
            "127.0.0.1",
        ]
        kcm_args = [
            *common,
            "--controllers=*",
            "--node-monitor-grace-period=1h",
            "--service-account-private-key-file",
            str(self.service_account_key),
            "--root-ca-file",
            str(self.root_ca),
            "--use-service-account-credentials=false",
            "-v=2",
            *self.extra_kcm_args,
        ]
        try:
            self.kcm = await self._start(
                "kube-controller-manager", kcm_binary, kcm_args, self.kcm_log
            )
            self.scheduler = await self._start(
                "kube-scheduler", scheduler_binary, [*common, "-v=2"], self.scheduler_log
            )
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """SIGTERM the scheduler, then kube-controller-manager (each killed if it lingers).
        Idempotent."""
        for process in (self.scheduler, self.kcm):
            if process is not None:
                process.stop()

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def _start(self, name: str, binary: Path, args: list[str], log: Path) -> Process:
        for attempt in range(3):  # a free port may be taken between choosing and binding it
            port = free_port()
            process = Process(name, [str(binary), *args, "--secure-port", str(port)], log)
            process.start()
            try:
                await asyncio.to_thread(_wait_healthy, process, port)
            except EnvtestError:
                process.stop()
                if attempt == 2:
                    raise
                continue
            self._ports[name] = port
            return process
        raise AssertionError("unreachable")


def _wait_healthy(process: Process, port: int) -> None:
    """Until ``https://127.0.0.1:PORT/healthz`` answers 200 (a self-signed certificate: not
    verified; nothing but the health answer is read)."""
    deadline = time.monotonic() + _START_TIMEOUT
    with httpx.Client(verify=False, timeout=2.0) as client:
        while time.monotonic() < deadline:
            if not process.alive():
                raise EnvtestError(f"{process.name} exited at start:\n{process.tail()}")
            with contextlib.suppress(httpx.HTTPError):
                if client.get(f"https://127.0.0.1:{port}/healthz").status_code == 200:
                    return
            time.sleep(0.1)
    raise EnvtestError(
        f"{process.name} not healthy within {_START_TIMEOUT:.0f} s:\n{process.tail()}"
    )
