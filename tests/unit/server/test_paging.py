"""Paged lists at older resourceVersions: every page is the page of the state at the token's RV,
whether that state was kept from an earlier page or rebuilt, and a walk builds it once.

The reference is the rebuild as it was before states were kept: the store's entries with the
EventLog's later events undone, for every page, the matching keys sorted, the page cut from them.
"""

from __future__ import annotations

import asyncio
import bisect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from cacheproxy.errors import ApiError
from cacheproxy.informer import Entry, EventLog, InformerEvent, Relisted, Store, TooOld
from cacheproxy.kube import status
from cacheproxy.kube.fields import parse_field_selector
from cacheproxy.kube.labels import parse_label_selector
from cacheproxy.kube.listoptions import EXACT, ListOptions
from cacheproxy.kube.resources import builtin
from cacheproxy.kube.rv import decode_continue, encode_continue
from cacheproxy.kube.versions import KUBE_1_32, KUBE_1_36, KubeVersion
from cacheproxy.server.query import Query, matches, parse_index_selector
from cacheproxy.server.resource import ServedList, ServedResource
from cacheproxy.server.snapshots import Snapshot, SnapshotCache

PODS = builtin("pods")
INDEXES = ("spec.nodeName",)
NAMESPACES = ("ns-a", "ns-b", "ns-c")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class FakeInformer:
    """The writer side of a SharedInformer, applied synchronously as its processing loop
    applies each item: a change goes to the Store and the EventLog at the next RV; a relist
    replaces the store's state and restarts the log at its RV."""

    def __init__(self, *, history: int = 1_000) -> None:
        self.store = Store(kind="Pod", api_version="v1", field_indexes=INDEXES)
        self.event_log = EventLog(max_events=history, min_events=history, clock=lambda: 0.0)
        self.has_synced = True
        self._subscribers: list[Callable[[InformerEvent], None]] = []

    def subscribe(self, subscriber: Callable[[InformerEvent], None]) -> Callable[[], None]:
        self._subscribers.append(subscriber)
        return lambda: self._subscribers.remove(subscriber)

    @property
    def rv(self) -> int:
        return self.store.resource_version

    def put(self, obj: dict[str, Any]) -> None:
        rv = self.rv + 1
        obj["metadata"]["resourceVersion"] = str(rv)
        entry = self.store.make_entry(obj)
        prev = self.store.put(entry, rv=rv)
        event = self.event_log.append("ADDED" if prev is None else "MODIFIED", entry, prev, rv)
        for subscriber in self._subscribers:
            subscriber(event)

    def delete(self, key: str) -> None:
        if key in self.store:
            rv = self.rv + 1
            prev = self.store.delete(key, rv=rv)
            assert prev is not None
            event = self.event_log.append("DELETED", prev, prev, rv)
            for subscriber in self._subscribers:
                subscriber(event)

    def relist(self, objs: list[dict[str, Any]]) -> None:
        rv = self.rv + 1
        before = self.rv
        self.store.replace([self.store.make_entry(o) for o in objs], rv)
        self.event_log.reset(rv)
        for subscriber in self._subscribers:
            subscriber(Relisted(rv, before, changed=[], gone={}))


def pod(
    ns: str, name: str, *, app: str = "a", node: str | None = "n1", phase: str = "Running"
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": []}
    if node is not None:
        spec["nodeName"] = node
    return {
        "metadata": {"name": name, "namespace": ns, "labels": {"app": app}},
        "spec": spec,
        "status": {"phase": phase},
    }


def served(informer: FakeInformer, snapshots: SnapshotCache | None = None) -> ServedResource:
    return ServedResource(
        PODS,
        informer,  # type: ignore[arg-type]
        index_paths=set(INDEXES),
        snapshots=SnapshotCache() if snapshots is None else snapshots,
        rv_wait=0.0,  # an RV the cache has not reached: 504 at once
    )


# ----------------------------------------------------------------------------- the reference

Outcome = tuple[list[Entry], int, str, int | None] | tuple[int, str, str, str]
"""A page (items, list RV, continue token, remainingItemCount) or a refusal (code, reason,
continue token of the 410, message)."""


def state_at(informer: FakeInformer, rv: int) -> dict[str, Entry]:
    state = {e.key: e for e in informer.store.entries()}
    for change in reversed(informer.event_log.since(rv)):
        if change.prev is None:
            state.pop(change.entry.key, None)
        else:
            state[change.entry.key] = change.prev
    return state


def reference(informer: FakeInformer, query: Query, opts: ListOptions) -> Outcome:
    """The page as it was served before states were kept (every page rebuilt and sorted)."""
    current = informer.rv
    try:
        if opts.continue_token:
            token = decode_continue(opts.continue_token)
            if token.resource_version > current:  # from a replica ahead: not reached (yet)
                raise status.expired(
                    status.CONTINUE_EXPIRED_MESSAGE,
                    continue_token=encode_continue(-1, token.key),
                )
            rv = current if token.resource_version == -1 else token.resource_version
            try:
                state = state_at(informer, rv)
            except TooOld:
                raise status.expired(
                    status.CONTINUE_EXPIRED_MESSAGE,
                    continue_token=encode_continue(-1, token.key),
                ) from None
        else:
            exact = opts.resource_version_match == EXACT or (opts.limit > 0 and opts.rv > 0)
            rv = opts.rv if exact and opts.rv else current
            try:
                state = state_at(informer, rv)
            except TooOld:
                raise status.expired(
                    "The resourceVersion for the provided list is too old."
                ) from None
    except ApiError as err:
        return outcome_of(err)
    store = informer.store
    keys = sorted(k for k, e in state.items() if matches(e, query, PODS, store))
    prefix = f"{query.namespace}/" if query.namespace else ""
    start = 0
    if opts.continue_token:
        start = bisect.bisect_left(keys, prefix + decode_continue(opts.continue_token).key)
    end = len(keys) if not opts.limit else min(len(keys), start + opts.limit)
    token, remaining = "", None
    if end < len(keys):
        # As the newest API server (the resource's default) writes them: a first page's key
        # rooted at "/", the pages' after it not.
        root = "" if opts.continue_token else "/"
        token = encode_continue(rv, root + keys[end - 1].removeprefix(prefix) + "\x00")
        remaining = None if query.selective else len(keys) - end
    return [state[k] for k in keys[start:end]], rv, token, remaining


def outcome_of(result: ServedList | ApiError) -> Outcome:
    if isinstance(result, ApiError):
        token = result.status.get("metadata", {}).get("continue", "")
        return result.code, result.reason, token, result.message
    return result.items, result.resource_version, result.continue_token, result.remaining


async def serve(res: ServedResource, query: Query, opts: ListOptions) -> Outcome:
    try:
        return outcome_of(await res.read_list(query, opts))
    except ApiError as err:
        return outcome_of(err)


def next_options(outcome: Outcome, limit: int) -> ListOptions | None:
    """The request after ``outcome``: its continue token (a 410's inconsistent one too)."""
    token = outcome[2]
    return ListOptions(limit=limit, continue_token=token) if token else None


def churn(informer: FakeInformer, step: int) -> None:
    """A few changes: a pod modified, one added, one deleted (deterministic in ``step``)."""
    keys = list(informer.store.sorted_keys())
    if keys:
        ns, _, name = keys[(step * 7) % len(keys)].partition("/")
        informer.put(pod(ns, name, app="b", phase="Pending"))
    informer.put(pod(NAMESPACES[step % 3], f"new-{step}", node=None))
    if len(keys) > 1:
        informer.delete(keys[(step * 13 + 1) % len(keys)])


def filled(pods: int = 60, *, history: int = 1_000) -> FakeInformer:
    informer = FakeInformer(history=history)
    for i in range(pods):
        informer.put(pod(NAMESPACES[i % 3], f"p-{i:03d}", app="ab"[i % 2], node=f"n{i % 4}"))
    return informer


async def walk_under_churn(
    res: ServedResource, informer: FakeInformer, query: Query, opts: ListOptions
) -> list[Outcome]:
    """Every page, each compared with the reference; the cache moves on after each page."""
    pages: list[Outcome] = []
    next_opts: ListOptions | None = opts
    step = 0
    while next_opts is not None:
        got = await serve(res, query, next_opts)
        assert got == reference(informer, query, next_opts), (len(pages), next_opts)
        pages.append(got)
        churn(informer, step := step + 1)
        next_opts = next_options(got, opts.limit)
    return pages


# ----------------------------------------------------------------------------- examples


async def test_a_walk_whose_cache_moves_on_builds_the_older_state_once() -> None:
    informer = filled()
    res = served(informer)
    pages = await walk_under_churn(res, informer, Query(), ListOptions(limit=7))
    assert len(pages) == 9
    assert {page[1] for page in pages} == {60}
    # The first page came from the current state; the other eight from the state at RV 60,
    # built for the second page and kept.
    assert res.snapshots.builds == 1


async def test_a_selected_walk_at_an_older_rv_builds_and_selects_once() -> None:
    informer = filled()
    earlier = informer.rv
    churn(informer, 0)
    res = served(informer)
    query = Query(namespace="ns-b", labels=parse_label_selector("app=a"))
    opts = ListOptions(resource_version=str(earlier), limit=2)
    pages = await walk_under_churn(res, informer, query, opts)
    assert len(pages) == 5 and {page[1] for page in pages} == {earlier}
    assert res.snapshots.builds == 1
    assert len(res.snapshots) == 2  # the state at ``earlier`` and the query's part of it


async def test_every_page_rebuilds_when_nothing_may_be_kept() -> None:
    informer = filled()
    earlier = informer.rv
    churn(informer, 0)
    res = served(informer, SnapshotCache(max_entries=0))
    pages = await walk_under_churn(
        res, informer, Query(), ListOptions(resource_version=str(earlier), limit=10)
    )
    assert len(pages) == 6
    assert res.snapshots.builds == 6


async def test_a_state_larger_than_the_bound_is_rebuilt_and_a_smaller_part_kept() -> None:
    informer = filled()
    earlier = informer.rv
    churn(informer, 0)
    res = served(informer, SnapshotCache(max_entries=30))
    query = Query(namespace="ns-a")
    pages = await walk_under_churn(
        res, informer, query, ListOptions(resource_version=str(earlier), limit=5)
    )
    assert len(pages) == 4
    # 60 objects exceed the bound; their 20 in ns-a do not: built once, the part kept.
    assert res.snapshots.builds == 1
    assert res.snapshots.entries == 21


async def test_a_list_without_limit_at_an_older_rv_keeps_nothing() -> None:
    informer = filled()
    earlier = informer.rv
    churn(informer, 0)
    res = served(informer)
    opts = ListOptions(resource_version=str(earlier), resource_version_match=EXACT)
    assert await serve(res, Query(), opts) == reference(informer, Query(), opts)
    assert len(res.snapshots) == 0


async def test_a_kept_state_unused_for_the_ttl_is_dropped_and_rebuilt_alike() -> None:
    informer = filled()
    earlier = informer.rv
    churn(informer, 0)
    clock = Clock()
    res = served(informer, SnapshotCache(ttl=300.0, clock=clock))
    first = await serve(res, Query(), ListOptions(resource_version=str(earlier), limit=10))
    clock.now += 299.5  # within it: kept
    opts = next_options(first, 10)
    assert opts is not None
    second = await serve(res, Query(), opts)
    assert res.snapshots.builds == 1
    clock.now += 300.5
    opts = next_options(second, 10)
    assert opts is not None
    assert await serve(res, Query(), opts) == reference(informer, Query(), opts)
    assert res.snapshots.builds == 2


async def test_a_token_the_event_log_no_longer_reaches_gets_410_though_its_state_was_kept() -> None:
    informer = filled(history=100)
    res = served(informer)
    first = await serve(res, Query(), ListOptions(limit=10))
    churn(informer, 1)
    opts = next_options(first, 10)
    assert opts is not None
    second = await serve(res, Query(), opts)
    assert len(res.snapshots) == 1
    for step in range(40):  # 120 events: the log forgets RV 60
        churn(informer, step)
    opts = next_options(second, 10)
    assert opts is not None
    refused = await serve(res, Query(), opts)
    assert refused == reference(informer, Query(), opts)
    assert refused[:2] == (410, "Expired")
    assert decode_continue(str(refused[2])).resource_version == -1
    assert len(res.snapshots) == 0


async def test_a_relist_forgets_every_kept_state() -> None:
    informer = filled()
    res = served(informer)
    first = await serve(res, Query(), ListOptions(limit=10))
    churn(informer, 1)
    opts = next_options(first, 10)
    assert opts is not None
    second = await serve(res, Query(), opts)
    assert len(res.snapshots) == 1
    informer.relist([pod("ns-a", "only")])
    assert len(res.snapshots) == 0
    opts = next_options(second, 10)
    assert opts is not None
    assert (await serve(res, Query(), opts))[:2] == (410, "Expired")


async def test_a_token_newer_than_the_cache_waits_for_its_rv_then_is_a_410() -> None:
    """A token from a replica ahead of this one (behind one Service): the state at its RV is not
    here yet, and cut from the older state here the page would miss what was written since. It
    waits for the RV, as a list at RV=N does: served from that state once the cache reached it,
    after ``rv_wait`` the API server's 410 for a token it cannot continue, with an inconsistent
    token (carry on at the latest state from the same key)."""
    informer = filled()
    res = served(informer)
    res.rv_wait = 0.05
    ahead = informer.rv + 3
    opts = ListOptions(limit=10, continue_token=encode_continue(ahead, "ns-a/p-010\x00"))
    refused = await serve(res, Query(), opts)
    assert refused[:3] == (410, "Expired", encode_continue(-1, "ns-a/p-010\x00"))

    res.rv_wait = 5.0
    waiting = asyncio.create_task(serve(res, Query(), opts))
    await asyncio.sleep(0)
    assert not waiting.done()
    churn(informer, 1)  # three events: the cache reaches the token's RV
    page = await waiting
    assert page == reference(informer, Query(), opts)
    assert page[1] == ahead


def test_the_least_recently_used_are_dropped_first_to_stay_within_the_bound() -> None:
    cache = SnapshotCache(max_entries=25)

    def view(rv: int) -> Snapshot:
        return cache.view(
            rv,
            None,
            oldest=0,
            build=lambda: Snapshot(rv, [Entry(f"k{i}", (), (), b"}", b"{") for i in range(7)]),
            select=lambda s: s,
            keep=True,
        )

    for rv in (1, 2, 3):
        view(rv)
    assert (len(cache), cache.entries, cache.builds) == (3, 24, 3)
    view(1)  # used: now the most recent
    view(4)  # drops 2, the least recently used
    assert cache.builds == 4
    view(1)
    view(3)
    assert cache.builds == 4
    view(2)
    assert cache.builds == 5


def test_what_the_event_log_no_longer_reaches_is_dropped() -> None:
    cache = SnapshotCache()
    for rv in (5, 9, 7):
        cache.view(
            rv, None, oldest=0, build=lambda rv=rv: Snapshot(rv, []), select=lambda s: s, keep=True
        )
    assert len(cache) == 3
    built: list[int] = []

    def refuse() -> Snapshot:
        built.append(1)
        raise TooOld(6, 8)

    with pytest.raises(TooOld):
        cache.view(7, None, oldest=8, build=refuse, select=lambda s: s, keep=True)
    assert (len(cache), built) == (1, [1])


# ----------------------------------------------------------------------------- the property

a_pod = st.builds(
    pod,
    st.sampled_from(NAMESPACES),
    st.sampled_from([f"p{i}" for i in range(16)]),
    app=st.sampled_from(["a", "b", "c"]),
    node=st.sampled_from(["n1", "n2", None]),
    phase=st.sampled_from(["Running", "Pending"]),
)
pods = st.lists(a_pod, min_size=1, max_size=6)
LABELS = ["", "app=a", "app!=b", "app in (a,c)", "!app"]
FIELDS = ["", "spec.nodeName=n1", "spec.nodeName=", "status.phase!=Running"]
INDEX = ["", "spec.nodeName in (n1,n2)", "spec.nodeName!=n1"]


@dataclass(frozen=True)
class Walk:
    namespace: str | None
    labels: str
    fields: str
    index: str
    namespaces: frozenset[str] | None
    """The namespaces a user may read (namespace filtering)."""
    limit: int
    rv: str
    """``current`` (unset), ``limit`` (RV=N with the limit: exact) or ``exact`` at an earlier RV,
    or ``ahead``: a continue token forged at a later RV than the cache's (as from a replica
    ahead of this one: 504 while the cache is behind it)."""
    back: int
    """How many RVs back the earlier RV is (ahead: forward)."""

    def query(self) -> Query:
        return Query(
            namespace=self.namespace,
            labels=parse_label_selector(self.labels),
            fields=parse_field_selector(self.fields),
            index=parse_index_selector(self.index, INDEXES),
            namespaces=self.namespaces,
        )

    def options(self, current: int) -> ListOptions:
        if self.rv == "ahead":
            start = "p\x00" if self.namespace else "a\x00"  # before every key
            token = encode_continue(current + 1 + self.back % 4, start)
            return ListOptions(limit=self.limit, continue_token=token)
        earlier = str(current - self.back)
        if current - self.back < 1:
            return ListOptions(limit=self.limit)
        if self.rv == "limit":
            return ListOptions(resource_version=earlier, limit=self.limit)
        if self.rv == "exact":
            return ListOptions(
                resource_version=earlier, resource_version_match=EXACT, limit=self.limit
            )
        return ListOptions(limit=self.limit)


walks = st.builds(
    Walk,
    namespace=st.sampled_from([None, *NAMESPACES]),
    labels=st.sampled_from(LABELS),
    fields=st.sampled_from(FIELDS),
    index=st.sampled_from(INDEX),
    namespaces=st.sampled_from([None, None, frozenset({"ns-a"}), frozenset({"ns-b", "ns-c"})]),
    limit=st.integers(1, 4),
    rv=st.sampled_from(["current", "current", "limit", "exact", "ahead"]),
    back=st.integers(0, 30),
)
changes = st.one_of(
    st.tuples(st.just("put"), pods),
    st.tuples(st.just("put"), pods),
    st.tuples(st.just("put"), pods),
    st.tuples(st.just("delete"), st.lists(st.integers(0, 99), min_size=1, max_size=4)),
    st.tuples(st.just("delete"), st.lists(st.integers(0, 99), min_size=1, max_size=4)),
    st.tuples(st.just("tick"), st.sampled_from([1.0, 30.0, 150.0])),
    st.tuples(st.just("relist"), pods),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    initial=st.lists(a_pod, min_size=10, max_size=40),
    history=st.sampled_from([4, 16, 1_000]),
    max_entries=st.sampled_from([0, 12, 1_000_000]),
    data=st.data(),
)
async def test_pages_served_with_kept_states_equal_pages_of_a_full_rebuild(
    initial: list[dict[str, Any]], history: int, max_entries: int, data: st.DataObject
) -> None:
    """Random churn (changes, relists, a short event history), time passing (the TTL), a small
    bound, and up to three walks at once with random selectors, limits and RVs: every page,
    refusal and continue token equals what rebuilding the state for that page gives."""
    informer = FakeInformer(history=history)
    for obj in initial:
        informer.put(obj)
    clock = Clock()
    res = served(informer, SnapshotCache(ttl=100.0, max_entries=max_entries, clock=clock))
    walking: dict[int, tuple[Query, ListOptions, int]] = {}
    started = 0
    for _ in range(20):
        for op, arg in data.draw(st.lists(changes, min_size=1, max_size=3), label="changes"):
            if op == "put":
                for obj in arg:
                    informer.put(obj)
            elif op == "delete":
                keys = list(informer.store.sorted_keys())
                for i in arg:
                    if keys:
                        informer.delete(keys[i % len(keys)])
            elif op == "relist":
                informer.relist(arg)
            else:
                clock.now += arg
        if started < 3 and (not walking or data.draw(st.booleans(), label="start")):
            w = data.draw(walks, label="walk")
            walking[started] = (w.query(), w.options(informer.rv), w.limit)
            started += 1
        if not walking:
            break
        for slot in data.draw(st.permutations(sorted(walking)), label="pages of"):
            query, opts, limit = walking.pop(slot)
            got = await serve(res, query, opts)
            assert got == reference(informer, query, opts), opts
            event("refused" if got[0] == 410 else "page")
            following = next_options(got, limit)
            if following is not None:
                walking[slot] = (query, following, limit)
    event(f"states built: {min(res.snapshots.builds, 3)}{'+' if res.snapshots.builds > 3 else ''}")
    assert res.snapshots.entries <= max_entries


async def test_reads_waiting_for_an_rv_wake_as_it_is_reached_and_a_timed_out_one_leaves() -> None:
    informer = FakeInformer()
    resource = served(informer)
    start = informer.rv
    near = asyncio.create_task(resource.wait_for(start + 1, within=5))
    far = asyncio.create_task(resource.wait_for(start + 3, within=5))
    await asyncio.sleep(0)
    informer.put(pod("ns", "a"))  # reaches start + 1 only
    await asyncio.wait_for(near, 5)
    assert not far.done()
    informer.put(pod("ns", "b"))
    informer.put(pod("ns", "c"))
    await asyncio.wait_for(far, 5)
    with pytest.raises(ApiError) as too_large:
        await resource.wait_for(informer.rv + 100, within=0.01)
    assert too_large.value.code == 504
    assert resource._waiting == []  # nothing left behind by the one that timed out


@pytest.mark.parametrize(
    ("kube", "rooted"),
    [(KubeVersion(1, 28), [False, False]), (KUBE_1_32, [True, False]), (KUBE_1_36, [True, True])],
)
async def test_continue_keys_are_rooted_as_the_upstreams_version_roots_them(
    kube: KubeVersion, rooted: list[bool]
) -> None:
    # 1.32 roots a first page's key only; 1.36 every page's, as each answered the differential
    # test's paged lists of pods.
    res = served(filled())

    def upstream() -> KubeVersion:
        return kube

    res.kube_version = upstream
    first = await serve(res, Query(), ListOptions(limit=7))
    second = await serve(res, Query(), ListOptions(limit=7, continue_token=str(first[2])))
    starts = [decode_continue(str(page[2])).start_key for page in (first, second)]
    assert [start.startswith("/") for start in starts] == rooted
