"""Custom resources as upstream describes them: a configuration may name one by
``GROUP/VERSION/PLURAL`` alone (its kind and scope read from upstream's discovery), and the
daemon's discovery says of every custom resource what upstream's does (short names, categories,
singular name, storage version hash). One that upstream does not serve is named in the logs,
in ``/status`` and ``/readyz``, and served once it appears."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from cacheproxy.daemon.config import load_config
from cacheproxy.daemon.runtime import Daemon
from cacheproxy.kube.resources import ResourceType
from cacheproxy.sim import SimServer, Simulator
from cacheproxy.upstream import UpstreamConfig
from tests.support import serving, until

WIDGETS = ResourceType(
    "example.com",
    "v1",
    "widgets",
    "Widget",
    namespaced=True,
    short_names=("wd", "wdg"),
    categories=("all", "toys"),
)
GADGETS = ResourceType("example.com", "v1", "gadgets", "Gadget", namespaced=False)


def _config(tmp_path: Path, resources: list[Any]) -> Path:
    path = tmp_path / "cacheproxy.yaml"
    path.write_text(yaml.safe_dump({"resources": resources, "server": {"port": 0}}))
    return path


def _daemon(tmp_path: Path, url: str, resources: list[Any]) -> Daemon:
    config = load_config(_config(tmp_path, resources), env={})
    return Daemon(config, UpstreamConfig(server=url), manage_gc=False)


def _by_name(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in doc["resources"]}


@pytest.fixture
async def upstream() -> Any:
    sim = Simulator(custom_resources=[WIDGETS, GADGETS])
    sim.load(
        [
            ("namespaces", {"metadata": {"name": "ns-1"}}),
            ("example.com/v1/widgets", {"metadata": {"name": "w-1", "namespace": "ns-1"}}),
            ("example.com/v1/gadgets", {"metadata": {"name": "g-1"}}),
        ]
    )
    async with serving(sim) as both:
        yield both


async def test_a_custom_resource_named_alone_is_served_as_upstreams_discovery_describes_it(
    upstream: tuple[SimServer, httpx.AsyncClient], tmp_path: Path
) -> None:
    server, direct = upstream
    names = ["example.com/v1/widgets", "example.com/v1/gadgets"]
    async with (
        _daemon(tmp_path, server.url, names) as daemon,
        httpx.AsyncClient(base_url=daemon.url) as proxy,
    ):
        assert await daemon.wait_ready(10)
        want = _by_name((await direct.get("/apis/example.com/v1")).json())
        have = _by_name((await proxy.get("/apis/example.com/v1")).json())
        assert set(have) == {"widgets", "gadgets"}
        for name, entry in have.items():
            keys = ("kind", "namespaced", "singularName", "shortNames", "categories")
            assert {k: entry.get(k) for k in keys} == {k: want[name].get(k) for k in keys}
            assert entry["storageVersionHash"] == want[name]["storageVersionHash"]
        assert have["widgets"]["shortNames"] == ["wd", "wdg"]
        assert have["gadgets"]["namespaced"] is False
        listed = (await proxy.get("/apis/example.com/v1/namespaces/ns-1/widgets")).json()
        assert (listed["kind"], [i["metadata"]["name"] for i in listed["items"]]) == (
            "WidgetList",
            ["w-1"],
        )
        gadgets = (await proxy.get("/apis/example.com/v1/gadgets")).json()
        assert [i["metadata"]["name"] for i in gadgets["items"]] == ["g-1"]


async def test_a_custom_resource_written_with_its_kind_gets_its_discovery_names(
    upstream: tuple[SimServer, httpx.AsyncClient], tmp_path: Path
) -> None:
    server, _ = upstream
    entry = {"resource": "example.com/v1/widgets", "kind": "Widget", "namespaced": True}
    async with (
        _daemon(tmp_path, server.url, [entry]) as daemon,
        httpx.AsyncClient(base_url=daemon.url) as proxy,
    ):
        assert await daemon.wait_ready(10)

        async def short_names() -> Any:
            doc = (await proxy.get("/apis/example.com/v1")).json()
            return _by_name(doc)["widgets"].get("shortNames")

        for _ in range(200):  # described once discovery answered (the first round trip)
            if await short_names() is not None:
                break
            await asyncio.sleep(0.02)
        assert await short_names() == ["wd", "wdg"]


async def test_a_custom_resource_upstream_does_not_serve_is_named_and_served_once_it_is(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sim = Simulator()
    async with serving(sim) as (server, _):
        daemon = _daemon(tmp_path, server.url, ["pods", "example.com/v1/widgets"])
        async with daemon, httpx.AsyncClient(base_url=daemon.url) as proxy:
            assert not await daemon.wait_ready(1.5)
            ready = await proxy.get("/readyz")
            assert ready.status_code == 503
            pending = (await proxy.get("/status")).json()["pending"]
            assert list(pending) == ["example.com/v1/widgets"]
            assert (
                "CustomResourceDefinition widgets.example.com" in pending["example.com/v1/widgets"]
            )
            errors = [r for r in caplog.records if r.levelno == logging.ERROR]
            assert len(errors) == 1  # once, not at every try
            assert "widgets.example.com" in errors[0].getMessage()
            missing = await proxy.get("/apis/example.com/v1/namespaces/ns-1/widgets")
            assert missing.status_code == 404
            # The CRD is installed: served at the next try (within 1 + 2 + 4 s).
            sim.add_custom_resource(WIDGETS)
            await until(lambda: daemon.server is not None and not daemon.server.pending, "served")
            assert await daemon.wait_ready(10)
            listed = await proxy.get("/apis/example.com/v1/widgets")
            assert listed.status_code == 200 and listed.json()["kind"] == "WidgetList"
