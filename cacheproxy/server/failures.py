"""Why a resource is not synced, where people look: the upstream failures of each cached
resource's lists and watches.

:class:`UpstreamFailures` is told every answer of a resource's list or watch start. The first
failure of a streak is a WARNING naming the resource, the request, upstream's code and message
and what to do about it; the same failure again is logged at most every ``repeat`` seconds (with
how many there were), a different one at once; the first success after a streak says so. The
last failure of each resource, and since when, is on ``/status`` (``lastError``), on the home
page, in ``/readyz?verbose`` and in the 429 a read of a resource that is not synced gets.

Expected answers are not failures: a watch-list the API server does not serve (4xx: 1.28
without the gate; the reflector then lists), a watch's 410 (the reflector relists).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cacheproxy.errors import ApiError, TransportError

__all__ = ["Failure", "UpstreamFailures", "fix_for"]

log = logging.getLogger("cacheproxy.upstream")


@dataclass(slots=True)
class Failure:
    """A streak of failed requests for one resource, and its last error."""

    verb: str
    code: int | None
    """Upstream's HTTP code (None: it could not be reached)."""
    message: str
    since: float
    """When the streak began (the clock of :class:`UpstreamFailures`)."""
    count: int = 1
    logged_at: float = 0.0
    logged_count: int = 1

    @property
    def summary(self) -> str:
        """``list failed: 403 pods is forbidden: …`` — what failed, in one line."""
        what = f"{self.code} " if self.code is not None else ""
        return f"{self.verb} failed: {what}{self.message}"

    def document(self, now: float, resource: str) -> dict[str, Any]:
        return {
            "verb": self.verb,
            "code": self.code,
            "message": self.message,
            "failures": self.count,
            "sinceSeconds": round(now - self.since, 3),
            "fix": fix_for(self.code, self.verb, resource),
        }


def fix_for(code: int | None, verb: str, resource: str) -> str:
    """What an operator can do about a failed ``verb`` of ``resource``."""
    if code is None:
        return (
            "cacheproxy cannot reach the API server: check upstream.kubeconfig (or the "
            "in-cluster service), upstream.tlsServerName, upstream.proxy and the network"
        )
    if code == 401:
        return (
            "the API server refused cacheproxy's own credentials: check the user of "
            "upstream.kubeconfig (or the pod's ServiceAccount token)"
        )
    if code == 403:
        return (
            f"cacheproxy's identity may not {verb} {resource}: grant it with "
            "`cacheproxy rbac --config CONFIG | kubectl apply -f -`"
        )
    if code == 404:
        return (
            f"the API server does not serve {resource}: if it is a custom resource, is its "
            "CustomResourceDefinition installed (and served at that version)?"
        )
    if code == 429:
        return "the API server is throttling cacheproxy (API Priority and Fairness): it retries"
    if code >= 500:
        return "the API server failed the request: see its logs; cacheproxy retries"
    return ""


class UpstreamFailures:
    """The failing resources (see the module). ``repeat``: seconds between WARNINGs of the
    same failure."""

    def __init__(self, *, repeat: float = 300.0, clock: Callable[[], float] = time.monotonic):
        self.repeat = repeat
        self.clock = clock
        self._failing: dict[str, Failure] = {}

    def of(self, resource: str) -> Failure | None:
        return self._failing.get(resource)

    def failing(self) -> dict[str, Failure]:
        """The failing resources' streaks, by resource."""
        return dict(self._failing)

    def answered(self, resource: str) -> None:
        """A list or watch of ``resource`` was answered: its streak, if any, is over."""
        failure = self._failing.pop(resource, None)
        if failure is not None:
            log.info(
                "%s: the API server answers again (after %d failed %s%s over %.0f s)",
                resource,
                failure.count,
                failure.verb,
                "s" if failure.count != 1 else "",
                self.clock() - failure.since,
            )

    def failed(self, resource: str, verb: str, err: BaseException) -> None:
        """A ``verb`` (``list``, ``watch``, ``watch-list``) of ``resource`` failed with ``err``."""
        code: int | None
        if isinstance(err, ApiError):
            code, message = err.code, err.message
            if (verb == "watch-list" and 400 <= err.code < 500) or (
                verb == "watch" and err.code == 410
            ):
                return  # expected: the reflector lists instead, or relists
        elif isinstance(err, TransportError):
            code, message = None, str(err)
        else:
            return
        now = self.clock()
        failure = self._failing.get(resource)
        if failure is not None and (failure.code, failure.message) == (code, message):
            failure.count += 1
            failure.verb = verb
            if now - failure.logged_at >= self.repeat:
                log.warning(
                    "%s: still: %s (%d times in %.0f s). %s",
                    resource,
                    failure.summary,
                    failure.count - failure.logged_count + 1,
                    now - failure.logged_at,
                    fix_for(code, verb, resource),
                )
                failure.logged_at, failure.logged_count = now, failure.count
            return
        since, count = (failure.since, failure.count + 1) if failure is not None else (now, 1)
        failure = Failure(verb, code, message, since=since, count=count, logged_at=now)
        failure.logged_count = count
        self._failing[resource] = failure
        if code is None:
            said = f"its {verb} did not reach the API server: {message}"
        else:
            said = f"the API server answered its {verb} with {code}: {message}"
        log.warning("%s: %s. %s", resource, said, fix_for(code, verb, resource))
