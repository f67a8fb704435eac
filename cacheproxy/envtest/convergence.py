"""Waiting for a cluster to converge, as the control-plane scenario does: requests through one
client, checks that raise :class:`NotYet` (saying what they saw) until what they wait for is
there, polled within a bound; and the time of a step.

:class:`ScenarioRun` holds a run's client, namespace and bound; the steps of
:mod:`cacheproxy.envtest.scenario` are written with it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

__all__ = [
    "NotFound",
    "NotYet",
    "ScenarioError",
    "ScenarioRun",
    "StepResult",
    "deleting",
    "ready",
]

_POLL = 0.02
_MERGE = {"Content-Type": "application/merge-patch+json"}


@dataclass(frozen=True)
class StepResult:
    """One step: whether it converged, the seconds from its change to convergence (or to giving
    up), and the last state seen (what was missing, when it did not converge)."""

    name: str
    converged: bool
    seconds: float
    detail: str = ""


class NotYet(Exception):
    """What a check raises while the cluster has not converged; its message is the state seen."""


@dataclass
class ScenarioRun:
    """One run of a scenario: whom it asks and writes through (``client``), its namespace, how
    many nodes the cluster has, and how long a step may wait to converge (``timeout``, seconds);
    :meth:`until` polls a check within it."""

    client: httpx.AsyncClient
    namespace: str
    nodes: int
    timeout: float
    started: float = 0.0

    # ------------------------------------------------------------------ requests

    def ns_path(self, group_version: str, plural: str, name: str = "") -> str:
        base = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
        path = f"{base}/namespaces/{self.namespace}/{plural}"
        return f"{path}/{name}" if name else path

    async def get(self, path: str, **params: str) -> dict[str, Any]:
        response = await self.client.get(path, params=params)
        if response.status_code == 404:
            raise NotFound(path)
        _check(response)
        body: dict[str, Any] = response.json()
        return body

    async def items(self, path: str, **params: str) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = (await self.get(path, **params))["items"]
        return found

    async def create(self, path: str, body: Mapping[str, Any]) -> None:
        _check(await self.client.post(path, json=body))

    async def patch(self, path: str, body: Mapping[str, Any]) -> None:
        _check(await self.client.patch(path, json=body, headers=_MERGE))

    async def delete(self, path: str, propagation: str = "Background") -> None:
        body = {"propagationPolicy": propagation}
        _check(await self.client.request("DELETE", path, json=body))

    def restart_clock(self) -> None:
        """A step's time counts from here (after what it only prepares)."""
        self.started = time.perf_counter()

    async def until(self, check: Callable[[], Awaitable[object]]) -> None:
        """Poll ``check`` until it stops raising :class:`NotYet` (or the step's bound passes,
        raising the last one)."""
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                await check()
                return
            except NotYet:
                if time.monotonic() >= deadline:
                    raise
            await asyncio.sleep(_POLL)

    # ------------------------------------------------------------------ common checks

    async def pods(self, selector: str) -> list[dict[str, Any]]:
        return await self.items(self.ns_path("v1", "pods"), labelSelector=selector)

    async def deployment_available(self, name: str, replicas: int) -> None:
        d = await self.get(self.ns_path("apps/v1", "deployments", name))
        s = d.get("status", {})
        seen = {k: s.get(k, 0) for k in ("replicas", "updatedReplicas", "availableReplicas")}
        if (
            s.get("observedGeneration", 0) < d["metadata"]["generation"]
            or any(v != replicas for v in seen.values())
            or s.get("unavailableReplicas", 0)
        ):
            raise NotYet(f"deployment {name}: {seen}, want {replicas}")
        pods = [p for p in await self.pods(f"app={name}") if not deleting(p)]
        if len(pods) != replicas:
            raise NotYet(f"deployment {name}: {len(pods)} live pods, want {replicas}")

    async def all_gone(self, what: str, selector: str) -> None:
        for gv, plural in (("apps/v1", "replicasets"), ("v1", "pods")):
            left = await self.items(self.ns_path(gv, plural), labelSelector=selector)
            if left:
                raise NotYet(f"{what}: {len(left)} {plural} left")


class NotFound(NotYet):
    """The object asked for does not exist (yet, or any more)."""


def _check(response: httpx.Response) -> None:
    if response.status_code >= 400:
        raise ScenarioError(
            f"{response.request.method} {response.request.url.path}: "
            f"{response.status_code} {response.text[:300]}"
        )


class ScenarioError(RuntimeError):
    """A request of the scenario itself was refused (not a convergence still pending)."""


def deleting(obj: Mapping[str, Any]) -> bool:
    """Whether ``obj`` is being deleted (``deletionTimestamp`` set)."""
    return bool(obj["metadata"].get("deletionTimestamp"))


def ready(pod: Mapping[str, Any]) -> bool:
    """Whether ``pod`` is Ready and not being deleted: what Endpoints list."""
    conditions = pod.get("status", {}).get("conditions") or []
    return not deleting(pod) and any(
        c["type"] == "Ready" and c["status"] == "True" for c in conditions
    )
