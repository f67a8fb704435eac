"""The demo's progress lines while it makes and loads a large cluster (both hold the thread)."""

from __future__ import annotations

import time

import pytest

from cacheproxy.cli import demo
from cacheproxy.sim import Simulator
from cacheproxy.sim.workload import DemoSpec, demo_objects


def test_the_demo_says_how_far_it_got_while_it_makes_and_loads(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(demo._Progress, "EVERY", 0.01)
    sim = Simulator()
    loaded: list[int] = []
    with demo._Progress(time.monotonic()) as progress:
        time.sleep(0.05)  # making: no count yet
        objects = demo_objects(DemoSpec(pods=3000))
        progress.loading(len(objects))

        def told(done: int) -> None:
            progress.loaded(done)
            loaded.append(done)
            time.sleep(0.005)  # time for a line now and then

        sim.load(objects, progress=told)
    lines = capsys.readouterr().err.splitlines()
    assert any(line.startswith("  … still making the demo cluster (") for line in lines)
    assert f"loading {len(objects)} objects into the simulator" in "\n".join(lines)
    counted = [line for line in lines if line.startswith("  … loaded ")]
    assert counted and all(f"of {len(objects)} objects" in line for line in counted)
    assert loaded == list(range(1000, len(objects) + 1, 1000))
