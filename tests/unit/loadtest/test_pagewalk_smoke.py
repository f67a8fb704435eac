"""loadtest.scenarios.pagewalk at a small scale: a walk at an older RV gives every item of the full list."""

from __future__ import annotations

import math

from loadtest.scenarios.pagewalk import build, measure


async def test_a_walk_at_an_older_rv_covers_the_full_list_in_pages() -> None:
    setup = build(pods=600, events=50)
    assert setup.rv < setup.informer.store.resource_version  # older than the cache
    figures = await measure(setup, limit=100, repeat=1)
    assert [f.query for f in figures] == ["all pods", "app=app-3"]
    for f in figures:
        assert f.items > 0
        assert f.pages == max(1, math.ceil(f.items / 100))
        assert f.full_s > 0 and f.walk_s > 0
