"""The read planner (:mod:`cacheproxy.server.readplan`), row by row: each request, resource state
and progress, and the step it must give (the module's table)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cacheproxy.errors import ApiError
from cacheproxy.kube.listoptions import parse_list_options
from cacheproxy.kube.rv import encode_continue
from cacheproxy.server.readplan import (
    Confirm,
    ForwardRead,
    Probe,
    ReadProgress,
    ReadRequest,
    ReadState,
    Refuse,
    Serve,
    Step,
    WaitFor,
    plan,
)

CURRENT = Serve()
LIVE = ReadState(100, oldest=50, catch_up=0.1, rv_wait=3.0)
"""A resource in the default mode, its watch live, its cache at 100, its log back to 50."""
STRICT = replace(LIVE, mode="strict")
FORWARDING = replace(STRICT, can_forward=True)
CONFIRMING = replace(STRICT, can_confirm=True)
DOWN = replace(LIVE, watch_live=False)
CACHE = replace(LIVE, mode="cache")


def list_of(**query: str) -> ReadRequest:
    return ReadRequest.of("list", parse_list_options({k: [v] for k, v in query.items()}))


def watch_of(**query: str) -> ReadRequest:
    params = {k: [v] for k, v in query.items()}
    return ReadRequest.of("watch", parse_list_options(params, watch=True))


def token(rv: int) -> str:
    return encode_continue(rv, "ns/b\x00")


GET = ReadRequest("get")
LIST = list_of()
WATCH = watch_of()

ROWS: list[tuple[str, ReadRequest, ReadState, ReadProgress, Step]] = [
    # continue tokens
    (
        "continue at the cache's RV",
        list_of(**{"continue": token(100)}),
        LIVE,
        ReadProgress(),
        CURRENT,
    ),
    (
        "continue at an older RV",
        list_of(**{"continue": token(70)}),
        LIVE,
        ReadProgress(),
        Serve(at=70),
    ),
    (
        "continue older than the log",
        list_of(**{"continue": token(40)}),
        LIVE,
        ReadProgress(),
        Refuse("continue_expired"),
    ),
    (
        "continue from a replica ahead",
        list_of(**{"continue": token(120)}),
        LIVE,
        ReadProgress(),
        WaitFor(120, 3.0),
    ),
    (
        "continue from a replica ahead, not reached",
        list_of(**{"continue": token(120)}),
        LIVE,
        ReadProgress(waited=True),
        Refuse("continue_expired"),
    ),
    (
        "continue from upstream's page, forwardable: upstream continues it",
        list_of(**{"continue": token(120)}),
        replace(LIVE, can_forward=True),
        ReadProgress(),
        ForwardRead(),
    ),
    (
        "an inconsistent continue is a most recent read",
        list_of(**{"continue": token(-1)}),
        DOWN,
        ReadProgress(),
        Probe(),
    ),
    # resourceVersion=N, Exact
    (
        "exact at the cache's RV",
        list_of(resourceVersion="100", resourceVersionMatch="Exact"),
        LIVE,
        ReadProgress(),
        CURRENT,
    ),
    (
        "exact at an older RV",
        list_of(resourceVersion="60", resourceVersionMatch="Exact"),
        LIVE,
        ReadProgress(),
        Serve(at=60),
    ),
    (
        "a limit at an RV is exact",
        list_of(resourceVersion="60", limit="5"),
        LIVE,
        ReadProgress(),
        Serve(at=60),
    ),
    (
        "exact older than the log",
        list_of(resourceVersion="10", resourceVersionMatch="Exact"),
        LIVE,
        ReadProgress(),
        Refuse("expired"),
    ),
    (
        "exact newer than the cache waits",
        list_of(resourceVersion="130", resourceVersionMatch="Exact"),
        LIVE,
        ReadProgress(),
        WaitFor(130, 3.0),
    ),
    (
        "exact newer than the cache, not reached",
        list_of(resourceVersion="130", resourceVersionMatch="Exact"),
        LIVE,
        ReadProgress(waited=True),
        Refuse("too_large", 130),
    ),
    # resourceVersion=N, not older than
    ("not older than, reached", list_of(resourceVersion="90"), LIVE, ReadProgress(), CURRENT),
    (
        "not older than, explicit match",
        list_of(resourceVersion="100", resourceVersionMatch="NotOlderThan"),
        LIVE,
        ReadProgress(),
        CURRENT,
    ),
    ("a get at a reached RV", ReadRequest("get", "99"), LIVE, ReadProgress(), CURRENT),
    (
        "not older than, not reached: wait rv_wait",
        list_of(resourceVersion="120"),
        LIVE,
        ReadProgress(),
        WaitFor(120, 3.0),
    ),
    (
        "not older than, not reached: then 504",
        list_of(resourceVersion="120"),
        LIVE,
        ReadProgress(waited=True),
        Refuse("too_large", 120),
    ),
    (
        "not older than, forwardable: wait catch_up",
        list_of(resourceVersion="120"),
        replace(LIVE, can_forward=True),
        ReadProgress(),
        WaitFor(120, 0.1),
    ),
    (
        "not older than, forwardable: then forward as asked (upstream's own rule)",
        ReadRequest("get", "120"),
        replace(LIVE, can_forward=True),
        ReadProgress(waited=True),
        ForwardRead(),
    ),
    (
        "exact newer than the cache, forwardable: forwarded as asked",
        list_of(resourceVersion="130", resourceVersionMatch="Exact"),
        replace(LIVE, can_forward=True),
        ReadProgress(waited=True),
        ForwardRead(),
    ),
    (
        "a watch from a newer RV waits for its events",
        watch_of(resourceVersion="120"),
        LIVE,
        ReadProgress(),
        CURRENT,
    ),
    (
        "a watch-list from a newer RV waits for its state",
        watch_of(
            resourceVersion="120",
            sendInitialEvents="true",
            resourceVersionMatch="NotOlderThan",
            allowWatchBookmarks="true",
        ),
        replace(LIVE, can_forward=True),
        ReadProgress(),
        WaitFor(120, 3.0),
    ),
    (
        "a watch-list from a newer RV, not reached, is the 504 (never forwarded)",
        watch_of(
            resourceVersion="120",
            sendInitialEvents="true",
            resourceVersionMatch="NotOlderThan",
            allowWatchBookmarks="true",
        ),
        replace(LIVE, can_forward=True),
        ReadProgress(waited=True),
        Refuse("too_large", 120),
    ),
    # resourceVersion="0"
    ("RV 0 is the cache as it is", list_of(resourceVersion="0"), STRICT, ReadProgress(), CURRENT),
    ("a get at RV 0", ReadRequest("get", "0"), DOWN, ReadProgress(), CURRENT),
    ("a watch at RV 0", watch_of(resourceVersion="0"), STRICT, ReadProgress(), CURRENT),
    # unset: cache mode
    ("cache mode serves at once", LIST, CACHE, ReadProgress(), CURRENT),
    ("cache mode ignores writes", GET, replace(CACHE, written=120), ReadProgress(), CURRENT),
    # unset: live mode
    ("live, watch live", LIST, LIVE, ReadProgress(), CURRENT),
    ("live get", GET, LIVE, ReadProgress(), CURRENT),
    ("live watch", WATCH, LIVE, ReadProgress(), CURRENT),
    (
        "live, a write through the daemon ahead of the cache",
        GET,
        replace(LIVE, written=110),
        ReadProgress(),
        WaitFor(110, 1.0, write=True),
    ),
    ("live, a write the cache holds", LIST, replace(LIVE, written=90), ReadProgress(), CURRENT),
    (
        "live, the write's event did not come: the live cache",
        LIST,
        replace(LIVE, written=110),
        ReadProgress(waited_for_write=True),
        CURRENT,
    ),
    ("live, watch down: a proof", LIST, DOWN, ReadProgress(), Probe()),
    (
        "live, watch down, a get forwarded",
        GET,
        replace(DOWN, can_forward=True),
        ReadProgress(),
        ForwardRead(),
    ),
    (
        "live, watch down, a write first",
        LIST,
        replace(DOWN, written=110),
        ReadProgress(),
        WaitFor(110, 1.0, write=True),
    ),
    # unset: strict
    (
        "strict ignores the write shortcut",
        LIST,
        replace(STRICT, written=110),
        ReadProgress(),
        Probe(),
    ),
    ("strict get is forwarded", GET, FORWARDING, ReadProgress(), ForwardRead()),
    ("strict get, not forwardable: probe", GET, STRICT, ReadProgress(), Probe()),
    ("strict list: probe", LIST, FORWARDING, ReadProgress(), Probe()),
    ("strict list, reached", LIST, FORWARDING, ReadProgress(probed=100), CURRENT),
    (
        "strict list, behind: wait catch_up",
        LIST,
        FORWARDING,
        ReadProgress(probed=105),
        WaitFor(105, 0.1),
    ),
    (
        "strict list, still behind: forward",
        LIST,
        FORWARDING,
        ReadProgress(probed=105, waited=True),
        ForwardRead(),
    ),
    (
        "strict list, quiet: forward at once",
        LIST,
        replace(FORWARDING, quiet=True),
        ReadProgress(),
        ForwardRead(),
    ),
    (
        "strict list, quiet, not forwardable: confirm",
        LIST,
        replace(CONFIRMING, quiet=True),
        ReadProgress(),
        Confirm(),
    ),
    (
        "strict list, behind, confirmable: wait catch_up",
        LIST,
        CONFIRMING,
        ReadProgress(probed=105),
        WaitFor(105, 0.1),
    ),
    (
        "strict list, still behind: confirm at the probed RV",
        LIST,
        CONFIRMING,
        ReadProgress(probed=105, waited=True),
        Confirm(105),
    ),
    (
        "strict list, confirmed",
        LIST,
        CONFIRMING,
        ReadProgress(probed=105, waited=True, confirmed=True),
        CURRENT,
    ),
    (
        "strict list, confirmation failed",
        LIST,
        CONFIRMING,
        ReadProgress(probed=105, waited=True, failed="upstream could not be asked"),
        Serve(warning="upstream could not be asked"),
    ),
    (
        "strict, nothing to confirm with: wait it out",
        LIST,
        STRICT,
        ReadProgress(probed=105),
        WaitFor(105, None),
    ),
    (
        "strict, nothing to confirm with, timed out",
        LIST,
        STRICT,
        ReadProgress(probed=105, waited=True),
        Serve(warning="the cache is at resourceVersion 100, upstream at 105"),
    ),
    (
        "strict, timed out, on_timeout error",
        LIST,
        replace(STRICT, on_timeout="error"),
        ReadProgress(probed=105, waited=True),
        Refuse("timeout", why="the cache is at resourceVersion 100, upstream at 105"),
    ),
    (
        "strict, the probe failed",
        LIST,
        FORWARDING,
        ReadProgress(failed="no answer"),
        Serve(warning="no answer"),
    ),
    ("strict watch: probe (never forwarded)", WATCH, FORWARDING, ReadProgress(), Probe()),
    (
        "strict watch, quiet: confirm",
        WATCH,
        replace(FORWARDING, quiet=True, can_confirm=True),
        ReadProgress(),
        Confirm(),
    ),
    (
        "strict watch, behind: confirm",
        WATCH,
        replace(FORWARDING, can_confirm=True),
        ReadProgress(probed=105, waited=True),
        Confirm(105),
    ),
]


@pytest.mark.parametrize(
    ("read", "state", "done", "step"),
    [row[1:] for row in ROWS],
    ids=[row[0] for row in ROWS],
)
def test_the_planner_answers_each_row_of_the_contract(
    read: ReadRequest, state: ReadState, done: ReadProgress, step: Step
) -> None:
    assert plan(read, state, done) == step


def test_a_continue_with_a_resource_version_is_the_api_servers_400() -> None:
    opts = parse_list_options({"continue": [token(70)], "resourceVersion": ["70"]})
    with pytest.raises(ApiError) as refused:
        ReadRequest.of("list", opts)
    assert refused.value.code == 400


def test_which_reads_are_most_recent() -> None:
    assert LIST.most_recent and GET.most_recent and WATCH.most_recent
    assert list_of(**{"continue": token(-1)}).most_recent
    assert not list_of(resourceVersion="0").most_recent
    assert not list_of(**{"continue": token(70)}).most_recent
    assert not ReadRequest("get", "5").most_recent
