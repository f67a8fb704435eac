"""loadtest.scenarios.warmrestart's process starts: the log read into the start's phases, and which
installed packages a start "as installed" hides (those cacheproxy does not depend on), and the
committed report's verdicts."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from loadtest.scenarios.warmrestart import log_marks, modules_not_needed, render, runtime_packages

LOG = """\
2026-12-01 21:46:02,901 WARNING cacheproxy: Secrets are cached: every client of this proxy can read them
2026-12-01 21:46:02,902 INFO cacheproxy: /etc/c.yaml: 7 resources
  pods: all namespaces
2026-12-01 21:46:03,112 INFO cacheproxy.daemon.warmrestart: pods: restored 10000 objects at resourceVersion 21026 from /s/pods.snapshot in 103 ms; resuming the watch
2026-12-01 21:46:03,120 INFO cacheproxy.daemon.warmrestart: events: restored 1000 objects at resourceVersion 22028 from /s/events.snapshot in 3 ms; resuming the watch
2026-12-01 21:46:03,196 INFO cacheproxy.daemon: serving pods, events on http://127.0.0.1:39151
2026-12-01 21:46:03,400 INFO cacheproxy: ready: every resource synced
"""


def test_the_log_gives_each_phase_from_the_exec() -> None:
    began = datetime.datetime(2026, 12, 1, 21, 46, 2, 500_000).timestamp()
    marks = log_marks(LOG, began)
    assert {k: round(v, 3) for k, v in marks.items()} == {
        "configured": 0.401,
        "restored": 0.62,
        "listening": 0.696,
        "ready": 0.9,
    }


def test_only_what_cacheproxy_does_not_depend_on_is_hidden() -> None:
    needed = runtime_packages()
    assert {"cacheproxy", "kubernetes", "fastapi", "httpx", "uvicorn", "pydantic"} <= needed
    assert "pytest" not in needed
    hidden = modules_not_needed()
    assert "pytest" in hidden
    assert not {"kubernetes", "fastapi", "httpx", "httpcore", "anyio", "yaml"} & set(hidden)


def test_the_committed_process_report_renders_with_its_verdicts() -> None:
    root = Path(__file__).resolve().parents[3]
    result: dict[str, Any] = json.loads(
        (root / "loadtest/results/2026-12-01-warm-restart-process/warmrestart.json").read_text()
    )
    machine = SimpleNamespace(
        command="python -m loadtest warmrestart", date="d", python="CPython", nproc=2, cpu_model="x"
    )
    report = render(result, machine=machine, pods=10_000)
    assert report.count("| met |") == 5
    assert "MISSED" not in report
    assert "a new process's exec → ready ≤ 1 s, as installed (worst of 5)" in report
