"""``python -m loadtest``: one entry point, every scenario listed and reachable, and in a make
target."""

from __future__ import annotations

import importlib
import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

from loadtest import __main__ as entry

REPO = Path(__file__).resolve().parents[3]


def test_every_scenario_module_is_listed_and_runnable_and_nothing_else() -> None:
    modules = {p.stem for p in (REPO / "loadtest" / "scenarios").glob("*.py")} - {"__init__"}
    assert modules == set(entry.SCENARIOS)
    for name in modules:
        main = importlib.import_module(f"loadtest.scenarios.{name}").main
        assert list(inspect.signature(main).parameters) == ["argv"], name


def test_every_scenario_is_run_by_a_make_target() -> None:
    makefile = (REPO / "Makefile").read_text()
    run = set(re.findall(r"-m loadtest ([a-z_]+)", makefile))
    assert run == set(entry.SCENARIOS)


def test_help_lists_the_scenarios_and_a_scenarios_help_is_its_own() -> None:
    listed = subprocess.run(
        [sys.executable, "-m", "loadtest", "--help"], capture_output=True, text=True, cwd=REPO
    )
    assert listed.returncode == 0
    for name, what in entry.SCENARIOS.items():
        assert re.search(rf"^  {name} +{re.escape(what)}$", listed.stdout, re.M), name
    own = subprocess.run(
        [sys.executable, "-m", "loadtest", "pagewalk", "--help"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert own.returncode == 0 and "usage: python -m loadtest pagewalk" in own.stdout


@pytest.mark.parametrize("argv", [[], ["nonesuch"]])
def test_no_scenario_or_an_unknown_one_is_a_usage_error(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert entry.main(argv) == 2
    out = capsys.readouterr()
    assert "scenarios:" in out.out + out.err
