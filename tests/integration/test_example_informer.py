"""The README's informer example runs against the simulator and reconciles every pod."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from cacheproxy.sim import SimServer, Simulator

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pod_informer.py"


async def test_the_pod_informer_example_syncs_and_reconciles(
    demo_server: SimServer, demo_sim: Simulator, capsys: object
) -> None:
    spec = importlib.util.spec_from_file_location("pod_informer_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    seen = await module.main(demo_server.url, None, 0.5)
    assert seen["reconciled"] == demo_sim.store.count(demo_sim.resource("pods"))
