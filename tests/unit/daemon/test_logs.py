"""Log lines: text for people, JSON objects for collectors."""

from __future__ import annotations

import logging

import orjson

from cacheproxy.daemon.logs import JsonFormatter


def test_json_lines_carry_time_level_logger_and_message() -> None:
    record = logging.LogRecord(
        "cacheproxy.x", logging.WARNING, __file__, 1, "synced %d", (3,), None
    )
    entry = orjson.loads(JsonFormatter().format(record))
    assert entry["level"] == "warning"
    assert entry["logger"] == "cacheproxy.x"
    assert entry["message"] == "synced 3"
    assert entry["time"].endswith("+00:00")


def test_json_lines_include_the_exception() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        import sys

        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", (), sys.exc_info())
    entry = orjson.loads(JsonFormatter().format(record))
    assert "ValueError: boom" in entry["exception"]
