"""The failure streaks of each resource: what is logged when, and what is expected."""

from __future__ import annotations

import logging

import pytest

from cacheproxy.errors import ApiError, TransportError
from cacheproxy.kube import status
from cacheproxy.server.failures import UpstreamFailures


class Clock:
    now = 100.0

    def __call__(self) -> float:
        return self.now


def _forbidden(text: str = 'pods is forbidden: User "x" cannot list') -> ApiError:
    return ApiError(status.status_body(code=403, reason="Forbidden", message=text))


def test_a_streak_is_logged_when_it_starts_changes_and_every_repeat(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="cacheproxy.upstream")
    clock = Clock()
    failures = UpstreamFailures(repeat=300, clock=clock)
    for _ in range(10):
        failures.failed("pods", "list", _forbidden())
        clock.now += 10
    clock.now += 300
    failures.failed("pods", "list", _forbidden())
    failures.failed("pods", "list", TransportError("connection refused"))
    failure = failures.of("pods")
    assert failure is not None and failure.code is None and failure.since == 100.0
    failures.answered("pods")
    messages = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert [level for level, _ in messages] == ["WARNING", "WARNING", "WARNING", "INFO"]
    assert messages[1][1].startswith("pods: still: list failed: 403 pods is forbidden")
    assert "(11 times in 400 s)" in messages[1][1]
    assert "cannot reach the API server" in messages[2][1]
    assert messages[3][1] == "pods: the API server answers again (after 12 failed lists over 400 s)"
    assert failures.of("pods") is None


def test_expected_answers_are_no_failures() -> None:
    failures = UpstreamFailures()
    failures.failed("pods", "watch-list", _forbidden("sendInitialEvents is forbidden"))
    failures.failed(
        "pods", "watch", ApiError(status.status_body(code=410, reason="Expired", message="too old"))
    )
    failures.failed("pods", "list", ValueError("not an upstream answer"))
    assert failures.of("pods") is None
    failures.answered("pods")  # nothing to end: no log, no error
