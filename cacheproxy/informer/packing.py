"""Compressed storage of a Store's objects: zstd with a dictionary trained on the store's own.

Kubernetes objects of one resource repeat most of their bytes (every pod of a Deployment shares
its spec; every pod shares the status schema), so a zstd dictionary trained on a few thousand of
them packs each object at 5-15x. What is packed is an :class:`~.store.Entry`'s ``body``; its record
(key, labels, index values) stays as it is, so indexes and selection never decompress.

A packed body is a *block*: up to ``block_objects`` bodies compressed together (neighbours by
key: the pods of one app, which share most bytes with each other), behind a header of where each
one starts. The objects of a list are packed in blocks; an object made later (a watch event)
alone, in a block of one. Decompressing a block of 8 pods costs about 3 of them packed alone
and the block is half their size, so a long list (which decompresses every block once) is ~3x
cheaper; a GET pays the block's few microseconds.

How a store gets there (:class:`Packer`):
1. The first list (``Store.replace``) is kept as it came until it is complete; then up to
   ``training_bytes`` of its objects train the dictionary, if there are at least
   ``min_training_objects`` of them, and every object is packed. A collection that was smaller
   trains once objects stored since (by watch events) reach the budget, or at the next relist.
2. From then on each new object is packed as it is made (``Store.make_entry``); a relist keeps
   the stored entry (and its block) of every object it finds unchanged.

The dictionary is not retrained: objects that drift from it compress less, never wrongly (a
relist that finds the collection changed out of all recognition is the time to restart).

Packing is deterministic (one dictionary, one level), so two packings of the same bodies are the
same bytes: a relist tells unchanged objects packed alone by comparing packed bytes.

Layout of a block: one byte ``n`` (objects, 1-255), ``n + 1`` little-endian uint32 offsets, the
zstd frame of the bodies joined by :data:`JOINER` (what a list of a built-in kind writes between
two items' bodies, so that a run of a block's objects is written as one piece). Offset ``i`` is
where body ``i`` starts in the plain bytes, offset ``n`` their length plus the joiner's: body
``i`` ends a joiner before offset ``i + 1``.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TypeAlias

import zstandard

__all__ = [
    "JOINER",
    "Buffer",
    "Packer",
    "Storage",
    "body_size",
    "member_bodies",
    "member_runs",
    "share",
]

Buffer: TypeAlias = bytes | memoryview
"""A body as lists write it: stored bytes, or a view of a batch decompressed at once."""

MAX_BLOCK_OBJECTS = 255
"""Objects a block holds at most (its count is one byte)."""

JOINER = b",{"
"""Between two bodies in a block: what a list of a built-in kind writes between two items' bodies
(an item is ``{`` and the body: the object without its kind and apiVersion)."""

_SPAN = struct.Struct("<II")
_JOINED = len(JOINER)


@dataclass(frozen=True, slots=True)
class Storage:
    """How a store keeps its objects (``resources[].storage``)."""

    compressed: bool = False
    """Each object zstd-compressed with a dictionary trained on the resource's first objects."""
    level: int = 1
    """zstd level (1-19). Pods alone with a trained dictionary: 1 packs 14.6x at ~6 µs an
    object, 3 packs 15.1x at ~8 µs, 19 17.4x at ~900 µs; all decompress at ~2.5-3 µs an object
    (in blocks of 8, ~1.2 µs)."""
    dictionary_bytes: int = 64 << 10
    """Size of the trained dictionary: 64 KiB holds the parts pods share best."""
    training_bytes: int = 8 << 20
    """Object bytes to train on (zstd suggests ~100x the dictionary)."""
    min_training_objects: int = 32
    """Fewer objects than this at the end of the first list: the collection stays plain."""
    block_objects: int = 8
    """Objects of a list packed together (neighbours by key). Pods: 8 halves the packed size
    and the CPU a full list spends decompressing, against packed alone, for ~6 µs more per GET;
    1 packs each alone."""

    def __post_init__(self) -> None:
        if not 1 <= self.block_objects <= MAX_BLOCK_OBJECTS:
            raise ValueError(f"block_objects is 1 to {MAX_BLOCK_OBJECTS}")


class Packer:
    """One store's dictionary and (de)compression contexts. Used from one thread at a time,
    except :meth:`block_unpacker`, which makes a decompressor for another thread."""

    __slots__ = (
        "_compress",
        "_decompress",
        "_decompressor",
        "_sampled",
        "_samples",
        "dictionary",
        "storage",
    )

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self.dictionary: zstandard.ZstdCompressionDict | None = None
        self._samples: list[bytes] = []
        self._sampled = 0
        self._decompressor: zstandard.ZstdDecompressor | None = None

    @property
    def ready(self) -> bool:
        """Trained: new objects are packed."""
        return self.dictionary is not None

    def sample(self, body: bytes) -> bool:
        """Offer a plain body for training; True once enough was offered to train."""
        self._samples.append(body)
        self._sampled += len(body)
        storage = self.storage
        return (
            self._sampled >= storage.training_bytes
            and len(self._samples) >= storage.min_training_objects
        )

    def forget_samples(self) -> None:
        self._samples = []
        self._sampled = 0

    def train(self) -> bool:
        """Train on the samples offered (if at least ``min_training_objects``); True once
        trained. The samples are let go either way: a failed training starts over."""
        if self.dictionary is not None:
            return True
        samples = self._samples
        self.forget_samples()
        if len(samples) < self.storage.min_training_objects:
            return False
        try:
            dictionary = zstandard.train_dictionary(
                self.storage.dictionary_bytes,
                list[bytes | bytearray | memoryview](samples),
                level=self.storage.level,
            )
        except zstandard.ZstdError:
            # Too little to learn from (tiny or identical objects): sample again.
            return False
        self._install(dictionary)
        return True

    def _install(self, dictionary: zstandard.ZstdCompressionDict) -> None:
        dictionary.precompute_compress(level=self.storage.level)
        compressor = zstandard.ZstdCompressor(
            level=self.storage.level,
            dict_data=dictionary,
            write_checksum=False,
            write_content_size=True,
            write_dict_id=False,
        )
        decompressor = zstandard.ZstdDecompressor(dict_data=dictionary)
        self.dictionary = dictionary
        self._compress = compressor.compress
        self._decompressor = decompressor
        self._decompress = decompressor.decompress

    def pack(self, body: Buffer) -> bytes:
        """A block of ``body`` alone."""
        return self.pack_block((body,))

    def pack_block(self, bodies: Sequence[Buffer]) -> bytes:
        """One block of ``bodies`` (1 to :data:`MAX_BLOCK_OBJECTS`), each read back by its place."""
        count = len(bodies)
        offsets = itertools.accumulate((len(body) + _JOINED for body in bodies), initial=0)
        # The concatenation copies zstd's output, whose buffer is sized for the worst case: the
        # block takes its own size.
        return _head(count).pack(count, *offsets) + self._compress(JOINER.join(bodies))

    def unpack(self, packed: bytes, member: int = 0) -> bytes:
        """The body at place ``member`` of the block ``packed``."""
        plain: bytes = self._decompress(_frame(packed))
        if packed[0] == 1:
            return plain
        start, end = _SPAN.unpack_from(packed, 1 + 4 * member)
        return plain[start : end - _JOINED]

    def unpack_block(self, packed: bytes) -> bytes:
        """The plain bytes of the block ``packed`` (its bodies, joined)."""
        plain: bytes = self._decompress(_frame(packed))
        return plain

    def block_unpacker(self) -> Callable[[bytes], bytes]:
        """:meth:`unpack_block` with a context of its own, for another thread (a zstd context
        is never shared between threads)."""
        decompress = zstandard.ZstdDecompressor(dict_data=self.dictionary).decompress
        return lambda packed: decompress(_frame(packed))


@cache
def _head(count: int) -> struct.Struct:
    return struct.Struct(f"<B{count + 1}I")


def _frame(packed: bytes) -> memoryview:
    return memoryview(packed)[5 + 4 * packed[0] :]


_Opened = dict[int, tuple[memoryview, tuple[int, ...]]]
"""Blocks decompressed for one call, by id (they are all alive meanwhile): plain bytes, header."""


def _opened(
    block: bytes, made: _Opened, unpack_block: Callable[[bytes], bytes]
) -> tuple[memoryview, tuple[int, ...]]:
    got = made.get(id(block))
    if got is None:
        got = made[id(block)] = (
            memoryview(unpack_block(block)),
            _head(block[0]).unpack_from(block),
        )
    return got


def member_bodies(
    unpack_block: Callable[[bytes], bytes], packed: Sequence[bytes], members: Sequence[int]
) -> list[Buffer]:
    """The bodies at places ``members`` of the blocks ``packed`` (pairwise), as views of each
    block decompressed once (by ``unpack_block``: a :meth:`Packer.unpack_block`) however many
    of its objects are asked for. zstd lets the GIL go while it works: called from a worker
    thread, this runs beside the event loop."""
    bodies: list[Buffer] = []
    add = bodies.append
    made: _Opened = {}
    last: bytes | None = None
    view = memoryview(b"")
    offsets: tuple[int, ...] = ()
    for block, member in zip(packed, members, strict=True):
        if block is not last:
            last = block
            view, offsets = _opened(block, made, unpack_block)
        add(view[offsets[member + 1] : offsets[member + 2] - _JOINED])
    return bodies


def member_runs(
    unpack_block: Callable[[bytes], bytes], packed: Sequence[bytes], members: Sequence[int]
) -> list[Buffer]:
    """:func:`member_bodies`, but each run of a block's objects asked for one after the other
    (places ``i``, ``i + 1``, …) as one view: their bodies joined by :data:`JOINER`. A list of a
    built-in kind writes these pieces with the joiner between them: a whole block in one piece."""
    runs: list[Buffer] = []
    add = runs.append
    made: _Opened = {}
    last: bytes | None = None
    view = memoryview(b"")
    offsets: tuple[int, ...] = ()
    first = after = 0  # the run so far: places first .. after - 1 of last
    for block, member in zip(packed, members, strict=True):
        if block is last and member == after:
            after += 1
            continue
        if last is not None:
            add(view[offsets[first + 1] : offsets[after + 1] - _JOINED])
        if block is not last:
            last = block
            view, offsets = _opened(block, made, unpack_block)
        first, after = member, member + 1
    if last is not None:
        add(view[offsets[first + 1] : offsets[after + 1] - _JOINED])
    return runs


def body_size(packed: bytes, member: int = 0) -> int:
    """The plain size of the body at place ``member`` of a block (read from its header)."""
    start: int
    end: int
    start, end = _SPAN.unpack_from(packed, 1 + 4 * member)
    return end - start - _JOINED


def share(packed: bytes) -> int:
    """What one object of the block ``packed`` holds of it: its bytes over its objects."""
    return len(packed) // packed[0]
