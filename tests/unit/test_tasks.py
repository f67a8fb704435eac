"""cancel_and_wait: every task ends, cancellation is swallowed, other errors are not."""

from __future__ import annotations

import asyncio

import pytest

from cacheproxy.tasks import cancel_and_wait


async def test_running_tasks_are_cancelled_and_waited_for_and_none_is_skipped() -> None:
    ended: list[str] = []

    async def forever(name: str) -> None:
        try:
            await asyncio.Event().wait()
        finally:
            await asyncio.sleep(0)  # cleanup that takes a loop turn still completes
            ended.append(name)

    tasks = [asyncio.create_task(forever(n)) for n in ("a", "b")]
    await asyncio.sleep(0)
    await cancel_and_wait(tasks[0], None, tasks[1])
    assert sorted(ended) == ["a", "b"]
    assert all(t.cancelled() for t in tasks)


async def test_an_error_a_task_ends_with_is_raised() -> None:
    async def fails_on_cancel() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            raise RuntimeError("cleanup failed") from None

    task = asyncio.create_task(fails_on_cancel())
    await asyncio.sleep(0)
    with pytest.raises(RuntimeError, match="cleanup failed"):
        await cancel_and_wait(task)
