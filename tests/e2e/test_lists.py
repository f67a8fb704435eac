"""Lists through the daemon against lists of the real API server: the same items in the same order."""

from __future__ import annotations

import httpx

from tests.e2e.support import DEMO, converged


async def test_a_list_of_every_pod_has_the_api_servers_items_in_its_order(
    upstream: httpx.AsyncClient, proxy: httpx.AsyncClient
) -> None:
    up, down = await converged(upstream, proxy, "/api/v1/pods")
    assert len(up["items"]) == DEMO.pods
    assert down["kind"] == "PodList" and down["apiVersion"] == "v1"
