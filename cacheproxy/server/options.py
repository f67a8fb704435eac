"""The server's settings (the daemon maps its configuration onto them) and the fixed choices of
how it answers."""

from __future__ import annotations

from dataclasses import dataclass, field

from cacheproxy.kube.resources import ResourceType
from cacheproxy.serving import JsonAnswers
from cacheproxy.serving.compression import Compression

__all__ = ["JSON_ANSWERS", "READ_VERBS", "ServerOptions", "read_verbs"]

READ_VERBS = ("get", "list", "watch")
"""What the server does with every resource it serves (and all discovery lists)."""

JSON_ANSWERS = JsonAnswers(pretty_newline=True)
"""JSON answers: negotiated where a handler checks, indented for people with a final newline."""


def read_verbs(rtype: ResourceType) -> list[str]:
    """The verbs discovery lists for a served resource."""
    return list(READ_VERBS)


@dataclass(frozen=True, slots=True)
class ServerOptions:
    watch_buffer: int = 1000
    """Lines a watcher may have pending before it is closed as too slow."""
    watch_buffer_bytes: int = 16 << 20
    """Bytes of lines a watcher may have pending before it is closed as too slow."""
    watch_buffers_total_bytes: int = 256 << 20
    """Bytes of lines pending for all watchers together, a line shared by many counted once; over
    it, the watchers with the most pending are closed as too slow until it is within."""
    bookmark_interval: float = 60.0
    min_watch_timeout: float = 1800.0
    """Watches without ``timeoutSeconds`` last ``[min, 2·min)`` seconds (the API server's rule)."""
    max_watchers: int = 10_000
    max_page_size: int = 10_000
    """A larger ``limit`` is served in pages of this size (the API lets a server return fewer)."""
    max_in_flight: int = 400
    """Requests other than watches served at once; more get 429 + ``Retry-After`` (the API
    server's ``--max-requests-inflight`` default)."""
    max_watchers_per_user: int = 1_000
    """Open watches per authenticated user (all resources); more get 429."""
    max_url_bytes: int = 8_192
    """Path + query string; longer → 414."""
    max_header_bytes: int = 65_536
    """All request headers together; more → 431."""
    ready_max_staleness: float = 0.0
    """``/readyz`` fails while some resource has not heard from upstream for longer than this
    (seconds); 0: ready once synced, whatever happens upstream (the cache keeps serving)."""
    watch_stall: float = 10.0
    """A watch whose client takes no bytes for this long while events wait for it is dropped."""
    compression: Compression = field(default_factory=Compression)
    """Gzip of large list and get answers for clients that accept it (the API server's rule:
    above 128 KiB, level 1)."""
    staleness_header: bool = False
    """Add ``X-Cacheproxy-Staleness-Seconds`` (seconds since upstream last moved this
    resource's cache) to list, get and watch responses."""
