"""send_groups: a body made group by group as it is written, and no more groups once the client
is gone."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import Any

from cacheproxy.serving import BodyPart, send_groups


class Writer:
    """A body writer whose client reads ``reads`` writes, then is gone."""

    def __init__(self, reads: int) -> None:
        self.reads = reads
        self.written: list[bytes] = []

    async def write(self, parts: Sequence[BodyPart], size: int) -> bool:
        raise AssertionError("a body made as it is written is chunked")

    async def write_chunk(self, parts: Sequence[BodyPart]) -> bool:
        if self.reads == 0:
            return False
        self.reads -= 1
        self.written.append(b"".join(parts))
        return True


def _groups(count: int, made: list[int]) -> Iterator[list[BodyPart]]:
    for i in range(count):
        made.append(i)
        assert threading.current_thread() is not threading.main_thread(), "made on the loop"
        yield [b"%d" % i, memoryview(b",")]


async def test_every_group_goes_out_in_order_chunked() -> None:
    messages: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        messages.append(message)

    made: list[int] = []
    writer = Writer(reads=100)
    await send_groups(send, _groups(10, made), writer=writer)
    assert writer.written == [b"%d," % i for i in range(10)]  # one chunk per group
    assert b"content-length" not in dict(messages[0]["headers"])
    assert messages[-1] == {"type": "http.response.body", "body": b"", "more_body": False}


async def test_no_more_groups_are_made_once_the_client_is_gone() -> None:
    messages: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        messages.append(message)

    made: list[int] = []
    writer = Writer(reads=2)
    await send_groups(send, _groups(1000, made), writer=writer)
    assert writer.written == [b"0,", b"1,"]
    assert made == [0, 1, 2, 3]  # the refused group and the one being made meanwhile
    assert messages[-1]["more_body"] is False  # the response is still ended
