"""Tests of this directory that name ``LOOPS`` run on each of those event loops."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

import pytest
import uvloop

_FACTORIES: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop,
    "uvloop": uvloop.new_event_loop,
}


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> Mapping[str, Callable[[], asyncio.AbstractEventLoop]]:
    loops = getattr(getattr(item, "module", None), "LOOPS", ("asyncio",))
    return {name: _FACTORIES[name] for name in loops}
