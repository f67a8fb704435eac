"""What a watcher sees of one change under its selector: the API server's transition rule.

As the watch cache's ``cacheWatcher.convertToWatchEvent``: a watch with a selector is told about an
object only while the object matches. A change that brings it into the selector is ADDED, one that
keeps it there MODIFIED, a deletion of a matching object DELETED; a change that takes it out of the
selector is DELETED too, carrying the *previous* object with the resourceVersion of the change that
moved it out (:attr:`Seen.LEFT`), so the watcher's view stays exact and its resume point advances.
Pure: both servers (the daemon's fan-out and history replay, the simulator's watchers) apply it.
"""

from __future__ import annotations

import enum

__all__ = ["Seen", "seen"]


class Seen(enum.Enum):
    """How a change reaches a watcher."""

    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"
    """The object was deleted; the event's object (its last state, at the deletion's RV)."""
    LEFT = "LEFT"
    """The object stopped matching: sent as DELETED, the previous object restamped with the
    change's RV."""

    @property
    def event_type(self) -> str:
        """The ``type`` on the wire."""
        return "DELETED" if self is Seen.LEFT else self.value


def seen(event_type: str, *, matched_before: bool, matches_now: bool) -> Seen | None:
    """How a watcher sees a change of type ``event_type`` (ADDED, MODIFIED or DELETED): whether
    its selector matched the previous state (False when there was none) and matches the new one
    (ignored for a deletion); None when the change does not concern it."""
    if event_type == "DELETED":
        return Seen.DELETED if matched_before else None
    if matches_now:
        return Seen.MODIFIED if matched_before else Seen.ADDED
    return Seen.LEFT if matched_before else None
