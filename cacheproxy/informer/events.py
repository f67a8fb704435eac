"""What an informer tells its subscribers: one small closed set of typed events.

A :class:`~cacheproxy.informer.informer.SharedInformer` publishes, in order, to every function
given to its ``subscribe()`` (called inline, in the informer's processing loop: they must be fast
and never block):

- :class:`Changed` — one change applied to the store (``ADDED``, ``MODIFIED``, ``DELETED``), at
  its resourceVersion;
- :class:`Relisted` — the store was replaced by a list (the first sync, a relist after an error or
  a 410, or a state restored from disk), with what that changed;
- :class:`Progressed` — upstream said it reached an RV with no change in between (a bookmark);
- :class:`Synced` — the informer counts as synced from now on (its first list, or a restored
  state once upstream confirmed it).

The informer's own EventLog, the server's watch fan-out, its wake-ups of waiting reads, the
metrics and the daemon's housekeeping are all subscribers; user handlers (:mod:`.handlers`) get
the same events turned into client-go's ``on_add``/``on_update``/``on_delete``, in their own
tasks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cacheproxy.informer.store import Entry

__all__ = ["Changed", "InformerEvent", "Progressed", "Relisted", "Synced"]


class Changed:
    """One change (immutable by contract; a plain slotted class: one is made per event)."""

    __slots__ = ("at", "entry", "prev", "rv", "type")

    def __init__(self, rv: int, type: str, entry: Entry, prev: Entry | None, at: float) -> None:
        self.rv = rv
        self.type = type
        """ADDED, MODIFIED or DELETED."""
        self.entry = entry
        """The new state; for DELETED, the last known state."""
        self.prev = prev
        """The state before (None for ADDED)."""
        self.at = at
        """When it was applied (the informer's clock)."""

    def __repr__(self) -> str:
        return f"Changed({self.type} {self.entry.key} rv={self.rv})"


@dataclass(frozen=True, slots=True)
class Relisted:
    """The store was replaced by a list at ``rv`` (immutable by contract, like the entries).

    The changes are upstream's list compared with what the store held, with no RVs made up for
    the deletions (when each happened is unknown; a consumer that must replay them as events
    decides how, as the server's watch fan-out does)."""

    rv: int
    """The list's RV: the store is at it now, and the EventLog starts there."""
    before: int
    """The RV the store was at before: every difference happened after it."""
    changed: Sequence[tuple[Entry, Entry | None]]
    """``(new, previous)`` for each object that is new (previous None) or not the same."""
    gone: Mapping[str, Entry]
    """The last known state of each vanished object, by key."""
    first: bool = False
    """The informer's first state (its first sync, or a restored one): nothing was served
    before it, so there is nothing to tell watchers."""
    restored: bool = False
    """Read from disk, not listed: upstream has not confirmed it yet."""


@dataclass(frozen=True, slots=True)
class Progressed:
    """Upstream reached ``rv`` with no change since the last event (a bookmark)."""

    rv: int


@dataclass(frozen=True, slots=True)
class Synced:
    """The informer counts as synced from now on (its store is served)."""

    rv: int


InformerEvent = Changed | Relisted | Progressed | Synced
"""What ``SharedInformer.subscribe`` delivers."""
