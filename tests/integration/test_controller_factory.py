"""cacheproxy.controller.InformerFactory: informers by resource name, over a connection the
factory opens (from a URL or a kubeconfig) and closes, with the selectors sent upstream."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from cacheproxy.controller import InformerFactory
from cacheproxy.sim import SimServer, Simulator


async def test_informers_by_name_sync_with_their_selectors_and_the_factory_closes_its_client(
    demo_server: SimServer, demo_sim: Simulator
) -> None:
    pods_rtype = demo_sim.resource("pods")
    every_pod = [
        demo_sim.store.get(pods_rtype, ns, n) or {} for ns, n in demo_sim.store.names(pods_rtype)
    ]
    namespace = every_pod[0]["metadata"]["namespace"]
    app = every_pod[0]["metadata"]["labels"]["app"]
    async with InformerFactory.from_url(demo_server.url) as factory:
        pods = factory.informer("pods", field_indexes=["spec.nodeName"])
        assert factory.informer("po") is pods  # the same collection, the same informer
        mine = factory.informer("pods", namespace=namespace, labels=f"app={app}")
        deployments = factory.informer("apps/v1/deployments")
        assert await factory.wait_for_cache_sync(within=30)
        client = factory.client
        assert len(pods.store) == len(every_pod)
        expected = {
            f"{p['metadata']['namespace']}/{p['metadata']['name']}"
            for p in every_pod
            if p["metadata"]["namespace"] == namespace and p["metadata"]["labels"].get("app") == app
        }
        assert set(mine.store.keys()) == expected and 0 < len(expected) < len(every_pod)
        assert len(deployments.store) == demo_sim.store.count(demo_sim.resource("deployments"))
        scheduled = [p for p in every_pod if p["spec"].get("nodeName")]
        indexed = pods.store.index_values("spec.nodeName")
        assert sum(map(len, indexed.values())) == len(scheduled)
    assert client.is_closed


async def test_from_kubeconfig_reads_the_server_of_the_context(
    demo_server: SimServer, tmp_path: Path
) -> None:
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "sim", "cluster": {"server": demo_server.url}}],
                "users": [{"name": "nobody", "user": {}}],
                "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": "nobody"}}],
                "current-context": "sim",
            }
        )
    )
    async with InformerFactory.from_kubeconfig(kubeconfig) as factory:
        namespaces = factory.informer("namespaces")
        assert await factory.wait_for_cache_sync(within=30)
        assert len(namespaces.store) > 0
        assert str(factory.client.base_url).rstrip("/") == demo_server.url


async def test_an_unknown_resource_name_says_how_to_name_a_custom_one() -> None:
    async with InformerFactory.from_url("http://127.0.0.1:9") as factory:
        with pytest.raises(ValueError, match=r"not a built-in resource.*ResourceType"):
            factory.informer("gadgets")
        assert list(factory) == []
