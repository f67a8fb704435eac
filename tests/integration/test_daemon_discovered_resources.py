"""Every resource upstream serves with list and watch is cacheable by its name: a kind of the
built-in table (``replicationcontrollers``, ``leases``) at once, any other kind of a built-in
group by ``GROUP/VERSION/PLURAL`` as upstream's discovery describes it — never by watching a
CustomResourceDefinition that cannot exist. A name upstream does not serve stops the daemon at
start with the closest names it does serve; a kind written that discovery contradicts is not
served, and says why."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from cacheproxy.daemon.config import load_config
from cacheproxy.daemon.runtime import Daemon
from cacheproxy.errors import ConfigError
from cacheproxy.kube.resources import ResourceType
from cacheproxy.sim import SimServer, Simulator
from cacheproxy.upstream import UpstreamConfig, served_resources
from tests.support import serving

ROLES = ResourceType(
    "rbac.authorization.k8s.io", "v1", "roles", "Role", namespaced=True, short_names=("ro",)
)
"""A kind of a built-in group outside the built-in table (the simulator serves it when asked)."""
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


def _daemon(tmp_path: Path, url: str, resources: list[Any]) -> Daemon:
    path = tmp_path / "cacheproxy.yaml"
    path.write_text(yaml.safe_dump({"resources": resources, "server": {"port": 0}}))
    return Daemon(load_config(path, env={}), UpstreamConfig(server=url), manage_gc=False)


@pytest.fixture
async def upstream() -> Any:
    sim = Simulator(custom_resources=[ROLES])
    sim.load(
        [
            ("namespaces", {"metadata": {"name": "ns-1"}}),
            (
                "rbac.authorization.k8s.io/v1/roles",
                {"metadata": {"name": "r-1", "namespace": "ns-1"}},
            ),
            (
                "coordination.k8s.io/v1/leases",
                {"metadata": {"name": "l-1", "namespace": "ns-1"}, "spec": {"holderIdentity": "a"}},
            ),
            (
                "replicationcontrollers",
                {
                    "metadata": {"name": "rc-1", "namespace": "ns-1"},
                    "spec": {"replicas": 2, "selector": {"app": "a"}},
                },
            ),
        ]
    )
    async with serving(sim) as both:
        yield both


async def test_built_in_kinds_are_served_by_name_without_a_crd_watch(
    upstream: tuple[SimServer, httpx.AsyncClient], tmp_path: Path
) -> None:
    server, direct = upstream
    names = ["rc", "coordination.k8s.io/v1/leases", "rbac.authorization.k8s.io/v1/roles"]
    async with (
        _daemon(tmp_path, server.url, names) as daemon,
        httpx.AsyncClient(base_url=daemon.url) as proxy,
    ):
        assert await daemon.wait_ready(10)
        assert daemon.crd_factory is not None
        assert list(daemon.crd_factory) == []  # no CustomResourceDefinition is watched
        roles = (await proxy.get("/apis/rbac.authorization.k8s.io/v1/namespaces/ns-1/roles")).json()
        assert (roles["kind"], [i["metadata"]["name"] for i in roles["items"]]) == (
            "RoleList",
            ["r-1"],
        )
        # Discovery says of each what upstream's says, in both forms.
        for path in (
            "/api/v1",
            "/apis/coordination.k8s.io/v1",
            "/apis/rbac.authorization.k8s.io/v1",
        ):
            want = {r["name"]: r for r in (await direct.get(path)).json()["resources"]}
            have = {r["name"]: r for r in (await proxy.get(path)).json()["resources"]}
            for name, entry in have.items():
                if "/" in name:
                    continue  # subresources (``replicationcontrollers/scale``) pass through
                for key in ("kind", "namespaced", "singularName", "shortNames", "categories"):
                    assert entry.get(key) == want[name].get(key), (name, key)
                assert {"get", "list", "watch"} <= set(entry["verbs"]) <= set(want[name]["verbs"])
        async with httpx.AsyncClient(base_url=daemon.url) as client:
            ours = await served_resources(client, verbs=("list", "watch"))
        described = {
            t.config_name: (t.kind, t.short_names) for ts in ours.resources.values() for t in ts
        }
        assert {name: described[name] for name in (*names[1:], "replicationcontrollers")} == {
            "coordination.k8s.io/v1/leases": ("Lease", ()),
            "rbac.authorization.k8s.io/v1/roles": ("Role", ("ro",)),
            "replicationcontrollers": ("ReplicationController", ("rc",)),
        }
        assert ours.aggregated
        # Tables in the API server's columns: the printers where the kind has one, else the
        # default Name and Created At (what the API server prints for Role).
        rc = (
            await proxy.get(
                "/api/v1/namespaces/ns-1/replicationcontrollers", headers={"Accept": TABLE}
            )
        ).json()
        assert [c["name"] for c in rc["columnDefinitions"]][:4] == [
            "Name",
            "Desired",
            "Current",
            "Ready",
        ]
        assert rc["rows"][0]["cells"][:2] == ["rc-1", 2]
        leases = (
            await proxy.get(
                "/apis/coordination.k8s.io/v1/namespaces/ns-1/leases", headers={"Accept": TABLE}
            )
        ).json()
        assert [r["cells"][:2] for r in leases["rows"]] == [["l-1", "a"]]
        role_table = (
            await proxy.get(
                "/apis/rbac.authorization.k8s.io/v1/namespaces/ns-1/roles",
                headers={"Accept": TABLE},
            )
        ).json()
        assert [c["name"] for c in role_table["columnDefinitions"]] == ["Name", "Created At"]
        # A caller with credentials gets upstream's Table of a kind printed nowhere here (some
        # such kinds have columns of their own upstream); those printed here stay the cache's.
        caller = {"Accept": TABLE, "Authorization": "Bearer someone"}
        for path in (
            "/apis/rbac.authorization.k8s.io/v1/namespaces/ns-1/roles",
            "/api/v1/namespaces/ns-1/replicationcontrollers",
        ):
            assert (await proxy.get(path, headers=caller)).status_code == 200
        metrics = (await proxy.get("/metrics")).text
        forwarded = [
            line.split("{")[1].split("}")[0]
            for line in metrics.splitlines()
            if line.startswith("cacheproxy_passthrough_requests_total{") and 'verb="list"' in line
        ]
        assert forwarded == ['code="200",resource="roles.rbac.authorization.k8s.io",verb="list"']


async def test_a_name_upstream_does_not_serve_stops_the_start_naming_the_closest(
    upstream: tuple[SimServer, httpx.AsyncClient], tmp_path: Path
) -> None:
    server, _ = upstream
    daemon = _daemon(tmp_path, server.url, ["pods", "coordination.k8s.io/v1/leasez"])
    with pytest.raises(ConfigError) as raised:
        await daemon.start()
    message = str(raised.value)
    assert "coordination.k8s.io/v1/leasez" in message
    assert "the closest it serves: coordination.k8s.io/v1/leases" in message
    assert "CustomResourceDefinition" not in message  # no CRD serves a built-in group
    # Another version of a served kind: the same plural is named first.
    daemon = _daemon(tmp_path, server.url, ["coordination.k8s.io/v2/leases"])
    with pytest.raises(
        ConfigError,
        match=r"no API group version coordination.k8s.io/v2; the closest it serves: coordination.k8s.io/v1/leases",
    ):
        await daemon.start()


async def test_a_resource_served_without_list_and_watch_is_refused_at_start(
    upstream: tuple[SimServer, httpx.AsyncClient], tmp_path: Path
) -> None:
    server, _ = upstream
    daemon = _daemon(tmp_path, server.url, ["authentication.k8s.io/v1/tokenreviews"])
    with pytest.raises(ConfigError) as raised:
        await daemon.start()
    assert (
        "authentication.k8s.io/v1/tokenreviews: upstream's authentication.k8s.io/v1 has no "
        "resource tokenreviews that may be listed and watched"
    ) in str(raised.value)


async def test_a_kind_written_that_discovery_contradicts_is_not_served_and_says_why(
    upstream: tuple[SimServer, httpx.AsyncClient], tmp_path: Path
) -> None:
    server, _ = upstream
    entry = {
        "resource": "rbac.authorization.k8s.io/v1/roles",
        "kind": "ClusterRole",
        "namespaced": False,
    }
    async with (
        _daemon(tmp_path, server.url, ["pods", entry]) as daemon,
        httpx.AsyncClient(base_url=daemon.url) as proxy,
    ):
        assert not await daemon.wait_ready(1.5)
        pending = (await proxy.get("/status")).json()["pending"]
        assert pending == {
            "rbac.authorization.k8s.io/v1/roles": "the configuration says kind ClusterRole; "
            "upstream's discovery says kind Role (leave kind out to take upstream's)"
        }
        # What is not cached passes through: upstream's 404 Status names what it lacks.
        missing = await proxy.get("/apis/coordination.k8s.io/v1/namespaces/ns-1/leasez")
        assert (missing.status_code, missing.json()["kind"]) == (404, "Status")


async def test_check_config_live_names_what_upstream_does_not_serve(
    upstream: tuple[SimServer, httpx.AsyncClient], tmp_path: Path
) -> None:
    import asyncio

    server, _ = upstream
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        f"apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: "
        f"'{server.url}'}}}}]\nusers: [{{name: u, user: {{}}}}]\ncontexts: [{{name: x, "
        "context: {cluster: c, user: u}}]\ncurrent-context: x\n"
    )
    config = tmp_path / "config.yaml"
    config.write_text(
        "resources: [leases, rbac.authorization.k8s.io/v1/roles, policy/v1/poddisruptionbudgetz]\n"
        f"upstream: {{kubeconfig: '{kubeconfig}'}}\n"
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cacheproxy", "check-config", "--config", str(config), "--live",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 1, (out, err)
    assert "ok   coordination.k8s.io/v1/leases: Lease, namespaced" in out.decode()
    assert "ok   rbac.authorization.k8s.io/v1/roles: Role, namespaced" in out.decode()
    assert (
        "FAIL policy/v1/poddisruptionbudgetz: upstream's policy/v1 has no resource "
        "poddisruptionbudgetz that may be listed and watched; the closest it serves: "
        "policy/v1/poddisruptionbudgets"
    ) in err.decode()
