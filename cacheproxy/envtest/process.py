"""One child process of the real cluster (etcd or kube-apiserver): started in a session of its
own, killed with the process that started it, stopped gracefully then by force, its log kept."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

__all__ = ["EnvtestError", "Process", "free_port"]

_STOP_TIMEOUT = 10.0
_LOG_TAIL = 3000


class EnvtestError(RuntimeError):
    """The real cluster could not be started (the message carries the end of its log)."""


@dataclass
class Process:
    name: str
    argv: list[str]
    log: Path
    popen: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                # Linux ties the death signal to the *thread* that started the child: only the
                # main thread (which lives as long as the process) may ask for it.
                preexec_fn=_die_with_parent if _on_main_thread() else None,
            )

    @property
    def pid(self) -> int:
        assert self.popen is not None, f"{self.name} was not started"
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.popen is None:
            return
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, sig)
            try:
                self.popen.wait(_STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(_STOP_TIMEOUT)
        self.popen = None

    def tail(self) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return ""
        return text[-_LOG_TAIL:]


def _on_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _die_with_parent() -> None:
    """In the child: SIGKILL it when the process that started it dies, however it dies (a test
    run killed by a timeout must not leave a 300 MB API server behind). Linux only."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


_PR_SET_PDEATHSIG = 1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
