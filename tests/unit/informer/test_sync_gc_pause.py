"""The collector is paused while syncs decode, and only then."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from typing import Any

import pytest

from cacheproxy.errors import TransportError
from cacheproxy.informer import (
    FakeListerWatcher,
    InOrderQueue,
    ListPage,
    ListRequest,
    Reflector,
    ReflectorOptions,
)
from cacheproxy.informer.syncing import gc_paused


@pytest.fixture(autouse=True)
def _collector_on() -> Iterator[None]:
    gc.enable()
    yield
    gc.enable()


def test_overlapping_pauses_resume_the_collector_once_the_last_ends() -> None:
    first, second = gc_paused(), gc_paused()
    first.__enter__()
    second.__enter__()
    assert not gc.isenabled()
    first.__exit__(None, None, None)
    assert not gc.isenabled(), "still paused for the second"
    second.__exit__(None, None, None)
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off() -> None:
    gc.disable()
    with gc_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


class Observing(FakeListerWatcher):
    """Records whether the collector ran while each list was read; the first list fails."""

    def __init__(self) -> None:
        super().__init__()
        self.supports_watch_list = False
        self.enabled_during_lists: list[bool] = []
        self.fail_next_list(TransportError("refused", connection_refused=True))

    async def list(self, request: ListRequest, **options: Any) -> ListPage:
        self.enabled_during_lists.append(gc.isenabled())
        return await super().list(request, **options)


@pytest.mark.parametrize("pause", [True, False])
async def test_a_reflector_pauses_the_collector_while_it_lists_never_while_it_backs_off(
    pause: bool,
) -> None:
    lw = Observing()
    enabled_during_sleeps: list[bool] = []

    async def sleep(_: float) -> None:
        enabled_during_sleeps.append(gc.isenabled())
        await asyncio.sleep(0)

    reflector = Reflector(
        lw,
        InOrderQueue(100),
        name="t",
        options=ReflectorOptions(pause_gc_during_sync=pause),
        sleep=sleep,
    )
    task = asyncio.create_task(reflector.run())
    try:
        await asyncio.wait_for(reflector.synced.wait(), 5)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert lw.enabled_during_lists == [not pause, not pause]  # the failed list and the retry
    assert enabled_during_sleeps and all(enabled_during_sleeps)
    assert gc.isenabled()
