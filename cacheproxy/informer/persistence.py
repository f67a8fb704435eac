"""A store's state on disk: the snapshot file an informer restarts warm from.

One file per collection holds its objects in their stored form (each :class:`Entry`'s bytes and
record: key, labels, index values — nothing is re-encoded or re-parsed on the way back), the RV
they are at, the format version, the collection's *identity* (whatever makes another
configuration's state not this one's: the daemon puts the upstream server, the resource, its
selectors and transform there) and a SHA-256 of all of it::

    cacheproxy-snapshot\\n
    {"format":1,"identity":{…},"resourceVersion":"N","count":n,"indexes":[…],"payloadBytes":P}\\n
    n of ( [key,[labels…],[[index values…]…],prefix or null,len(body)]\\n body )   ← P bytes
    SHA-256 of everything above (32 bytes)

Writing is atomic (a temporary file in the same directory, fsync, rename over the old file, fsync
of the directory): a crash at any point leaves the previous snapshot or the new one, never a mix.
:func:`write_snapshot` reads only a :class:`SnapshotView` — immutable entries gathered on the
event loop at one RV — so it runs in a thread while the loop keeps serving.

:func:`read_snapshot` trusts nothing: a missing magic line, an unknown format version, a length
that does not add up (truncated), a checksum that does not match (corrupt) or another identity
(foreign) raises :class:`SnapshotRejected` with one sentence saying which; only a whole, valid
snapshot becomes entries. Snapshots written with other index paths are re-indexed as they load.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import orjson

from cacheproxy.informer.packing import Buffer
from cacheproxy.informer.store import Entry, Store, Unpackers, bodies, type_prefix

__all__ = [
    "FORMAT_VERSION",
    "SnapshotFile",
    "SnapshotRejected",
    "SnapshotView",
    "read_snapshot",
    "remove_temporaries",
    "snapshot_path",
    "write_snapshot",
]

FORMAT_VERSION: Final = 1
"""The layout this module writes and reads; any other is refused (never guessed at)."""

MAGIC: Final = b"cacheproxy-snapshot\n"
_DIGEST: Final = 32
_BATCH: Final = 512
"""Entries per write."""

_intern = sys.intern


class SnapshotRejected(Exception):
    """A snapshot file that must not be used; the message says why, in one sentence."""


@dataclass(frozen=True, slots=True)
class SnapshotView:
    """What a snapshot holds, taken at one point of the event loop: immutable entries (the store's
    own, not copies), the RV they are at, and what the file says about them."""

    entries: Sequence[Entry]
    rv: int
    identity: Mapping[str, Any]
    indexes: tuple[str, ...]
    prefix: bytes
    """The store's type prefix: entries that share it are written without it."""

    @classmethod
    def of(cls, store: Store, identity: Mapping[str, Any]) -> SnapshotView:
        """The store's state now (call on the loop that writes the store: no await inside)."""
        return cls(
            tuple(store.entries()),
            store.resource_version,
            identity,
            tuple(store.index_names),
            type_prefix(store.kind, store.api_version),
        )


@dataclass(frozen=True, slots=True)
class SnapshotFile:
    """A snapshot file's bytes as read, and the SHA-256 of all but its last 32 bytes (what its
    checksum covers when it is whole): :meth:`read` does the work that needs no store — reading,
    hashing, both without the GIL — so it can run in a thread beside other work."""

    data: bytes
    digest: bytes
    stamp: tuple[int, int, int]
    """The file's (inode, size, mtime) when read: :meth:`current` tells whether it is still that."""

    @classmethod
    def read(cls, path: Path) -> SnapshotFile:
        with path.open("rb") as f:
            stat = os.fstat(f.fileno())
            data = f.read()
        digest = hashlib.sha256(memoryview(data)[: max(len(data) - _DIGEST, 0)]).digest()
        return cls(data, digest, (stat.st_ino, stat.st_size, stat.st_mtime_ns))

    def current(self, path: Path) -> bool:
        """Whether ``path`` is still the file that was read (not replaced or rewritten since)."""
        try:
            stat = path.stat()
        except OSError:
            return False
        return (stat.st_ino, stat.st_size, stat.st_mtime_ns) == self.stamp


def snapshot_path(directory: Path, name: str) -> Path:
    """The file of collection ``name`` (``pods``, ``apps/v1/deployments``) in ``directory``."""
    safe = "".join(c if c.isalnum() or c in "-." else "_" for c in name)
    return directory / f"{safe}.snapshot"


def write_snapshot(path: Path, view: SnapshotView) -> int:
    """Write ``view`` to ``path`` atomically (see the module); returns the file's size."""
    dumps, shared = orjson.dumps, view.prefix
    entries = view.entries
    records = [
        dumps(
            [
                e.key,
                e.labels,
                e.values,
                None if e.prefix == shared else e.prefix.decode(),
                e.size - len(e.prefix),
            ]
        )
        for e in entries
    ]
    header = dumps(
        {
            "format": FORMAT_VERSION,
            "identity": view.identity,
            "resourceVersion": str(view.rv),
            "count": len(entries),
            "indexes": list(view.indexes),
            "payloadBytes": sum(
                len(r) + 1 + e.size - len(e.prefix) for r, e in zip(records, entries, strict=True)
            ),
        }
    )
    digest = hashlib.sha256()
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            for chunk in _chunks(MAGIC + header + b"\n", records, entries):
                digest.update(chunk)
                out.write(chunk)
            out.write(digest.digest())
            out.flush()
            os.fsync(out.fileno())
            size = out.tell()
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    _fsync_directory(path.parent)
    return size


def _chunks(head: bytes, records: Sequence[bytes], entries: Sequence[Entry]) -> Iterator[bytes]:
    """The file before its checksum, in batches (fewer, larger writes; bounded memory)."""
    yield head
    unpackers: Unpackers = {}  # this runs in a thread of its own (see the module)
    for start in range(0, len(entries), _BATCH):
        parts: list[Buffer] = []
        group = entries[start : start + _BATCH]
        for record, body in zip(
            records[start : start + _BATCH], bodies(group, off_loop=unpackers), strict=True
        ):
            parts += (record, b"\n", body)
        yield b"".join(parts)


def _fsync_directory(directory: Path) -> None:
    """Make the rename itself durable (the directory entry), as a crash right after it would
    otherwise lose it on some file systems."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_temporaries(path: Path) -> int:
    """Delete what interrupted writes of ``path`` left behind; returns how many."""
    removed = 0
    for stale in path.parent.glob(f".{path.name}.*.tmp"):
        with contextlib.suppress(OSError):
            stale.unlink()
            removed += 1
    return removed


def read_snapshot(
    path: Path, *, identity: Mapping[str, Any], store: Store, read: SnapshotFile | None = None
) -> tuple[list[Entry], int]:
    """The entries and RV of the snapshot at ``path``, as ``store`` keeps them (re-indexed if it
    was written with other index paths). Raises :class:`SnapshotRejected` for anything but a
    whole, valid snapshot of this ``identity``; FileNotFoundError when there is none. ``read``:
    the file as already read (:meth:`SnapshotFile.read`), else it is read now."""
    if read is None:
        read = SnapshotFile.read(path)
    data = read.data
    if not data.startswith(MAGIC):
        raise SnapshotRejected("not a cacheproxy snapshot (no magic line)")
    end = data.find(b"\n", len(MAGIC))
    if end < 0:
        raise SnapshotRejected("truncated: the header is incomplete")
    try:
        header = orjson.loads(data[len(MAGIC) : end])
        version = header["format"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        raise SnapshotRejected("corrupt: the header is not readable") from None
    if version != FORMAT_VERSION:
        raise SnapshotRejected(
            f"format version {version!r}, this cacheproxy reads {FORMAT_VERSION}"
        )
    try:
        payload = int(header["payloadBytes"])
        count = int(header["count"])
        rv = int(header["resourceVersion"])
        indexes = tuple(header["indexes"])
        theirs = header["identity"]
    except (KeyError, TypeError, ValueError):
        raise SnapshotRejected("corrupt: the header lacks a field") from None
    start = end + 1
    expected = start + payload + _DIGEST
    if len(data) < expected:
        raise SnapshotRejected(f"truncated: {len(data)} bytes of {expected}")
    if len(data) > expected:
        raise SnapshotRejected(f"corrupt: {len(data) - expected} bytes after the checksum")
    if read.digest != data[start + payload :]:  # the SHA-256 of data[: start + payload]
        raise SnapshotRejected("corrupt: the checksum does not match")
    if theirs != orjson.loads(orjson.dumps(identity)):
        differs = sorted(k for k in {*theirs, *identity} if theirs.get(k) != identity.get(k))
        raise SnapshotRejected(f"foreign: written for another {', '.join(differs)}")
    try:
        entries = _entries(data, start, start + payload, count, store)
    except (orjson.JSONDecodeError, ValueError, TypeError) as err:
        raise SnapshotRejected(f"corrupt: {err}") from None
    if indexes != tuple(store.index_names):
        entries = [store.make_entry(entry.object()) for entry in entries]
    return entries, rv


def _entries(data: bytes, pos: int, end: int, count: int, store: Store) -> list[Entry]:
    prefix = type_prefix(store.kind, store.api_version)
    shared: dict[Any, Any] = {}
    out: list[Entry] = []
    loads, find = orjson.loads, data.find
    for _ in range(count):
        line_end = find(b"\n", pos, end)
        if line_end < 0:
            raise ValueError("a record line runs past the end")
        key, labels, values, own_prefix, length = loads(data[pos:line_end])
        pos = line_end + 1 + length
        if pos > end:
            raise ValueError("a body runs past the end")
        labels = _shared(shared, labels)
        values = _shared(shared, [_shared(shared, v) for v in values]) if values else ()
        entry_prefix = prefix if own_prefix is None else own_prefix.encode()
        out.append(Entry(key, labels, values, data[line_end + 1 : pos], entry_prefix))
    if pos != end:
        raise ValueError(f"{end - pos} bytes after the last of {count} records")
    return out


def _shared(shared: dict[Any, Any], items: list[Any]) -> Any:
    """The tuple of ``items`` (strings interned, or tuples already shared), one object per distinct
    value, as the store's indexes share equal tuples. A value seen before is looked up, not built
    again: most objects share their label sets (a start restores 10 000 pods in tens of ms)."""
    key = tuple(items)
    found = shared.get(key)
    if found is None:
        found = shared[key] = tuple(map(_intern, key)) if key and type(key[0]) is str else key
    return found
