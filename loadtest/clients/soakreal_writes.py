"""Upstream's history in the real-server soak: the harness's writes, each recorded from its result.

No controllers run beside the envtest API server, so the harness is the only writer of pods and
configmaps, and what its writes return *is* upstream's history of them. :class:`Writer` churns
both at a steady rate from a few lanes; each lane owns the objects it created (names are never
reused), so nothing else writes them between two of its writes. Every write goes through
:class:`Recorder`, which feeds one :class:`~loadtest.harness.soak_model.UpstreamModel` per resource in
RV order:

- a write's RV is known only when its response is back, and concurrent writes come back in any
  order, so the recorder holds results until every write that could land below them is back:
  each write in flight carries a *floor* (the highest RV recorded when it began, which it must
  exceed), and a resource's history is complete up to the lowest floor in flight
  (:meth:`Recorder.complete_to`; everything, when nothing is in flight);
- what a response does not say is asked of etcd (``EtcdProbe``, its JSON gateway): deleting a
  pod is two writes (the API server first sets ``deletionTimestamp``, then deletes; the
  response carries only the delete's RV), and deleting a configmap returns a Status with no RV;
- a write whose outcome is unknown (the API server killed mid-request, a 5xx, a timeout) stays
  in flight, holding the history back, until the API server answers again; then the object
  (a quorum GET) and etcd say whether and at which RV it was applied.

A write that could not have been applied (connection refused, 429, 409/404/422) is not recorded;
a 404 or 409 on an object the lane owns means the harness lost track of it: counted in
``WriterStats.harness_errors`` and reported, since the model is then wrong.
"""

from __future__ import annotations

import asyncio
import base64
import bisect
import heapq
import itertools
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson

from loadtest.harness.soak_model import JsonObject, UpstreamModel

__all__ = [
    "EtcdProbe",
    "Recorder",
    "Writer",
    "WriterSpec",
    "WriterStats",
]

Write = tuple[str, str, int, JsonObject | None]
"""(event type, key, RV, the object after it; None for DELETED)."""
Writes = list[Write]
_MERGE = {"Content-Type": "application/merge-patch+json"}
_UNKNOWN = 1 << 62
"""``complete_to`` with nothing in flight: every write up to any RV seen is recorded."""
_WRITE_TIMEOUT = httpx.Timeout(120.0, connect=5.0)
"""Longer than the API server's own request timeout (60 s): it answers first, even while etcd
is paused (a write then waits for etcd and lands when it resumes)."""


# ---------------------------------------------------------------------- etcd


class Compacted(Exception):
    """etcd no longer has the revision asked for."""


class EtcdProbe:
    """The few questions the recorder asks etcd (v3 JSON gateway), by key and revision."""

    def __init__(self, url: str) -> None:
        self._http = httpx.AsyncClient(base_url=url, timeout=httpx.Timeout(5.0))

    async def aclose(self) -> None:
        await self._http.aclose()

    async def mod_revision(self, key: str, revision: int = 0) -> int | None:
        """The revision of the last write of ``key`` at ``revision`` (0: now); None when the key
        does not exist then."""
        body: dict[str, Any] = {"key": base64.b64encode(key.encode()).decode(), "keys_only": True}
        if revision:
            body["revision"] = revision
        resp = await self._http.post("/v3/kv/range", json=body)
        if resp.status_code != 200:
            if "compacted" in resp.text:
                raise Compacted(key)
            raise RuntimeError(f"etcd range {key}@{revision}: {resp.status_code} {resp.text}")
        data = orjson.loads(resp.content)
        kvs = data.get("kvs") or []
        return int(kvs[0]["mod_revision"]) if kvs else None

    async def revision(self) -> int:
        resp = await self._http.post("/v3/kv/range", json={"key": "AA==", "keys_only": True})
        resp.raise_for_status()
        return int(orjson.loads(resp.content)["header"]["revision"])

    async def deleted_at(self, key: str, *, after: int) -> int:
        """The revision at which ``key`` (present at ``after``, absent now) was deleted: the
        first revision where it is absent, by bisection. Revisions etcd compacted away are
        skipped when the key was still there at the first one it kept."""
        high = await self.revision()  # absent here
        low = after  # present here
        while high - low > 1:
            mid = (low + high) // 2
            try:
                present = await self.mod_revision(key, mid) is not None
            except Compacted:
                low = mid  # the delete is recent: it is after what etcd forgot
                continue
            if present:
                low = mid
            else:
                high = mid
        return high


# ---------------------------------------------------------------------- the record


@dataclass(frozen=True, slots=True)
class Ticket:
    resource: str
    floor: int
    serial: int


class Recorder:
    """Writes' results in, each resource's model out, in RV order (see the module docstring)."""

    def __init__(
        self,
        models: dict[str, UpstreamModel],
        *,
        drop_pod_write: int | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.models = models
        self.clock = clock
        self.drop_pod_write = drop_pod_write
        """Self-test of the checks: the N-th pod write recorded is forgotten (the model is then
        wrong from its RV on, and every check after it must fail)."""
        self._recorded = Counter[str]()
        self.max_seen = 0
        """The highest RV recorded (of any resource: they share one RV sequence)."""
        self._in_flight: dict[str, dict[int, int]] = {r: {} for r in models}
        self._pending: dict[str, list[tuple[int, int, str, str, JsonObject | None, float]]] = {
            r: [] for r in models
        }
        self._serial = itertools.count()
        self.answered: dict[str, tuple[list[int], list[float]]] = {r: ([], []) for r in models}
        """Per resource, the RVs of its writes in order and when each one's answer came (so
        the age of the oldest write a reader has not seen yet can be told)."""

    def begin(self, resource: str) -> Ticket:
        ticket = Ticket(resource, self.max_seen, next(self._serial))
        self._in_flight[resource][ticket.serial] = ticket.floor
        return ticket

    def finish(self, ticket: Ticket, writes: Sequence[Write] = ()) -> None:
        """``writes``: what the write did (none: it was not applied)."""
        pending = self._pending[ticket.resource]
        for event_type, key, rv, obj in writes:
            if rv <= ticket.floor:
                self.models[ticket.resource].errors.append(
                    f"{event_type} {key} at {rv}, not above the RV {ticket.floor} known before it"
                )
            heapq.heappush(pending, (rv, next(self._serial), event_type, key, obj, self.clock()))
            self.max_seen = max(self.max_seen, rv)
        del self._in_flight[ticket.resource][ticket.serial]
        self._commit(ticket.resource)

    def complete_to(self, resource: str) -> int:
        floors = self._in_flight[resource]
        return min(floors.values()) if floors else _UNKNOWN

    def floor(self) -> int:
        """No write in flight, nor any later one, lands at or below this RV."""
        floors = [f for flight in self._in_flight.values() for f in flight.values()]
        return min(floors) if floors else self.max_seen

    def in_flight(self) -> int:
        return sum(len(f) for f in self._in_flight.values())

    def lag(self, resource: str, rv: int, at: float) -> float:
        """How long before ``at`` the oldest write of ``resource`` above ``rv`` was answered:
        how far behind upstream a reader at ``rv`` is (0 when it has every write)."""
        rvs, times = self.answered[resource]
        i = bisect.bisect_right(rvs, rv)
        return max(0.0, at - times[i]) if i < len(rvs) else 0.0

    def _commit(self, resource: str) -> None:
        limit = self.complete_to(resource)
        pending, model = self._pending[resource], self.models[resource]
        while pending and pending[0][0] <= limit:
            rv, _, event_type, key, obj, at = heapq.heappop(pending)
            rvs, times = self.answered[resource]
            rvs.append(rv)
            times.append(at)
            self._recorded[resource] += 1
            if resource == "pods" and self._recorded[resource] == self.drop_pod_write:
                continue
            model.record(event_type, key, rv, obj)


# ---------------------------------------------------------------------- the writer


@dataclass(frozen=True)
class WriterSpec:
    rate: float = 20.0
    """Writes per second, all lanes together."""
    lanes: int = 4
    pods: tuple[int, int, int] = (120, 80, 200)
    """Pods at the start, and the population's bounds (creates and deletes keep it inside)."""
    configmaps: tuple[int, int, int] = (40, 25, 70)
    configmap_share: float = 0.3
    namespaces: tuple[str, ...] = ("ns-0", "ns-1", "ns-2")
    apps: int = 4
    nodes: int = 5
    label: tuple[str, str] = ("soak", "real")
    """On every object: the daemon caches configmaps with this label selector (the API server
    writes configmaps of its own in kube-system)."""
    seed: int = 1


@dataclass
class WriterStats:
    writes: Counter[str] = field(default_factory=Counter)
    """``op outcome`` → count (``applied``, ``no-op``, ``not-applied``)."""
    ambiguous: Counter[str] = field(default_factory=Counter)
    """Writes whose outcome was unknown, by how they were resolved."""
    refused: Counter[str] = field(default_factory=Counter)
    """Writes that were not applied, by reason (refused, 429, …)."""
    harness_errors: list[str] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    """Seconds per write (answered ones)."""
    longest_resolution: float = 0.0

    @property
    def applied(self) -> int:
        return sum(n for k, n in self.writes.items() if k.endswith(" applied"))


@dataclass
class _Owned:
    resource: str
    namespace: str
    name: str
    obj: JsonObject
    rv: int

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def path(self) -> str:
        return f"/api/v1/namespaces/{self.namespace}/{self.resource}/{self.name}"

    @property
    def etcd_key(self) -> str:
        return f"/registry/{self.resource}/{self.namespace}/{self.name}"


class _Ambiguous(Exception):
    """The write may or may not have been applied."""


class _NotApplied(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _rv(obj: JsonObject) -> int:
    return int(obj["metadata"]["resourceVersion"])


class Writer:
    """Churn on pods and configmaps through ``http`` (the API server, as admin), recorded."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        etcd: EtcdProbe,
        recorder: Recorder,
        spec: WriterSpec,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.http = http
        self.etcd = etcd
        self.recorder = recorder
        self.spec = spec
        self.clock = clock
        self.stats = WriterStats()
        self.rng = random.Random(spec.seed)
        self._owned: list[dict[str, _Owned]] = [{} for _ in range(spec.lanes)]
        self._names = itertools.count()
        self.paused = asyncio.Event()
        self.paused.set()
        """Cleared: the lanes stop before their next write (quiescence)."""

    # ------------------------------------------------------------------ population

    def count(self, resource: str) -> int:
        return sum(1 for lane in self._owned for o in lane.values() if o.resource == resource)

    async def populate(self) -> None:
        """Create the starting objects, all lanes at once."""
        spec = self.spec

        async def lane(i: int) -> None:
            for resource, total in (("pods", spec.pods[0]), ("configmaps", spec.configmaps[0])):
                for _ in range(i, total, spec.lanes):
                    await self._create(i, resource)

        await asyncio.gather(*(lane(i) for i in range(spec.lanes)))

    async def run(self) -> None:
        """Write until cancelled, at ``spec.rate`` writes/s over all lanes."""
        await asyncio.gather(*(self._lane(i) for i in range(self.spec.lanes)))

    async def _lane(self, i: int) -> None:
        rng = random.Random(self.spec.seed * 100 + i)
        period = self.spec.lanes / self.spec.rate
        next_at = self.clock() + rng.uniform(0, period)
        while True:
            await asyncio.sleep(max(0.0, next_at - self.clock()))
            await self.paused.wait()
            next_at = max(next_at + period, self.clock() - period)
            try:
                await self._one(i, rng)
            except Exception as exc:  # a bug of the harness: reported, and the lane goes on
                self.stats.harness_errors.append(f"lane {i}: {exc!r}")

    async def _one(self, lane: int, rng: random.Random) -> None:
        spec = self.spec
        resource = "configmaps" if rng.random() < spec.configmap_share else "pods"
        low, high = (spec.pods if resource == "pods" else spec.configmaps)[1:]
        mine = [o for o in self._owned[lane].values() if o.resource == resource]
        count = self.count(resource)
        roll = rng.random()
        if not mine or count < low or (roll < 0.25 and count < high):
            await self._create(lane, resource)
            return
        target = rng.choice(mine)
        if count > high or roll < 0.45:
            await self._delete(lane, target)
        elif resource == "pods" and roll < 0.7:
            phase = (
                "Running" if target.obj.get("status", {}).get("phase") != "Running" else "Pending"
            )
            await self._patch(lane, target, {"status": {"phase": phase}}, status=True)
        else:
            await self._patch(lane, target, self._change(target, rng))

    def _change(self, target: _Owned, rng: random.Random) -> JsonObject:
        if target.resource == "pods":
            if rng.random() < 0.5:
                return {"metadata": {"labels": {"app": f"app-{rng.randrange(self.spec.apps)}"}}}
            return {"metadata": {"annotations": {"soak/touched": str(rng.random())}}}
        if rng.random() < 0.5:
            return {"metadata": {"labels": {"tier": rng.choice("ab")}}}
        return {"data": {"value": rng.randbytes(rng.randint(16, 512)).hex()}}

    def _body(self, resource: str, namespace: str, name: str) -> JsonObject:
        rng = self.rng
        key, value = self.spec.label
        if resource == "configmaps":
            return {
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "labels": {key: value, "tier": rng.choice("ab")},
                },
                "data": {"value": rng.randbytes(rng.randint(16, 512)).hex()},
            }
        app = f"app-{rng.randrange(self.spec.apps)}"
        return {
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {key: value, "app": app},
                "annotations": {"soak/created": f"{time.time():.3f}"},
            },
            "spec": {
                "nodeName": f"node-{rng.randrange(self.spec.nodes)}",
                "containers": [
                    {
                        "name": "main",
                        "image": f"registry.example/{app}:1.{rng.randrange(20)}",
                        "env": [{"name": f"VAR_{k}", "value": str(rng.random())} for k in range(6)],
                        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                    }
                ],
            },
        }

    # ------------------------------------------------------------------ writes

    async def _create(self, lane: int, resource: str) -> None:
        namespace = self.rng.choice(self.spec.namespaces)
        name = f"{resource[:-1]}-{lane}-{next(self._names)}"
        body = self._body(resource, namespace, name)
        path = f"/api/v1/namespaces/{namespace}/{resource}"
        owned = _Owned(resource, namespace, name, body, 0)

        async def send() -> Writes:
            created = await self._request("POST", path, owned, json=body)
            owned.obj, owned.rv = created, _rv(created)
            self._owned[lane][owned.key] = owned
            return [("ADDED", owned.key, owned.rv, created)]

        async def resolve() -> Writes:
            current = await self._get(owned)
            if current is None:
                return []
            owned.obj, owned.rv = current, _rv(current)
            self._owned[lane][owned.key] = owned
            return [("ADDED", owned.key, owned.rv, current)]

        await self._write("create", owned, send, resolve)

    async def _patch(
        self, lane: int, owned: _Owned, patch: JsonObject, *, status: bool = False
    ) -> None:
        path = owned.path + ("/status" if status else "")
        before = owned.rv
        op = "status" if status else "update"

        async def send() -> Writes:
            data = orjson.dumps(patch)
            updated = await self._request("PATCH", path, owned, content=data, headers=_MERGE)
            return self._updated(owned, updated, before)

        async def resolve() -> Writes:
            current = await self._get(owned)
            if current is None:
                self._lost(owned, "gone after an update of unknown outcome")
                self._owned[lane].pop(owned.key, None)
                return []
            return self._updated(owned, current, before)

        await self._write(op, owned, send, resolve)

    def _updated(self, owned: _Owned, obj: JsonObject, before: int) -> Writes:
        owned.obj = obj
        if _rv(obj) == before:
            return []  # a patch that changed nothing writes nothing
        owned.rv = _rv(obj)
        return [("MODIFIED", owned.key, owned.rv, obj)]

    async def _delete(self, lane: int, owned: _Owned) -> None:
        before = owned.rv
        # Pods: without a grace period (no kubelet would ever finish a graceful deletion).
        query = "?gracePeriodSeconds=0" if owned.resource == "pods" else ""

        async def send() -> Writes:
            answer = await self._request("DELETE", owned.path + query, owned)
            self._owned[lane].pop(owned.key, None)
            deleted = _rv(answer) if answer.get("kind") != "Status" else None
            return await self._deletion(owned, before, deleted)

        async def resolve() -> Writes:
            current = await self._get(owned)
            if current is None:
                self._owned[lane].pop(owned.key, None)
                return await self._deletion(owned, before, None)
            # Not deleted; a pod may have got its deletionTimestamp (the first of two writes).
            return self._updated(owned, current, before)

        await self._write("delete", owned, send, resolve)

    async def _deletion(self, owned: _Owned, before: int, deleted: int | None) -> Writes:
        """The writes of a delete: etcd says its RV when the answer did not, and whether a pod's
        ``deletionTimestamp`` was written first (the last write before the delete)."""
        key = owned.etcd_key
        if deleted is None:
            deleted = await self._etcd(lambda: self.etcd.deleted_at(key, after=before))
        at = deleted - 1
        writes: Writes = []
        try:
            last = await self._etcd(lambda: self.etcd.mod_revision(key, at))
        except Compacted:
            self._lost(owned, f"etcd compacted past {at}: was deletionTimestamp written first?")
            last = None
        if last is not None and last > before:
            marked = {**owned.obj, "metadata": {**owned.obj["metadata"], "deletionTimestamp": "?"}}
            writes.append(("MODIFIED", owned.key, last, marked))
        writes.append(("DELETED", owned.key, deleted, None))
        return writes

    async def _etcd(self, ask: Callable[[], Awaitable[int | None]]) -> Any:
        """etcd's answer, however long it takes (it may be paused)."""
        while True:
            try:
                return await ask()
            except (httpx.HTTPError, RuntimeError):
                await asyncio.sleep(0.5)

    async def _write(
        self,
        op: str,
        owned: _Owned,
        send: Callable[[], Awaitable[Writes]],
        resolve: Callable[[], Awaitable[Writes]],
    ) -> None:
        ticket = self.recorder.begin(owned.resource)
        writes: Writes = []
        began = self.clock()
        try:
            writes = await send()
            self.stats.latencies.append(self.clock() - began)
            self.stats.writes[f"{op} {'applied' if writes else 'no-op'}"] += 1
        except _NotApplied as refused:
            self.stats.refused[refused.reason] += 1
            self.stats.writes[f"{op} not-applied"] += 1
        except _Ambiguous as err:
            writes = await self._resolved(op, resolve, err)
        finally:
            self.recorder.finish(ticket, writes)

    async def _resolved(
        self, op: str, resolve: Callable[[], Awaitable[Writes]], err: _Ambiguous
    ) -> Writes:
        """Retry ``resolve`` until the API server and etcd answer it; its writes."""
        began = self.clock()
        await asyncio.sleep(1.0)  # let a request still inside the API server finish first
        while True:
            try:
                writes = await resolve()
                break
            except (_Ambiguous, _NotApplied, httpx.HTTPError, RuntimeError):
                await asyncio.sleep(0.5)
        self.stats.longest_resolution = max(self.stats.longest_resolution, self.clock() - began)
        outcome = "applied" if writes else "not applied"
        self.stats.ambiguous[f"{op} {outcome} ({err})"] += 1
        self.stats.writes[f"{op} {'applied' if writes else 'not-applied'}"] += 1
        return writes

    async def _request(self, method: str, path: str, owned: _Owned, **kwargs: Any) -> JsonObject:
        try:
            resp = await self.http.request(method, path, timeout=_WRITE_TIMEOUT, **kwargs)
        except httpx.ConnectError as exc:
            raise _NotApplied("refused") from exc
        except httpx.HTTPError as exc:  # sent, perhaps applied: the answer was lost
            raise _Ambiguous(type(exc).__name__) from exc
        if resp.status_code in (200, 201):
            body: JsonObject = orjson.loads(resp.content)
            return body
        if resp.status_code == 429:
            raise _NotApplied("429")
        if resp.status_code in (404, 409, 422):
            self._lost(owned, f"{method} {path}: {resp.status_code} {resp.text[:200]}")
            raise _NotApplied(str(resp.status_code))
        raise _Ambiguous(str(resp.status_code))

    async def _get(self, owned: _Owned) -> JsonObject | None:
        """The object now (a quorum read), None when it does not exist."""
        resp = await self.http.get(owned.path, timeout=httpx.Timeout(10.0))
        if resp.status_code == 404:
            return None
        if resp.status_code != 200:
            raise _Ambiguous(str(resp.status_code))
        body: JsonObject = orjson.loads(resp.content)
        return body

    def _lost(self, owned: _Owned, detail: str) -> None:
        self.stats.harness_errors.append(f"{owned.key}: {detail}")

    def owned(self) -> Iterator[_Owned]:
        for lane in self._owned:
            yield from lane.values()
