"""Upstream answers by HTTP code, measured where the daemon composes its ListerWatchers.

The informer's :class:`~cacheproxy.informer.instruments.InformerMetrics` counts the requests its
Reflector makes, not how upstream answered; rather than widen that protocol, the daemon wraps
each upstream ListerWatcher in a :class:`MeteredListerWatcher` that reports every answer to
:meth:`ServerMetrics.upstream_response <cacheproxy.server.metrics.ServerMetrics.upstream_response>`
(the informer library stays as it is, and library users lose nothing).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractContextManager, asynccontextmanager, contextmanager
from typing import ParamSpec, TypeVar

from cacheproxy.errors import ApiError, TransportError
from cacheproxy.informer import (
    Decode,
    ListerWatcher,
    ListPage,
    ListRequest,
    WatchEvent,
    WatchRequest,
    WatchStream,
    as_parsed,
)
from cacheproxy.server.metrics import ServerMetrics

__all__ = ["MeteredListerWatcher", "metered"]

P = ParamSpec("P")
T = TypeVar("T")


class MeteredListerWatcher:
    """``inner`` (a ListerWatcher), reporting the code of each list page and each watch start
    (``200``, the error's code, or ``error`` when the server could not be reached). An error in
    the middle of a watch stream is the Reflector's to report (``watch_errors``)."""

    def __init__(self, inner: ListerWatcher, *, informer: str, metrics: ServerMetrics) -> None:
        self.inner = inner
        self.informer = informer
        self.metrics = metrics

    def __repr__(self) -> str:
        return f"MeteredListerWatcher({self.inner!r})"

    async def list(self, request: ListRequest, *, decode: Decode = as_parsed) -> ListPage:
        with self._answer("list"):
            return await self.inner.list(request, decode=decode)

    def watch(self, request: WatchRequest) -> WatchStream:
        return self._watch(request)

    @asynccontextmanager
    async def _watch(self, request: WatchRequest) -> AsyncIterator[AsyncIterator[WatchEvent]]:
        cm = self.inner.watch(request)
        with self._answer("watch-list" if request.send_initial_events else "watch"):
            events = await cm.__aenter__()
        try:
            yield events
        except BaseException as err:
            if not await cm.__aexit__(type(err), err, err.__traceback__):
                raise
        else:
            await cm.__aexit__(None, None, None)

    def _answer(self, verb: str) -> AbstractContextManager[None]:
        return _answered(self.metrics, self.informer, verb, failures=True)


def metered(
    call: Callable[P, Awaitable[T]], *, informer: str, verb: str, metrics: ServerMetrics
) -> Callable[P, Awaitable[T]]:
    """``call`` (another request of ``informer``'s to upstream, e.g. a consistent read's probe),
    counted in the upstream request and answer metrics under ``verb``."""

    async def metered_call(*args: P.args, **kwargs: P.kwargs) -> T:
        metrics.request(informer, verb)
        with _answered(metrics, informer, verb):
            return await call(*args, **kwargs)

    return metered_call


@contextmanager
def _answered(
    metrics: ServerMetrics, informer: str, verb: str, *, failures: bool = False
) -> Iterator[None]:
    """Reports how upstream answered the ``verb`` made inside: 200, or the error raised (a
    cancellation is no answer); with ``failures``, to the resource's failure streak too
    (:class:`~cacheproxy.server.failures.UpstreamFailures`: its lists and watches)."""
    try:
        yield
    except asyncio.CancelledError:
        raise
    except BaseException as err:
        if failures:
            metrics.failures.failed(metrics.resource_label(informer), verb, err)
        if isinstance(err, ApiError):
            metrics.upstream_response(informer, verb, err.code)
        elif isinstance(err, TransportError):
            metrics.upstream_response(informer, verb, "error")
        elif isinstance(err, Exception):
            metrics.upstream_response(informer, verb, "other")
        raise
    metrics.upstream_response(informer, verb, 200)
    if failures:
        metrics.failures.answered(metrics.resource_label(informer))
