"""Property: for any list query, the daemon answers what the simulator answers, page by page.

Random queries (namespaces, label and field selectors, limit/continue walks, resourceVersion
unset, "0", Exact at the current or an earlier RV, NotOlderThan) go to the daemon and to the
simulator directly; between examples the pods churn. Both are compared at the same RV: after each
churn step the test waits until the daemon's pods have reached the simulator's RV. Same items
(keys and resourceVersions) in the same order, same list RV, same continue tokens and
``remainingItemCount`` on every page.

Walks whose cache moves on between pages (the normal case under churn) go to both page by page,
with churn between pages: every page after the first is cut from a state the daemon has moved
past, which it builds once per walk and keeps (or, with nothing kept, rebuilds for every page).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cacheproxy.daemon.config import ServerLimits
from cacheproxy.daemon.runtime import Daemon
from cacheproxy.kube.resources import builtin
from cacheproxy.server.resource import ServedResource
from cacheproxy.sim import SimServer, Simulator
from cacheproxy.sim.churn import ChurnDriver
from tests.integration.daemon_support import daemon_for

PODS = builtin("pods")
GUARD = 10.0

NAMESPACES = [None, "ns-0", "ns-1", "ns-2", "default"]
LABEL_SELECTORS = [
    "",
    "app=app-1",
    "app in (app-0,app-2)",
    "app notin (app-1),tier=frontend",
    "tier!=worker",
    "team",
    "!team",
    "version,app!=app-3",
]
FIELD_SELECTORS = [
    "",
    "spec.nodeName=node-2",
    "spec.nodeName=",  # unscheduled pods: an index path, absent from those objects
    "spec.nodeName!=,status.phase=Pending",
    "status.phase=Running",
    "status.phase!=Running",
    "spec.nodeName!=node-0,status.phase=Pending",
    "metadata.namespace=ns-1",
    "spec.restartPolicy=Always,spec.schedulerName=default-scheduler",
]
RV_MODES = ["unset", "0", "exact-current", "exact-earlier", "not-older-than-current"]


@dataclass(frozen=True)
class ListQuery:
    namespace: str | None
    labels: str
    fields: str
    rv: str
    limit: int | None

    @property
    def path(self) -> str:
        return f"/api/v1/namespaces/{self.namespace}/pods" if self.namespace else "/api/v1/pods"

    def params(self, *, current: int, earlier: int) -> dict[str, str]:
        params: dict[str, str] = {}
        if self.labels:
            params["labelSelector"] = self.labels
        if self.fields:
            params["fieldSelector"] = self.fields
        if self.limit:
            params["limit"] = str(self.limit)
        if self.rv == "0":
            params["resourceVersion"] = "0"
        elif self.rv == "exact-current":
            params |= {"resourceVersion": str(current), "resourceVersionMatch": "Exact"}
        elif self.rv == "exact-earlier":
            params |= {"resourceVersion": str(earlier), "resourceVersionMatch": "Exact"}
        elif self.rv == "not-older-than-current":
            params |= {"resourceVersion": str(current), "resourceVersionMatch": "NotOlderThan"}
        return params


queries = st.builds(
    ListQuery,
    namespace=st.sampled_from(NAMESPACES),
    labels=st.sampled_from(LABEL_SELECTORS),
    fields=st.sampled_from(FIELD_SELECTORS),
    rv=st.sampled_from(RV_MODES),
    limit=st.one_of(st.none(), st.integers(3, 40)),
)


Page = tuple[list[tuple[str, str, str]], str, str, int | None]
"""(items as namespace/name/RV, list RV, continue token, remainingItemCount)."""


async def fetch_page(client: httpx.AsyncClient, path: str, params: dict[str, str]) -> Page:
    r = await client.get(path, params=params)
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    meta = body["metadata"]
    items = [
        (i["metadata"]["namespace"], i["metadata"]["name"], i["metadata"]["resourceVersion"])
        for i in body["items"]
    ]
    token = meta.get("continue", "")
    return items, meta["resourceVersion"], token, meta.get("remainingItemCount")


def following(params: dict[str, str], token: str) -> dict[str, str]:
    """The parameters of the page after one that carried ``token``."""
    return {"continue": token, **({"limit": params["limit"]} if "limit" in params else {})}


async def walk(client: httpx.AsyncClient, query: ListQuery, params: dict[str, str]) -> list[Page]:
    """Every page of ``query``, following continue tokens (at most 200 pages)."""
    pages: list[Page] = []
    while len(pages) < 200:
        pages.append(await fetch_page(client, query.path, params))
        token = pages[-1][2]
        if not token:
            return pages
        params = following(params, token)
    pytest.fail(f"{query} did not end within 200 pages")


@dataclass
class Rig:
    daemon: Daemon
    sim: Simulator
    proxy: httpx.AsyncClient
    upstream: httpx.AsyncClient
    churn: ChurnDriver


@contextlib.asynccontextmanager
async def rig_for(
    demo_server: SimServer, demo_sim: Simulator, **server: object
) -> AsyncIterator[Rig]:
    """A daemon (``server``: its ServerSettings) in front of the demo simulator, whose pods a
    churn driver changes on demand; three pods are not scheduled yet (no ``spec.nodeName``)."""
    churn = ChurnDriver(
        demo_sim.store,
        rate=0,
        rng=random.Random(11),
        namespaces=["ns-0", "ns-1", "ns-2", "default"],
        nodes=[f"node-{i}" for i in range(5)],
        apps=[f"app-{i}" for i in range(4)],
        max_pods=80,
    )
    pods = demo_sim.resource("pods")
    for i in range(3):  # not scheduled yet: no spec.nodeName
        demo_sim.store.create(
            pods,
            {
                "metadata": {
                    "name": f"unscheduled-{i}",
                    "namespace": "ns-1",
                    "labels": {"team": "x"},
                },
                "spec": {"containers": [{"name": "main", "image": "busybox"}]},
                "status": {"phase": "Pending"},
            },
        )
    async with (
        daemon_for(demo_server.url, **server) as daemon,
        httpx.AsyncClient(base_url=daemon.url, timeout=GUARD) as proxy,
        httpx.AsyncClient(base_url=demo_server.url, timeout=GUARD) as upstream,
    ):
        yield Rig(daemon, demo_sim, proxy, upstream, churn)


@pytest.fixture
async def rig(demo_server: SimServer, demo_sim: Simulator) -> AsyncIterator[Rig]:
    async with rig_for(demo_server, demo_sim) as rig:
        yield rig


def served_pods(rig: Rig) -> ServedResource:
    assert rig.daemon.server is not None
    return rig.daemon.server.resources[PODS]


async def caught_up(rig: Rig) -> int:
    """The simulator's RV, once the daemon's pods reached it (the churn writes only pods)."""
    served = served_pods(rig)
    target = rig.sim.store.rv
    loop = asyncio.get_running_loop()
    deadline = loop.time() + GUARD
    while served.resource_version != target:
        assert served.resource_version < target, "the daemon is ahead of the simulator"
        if loop.time() > deadline:
            pytest.fail(f"the daemon never reached RV {target}")
        await asyncio.sleep(0.002)
    return target


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(query=queries, writes=st.integers(0, 20))
# Always tried: the unscheduled pods (a selector on an index path the objects lack), and a walk
# of an older snapshot.
@example(query=ListQuery(None, "", "spec.nodeName=", "unset", None), writes=0)
@example(query=ListQuery("ns-1", "team", "spec.nodeName!=", "exact-earlier", 4), writes=15)
async def test_any_list_query_answers_what_the_simulator_answers_at_the_same_rv(
    rig: Rig, query: ListQuery, writes: int
) -> None:
    earlier = await caught_up(rig)
    rig.churn.step(writes)
    current = await caught_up(rig)
    params = query.params(current=current, earlier=earlier)
    mine, theirs = await asyncio.gather(
        walk(rig.proxy, query, params), walk(rig.upstream, query, params)
    )
    assert mine == theirs, (query, params)
    expected_rv = earlier if query.rv == "exact-earlier" else current
    assert {page[1] for page in mine} == {str(expected_rv)}


async def walk_under_churn(
    rig: Rig, query: ListQuery, params: dict[str, str], writes: list[int]
) -> tuple[list[Page], list[Page]]:
    """Both walks of ``query``, page by page; after each page the pods churn (``writes[i]``
    writes after page i, cycling) and the daemon catches up, so the next page comes from a
    state both have moved past. Each walk follows its own continue tokens."""
    mine: list[Page] = []
    theirs: list[Page] = []
    mine_params = theirs_params = params
    for i in range(200):
        a, b = await asyncio.gather(
            fetch_page(rig.proxy, query.path, mine_params),
            fetch_page(rig.upstream, query.path, theirs_params),
        )
        mine.append(a)
        theirs.append(b)
        if not (a[2] and b[2]):
            return mine, theirs
        rig.churn.step(writes[i % len(writes)])
        await caught_up(rig)
        mine_params, theirs_params = following(params, a[2]), following(params, b[2])
    pytest.fail(f"{query} did not end within 200 pages")


walks_under_churn = st.builds(
    ListQuery,
    namespace=st.sampled_from(NAMESPACES),
    labels=st.sampled_from(LABEL_SELECTORS),
    fields=st.sampled_from(FIELD_SELECTORS),
    rv=st.sampled_from(["unset", "0", "exact-earlier", "not-older-than-current"]),
    limit=st.integers(2, 15),
)


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    query=walks_under_churn,
    before=st.integers(0, 20),
    writes=st.lists(st.integers(1, 6), min_size=1, max_size=4),
)
@example(query=ListQuery(None, "", "", "unset", 7), before=0, writes=[3])
@example(
    query=ListQuery("ns-1", "team", "spec.nodeName!=", "exact-earlier", 2), before=10, writes=[2]
)
async def test_a_walk_whose_cache_moves_on_between_pages_answers_what_the_simulator_answers(
    rig: Rig, query: ListQuery, before: int, writes: list[int]
) -> None:
    """Churn between every two pages: the daemon's later pages come from the state at the walk's
    RV, built once for the walk and kept, and equal the simulator's pages at that RV."""
    earlier = await caught_up(rig)
    rig.churn.step(before)
    current = await caught_up(rig)
    params = query.params(current=current, earlier=earlier)
    builds = served_pods(rig).snapshots.builds
    mine, theirs = await walk_under_churn(rig, query, params, writes)
    assert mine == theirs, (query, params)
    expected_rv = earlier if query.rv == "exact-earlier" else current
    assert {page[1] for page in mine} == {str(expected_rv)}
    assert served_pods(rig).snapshots.builds - builds <= 1


async def test_the_paging_limits_reach_the_served_resources_and_without_kept_states_pages_agree(
    demo_server: SimServer, demo_sim: Simulator
) -> None:
    """``continueTokenTTLSeconds`` and ``listSnapshotEntries`` reach every served resource; with
    nothing kept, every page after the first rebuilds the walk's state, and answers alike."""
    limits = ServerLimits(continue_token_ttl_seconds=42.0, list_snapshot_entries=0)
    async with rig_for(demo_server, demo_sim, limits=limits) as rig:
        assert rig.daemon.server is not None and rig.daemon.server.resources
        for resource in rig.daemon.server.resources.values():
            assert (resource.snapshots.ttl, resource.snapshots.max_entries) == (42.0, 0)
        query = ListQuery(None, "", "", "unset", 10)
        await caught_up(rig)
        params = query.params(current=0, earlier=0)
        mine, theirs = await walk_under_churn(rig, query, params, [2])
        assert mine == theirs
        assert len(mine) > 3
        assert served_pods(rig).snapshots.builds == len(mine) - 1
