"""ReflectorOptions: how a Reflector lists and watches — page size, watch-lists, timeouts, backoff.

One record its owner fills (the daemon from its configuration, :mod:`.factory` for library
users); what each option does to the Reflector's rules is :mod:`.reflector`'s docstring.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from cacheproxy.informer.backoff import Backoff

__all__ = ["ReflectorOptions"]


@dataclass
class ReflectorOptions:
    """How a :class:`~cacheproxy.informer.reflector.Reflector` lists and watches (the defaults
    are client-go's)."""

    page_size: int = 500
    """Items per list page (client-go's pager default, ``tools/pager``); also
    :func:`cacheproxy.upstream.list_all`'s default."""
    watch_list: bool = True
    """Try a streaming watch-list for the first sync (falls back to a paged list)."""
    pause_gc_during_sync: bool = False
    """Pause the cyclic GC while a (re)sync decodes its list (:mod:`.gcpause`): much faster
    for large lists, but process-wide — for the process's owner (the daemon) to turn on."""
    watch_list_timeout: float = 10.0
    """Give a watch-list up for a paged list (for good) when its initial events stopped this long
    ago and its initial-events-end bookmark has not come (kube-apiserver 1.27-1.30 sends it only
    once the resource sees a newer write: on a quiet resource, not for minutes)."""
    min_watch_timeout: float = 300.0
    """Each watch asks for a timeout drawn from ``[min, 2·min)`` seconds."""
    stall_margin: float = 30.0
    """A watch that sent nothing for its timeout plus this long is stalled: dropped, watched
    again."""
    live_silence: float = 0.0
    """A watch counts as live (:attr:`Reflector.watch_live`) while its stream is open and, when
    this is set, it delivered something within this many seconds (0: open is enough). A quiet
    collection's watch may say nothing for its whole timeout: kube-apiserver 1.28 sent no
    bookmark in 150 s to a watch of 10 000 quiet pods; one that dies silently is dropped as
    stalled after its timeout plus ``stall_margin``."""
    live_grace: float = 1.0
    """After a normal end, the watch still counts as live this long while the next one (from
    the last RV: nothing is missed) opens."""
    very_short_watch: float = 1.0
    """A watch that ended within this many seconds without an event was "very short": relist."""
    backoff: Callable[[], Backoff] = field(default=Backoff)
    """Makes the Reflector's :class:`~cacheproxy.informer.backoff.Backoff` (its clock and
    randomness become the Reflector's)."""
