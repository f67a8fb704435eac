"""A fake kubelet: what a real control plane needs from its nodes, with no containers.

:class:`FakeKubelet` registers its Nodes (``Ready=True``; capacity ``cpu: 4``, ``memory: 8Gi``,
``pods: 110``; status written through the ``status`` subresource, as the kubelet does), renews
their Leases in ``kube-node-lease`` (the heartbeat kube-controller-manager's node-lifecycle
controller reads), and watches the pods bound to them:

- a pending pod of a Job (an owner of kind Job, or ``restartPolicy`` ``Never``/``OnFailure``)
  becomes ``Succeeded``, its containers terminated with exit code 0;
- any other pending pod becomes ``Running`` and Ready, with a pod IP of its node's range;
- a pod being deleted (``deletionTimestamp`` set) is finalized: deleted with
  ``gracePeriodSeconds=0``, as the kubelet does once its containers stopped.

It talks to whatever server its client names (the API server, or cacheproxy in front of it)
through list + watch + status writes, as a kubelet does. Run it with ``async with``: it stops
when the block ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import itertools
import logging
from collections.abc import Sequence
from types import TracebackType
from typing import Any

import httpx
import orjson

from cacheproxy.envtest.process import EnvtestError

__all__ = ["FakeKubelet", "is_job_pod"]

log = logging.getLogger(__name__)

_LEASE_SECONDS = 40
_RENEW_EVERY = 10.0
_RETRY_AFTER = 0.5
_MERGE = {"Content-Type": "application/merge-patch+json"}
_CAPACITY = {"cpu": "4", "memory": "8Gi", "pods": "110"}
_LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"


def is_job_pod(pod: dict[str, Any]) -> bool:
    """Whether ``pod`` runs to completion: owned by a Job, or never restarted."""
    owners = pod["metadata"].get("ownerReferences") or []
    if any(o.get("kind") == "Job" for o in owners):
        return True
    return pod["spec"].get("restartPolicy") in ("Never", "OnFailure")


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _micro_now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class FakeKubelet:
    """The kubelet of ``nodes`` (names; ``node-a`` …), through ``client`` (an admin's, with the
    server's base URL). Nodes are registered on entry; the lease and pod loops run until exit.
    :attr:`pods_started`, :attr:`pods_completed` and :attr:`pods_finalized` count what it did."""

    def __init__(self, client: httpx.AsyncClient, nodes: Sequence[str]) -> None:
        if not nodes:
            raise ValueError("a kubelet needs at least one node")
        self.client = client
        self.nodes = tuple(nodes)
        self.pods_started = 0
        self.pods_completed = 0
        self.pods_finalized = 0
        self._ips = {name: itertools.count(2) for name in self.nodes}
        self._done: set[tuple[str, bool]] = set()
        """(uid, deleting) of what was done already: a late event of a pod changes nothing."""
        self._loops: list[asyncio.Task[None]] = []
        self._stop = asyncio.Event()

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> FakeKubelet:
        for index, name in enumerate(self.nodes):
            await self._register(name, index)
        self._loops = [
            asyncio.create_task(self._renew_leases(), name="kubelet-leases"),
            asyncio.create_task(self._sync_pods(), name="kubelet-pods"),
        ]
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        for task in self._loops:
            task.cancel()
        await asyncio.gather(*self._loops, return_exceptions=True)
        self._loops = []

    # ------------------------------------------------------------------ nodes

    async def _register(self, name: str, index: int) -> None:
        node = {
            "metadata": {
                "name": name,
                "labels": {
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                },
            },
            "spec": {"podCIDR": f"10.244.{index}.0/24", "podCIDRs": [f"10.244.{index}.0/24"]},
        }
        response = await self.client.post("/api/v1/nodes", json=node)
        if response.status_code not in (201, 409):
            raise EnvtestError(f"registering node {name}: {response.status_code} {response.text}")
        await self._write_node_status(name)
        lease = {
            "metadata": {"name": name, "namespace": "kube-node-lease"},
            "spec": {
                "holderIdentity": name,
                "leaseDurationSeconds": _LEASE_SECONDS,
                "renewTime": _micro_now(),
            },
        }
        response = await self.client.post(_LEASES, json=lease)
        if response.status_code not in (201, 409):
            raise EnvtestError(f"lease of node {name}: {response.status_code} {response.text}")

    async def _write_node_status(self, name: str) -> None:
        now = _now()

        def condition(kind: str, status: str, reason: str) -> dict[str, str]:
            return {
                "type": kind,
                "status": status,
                "reason": reason,
                "lastHeartbeatTime": now,
                "lastTransitionTime": now,
            }

        status = {
            "capacity": _CAPACITY,
            "allocatable": _CAPACITY,
            "conditions": [
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory"),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure"),
                condition("PIDPressure", "False", "KubeletHasSufficientPID"),
                condition("Ready", "True", "KubeletReady"),
            ],
            "addresses": [
                {"type": "InternalIP", "address": "127.0.0.1"},
                {"type": "Hostname", "address": name},
            ],
            "nodeInfo": {
                "kubeletVersion": "v1.36.0-fake",
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": "amd64",
                "containerRuntimeVersion": "fake://1",
                "osImage": "fake",
                "kernelVersion": "",
                "machineID": name,
                "systemUUID": name,
                "bootID": name,
            },
        }
        response = await self.client.patch(
            f"/api/v1/nodes/{name}/status", json={"status": status}, headers=_MERGE
        )
        if response.status_code != 200:
            raise EnvtestError(f"status of node {name}: {response.status_code} {response.text}")

    async def _renew_leases(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._stop.wait(), _RENEW_EVERY)
                return
            for name in self.nodes:
                try:
                    response = await self.client.patch(
                        f"{_LEASES}/{name}",
                        json={"spec": {"renewTime": _micro_now()}},
                        headers=_MERGE,
                    )
                except httpx.HTTPError as exc:
                    log.info("renewing the lease of %s: %s", name, exc)
                    continue
                if response.status_code != 200:
                    log.info("renewing the lease of %s: %s", name, response.status_code)

    # ------------------------------------------------------------------ pods

    async def _sync_pods(self) -> None:
        """List and watch every pod; act on those bound to our nodes. A watch that ends (or
        fails) is resumed from the last RV seen, a 410 or an error relists."""
        rv = ""
        while not self._stop.is_set():
            try:
                if not rv:
                    rv = await self._list_pods()
                rv = await self._watch_pods(rv)
            except (httpx.HTTPError, EnvtestError) as exc:
                log.info("kubelet pod watch: %s; starting again", exc)
                rv = ""
                await asyncio.sleep(_RETRY_AFTER)

    async def _list_pods(self) -> str:
        response = await self.client.get("/api/v1/pods")
        if response.status_code != 200:
            raise EnvtestError(f"listing pods: {response.status_code}")
        body = response.json()
        for pod in body["items"]:
            await self._handle(pod)
        return str(body["metadata"]["resourceVersion"])

    async def _watch_pods(self, rv: str) -> str:
        """Watch from ``rv``; the RV to resume from ("" when it must relist)."""
        params = {"watch": "1", "resourceVersion": rv, "allowWatchBookmarks": "true"}
        async with self.client.stream(
            "GET", "/api/v1/pods", params=params, timeout=httpx.Timeout(30, read=None)
        ) as response:
            if response.status_code != 200:  # relisted after a pause, as after an error
                raise EnvtestError(f"watching pods: {response.status_code}")
            async for line in response.aiter_lines():
                if not line.strip():
                    continue
                event = orjson.loads(line)
                obj = event["object"]
                if event["type"] == "ERROR":
                    return ""  # a 410: relist
                rv = obj["metadata"].get("resourceVersion", rv)
                if event["type"] in ("ADDED", "MODIFIED"):
                    await self._handle(obj)
        return rv

    async def _handle(self, pod: dict[str, Any]) -> None:
        node = pod["spec"].get("nodeName")
        if node not in self._ips:
            return
        meta = pod["metadata"]
        path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"
        deleting = bool(meta.get("deletionTimestamp"))
        if (meta["uid"], deleting) in self._done:
            return
        if deleting:
            body = {"gracePeriodSeconds": 0, "preconditions": {"uid": meta["uid"]}}
            response = await self.client.request("DELETE", path, json=body)
            if response.status_code in (200, 202):
                self.pods_finalized += 1
            if response.status_code in (200, 202, 404, 409):
                self._done.add((meta["uid"], True))
            return
        if pod.get("status", {}).get("phase", "Pending") != "Pending":
            return
        status = self._completed(pod) if is_job_pod(pod) else self._running(pod, node)
        response = await self.client.patch(
            f"{path}/status", json={"status": status}, headers=_MERGE
        )
        if response.status_code in (200, 404):
            self._done.add((meta["uid"], False))
        if response.status_code == 200:
            if status["phase"] == "Succeeded":
                self.pods_completed += 1
            else:
                self.pods_started += 1
        elif response.status_code not in (404, 409):
            log.info("status of pod %s: %s %s", path, response.status_code, response.text)

    def _running(self, pod: dict[str, Any], node: str) -> dict[str, Any]:
        now = _now()
        ip = f"10.244.{self.nodes.index(node)}.{next(self._ips[node]) % 250 + 2}"
        return {
            "phase": "Running",
            "hostIP": "127.0.0.1",
            "hostIPs": [{"ip": "127.0.0.1"}],
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "startTime": now,
            "conditions": [
                {"type": kind, "status": "True", "lastTransitionTime": now}
                for kind in (
                    "PodReadyToStartContainers",
                    "Initialized",
                    "Ready",
                    "ContainersReady",
                    "PodScheduled",
                )
            ],
            "containerStatuses": [
                {
                    "name": c["name"],
                    "image": c.get("image", ""),
                    "imageID": "",
                    "ready": True,
                    "started": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": now}},
                }
                for c in pod["spec"].get("containers", [])
            ],
        }

    def _completed(self, pod: dict[str, Any]) -> dict[str, Any]:
        now = _now()
        return {
            "phase": "Succeeded",
            "hostIP": "127.0.0.1",
            "startTime": now,
            "conditions": [
                {"type": "Initialized", "status": "True", "lastTransitionTime": now},
                {
                    "type": "Ready",
                    "status": "False",
                    "reason": "PodCompleted",
                    "lastTransitionTime": now,
                },
                {
                    "type": "ContainersReady",
                    "status": "False",
                    "reason": "PodCompleted",
                    "lastTransitionTime": now,
                },
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
            ],
            "containerStatuses": [
                {
                    "name": c["name"],
                    "image": c.get("image", ""),
                    "imageID": "",
                    "ready": False,
                    "started": False,
                    "restartCount": 0,
                    "state": {
                        "terminated": {
                            "exitCode": 0,
                            "reason": "Completed",
                            "startedAt": now,
                            "finishedAt": now,
                        }
                    },
                }
                for c in pod["spec"].get("containers", [])
            ],
        }
