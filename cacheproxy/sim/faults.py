"""Fault injection for the simulator, driven from tests (this Python API) or over HTTP.

The HTTP control path is ``/_sim/…`` (see :mod:`cacheproxy.sim.simulator`); no real client calls it.
Faults are consumed in request order: "the next N watches fail with 410" affects exactly the next
N watch requests, whatever their resource.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Literal

from cacheproxy.errors import ApiError
from cacheproxy.kube import status

__all__ = ["FailureSpec", "Faults", "StreamFault", "Verb"]

Verb = Literal["list", "watch", "get", "create", "any"]
StreamFault = Literal["garbage", "truncate", "silent"]


@dataclass(slots=True)
class FailureSpec:
    verb: Verb
    code: int
    retry_after: int = 1
    after: int = 0
    """Matching requests to let through before this one fails."""

    def error(self) -> ApiError:
        if self.code == 410:
            if self.verb == "watch":
                return status.too_old_resource_version(0, 0)
            return status.expired("The resourceVersion for the provided list is too old.")
        if self.code == 429:
            return status.too_many_requests(
                "Too many requests, please try again later.", retry_after=self.retry_after
            )
        if self.code == 503:
            return status.service_unavailable(
                "the server is shutting down", retry_after=self.retry_after
            )
        if self.code == 504:
            return status.too_large_resource_version(0, 0, retry_after=self.retry_after)
        return status.internal_error("injected fault")


@dataclass
class Faults:
    """Pending faults. Every method is synchronous and safe to call between requests."""

    latency: float = 0.0
    """Seconds added before answering every API request."""
    event_delay: float = 0.0
    """Seconds each watch event (or bookmark) waits before it is sent: a watch whose events
    arrive late, as the delivery lag of a busy server."""
    _failures: deque[FailureSpec] = field(default_factory=deque)
    _stream_faults: deque[StreamFault] = field(default_factory=deque)
    injected: int = 0

    def fail_next(
        self, verb: Verb, code: int, *, count: int = 1, retry_after: int = 1, after: int = 0
    ) -> None:
        """The next ``count`` requests of ``verb`` fail with ``code`` (410, 429, 500, 503, 504),
        once ``after`` matching requests went through (e.g. ``after=1``: the second page)."""
        if code not in (410, 429, 500, 503, 504):
            raise ValueError(f"unsupported fault code {code}")
        for i in range(count):
            self._failures.append(FailureSpec(verb, code, retry_after, after if i == 0 else 0))

    def next_watch_stream(self, fault: StreamFault, *, count: int = 1) -> None:
        """The next ``count`` watch streams misbehave: a garbage line, a line cut in the middle
        (then the connection drops), or silence (no events, no bookmarks) until they end."""
        for _ in range(count):
            self._stream_faults.append(fault)

    def clear(self) -> None:
        self._failures.clear()
        self._stream_faults.clear()
        self.latency = 0.0

    def take_failure(self, verb: Verb) -> ApiError | None:
        for i, spec in enumerate(self._failures):
            if spec.verb in (verb, "any"):
                if spec.after:
                    spec.after -= 1
                    return None
                del self._failures[i]
                self.injected += 1
                return spec.error()
        return None

    def take_stream_fault(self) -> StreamFault | None:
        if not self._stream_faults:
            return None
        self.injected += 1
        return self._stream_faults.popleft()
