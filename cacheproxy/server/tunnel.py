"""A switched connection relayed: once upstream answered an upgrade with ``101 Switching
Protocols`` (websocket or SPDY: exec, attach, port-forward, a websocket watch), bytes go both
ways between the caller's connection and upstream's as they come, whatever protocol they
carry, until either side closes or fails; then both are closed."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Final

import httpcore

from cacheproxy.serving import Tunnel

__all__ = ["pump"]

READ_SIZE: Final = 64 * 1024
"""Bytes read from upstream at a time."""


async def pump(tunnel: Tunnel, upstream: httpcore.AsyncNetworkStream) -> None:
    """Relay between ``tunnel`` (the caller's connection) and ``upstream`` (the network stream
    of upstream's ``101``), each direction at the pace of its reader."""

    async def up() -> None:
        while data := await tunnel.receive():
            await upstream.write(data)

    async def down() -> None:
        while data := await upstream.read(READ_SIZE):
            await tunnel.send(data)

    directions = [asyncio.ensure_future(up()), asyncio.ensure_future(down())]
    try:
        await asyncio.wait(directions, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for direction in directions:
            direction.cancel()
        for direction in directions:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await direction
        tunnel.close()
        with contextlib.suppress(Exception):
            await upstream.aclose()
