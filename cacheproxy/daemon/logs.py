"""Log output: human-readable lines, or one JSON object per line for log collectors."""

from __future__ import annotations

import datetime
import logging
import sys

import orjson

__all__ = ["JsonFormatter", "configure_logging"]


class JsonFormatter(logging.Formatter):
    """``{"time": …, "level": …, "logger": …, "message": …}`` (plus ``exception`` when there is
    one), one per line."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(entry).decode()


def configure_logging(level: str, fmt: str = "text") -> None:
    """Replace the root handlers: ``fmt`` is ``text`` or ``json``; ``level`` a logging level name."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(getattr(logging, level.upper(), logging.INFO))
    # One line per upstream request is too much at INFO: the reflectors log what matters.
    logging.getLogger("httpx").setLevel(logging.WARNING)
