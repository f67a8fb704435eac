"""Property: whatever the writes, compactions and resumes, every watcher receives exactly the
writes after its resource version (as the selector transition rule turns them), in order, once;
a resume older than the history is refused with 410."""

from __future__ import annotations

from dataclasses import dataclass, field

import orjson
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cacheproxy.errors import ApiError
from cacheproxy.kube.labels import LabelSelector, parse_label_selector
from cacheproxy.kube.listoptions import parse_list_options
from cacheproxy.kube.resources import BUILTIN_RESOURCES, ResourceRegistry, builtin
from cacheproxy.sim.api import SimApi
from cacheproxy.sim.storage import SimStore
from cacheproxy.sim.watch import SimWatcher

NAMES = ("a", "b", "c", "d")
COLORS = ("red", "blue")
SELECTORS = ("", "color=red", "color!=red", "!color")

write = st.tuples(  # few names and colors, so objects change, move in and out of selectors
    st.sampled_from(("put", "delete")), st.sampled_from(NAMES), st.sampled_from((*COLORS, None))
)
step = st.one_of(
    write.map(lambda w: ("write", w)),
    st.tuples(st.integers(min_value=0, max_value=12), st.sampled_from(SELECTORS)).map(
        lambda r: ("watch", r)
    ),
    st.just(("compact", None)),
)


@dataclass
class _Expectation:
    watcher: SimWatcher
    selector: LabelSelector
    from_rv: int
    received: list[tuple[int, str, str]] = field(default_factory=list)


def _labels(color: str | None) -> dict[str, str]:
    return {"color": color} if color else {}


@settings(max_examples=300, deadline=None)
@given(st.lists(step, min_size=1, max_size=60), st.integers(min_value=5, max_value=60))
@example(
    [("write", ("put", "a", "red")), ("watch", (0, "color=red")), ("write", ("put", "a", "blue"))],
    50,
)
@example(
    [("write", ("put", "a", "blue")), ("watch", (0, "color=red")), ("write", ("put", "a", "red"))],
    50,
)
def test_every_watcher_sees_exactly_the_writes_after_its_resource_version(
    steps: list[tuple[str, object]], history: int
) -> None:
    store = SimStore(ResourceRegistry(BUILTIN_RESOURCES), history_limit=history)
    store.create(builtin("namespaces"), {"metadata": {"name": "default"}})
    api = SimApi(store)
    cms = builtin("configmaps")
    # The model: every write as (rv, name, labels before, labels after); None = absent.
    writes: list[tuple[int, str, dict[str, str] | None, dict[str, str] | None]] = []
    current: dict[str, dict[str, str]] = {}
    watches: list[_Expectation] = []
    refused: list[int] = []

    for kind, arg in steps:
        if kind == "write":
            op, name, color = arg  # type: ignore[misc]
            before = current.get(name)
            if op == "delete":
                if before is None:
                    continue
                store.delete(cms, "default", name)
                del current[name]
                writes.append((store.rv, name, before, None))
            else:
                obj = {"metadata": {"name": name, "namespace": "default", "labels": _labels(color)}}
                if before is None:
                    store.create(cms, obj)
                else:
                    store.update(cms, obj)
                current[name] = _labels(color)
                writes.append((store.rv, name, before, _labels(color)))
        elif kind == "watch":
            back, selector_text = arg  # type: ignore[misc]
            from_rv = max(1, store.rv - back)
            query = {
                "watch": ["1"],
                "resourceVersion": [str(from_rv)],
                "labelSelector": [selector_text],
            }
            opts = parse_list_options(query)
            try:
                watcher, plan = api.open_watch(cms, "default", opts)
            except ApiError as err:
                assert err.code == 410
                assert from_rv < store.compacted_rv
                refused.append(from_rv)
                continue
            assert from_rv >= store.compacted_rv
            exp = _Expectation(watcher, parse_label_selector(selector_text), from_rv)
            for event in plan.replay:
                line = watcher.line_for(event)
                if line is not None:
                    exp.received.append(_decode(line))
            watches.append(exp)
        else:
            store.compact()

    for exp in watches:
        for event in exp.watcher.drain():
            line = exp.watcher.line_for(event)
            if line is not None:
                exp.received.append(_decode(line))
        expected = []
        for rv, name, before, after in writes:
            if rv <= exp.from_rv:
                continue
            was = before is not None and exp.selector.matches(before)
            now = after is not None and exp.selector.matches(after)
            if was and now:
                expected.append((rv, "MODIFIED", name))
            elif now:
                expected.append((rv, "ADDED", name))
            elif was:
                expected.append((rv, "DELETED", name))
        assert exp.received == expected


def _decode(line: bytes) -> tuple[int, str, str]:
    """(the object's RV — which must be the write's —, event type, name)."""
    event = orjson.loads(line)
    meta = event["object"]["metadata"]
    return int(meta["resourceVersion"]), event["type"], meta["name"]
