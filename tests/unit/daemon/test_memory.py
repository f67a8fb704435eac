"""Memory freed by a relist goes back to the OS, once per burst of relists."""

from __future__ import annotations

import asyncio
import sys

import pytest

from cacheproxy.daemon.memory import MemoryTrimmer, release_free_memory

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="malloc_trim is glibc's (Linux)"
)


def test_free_memory_is_released_with_glibc() -> None:
    assert release_free_memory() is True


async def test_a_burst_of_requests_is_one_trim_after_the_last() -> None:
    trimmer = MemoryTrimmer(delay=0.05)
    for _ in range(5):
        trimmer.request(123)  # called as a relist listener, with the relist's RV
        await asyncio.sleep(0.01)
    assert trimmer.trims == 0
    await asyncio.sleep(0.1)
    assert trimmer.trims == 1


async def test_a_stopped_trimmer_does_not_trim() -> None:
    trimmer = MemoryTrimmer(delay=0.01)
    trimmer.request()
    trimmer.stop()
    await asyncio.sleep(0.05)
    assert trimmer.trims == 0
