"""Lean list reading against the real API server: a ``resourceVersion=0`` list comes in one
response, whatever ``limit`` says (1.28 to 1.32); reading it must never hold the whole body, nor
its items as dicts all at once."""

from __future__ import annotations

import random
import tracemalloc

import httpx
import orjson

from cacheproxy.envtest import Cluster
from cacheproxy.informer import ListRequest
from cacheproxy.kube.resources import builtin
from cacheproxy.sim.workload.replicapods import make_pod
from cacheproxy.upstream import ApiListerWatcher, build_client, load_kubeconfig
from tests.e2e.support import fresh_namespace

PODS = 1200
"""~10 MB of list: what the reader holds at most besides the items it decodes (a socket read
or two ahead, ~0.5 MB) is then small beside what holding the list whole would take."""


async def test_a_whole_list_in_one_response_is_read_one_item_at_a_time(
    cluster: Cluster, upstream: httpx.AsyncClient
) -> None:
    ns = await fresh_namespace(upstream)
    rng = random.Random(3)
    pods = [
        (
            "pods",
            make_pod(rng, namespace=ns, app=f"app-{i % 4}", node=f"node-{i % 5}", phase="Running"),
        )
        for i in range(PODS)
    ]
    await cluster.load(pods)
    path = f"/api/v1/namespaces/{ns}/pods"
    body = (await upstream.get(path, params={"resourceVersion": "0", "limit": "10"})).content
    assert len(orjson.loads(body)["items"]) == PODS, "one response, limit ignored"

    seen: list[str] = []
    async with build_client(load_kubeconfig(cluster.admin.kubeconfig)) as client:
        lw = ApiListerWatcher(client, builtin("pods"), namespace=ns)
        tracemalloc.start()
        try:
            page = await lw.list(
                ListRequest(resource_version="0", limit=10),
                decode=lambda pod: seen.append(pod["metadata"]["name"]),
            )
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert len(seen) == len(page.items) == PODS
    # Parsed whole, the items alone take ~10x the body; held whole, the body takes 1x.
    assert peak < len(body) / 4, f"peak {peak} bytes while reading a {len(body)}-byte list"
