"""The simulator's control path, ``/_sim/…``: faults, compaction, restart and statistics over HTTP.

No real client calls it. ``GET /_sim/stats``; ``POST /_sim/{compact,compact-storage,
progress-notify,end-watches,fail,stream-fault,latency,clear,restart}`` with a JSON body where the
action takes arguments (README: "Faults"; ``docs/simulator.md``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any, Protocol

from cacheproxy.kube import status
from cacheproxy.sim.faults import Faults
from cacheproxy.sim.storage import SimStore

__all__ = ["Controlled", "control"]


class Controlled(Protocol):
    """What the control path acts on (the :class:`~cacheproxy.sim.simulator.Simulator` is one)."""

    store: SimStore
    faults: Faults
    requests: Counter[str]
    on_restart: Callable[[], None] | None

    def compact(self) -> None: ...

    def compact_storage(self, rv: int | None = None) -> None: ...

    def progress_notify(self) -> None: ...

    def end_watches(self) -> int: ...


def control(sim: Controlled, method: str, action: str, body: dict[str, Any]) -> dict[str, Any]:
    """Carry out one control request; its JSON answer. Bad arguments are a 400 naming them."""
    result: dict[str, Any] = {"ok": True}
    try:
        if action == "stats" and method == "GET":
            return {
                "resourceVersion": sim.store.rv,
                "compactedResourceVersion": sim.store.compacted_rv,
                "writes": sim.store.writes,
                "watchers": sum(1 for _ in sim.store.watchers()),
                "requests": dict(sim.requests),
                "faultsInjected": sim.faults.injected,
            }
        if method != "POST":
            raise status.method_not_allowed(verb=method.lower(), resource="_sim")
        if action == "compact":
            sim.compact()
        elif action == "compact-storage":
            rv = body.get("resourceVersion")
            sim.compact_storage(int(rv) if rv is not None else None)
        elif action == "progress-notify":
            sim.progress_notify()
        elif action == "end-watches":
            result["ended"] = sim.end_watches()
        elif action == "fail":
            sim.faults.fail_next(
                body.get("verb", "any"),
                int(body["code"]),
                count=int(body.get("count", 1)),
                retry_after=int(body.get("retryAfter", 1)),
                after=int(body.get("after", 0)),
            )
        elif action == "stream-fault":
            sim.faults.next_watch_stream(body["fault"], count=int(body.get("count", 1)))
        elif action == "latency":
            sim.faults.latency = float(body.get("seconds", 0))
        elif action == "clear":
            sim.faults.clear()
        elif action == "restart" and sim.on_restart is not None:
            sim.on_restart()
        else:
            raise status.resource_not_found()
    except (KeyError, ValueError, TypeError) as exc:
        raise status.bad_request(f"bad control request for {action!r}: {exc}") from None
    return result
