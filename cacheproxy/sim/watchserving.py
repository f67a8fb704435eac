"""Serving one watch request of the simulator, with the stream faults it can be told to inject.

The API server's order: options checked and a watch-list's RV waited for before the response
starts (a 504 or 422 is still a Status); a refusal after it started (410 for a compacted RV, an
injected failure) is one ``ERROR`` event, then the end (cacher.go). The events themselves are
:mod:`cacheproxy.sim.watch`'s. Stream faults (``sim.faults.next_watch_stream``): ``silent`` sends
nothing until the deadline (a stalled watch), ``garbage`` starts with a line that is not JSON,
``truncate`` cuts the first chunk in half and ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from cacheproxy.errors import ApiError
from cacheproxy.kube import status
from cacheproxy.kube.listoptions import ListOptions
from cacheproxy.kube.resources import ResourceType
from cacheproxy.kube.versions import KubeVersion
from cacheproxy.serving import Request, Send, WatchWriter, closed_on_disconnect, error_line
from cacheproxy.sim import render
from cacheproxy.sim.api import SimApi
from cacheproxy.sim.faults import Faults, StreamFault
from cacheproxy.sim.storage import SimStore
from cacheproxy.sim.watch import SimWatcher, SimWatchPlan, stream_watch

__all__ = ["Watched", "serve_watch"]


class Watched(Protocol):
    """What a watch is served from (the :class:`~cacheproxy.sim.simulator.Simulator` is one)."""

    api: SimApi
    store: SimStore
    faults: Faults
    stopping: bool

    @property
    def kube_version(self) -> KubeVersion: ...


async def serve_watch(
    sim: Watched,
    req: Request,
    send: Send,
    rtype: ResourceType,
    namespace: str | None,
    opts: ListOptions,
    *,
    forced_error: ApiError | None,
) -> None:
    """Answer a watch; ``forced_error`` is an injected failure to answer in-stream."""
    api = sim.api
    send = render.watch_send(
        send,
        rtype,
        render.negotiate(req.header("accept"), req.query, verb="watch", kube=sim.kube_version),
    )
    opts = api.watch_options(rtype, opts)
    if forced_error is None:
        await api.wait_for_watch(rtype, opts)
    if sim.stopping:
        # The server is going away: a watch opened now would outlive it.
        raise status.service_unavailable("the server is shutting down", retry_after=1)
    stream_fault = sim.faults.take_stream_fault()
    out = WatchWriter(send)
    await out.start(req)
    if forced_error is not None:
        await out.write([error_line(forced_error)])
        await out.finish()
        return
    try:
        watcher, plan = api.open_watch(rtype, namespace, opts)
    except ApiError as err:
        # A 410 after the response started is one ERROR event, then the end (cacher.go).
        await out.write([error_line(err)])
        await out.finish()
        return
    async with closed_on_disconnect(req, watcher, "client disconnected"):
        try:
            await _stream(out, watcher, plan, stream_fault, lambda: api.cache_rv(rtype), sim.faults)
        finally:
            sim.store.remove_watcher(watcher)
            watcher.close()
    await out.finish()


async def _stream(
    out: WatchWriter,
    watcher: SimWatcher,
    plan: SimWatchPlan,
    fault: StreamFault | None,
    cache_rv: Callable[[], int],
    faults: Faults,
) -> None:
    if fault == "silent":
        # Neither events nor bookmarks until the deadline: a stalled watch.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + plan.timeout
        while not watcher.closed and loop.time() < deadline:
            await watcher.wait(deadline - loop.time())
            watcher.drain()
        return
    first = True
    async for chunk in stream_watch(watcher, plan, current_rv=cache_rv):
        if fault == "garbage" and first:
            chunk = b"{this is not json\n" + chunk
        elif fault == "truncate":
            await out.write([chunk[: max(1, len(chunk) // 2)]])
            return
        first = False
        if faults.event_delay:
            await asyncio.sleep(faults.event_delay)
        await out.write([chunk])
