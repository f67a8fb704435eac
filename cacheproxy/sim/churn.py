"""The churn driver: creates, updates and deletes pods at a set rate, for demos and load tests.

It writes through an :class:`ObjectWriter`, the few synchronous store operations it needs (the
simulator's store implements it; tests use a dict). The objects come from
:mod:`cacheproxy.sim.workload`, so a seeded driver against a fresh store replays the same writes.

Writes race with whoever else writes to the same store (a test, kubectl, another driver): an
update can meet a newer ``resourceVersion`` (409) or a pod deleted meanwhile (404). Like a
controller, the driver counts such an :class:`~cacheproxy.errors.ApiError` as a failed write,
skips it and goes on; it never dies of one.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any, Protocol

from cacheproxy.errors import ApiError
from cacheproxy.kube.resources import ResourceType, builtin
from cacheproxy.sim.workload import make_pod, mutate_pod

__all__ = ["ChurnDriver", "ChurnMix", "ChurnStats", "ObjectWriter", "demo_churn"]

_log = logging.getLogger(__name__)

_PODS = builtin("pods")
_NODES = builtin("nodes")
_OPS = ("create", "update", "delete")
_MAX_BATCH = 16
"""Writes made back to back before yielding to the event loop (a write costs up to ~1 ms: the
loop also serves the simulator's clients)."""
_RELIST_SECONDS = 1.0
"""How stale :meth:`ChurnDriver.run`'s view of the pods may get before it lists them again
(listing every pod per batch would cost more than the writes with large populations)."""
_IDLE_SLEEP = 3600.0
"""How long a rate-0 driver sleeps at a time (it wakes only to notice its duration is over)."""
_EARLY = 1e-6
"""Fraction of a write interval by which a write may run early: absorbs float rounding, so a
wake-up at exactly the due time never finds the write not yet due and sleeps a few ns again."""


class ObjectWriter(Protocol):
    """The synchronous store operations the driver writes through.

    Every call completes without awaiting (one event loop; the store never awaits). Errors are
    :class:`~cacheproxy.errors.ApiError` with the API server's Status (404, 409 ...). Objects
    returned must not be mutated by the caller.
    """

    def create(self, rtype: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        """Store a new object (namespace from ``obj["metadata"]["namespace"]``); return it as
        stored, with ``metadata.resourceVersion``, ``uid`` and ``creationTimestamp``."""
        ...

    def update(self, rtype: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        """Replace an object; a stale ``metadata.resourceVersion`` is a 409 Conflict."""
        ...

    def delete(self, rtype: ResourceType, namespace: str, name: str) -> dict[str, Any]: ...

    def get(self, rtype: ResourceType, namespace: str, name: str) -> dict[str, Any] | None: ...

    def names(self, rtype: ResourceType) -> list[tuple[str, str]]:
        """``(namespace, name)`` of every live object of ``rtype``, in key order."""
        ...

    def now(self) -> str:
        """The server's time, as it stamps ``creationTimestamp`` (RFC 3339, in seconds)."""
        ...


@dataclass(frozen=True)
class ChurnMix:
    """Relative weights of creates, updates and deletes (they need not sum to 1)."""

    create: float = 1.0
    update: float = 8.0
    delete: float = 1.0

    def __post_init__(self) -> None:
        weights = (self.create, self.update, self.delete)
        if not all(math.isfinite(w) and w >= 0 for w in weights) or sum(weights) <= 0:
            raise ValueError(f"churn weights must be finite, >= 0 and not all 0: {self}")


@dataclass(frozen=True)
class ChurnStats:
    """Write attempts by outcome; every attempt counts exactly once."""

    created: int = 0
    updated: int = 0
    deleted: int = 0
    failed: int = 0

    @property
    def writes(self) -> int:
        return self.created + self.updated + self.deleted + self.failed

    def __add__(self, other: ChurnStats) -> ChurnStats:
        return ChurnStats(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))


class ChurnDriver:
    """Churns the pods of a store: :meth:`step` writes now, :meth:`run` writes at ``rate``/s.

    Each write is drawn from ``mix``: a create (a new pod of a random app in a random namespace
    on a random node), an update (:func:`~cacheproxy.sim.workload.mutate_pod` of the current
    object, sent with its ``resourceVersion``) or a delete. Pods are made and updated at the
    writer's time (:meth:`ObjectWriter.now`), the time the server stamps them with: a pod's
    timestamps are never before its ``creationTimestamp`` nor after the server's now, a restart
    counts in its container's ``restartCount`` and dates its last state, a crashed container backs
    off (CrashLoopBackOff) for as long as the kubelet would. Updates and deletes pick among *every*
    pod of the store, not only the driver's own, as last listed: :meth:`step` lists once per call,
    :meth:`run` at most once a second; in between the driver's own writes keep its view current.
    With no pod left, any write is a create.

    Guarantees:

    - the pod population stays at most ``max_pods`` as far as the driver's view goes (pods
      created by others count from the next listing): at the cap, a create drawn becomes a delete;
    - an :class:`~cacheproxy.errors.ApiError` from the writer is counted in ``failed`` and
      skipped; any other exception is a bug and propagates;
    - :meth:`run` keeps a schedule that does not drift: write *k* is due ``k / rate`` seconds after
      the start, whatever the sleeps and the writes cost. When behind, the due writes are made in
      batches (yielding to the loop after every 16 writes); when ahead, it sleeps until
      the next due time, never spinning;
    - for one ``rng`` seed and one store state, the same writes in the same order.
    """

    def __init__(
        self,
        writer: ObjectWriter,
        *,
        rate: float,
        rng: random.Random | None = None,
        namespaces: Sequence[str],
        nodes: Sequence[str],
        apps: Sequence[str],
        mix: ChurnMix = ChurnMix(),
        max_pods: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ) -> None:
        if not (math.isfinite(rate) and rate >= 0):
            raise ValueError(f"rate must be a finite number of writes/s >= 0, not {rate}")
        if not (namespaces and nodes and apps):
            raise ValueError("churn needs at least one namespace, one node and one app")
        if max_pods is not None and max_pods < 1:
            raise ValueError(f"max_pods must be at least 1, not {max_pods}")
        self._writer = writer
        self._rate = rate
        self._rng = rng if rng is not None else random.Random()
        self._namespaces = tuple(namespaces)
        self._nodes = tuple(nodes)
        self._apps = tuple(apps)
        self._weights = (mix.create, mix.update, mix.delete)
        self._max_pods = max_pods
        self._clock = clock
        self._sleep = sleep
        self._stats = ChurnStats()

    @property
    def stats(self) -> ChurnStats:
        """Every write attempted since construction."""
        return self._stats

    def step(self, n: int) -> ChurnStats:
        """Make ``n`` writes now (synchronously); return their outcomes."""
        if n < 0:
            raise ValueError(f"cannot make {n} writes")
        return self._step(n, self._writer.names(_PODS))

    def _step(self, n: int, live: list[tuple[str, str]]) -> ChurnStats:
        """``n`` writes against ``live``, the pods' keys as listed, which the writes keep current
        (another writer's changes show up at the next listing, or as failed writes)."""
        counts = dict.fromkeys(("created", "updated", "deleted", "failed"), 0)
        for _ in range(n):
            counts[self._write(live)] += 1
        done = ChurnStats(**counts)
        self._stats += done
        return done

    async def run(self, *, duration: float | None = None, events: int | None = None) -> ChurnStats:
        """Write at ``rate`` until ``duration`` seconds have passed or ``events`` writes were made
        (whichever comes first; neither: until cancelled). Returns this run's outcomes.

        ``rate`` 0 idles (until ``duration``, or until cancelled). Cancellation propagates.
        """
        if duration is not None and not duration >= 0:
            raise ValueError(f"duration must be >= 0, not {duration}")
        if events is not None and events < 0:
            raise ValueError(f"events must be >= 0, not {events}")
        limit = sys.maxsize if events is None else events
        start = self._clock()
        end = math.inf if duration is None else start + duration
        total = ChurnStats()
        live: list[tuple[str, str]] = []
        listed_at = -math.inf
        try:
            while total.writes < limit:
                now = self._clock()
                if now >= end:
                    break
                if self._rate == 0:
                    await self._sleep(min(end - now, _IDLE_SLEEP))
                    continue
                due = min(limit, math.floor((now - start) * self._rate + _EARLY) + 1)
                if due > total.writes:
                    if now - listed_at >= _RELIST_SECONDS:
                        live, listed_at = self._writer.names(_PODS), now
                    total += self._step(min(due - total.writes, _MAX_BATCH), live)
                    if due > total.writes:  # still behind: let the loop breathe, then go on
                        await self._sleep(0)
                        continue
                if total.writes >= limit:
                    break
                next_due = start + total.writes / self._rate
                await self._sleep(max(0.0, min(next_due, end) - self._clock()))
        except asyncio.CancelledError:
            _log.info("churn cancelled after %s", total)
            raise
        _log.info("churn finished: %s", total)
        return total

    # ------------------------------------------------------------------ one write

    def _write(self, live: list[tuple[str, str]]) -> str:
        """Make one write, keeping ``live`` (the pods' keys) current; return its outcome."""
        op = self._rng.choices(_OPS, weights=self._weights)[0]
        if op == "create" and self._max_pods is not None and len(live) >= self._max_pods:
            op = "delete"
        if not live:
            op = "create"
        try:
            if op == "create":
                return self._create(live)
            if op == "update":
                return self._update(live)
            return self._delete(live)
        except ApiError as exc:
            _log.debug("churn %s failed: %s", op, exc)
            return "failed"

    def _create(self, live: list[tuple[str, str]]) -> str:
        rng = self._rng
        namespace = rng.choice(self._namespaces)
        pod = make_pod(
            rng,
            namespace=namespace,
            app=rng.choice(self._apps),
            node=rng.choice(self._nodes),
            phase="Pending" if rng.random() < 0.2 else "Running",
            now=self._now(),
        )
        stored = self._writer.create(_PODS, pod)
        live.append((namespace, stored["metadata"]["name"]))
        return "created"

    def _update(self, live: list[tuple[str, str]]) -> str:
        i = self._rng.randrange(len(live))
        namespace, name = live[i]
        current = self._writer.get(_PODS, namespace, name)
        if current is None:  # deleted by someone else since we listed
            _forget(live, i)
            _log.debug("churn update: pod %s/%s is gone", namespace, name)
            return "failed"
        try:
            self._writer.update(_PODS, mutate_pod(self._rng, current, now=self._now()))
        except ApiError as exc:
            if exc.code == 404:
                _forget(live, i)
            raise
        return "updated"

    def _now(self) -> datetime:
        return datetime.fromisoformat(self._writer.now())

    def _delete(self, live: list[tuple[str, str]]) -> str:
        namespace, name = _forget(live, self._rng.randrange(len(live)))
        self._writer.delete(_PODS, namespace, name)
        return "deleted"


def demo_churn(
    writer: ObjectWriter, *, rate: float, seed: int, apps: int, pods: int
) -> ChurnDriver:
    """The churn ``cacheproxy demo`` and ``cacheproxy sim --churn`` run over the demo they loaded.

    Pods of ``app-0`` … (``apps`` of them, at least one) written at ``rate``/s from ``seed``, in
    the namespaces that hold pods in ``writer`` now and on its nodes (``default`` and ``node-0``
    when it has none), up to twice the ``pods`` loaded (at least 10).
    """
    namespaces = sorted({ns for ns, _ in writer.names(_PODS)}) or ["default"]
    nodes = [name for _, name in writer.names(_NODES)] or ["node-0"]
    return ChurnDriver(
        writer,
        rate=rate,
        rng=random.Random(seed),
        namespaces=namespaces,
        nodes=nodes,
        apps=[f"app-{i}" for i in range(max(apps, 1))],
        max_pods=max(pods * 2, 10),
    )


def _forget(live: list[tuple[str, str]], i: int) -> tuple[str, str]:
    """Remove ``live[i]`` in O(1) (order does not matter, only determinism does)."""
    live[i], live[-1] = live[-1], live[i]
    return live.pop()
