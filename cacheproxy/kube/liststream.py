"""Splitting a list response into its items while it arrives, one parsed item at a time.

A real API server answers a ``resourceVersion=0`` list from its watch cache in one response,
ignoring ``limit`` (1.28 to 1.32): 70 MB for 10 000 pods. Parsed at once, that is ~550 MB of
dicts alive together before the first is turned into its compact stored form. :class:`ListSplitter`
is fed the body's chunks as they come and hands out each item as soon as its bytes are complete,
so at most one item is a dict at any time and the body is never held whole.

How the items are found, at C speed: the API server writes every item of a list with the same
first key (``{"metadata":`` for built-in kinds, ``{"apiVersion":`` for custom resources, whose keys
are sorted), so the bytes between two items are ``},`` + that opening. ``bytes.find`` locates
each such separator; the bytes before it are an item only if they parse as one JSON object (a
separator can also occur inside an item — an array of objects that start with the same key —
and then the bytes before it do not balance, so the search goes on). Nothing is guessed: every
item handed out is a complete JSON object, and a body whose layout defeats the search (or that
is not a list) is parsed whole at the end, which is correct, just not lean.
"""

from __future__ import annotations

import re
from typing import Any, Final

import orjson

__all__ = ["ListSplitter", "NotAList"]

_ITEMS: Final = re.compile(rb'"items"\s*:\s*\[')
_FIRST_KEY: Final = re.compile(rb'\s*(\{\s*"(?:[^"\\]|\\.)*"\s*:)')
_HEAD_LIMIT: Final = 1 << 20
"""A list's metadata is small: with no ``"items":[`` in the first MiB, give splitting up."""
_TAIL_TRIES: Final = 8
"""How many ``]`` from the end may close the items: what follows the last item is small."""


class NotAList(ValueError):
    """The body is not a JSON object (with or without items)."""


class ListSplitter:
    """Feed a list body's chunks in order; take the parsed items as they complete.

    ``feed(chunk)`` returns the items completed by this chunk (as orjson parses them);
    ``close()`` returns the last ones and the list itself without its items (``kind``,
    ``apiVersion``, ``metadata``). Raises :class:`NotAList` (a ``ValueError``) for a body that is
    not a JSON object, or whose ``items`` is not an array of objects.
    """

    def __init__(self) -> None:
        self._buf = b""
        self._head: bytes | None = None
        """The body up to and including ``"items":[`` once found."""
        self._sep = b""
        """``},`` + whitespace + what opens every item, once the first item was seen."""
        self._gap = 0
        """Bytes from a separator's ``}`` to the next item's ``{``."""
        self._scan = 1
        """Where to look for the next separator in ``_buf`` (which begins with an item)."""
        self._whole = False
        """Splitting was given up (or is pointless): everything is parsed at the end."""

    def feed(self, chunk: bytes) -> list[dict[str, Any]]:
        self._buf += chunk
        if self._whole or not chunk:
            return []
        if self._head is None and not self._find_items():
            return []
        if not self._sep and not self._find_separator():
            return []
        return self._split()

    def close(self) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """The remaining items, and the list without its items."""
        if self._head is None or self._whole:
            return self._parse_whole()
        rest = self._buf
        stripped = rest.lstrip()
        if stripped.startswith(b"]"):
            return [], self._shell(stripped[1:])
        # The last item, then "]" and the rest of the list (its metadata, when written after:
        # a few "]" from the end at most). Else more than one item is left (they did not all
        # open alike): parse what is left as a whole.
        end = len(rest)
        for _ in range(_TAIL_TRIES):
            end = rest.rfind(b"]", 0, end)
            if end <= 0:
                break
            item = _object(rest[:end])
            if item is not None:
                return [item], self._shell(rest[end + 1 :])
        return self._parse_whole()

    # ------------------------------------------------------------------ the parts

    def _find_items(self) -> bool:
        found = _ITEMS.search(self._buf)
        if found is None:
            self._whole = len(self._buf) > _HEAD_LIMIT
            return False
        self._head = self._buf[: found.end()]
        self._buf = self._buf[found.end() :]
        return True

    def _find_separator(self) -> bool:
        opening = _FIRST_KEY.match(self._buf)
        if opening is None:
            # Not yet the whole first key — or no object at all ("]": no items): then nothing
            # to split, and the little there is gets parsed at the end.
            self._whole = self._buf.lstrip()[:1] not in (b"", b"{")
            return False
        gap = self._buf[: opening.start(1)]  # whitespace between "[" and the first "{"
        self._buf = self._buf[len(gap) :]
        self._gap = 2 + len(gap)
        self._sep = b"}," + gap + opening.group(1)
        return True

    def _split(self) -> list[dict[str, Any]]:
        buf, sep, gap = self._buf, self._sep, self._gap
        start, scan = 0, self._scan
        items: list[dict[str, Any]] = []
        while (at := buf.find(sep, scan)) >= 0:
            item = _object(buf[start : at + 1])
            if item is not None:
                items.append(item)
                start = at + gap
            scan = at + 1
        # Keep what the next items need; look again where a separator could still begin.
        self._buf = buf[start:]
        self._scan = max(scan, len(buf) - len(sep) + 1, start + 1) - start
        return items

    def _shell(self, tail: bytes) -> dict[str, Any]:
        assert self._head is not None
        shell = _loads(self._head + b"]" + tail)
        if not isinstance(shell, dict):
            raise NotAList("the body is not a JSON object")
        shell.pop("items", None)
        return shell

    def _parse_whole(self) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        body = _loads((self._head or b"") + self._buf)
        if not isinstance(body, dict):
            raise NotAList("the body is not a JSON object")
        items = body.pop("items", None) or []
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise NotAList("the list's items are not an array of objects")
        return items, body


def _object(piece: bytes) -> dict[str, Any] | None:
    """``piece`` parsed, if it is exactly one JSON object; else None."""
    try:
        value = orjson.loads(piece)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _loads(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise NotAList(f"the body is not JSON ({exc})") from exc
