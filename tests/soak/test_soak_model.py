"""The soak's upstream model answers "upstream's selection at RV R" exactly, and a view built
from events compares equal to it only when it holds the same objects at the same RVs."""

from __future__ import annotations

import random

from cacheproxy.kube.resources import builtin
from cacheproxy.sim import Simulator
from cacheproxy.sim.churn import ChurnDriver
from loadtest.harness.soak_model import FILTERS, UpstreamModel, View, describe_diff

PODS = builtin("pods")


def _churned(writes: int) -> tuple[Simulator, UpstreamModel, list[int]]:
    sim = Simulator()
    model = UpstreamModel(sim.resource("pods"), upstream_rv=lambda: sim.store.rv)
    sim.store.add_watcher(model)
    for ns in ("ns-0", "ns-1", "ns-2"):
        sim.store.create(sim.resource("namespaces"), {"metadata": {"name": ns}})
    driver = ChurnDriver(
        sim.store,
        rate=0,
        rng=random.Random(7),
        namespaces=["ns-0", "ns-1", "ns-2"],
        nodes=[f"node-{i}" for i in range(3)],
        apps=[f"app-{i}" for i in range(4)],
        max_pods=40,
    )
    rvs = []
    for _ in range(writes):
        driver.step(1)
        rvs.append(sim.store.rv)
    return sim, model, rvs


def test_the_model_knows_every_selection_at_every_rv() -> None:
    sim, model, rvs = _churned(300)
    assert not model.errors
    assert sum(model.by_type.values()) == 300
    for rv in [*rvs[::17], rvs[-1]]:
        for selection in FILTERS:
            state = model.state_at(selection.name, rv)
            assert View(state).summary() == model.summary_at(selection.name, rv)
    # The latest state is the simulator's.
    current = {o.key: o.rv for o in sim.store.iter_range(PODS, None)}
    assert model.state_at("all", rvs[-1]) == current
    assert model.current["all"] == current
    running = {
        o.key: o.rv
        for o in sim.store.iter_range(PODS, None)
        if o.obj.get("status", {}).get("phase") == "Running"
    }
    assert model.state_at("running", rvs[-1]) == running


def test_a_view_that_missed_or_repeated_an_event_does_not_compare_equal() -> None:
    _, model, rvs = _churned(120)
    before, after = rvs[60], rvs[61]
    view = View(model.state_at("all", before))
    assert view.summary() == model.summary_at("all", before)
    assert view.summary() != model.summary_at("all", after)  # the event is not applied yet
    ((_, key, mask),) = [w for w in model.writes if w[0] == after]
    kind = "DELETED" if not mask else "MODIFIED" if key in view.items else "ADDED"
    assert view.apply(kind, key, after) is None
    assert view.summary() == model.summary_at("all", after)
    # Applied twice, the same event is reported (an ADDED or MODIFIED of a held key, a DELETED
    # of an unknown one) or at least leaves the view unequal.
    again = View(model.state_at("all", before))
    again.apply(kind, key, after)
    repeated = again.apply("ADDED" if kind != "DELETED" else "DELETED", key, after)
    assert repeated is not None
    later = model.state_at("all", after)
    assert describe_diff(view.items, later).startswith("view ")
    assert "missing" in describe_diff({}, later)
