"""``server.limits``: the bounds of the daemon's server (every buffer bounded, overload refused
early), each declared once as :mod:`.model` declares its settings."""

from __future__ import annotations

from typing import Annotated, Final

from pydantic import Field, model_validator

from cacheproxy.daemon.config.settings import Section, library_default, located
from cacheproxy.server.app import ServerOptions
from cacheproxy.server.consistent import SERVE_FROM_CACHE, ConsistencyOptions, OnTimeout
from cacheproxy.server.resource import ServedResource
from cacheproxy.server.snapshots import SnapshotCache
from cacheproxy.serving import ServingProtocol

__all__ = ["ServerLimits"]

_SERVER: Final = ServerOptions
_CONSISTENCY: Final = ConsistencyOptions


class ServerLimits(Section):
    """``server.limits``: bounds that keep one client from hurting the others (docs/design.md §7:
    every buffer bounded)."""

    max_in_flight: Annotated[int, Field(ge=1, le=1_000_000)] = library_default(
        _SERVER, "max_in_flight"
    )
    """Requests other than watches served at once; more get 429 with `Retry-After: 1`."""
    max_watchers: Annotated[int, Field(ge=1, le=1_000_000)] = library_default(
        _SERVER, "max_watchers"
    )
    """Concurrent watches served per resource; more get 429."""
    max_watchers_per_user: Annotated[int, Field(ge=1, le=1_000_000)] = library_default(
        _SERVER, "max_watchers_per_user"
    )
    """Concurrent watches of one authenticated user; more get 429."""
    max_url_bytes: Annotated[int, Field(ge=256, le=1_048_576, alias="maxURLBytes")] = (
        library_default(_SERVER, "max_url_bytes")
    )
    """Path and query string; longer → 414."""
    max_header_bytes: Annotated[int, Field(ge=1_024, le=16_777_216)] = library_default(
        _SERVER, "max_header_bytes"
    )
    """All request headers together; more → 431."""
    ready_max_staleness_seconds: Annotated[float, Field(ge=0, le=86_400)] = library_default(
        _SERVER, "ready_max_staleness"
    )
    """`/readyz` fails (503) while some resource has not heard from upstream (an event or a
    bookmark) for longer than this, so a load balancer can prefer fresher replicas; `0` = stay
    ready once synced. The cache keeps serving its last state either way. Upstream bookmarks
    come about once a minute on a quiet resource: use more than 120."""
    header_timeout_seconds: Annotated[float, Field(ge=0.1, le=600)] = library_default(
        ServingProtocol, "header_timeout"
    )
    """A connection that has not sent a request's complete headers this long after it opened
    (or after the request began) is closed, so slow clients cannot hold connections."""
    idle_connection_seconds: Annotated[int, Field(ge=1, le=3600)] = 90
    """How long a client's connection is kept open with no request on it, waiting for the
    next. As the API server (90 s) and Go clients (90 s): a client-go program that pauses
    reuses its connections instead of paying a new TLS handshake on each."""
    watch_buffer: Annotated[int, Field(ge=1, le=1_000_000)] = library_default(
        _SERVER, "watch_buffer"
    )
    """Events queued per watcher; a watcher that falls this far behind is closed (it resumes
    from its last resourceVersion; counted in `cacheproxy_watch_evicted_total` with
    `reason="events"`)."""
    watch_buffer_bytes: Annotated[int, Field(ge=1_048_576, le=17_179_869_184)] = library_default(
        _SERVER, "watch_buffer_bytes"
    )
    """Bytes of events queued per watcher (each event line counted in full for each watcher it
    waits for); a watcher that falls this far behind is closed and what was queued for it
    dropped at once (`reason="bytes"`). Keep it well above your largest object (the API
    server accepts objects of about 1.5 MiB)."""
    watch_buffers_total_bytes: Annotated[int, Field(ge=1_048_576, le=1_099_511_627_776)] = (
        library_default(_SERVER, "watch_buffers_total_bytes")
    )
    """Bytes of event lines queued for all watchers of the daemon together (every resource),
    each line counted once however many watchers it waits for: a line is built once and shared
    by their queues, and held until the last of them sends or drops it. When an event would
    take the total above it, the watchers with the most queued (each counted as for
    `watchBufferBytes`) are closed and their queues dropped (`reason="total_bytes"`), the
    largest first, until the total is within it again. What slow clients can make the daemon
    hold, whatever their number."""
    watch_stall_seconds: Annotated[float, Field(ge=0.1, le=3600)] = library_default(
        _SERVER, "watch_stall"
    )
    """A watch whose client takes no bytes for this long while events wait for it is dropped
    (connection closed; counted in `cacheproxy_watch_evicted_total`), as the API server drops
    watchers that do not keep up."""
    rv_wait_seconds: Annotated[float, Field(ge=0.1, le=60)] = library_default(
        ServedResource, "rv_wait"
    )
    """How long a list, get or watch-list at a resourceVersion newer than the cache waits
    before 504 (as the API server). A plain watch from a newer resourceVersion does not time
    out: it waits for the events after it, as the API server's."""
    bookmark_interval_seconds: Annotated[float, Field(ge=1, le=3600)] = library_default(
        _SERVER, "bookmark_interval"
    )
    """Bookmarks sent to watchers that asked for them."""
    continue_token_ttl_seconds: Annotated[
        float, Field(ge=1, le=86_400, alias="continueTokenTTLSeconds")
    ] = library_default(SnapshotCache, "ttl")
    """How long the state at an older resourceVersion that a paged list is served from (its
    pages after the cache moved on, or a `limit` or `Exact` list at an older resourceVersion)
    is kept after its last page, so the next page is a slice of it rather than a rebuild. A
    continue token used later still works while the event history (`resources[].history`)
    reaches its resourceVersion (the state is rebuilt), and gets 410 Expired with an
    inconsistent continue token once it does not, as before."""
    list_snapshot_entries: Annotated[int, Field(ge=0, le=1_000_000_000)] = library_default(
        SnapshotCache, "max_entries"
    )
    """Objects those kept states (and the parts of them that paged selector queries select) may
    reference together, per resource; the least recently used are dropped first. They refer to
    the cache's objects, not copies: about 8 bytes an object. `0` keeps none: every page
    rebuilds its state."""
    max_page_size: Annotated[int, Field(ge=1, le=1_000_000)] = library_default(
        _SERVER, "max_page_size"
    )
    """A larger `limit` is served in pages of this size."""
    consistent_probes_per_second: Annotated[int, Field(ge=1, le=1_000)] = library_default(
        _CONSISTENCY, "probes_per_second"
    )
    """Consistent reads (`resources[].consistentReads`): at most this many probes of upstream's
    current resourceVersion per resource per second, one at a time. A read that comes while none
    is in flight starts one at once; the reads that come while one is share the next one,
    however many clients read. Idle: none."""
    consistent_read_timeout_seconds: Annotated[float, Field(ge=0.1, le=60)] = library_default(
        _CONSISTENCY, "timeout"
    )
    """How long a consistent read waits for upstream's resourceVersion and for the cache to
    reach it before `consistentReadFallback` applies."""
    consistent_read_confirm_after_seconds: Annotated[float, Field(ge=0, le=60)] = library_default(
        _CONSISTENCY, "confirm_after"
    )
    """How long a read waits for the cache's events to bring it to a resourceVersion it has not
    reached — upstream's (a `strict` read's probe), another replica's or upstream's (a read at
    `resourceVersion=N`) — before it is passed through to upstream as its caller, or, where it
    cannot be, confirmed by one metadata list of the resource (a get: of its object). Events
    arrive within milliseconds of a write; a resource nobody writes never gets there by them.
    `0`: at once."""
    consistent_read_after_write_seconds: Annotated[float, Field(ge=0, le=60)] = library_default(
        _CONSISTENCY, "after_write"
    )
    """For this long after a write to a resource passed through the daemon, its consistent
    reads wait for the cache to hold that write (the resourceVersion upstream answered it
    with) instead of asking upstream: a program that writes and reads back through cacheproxy
    sees its own write at no upstream cost. Writes others made upstream in that window show
    once their events arrive (milliseconds). `0`: every consistent read asks upstream."""
    write_settle_seconds: Annotated[float, Field(ge=0, le=60)] = library_default(
        ServedResource, "write_settle"
    )
    """A write to a cached resource passed through the daemon is answered once the cache holds
    it (its watch event arrived and went to every watcher), for at most this long, then answered
    anyway: a controller that writes and then reads its informer, fed through the daemon, sees
    its own write as soon as it would straight from the API server. Not while the resource's
    upstream watch is down, nor for a resource cached with selectors. `0`: answered at once."""
    consistent_read_fallback: OnTimeout = SERVE_FROM_CACHE
    """What a consistent read that timed out answers: `cache`: the cache as it is, with a
    `Warning` header saying it may be stale; `error`: 504 with `Retry-After: 1`."""

    @model_validator(mode="after")
    def _watch_bytes(self) -> ServerLimits:
        """All watchers together may hold at least what one may."""
        if self.watch_buffers_total_bytes < self.watch_buffer_bytes:
            why = (
                f"{self.watch_buffers_total_bytes} is less than watchBufferBytes "
                f"({self.watch_buffer_bytes}): one watcher could never use its buffer"
            )
            raise located([(("watchBuffersTotalBytes",), why)])
        return self
