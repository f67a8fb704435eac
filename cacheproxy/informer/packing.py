"""Compressed storage of a Store's objects: zstd with a dictionary trained on the store's own.

Kubernetes objects of one resource repeat most of their bytes (every pod of a Deployment shares
its spec; every pod shares the status schema), so a zstd dictionary trained on a few thousand of
them lets each object compress on its own — a GET decompresses one object, never its
neighbours — at 5-15x. What is packed is an :class:`~.store.Entry`'s ``body``; its record
(key, labels, index values) stays as it is, so indexes and selection never decompress.

How a store gets there (:class:`Packer`):
1. The first list (``Store.replace``) is kept as it came until it is complete; then up to
   ``training_bytes`` of its objects train the dictionary, if there are at least
   ``min_training_objects`` of them, and every object is packed. A collection that was smaller
   trains once objects stored since (by watch events) reach the budget, or at the next relist.
2. From then on each new object is packed as it is made (``Store.make_entry``).

The dictionary is not retrained: objects that drift from it compress less, never wrongly (a
relist that finds the collection changed out of all recognition is the time to restart).

Packing is deterministic (one dictionary, one level), so two packings of the same bytes are the
same bytes: a relist tells unchanged objects by comparing packed bodies.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeAlias

import zstandard

__all__ = ["Buffer", "Packer", "Storage", "unpacked_size"]

Buffer: TypeAlias = bytes | memoryview
"""A body as lists write it: stored bytes, or a view of a batch decompressed at once."""

_MANY = 64
"""From this many packed bodies on, one call decompresses them all (in C, on both cores)."""


@dataclass(frozen=True, slots=True)
class Storage:
    """How a store keeps its objects (``resources[].storage``)."""

    compressed: bool = False
    """Each object zstd-compressed with a dictionary trained on the resource's first objects."""
    level: int = 1
    """zstd level (1-19). Pods with a trained dictionary: 1 packs 14.6x at ~6 µs an object,
    3 packs 15.1x at ~8 µs, 19 17.4x at ~900 µs; all decompress at ~2.5-3 µs an object."""
    dictionary_bytes: int = 64 << 10
    """Size of the trained dictionary: 64 KiB holds the parts pods share best."""
    training_bytes: int = 8 << 20
    """Object bytes to train on (zstd suggests ~100x the dictionary)."""
    min_training_objects: int = 32
    """Fewer objects than this at the end of the first list: the collection stays plain."""


class Packer:
    """One store's dictionary and (de)compression contexts. Used from one thread at a time,
    except :meth:`unpack_batch`, which decompresses on zstd's own threads, and
    :meth:`batch_unpacker`, for another thread."""

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

    def pack(self, body: bytes) -> bytes:
        # zstd's bytes keep the buffer made for the worst case (about the input's size): the
        # copy is what makes a packed body take its own size.
        return bytes(memoryview(self._compress(body)))

    def unpack(self, packed: bytes) -> bytes:
        body: bytes = self._decompress(packed)
        return body

    def unpack_batch(self, packed: list[bytes]) -> list[Buffer]:
        """Many bodies at once, in order: from ``_MANY`` on, views of one buffer that zstd
        fills on its own threads (the event loop's thread waits, but does not work)."""
        assert self._decompressor is not None
        return _unpack_batch(self._decompressor, packed)

    def batch_unpacker(self) -> Callable[[list[bytes]], list[Buffer]]:
        """:meth:`unpack_batch` with a context of its own, for another thread (a zstd context is
        never shared between threads)."""
        decompressor = zstandard.ZstdDecompressor(dict_data=self.dictionary)
        return lambda packed: _unpack_batch(decompressor, packed)


def _unpack_batch(decompressor: zstandard.ZstdDecompressor, packed: list[bytes]) -> list[Buffer]:
    if len(packed) < _MANY:
        return list(map(decompressor.decompress, packed))
    frames = list[bytes | bytearray | memoryview](packed)
    batch = decompressor.multi_decompress_to_buffer(frames, threads=-1)
    # A segment is a view into the batch's one buffer (kept alive by the views).
    return [memoryview(batch[i]) for i in range(len(batch))]  # type: ignore[arg-type]


def unpacked_size(packed: bytes) -> int:
    """The plain size of a packed body (read from its frame header)."""
    return int(zstandard.frame_content_size(packed))
