"""The serving protocol's transport: small writes of one turn of the event loop go out in one
``writelines`` at its end; large ones at once; closing and aborting hand over what is held."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from cacheproxy.serving.uvicorn_adapter import COALESCE_BYTES, _Coalescing


class FakeTransport:
    """Records what reaches the socket's side, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.closing = False

    def writelines(self, parts: list[bytes]) -> None:
        self.calls.append(("writelines", list(parts)))

    def close(self) -> None:
        self.calls.append(("close", None))
        self.closing = True

    def abort(self) -> None:
        self.calls.append(("abort", None))
        self.closing = True

    def is_closing(self) -> bool:
        return self.closing

    def get_write_buffer_size(self) -> int:
        return 7


def coalescing() -> tuple[_Coalescing, FakeTransport]:
    fake = FakeTransport()
    return _Coalescing(cast(asyncio.Transport, fake), asyncio.get_running_loop()), fake


async def test_a_head_and_body_written_in_one_turn_go_out_together_at_its_end() -> None:
    transport, fake = coalescing()
    transport.write(b"HTTP/1.1 200 OK\r\n\r\n")
    transport.write(b"")
    transport.writelines([b"{", b"}"])
    assert fake.calls == []
    await asyncio.sleep(0)
    assert fake.calls == [("writelines", [b"HTTP/1.1 200 OK\r\n\r\n", b"{", b"}"])]
    transport.write(b"next")
    await asyncio.sleep(0)
    assert fake.calls[1:] == [("writelines", [b"next"])]


async def test_a_large_write_goes_at_once_with_what_was_held_before_it() -> None:
    transport, fake = coalescing()
    transport.write(b"head")
    big = b"x" * COALESCE_BYTES
    transport.write(big)
    assert fake.calls == [("writelines", [b"head", big])]
    await asyncio.sleep(0)
    assert len(fake.calls) == 1


async def test_closing_or_aborting_hands_over_what_is_held_first() -> None:
    for end in ("close", "abort"):
        transport, fake = coalescing()
        transport.write(b"partial")
        getattr(transport, end)()
        assert fake.calls == [("writelines", [b"partial"]), (end, None)]
        transport.write(b"late")  # after the end: nothing reaches a closing transport
        await asyncio.sleep(0)
        assert fake.calls == [("writelines", [b"partial"]), (end, None)]
        assert transport.is_closing()


async def test_everything_else_is_the_transports() -> None:
    transport, _ = coalescing()
    assert transport.get_write_buffer_size() == 7  # type: ignore[attr-defined]
