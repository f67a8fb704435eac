"""Running a command's main coroutine: on uvloop when installed (docs/design.md §3), until SIGINT or
SIGTERM, and the help layout every command shares."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
from collections.abc import Coroutine
from typing import Any

__all__ = ["HelpFormatter", "env_default", "run", "stop_on_signals"]


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """``--help`` shows each option's default, unless it has none worth showing (None, an empty
    list, an unset switch) or its help already says it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.default in (None, [], False, argparse.SUPPRESS) or "%(default)" in text:
            return text
        return super()._get_help_string(action) or text


def env_default(name: str, default: str) -> str:
    """A flag's default from ``CACHEPROXY_<name>`` (the commands without a configuration)."""
    return os.environ.get(f"CACHEPROXY_{name}", default)


def stop_on_signals(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)


def run(coro: Coroutine[Any, Any, int]) -> int:
    """Run the main coroutine on uvloop when installed, else asyncio."""
    with contextlib.suppress(KeyboardInterrupt):
        try:
            import uvloop
        except ImportError:  # pragma: no cover - uvloop is optional
            return asyncio.run(coro)
        return uvloop.run(coro)
    return 130
