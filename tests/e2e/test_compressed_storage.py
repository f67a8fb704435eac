"""Compressed storage against the real API server: a daemon keeping ConfigMaps compressed trains
its dictionary on the objects the API server sends, then answers lists, GETs and watches with
what the API server holds (without ``managedFields``, the default transform)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import orjson

from cacheproxy.envtest import Cluster
from cacheproxy.informer.store import PackedEntry
from cacheproxy.kube.resources import builtin
from tests.e2e.support import converged, create, daemon_over, fresh_namespace, merge_patch

CONFIGMAPS = 48
"""Past the 32 objects and the 64 KiB a dictionary needs at least."""


async def test_a_compressed_store_answers_what_the_api_server_holds(
    cluster: Cluster, upstream: httpx.AsyncClient, tmp_path: Path
) -> None:
    storage = {"compressed": True, "trainingBytes": 65_536}
    resources = [{"resource": "configmaps", "storage": storage}]
    async with (
        daemon_over(cluster, tmp_path, resources=resources) as daemon,
        httpx.AsyncClient(base_url=daemon.url, timeout=30) as proxy,
    ):
        namespace = await fresh_namespace(upstream, "packed")
        path = f"/api/v1/namespaces/{namespace}/configmaps"
        # Made after the first list: the store trains on objects its watch brings.
        await asyncio.gather(
            *(
                create(
                    upstream,
                    path,
                    {"metadata": {"name": f"cm-{i:02d}"}, "data": {"d": f"{i}-" + "y" * 3000}},
                )
                for i in range(CONFIGMAPS)
            )
        )
        up, down = await converged(upstream, proxy, path)
        assert len(down["items"]) >= CONFIGMAPS
        assert daemon.server is not None
        store = daemon.server.resources[builtin("configmaps")].informer.store
        assert store.packer is not None and store.packer.ready
        ours = [e for e in store.entries() if e.namespace == namespace]
        assert ours and all(isinstance(e, PackedEntry) for e in ours)
        status = orjson.loads((await proxy.get("/status")).content)["resources"]["configmaps"]
        assert (
            status["storage"]["trained"] and 0 < status["storage"]["packedBytes"] < status["bytes"]
        )

        # A change after training: its watch event is packed as it is stored.
        await merge_patch(upstream, f"{path}/cm-07", {"data": {"d": "changed"}})
        up, down = await converged(upstream, proxy, path)
        for theirs, mine in zip(up["items"], down["items"], strict=True):
            theirs["metadata"].pop("managedFields", None)
            assert mine == theirs
        got = (await proxy.get(f"{path}/cm-07")).json()
        assert got["data"] == {"d": "changed"}
