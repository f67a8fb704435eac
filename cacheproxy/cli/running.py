"""Running a command's main coroutine: on uvloop when installed (docs/design.md §3), until SIGINT or
SIGTERM, the help layout every command shares, and the collector paused while a command starts."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import signal
from collections.abc import Coroutine
from typing import Any

__all__ = [
    "HelpFormatter",
    "env_default",
    "pause_collector",
    "resume_collector",
    "run",
    "stop_on_signals",
]

_paused = False


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """``--help`` shows each option's default, unless it has none worth showing (None, an empty
    list, an unset switch) or its help already says it. In a description or epilog, lines that
    start with two spaces (examples) are kept as written; the rest is wrapped."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        out: list[str] = []
        prose: list[str] = []
        for line in text.splitlines():
            if line.startswith("  ") or not line.strip():
                if prose:
                    out.append(super()._fill_text(" ".join(prose), width, indent))
                    prose = []
                out.append(indent + line if line.strip() else "")
            else:
                prose.append(line.strip())
        if prose:
            out.append(super()._fill_text(" ".join(prose), width, indent))
        return "\n".join(out)

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


def pause_collector() -> None:
    """The cyclic garbage collector off until :func:`resume_collector` (if it was on).

    A command's start imports its modules (FastAPI-free for ``serve``, still ~2 000 classes and
    functions), reads its configuration and, for ``serve``, restores its snapshots: a hundred
    thousand objects and more that all live on, and every few hundred allocations the collector
    ran and, now and then, walked all of them — ~0.1 s of a ~0.5 s start. Nothing they make is
    garbage in a cycle worth collecting meanwhile; the daemon collects once its caches are in
    (:class:`~cacheproxy.informer.SharedInformer`'s ``freeze_gc_after_sync``). One pause from the
    start of :func:`~cacheproxy.cli.main` to the command's start: resumed in between, the
    collector would at once walk all that was made so far (~30 ms)."""
    global _paused
    if gc.isenabled():
        gc.disable()
        _paused = True


def resume_collector() -> None:
    """The collector on again if :func:`pause_collector` turned it off (else nothing)."""
    global _paused
    if _paused:
        _paused = False
        gc.enable()


def run(coro: Coroutine[Any, Any, int]) -> int:
    """Run the main coroutine on uvloop when installed, else asyncio."""
    with contextlib.suppress(KeyboardInterrupt):
        try:
            import uvloop
        except ImportError:  # pragma: no cover - uvloop is optional
            return asyncio.run(coro)
        return uvloop.run(coro)
    return 130
