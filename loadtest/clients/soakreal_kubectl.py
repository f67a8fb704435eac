"""``kubectl get pods -A -w`` as one of the soak's clients, its output checked like the others'.

kubectl lists, prints every object, then watches from the list's RV, printing each event; it
exits when the watch ends (the daemon killed, or closing the stream), and this client starts it
again. It runs with ``--output-watch-events -o jsonpath=…`` so each line is ``TYPE ns/name RV``,
and ``-v=6`` so its request log (stderr) names the watch's ``resourceVersion``: the list's RV.
Lines at or below it are the list's objects; the first line above it is the first watch event,
so the listed view is checked at that RV then, and every event after it (order, duplicates,
the view at its RV), by :class:`~loadtest.harness.soak_views.ViewChecker`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
from pathlib import Path

from loadtest.clients.soak_clients import Endpoint
from loadtest.harness.soak_model import Filter, UpstreamModel, Violations
from loadtest.harness.soak_views import Relist, ViewChecker

__all__ = ["KUBECTL_CANDIDATES", "KubectlClient", "find_kubectl"]

KUBECTL_CANDIDATES = (
    Path("/usr/lib/google-cloud-sdk/bin/kubectl.1.28"),  # the API server's own version
    Path("/usr/bin/kubectl"),
)
_JSONPATH = (
    "jsonpath={.type} {.object.metadata.namespace}/{.object.metadata.name} "
    '{.object.metadata.resourceVersion}{"\\n"}'
)
_WATCH = re.compile(r"GET \S+\?resourceVersion=(\d+)&watch=true (\d+)")


def find_kubectl() -> Path | None:
    """The pinned 1.28 kubectl, else the system's; None when there is neither."""
    for candidate in KUBECTL_CANDIDATES:
        if os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("kubectl")
    return Path(found) if found else None


class KubectlClient(ViewChecker):
    """``kubectl get -w`` of ``selection`` (all pods), restarted whenever it exits."""

    def __init__(
        self,
        name: str,
        *,
        kubectl: Path,
        selection: Filter,
        endpoint: Endpoint,
        model: UpstreamModel,
        violations: Violations,
        workdir: Path,
        tolerant: bool = True,
    ) -> None:
        super().__init__(
            name, selection=selection, model=model, violations=violations, tolerant=tolerant
        )
        self.kubectl = kubectl
        self.endpoint = endpoint
        self.workdir = workdir
        self.runs = 0
        self.stderr_tail: list[str] = []

    async def run(self) -> None:
        while True:
            try:
                await self._one_run()
            except Relist as relist:
                self.relisted(relist.reason)
            await asyncio.sleep(0.3)

    def _kubeconfig(self) -> Path:
        path = self.workdir / f"{self.name}-kubeconfig.yaml"
        path.write_text(
            "apiVersion: v1\nkind: Config\n"
            f"clusters:\n- name: daemon\n  cluster:\n    server: {self.endpoint.url}\n"
            "users:\n- name: soak\n  user: {}\n"
            "contexts:\n- name: daemon\n  context:\n    cluster: daemon\n    user: soak\n"
            "current-context: daemon\n"
        )
        return path

    async def _one_run(self) -> None:
        argv = [
            str(self.kubectl),
            "--kubeconfig",
            str(self._kubeconfig()),
            "--cache-dir",
            str(self.workdir / f"{self.name}-cache"),
            "get",
            "pods",
            "-A",
            "-w",
            "--output-watch-events",
            "-o",
            _JSONPATH,
            "-v=6",
        ]
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        self.runs += 1
        watch_rv: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        stderr = asyncio.create_task(self._stderr(proc, watch_rv), name=f"{self.name}-stderr")
        try:
            await self._stdout(proc, watch_rv)
        finally:
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
            code = await proc.wait()
            self.stats.retries[f"exit {code}"] += 1
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                await asyncio.wait_for(stderr, 2)
            if watch_rv.done() and not watch_rv.cancelled():
                watch_rv.exception()  # retrieved: no "never retrieved" report
        raise Relist("kubectl-exited")

    async def _stderr(
        self, proc: asyncio.subprocess.Process, watch_rv: asyncio.Future[int]
    ) -> None:
        assert proc.stderr is not None
        while line := await proc.stderr.readline():
            text = line.decode(errors="replace").rstrip()
            found = _WATCH.search(text)
            if found and not watch_rv.done():
                if found.group(2) == "200":
                    watch_rv.set_result(int(found.group(1)))
                self.stats.watches += 1
            elif text.startswith(("E", "W")) or "error" in text.lower():
                self.stderr_tail = [*self.stderr_tail[-9:], text[:300]]
        if not watch_rv.done():  # kubectl ended before its watch began
            watch_rv.set_exception(Relist("kubectl-no-watch"))

    async def _stdout(
        self, proc: asyncio.subprocess.Process, watch_rv: asyncio.Future[int]
    ) -> None:
        assert proc.stdout is not None
        self.stats.lists += 1
        initial: dict[str, int] | None = {}
        listed_at = 0
        while line := await proc.stdout.readline():
            kind, key, rv_text = line.decode().split()
            rv = int(rv_text)
            if initial is not None:
                if not listed_at:
                    # The watch starts after every listed object was printed: once its RV is
                    # known, a line above it is the first event.
                    listed_at = await watch_rv
                if rv <= listed_at and kind == "ADDED":
                    initial[key] = rv
                    continue
                self.replace_view(initial, listed_at, "kubectl list")
                initial = None
                self.start_stream(listed_at)
                self.checkpoint(listed_at, "kubectl's list", firm=True)
            self.stream_event(kind, key, rv)
            self.apply(kind, key, rv)
            self.checkpoint(rv, "1 event")
