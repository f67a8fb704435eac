"""One endpoint: what the cache does not answer passes through to the simulator as its caller sent
it, and the simulator's answer comes back — writes, subresources, uncached resources and their
watches, discovery — with the caller's identity, never the daemon's; reads after a write through
the daemon see it without asking upstream; real kubectl drives it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import orjson
import pytest

from cacheproxy.daemon.config import AuthMode, AuthSettings, ResourceConfig
from cacheproxy.daemon.runtime import Daemon
from cacheproxy.kube.resources import builtin
from cacheproxy.sim import SimConfig, SimServer, Simulator
from cacheproxy.sim.policy import Policy
from cacheproxy.upstream import TokenSource, UpstreamConfig
from tests.integration.clients import run_kubectl
from tests.integration.daemon_support import daemon_for
from tests.support import until

CONFIGMAPS = "/api/v1/namespaces/ns-0/configmaps"


def _without_volatile(body: dict[str, object]) -> dict[str, object]:
    meta = dict(body.get("metadata", {}))  # type: ignore[call-overload]
    for key in ("uid", "resourceVersion", "creationTimestamp", "managedFields"):
        meta.pop(key, None)
    return {**body, "metadata": meta}


async def test_writes_of_every_kind_pass_through_and_get_upstreams_answers(
    both: tuple[httpx.AsyncClient, httpx.AsyncClient], demo_sim: Simulator
) -> None:
    proxy, upstream = both
    created = await proxy.post(CONFIGMAPS, json={"metadata": {"name": "w"}, "data": {"a": "1"}})
    assert created.status_code == 201, created.text
    assert demo_sim.store.get(demo_sim.resource("configmaps"), "ns-0", "w") is not None
    # The same request straight to upstream: the same answer but for what a create makes anew.
    direct = await upstream.post(CONFIGMAPS, json={"metadata": {"name": "w2"}, "data": {"a": "1"}})
    assert _without_volatile(created.json()) == {
        **_without_volatile(direct.json()),
        "metadata": {**_without_volatile(direct.json())["metadata"], "name": "w"},  # type: ignore[dict-item]
    }
    again = await proxy.post(CONFIGMAPS, json={"metadata": {"name": "w"}})
    assert again.status_code == 409
    assert (
        again.json() == (await upstream.post(CONFIGMAPS, json={"metadata": {"name": "w"}})).json()
    )
    body = created.json()
    body["data"] = {"a": "2"}
    updated = await proxy.put(f"{CONFIGMAPS}/w", json=body)
    assert (updated.status_code, updated.json()["data"]) == (200, {"a": "2"})
    for ctype, patch, data in [
        ("application/merge-patch+json", b'{"data":{"b":"3"}}', {"a": "2", "b": "3"}),
        ("application/strategic-merge-patch+json", b'{"data":{"c":"4"}}', {"a": "2", "b": "3", "c": "4"}),
        ("application/json-patch+json", b'[{"op":"remove","path":"/data/a"}]', {"b": "3", "c": "4"}),
    ]:  # fmt: skip
        patched = await proxy.patch(
            f"{CONFIGMAPS}/w", content=patch, headers={"Content-Type": ctype}
        )
        assert (patched.status_code, patched.json()["data"]) == (200, data), ctype
    # A patch type the simulator does not take: its own 415, passed on.
    apply = b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: w}\n"
    headers = {"Content-Type": "application/apply-patch+yaml"}
    mine = await proxy.patch(f"{CONFIGMAPS}/w", content=apply, headers=headers)
    theirs = await upstream.patch(f"{CONFIGMAPS}/w", content=apply, headers=headers)
    assert (mine.status_code, mine.content) == (theirs.status_code, theirs.content)
    deleted = await proxy.delete(f"{CONFIGMAPS}/w")
    assert deleted.status_code == 200
    assert demo_sim.store.get(demo_sim.resource("configmaps"), "ns-0", "w") is None
    collection = await proxy.delete(CONFIGMAPS, params={"labelSelector": "nothing=here"})
    assert collection.status_code == 200
    assert collection.json()["items"] == []


async def test_subresources_and_uncached_resources_pass_through(
    both: tuple[httpx.AsyncClient, httpx.AsyncClient],
) -> None:
    proxy, upstream = both
    pod = (await upstream.get("/api/v1/namespaces/ns-0/pods")).json()["items"][0]
    name = pod["metadata"]["name"]
    status = await proxy.get(f"/api/v1/namespaces/ns-0/pods/{name}/status")
    assert status.status_code == 200
    assert (
        status.json() == (await upstream.get(f"/api/v1/namespaces/ns-0/pods/{name}/status")).json()
    )
    pod["status"]["message"] = "through the proxy"
    put = await proxy.put(f"/api/v1/namespaces/ns-0/pods/{name}/status", json=pod)
    assert put.status_code == 200 and put.json()["status"]["message"] == "through the proxy"
    for path in ("/api/v1/secrets", "/api/v1/nodes", "/apis/apps/v1/replicasets", "/api/v1/nope"):
        mine, theirs = await proxy.get(path), await upstream.get(path)
        assert (mine.status_code, mine.json()) == (theirs.status_code, theirs.json()), path


async def test_a_watch_of_an_uncached_resource_delivers_every_event(
    both: tuple[httpx.AsyncClient, httpx.AsyncClient], daemon: Daemon
) -> None:
    proxy, upstream = both
    rv = (await upstream.get("/api/v1/secrets")).json()["metadata"]["resourceVersion"]
    names = [f"s-{i}" for i in range(20)]
    seen: list[tuple[str, str]] = []
    async with proxy.stream(
        "GET", "/api/v1/secrets", params={"watch": "1", "resourceVersion": rv}
    ) as watch:
        assert watch.status_code == 200
        for name in names:
            made = await upstream.post(
                "/api/v1/namespaces/ns-0/secrets", json={"metadata": {"name": name}}
            )
            assert made.status_code == 201
        async for line in watch.aiter_lines():
            event = orjson.loads(line)
            seen.append((event["type"], event["object"]["metadata"]["name"]))
            if len(seen) == len(names):
                break
    assert seen == [("ADDED", name) for name in names]
    assert daemon.server is not None and daemon.server.passthrough is not None
    passthrough = daemon.server.passthrough
    await until(lambda: passthrough.long_running == 0, "the forwarded watch ended")
    metrics = (await proxy.get("/metrics")).text
    assert (
        'cacheproxy_passthrough_requests_total{code="200",resource="secrets",verb="watch"} 1.0'
        in metrics
    )
    assert (
        'cacheproxy_passthrough_requests_total{code="201",resource="secrets",verb="create"}'
        not in metrics
    )


async def test_discovery_is_upstreams_and_the_caches_own_when_upstream_is_down(
    demo_server: SimServer,
) -> None:
    async with (
        daemon_for(demo_server.url) as daemon,
        httpx.AsyncClient(base_url=daemon.url, timeout=10) as proxy,
        httpx.AsyncClient(base_url=demo_server.url, timeout=10) as upstream,
    ):
        for path in ("/api", "/api/v1", "/apis", "/apis/apps/v1"):
            assert (await proxy.get(path)).json() == (await upstream.get(path)).json(), path
        await demo_server.stop()
        try:
            core = (await proxy.get("/api/v1")).json()
            assert sorted(r["name"] for r in core["resources"]) == [
                "configmaps",
                "namespaces",
                "pods",
            ]
            assert {tuple(r["verbs"]) for r in core["resources"]} == {("get", "list", "watch")}
            write = await proxy.post(CONFIGMAPS, json={"metadata": {"name": "x"}})
            assert write.status_code == 503
            assert write.json()["reason"] == "ServiceUnavailable"
            assert f"cannot reach the API server at {demo_server.url}" in write.json()["message"]
            # Reads of what is cached still come from the cache.
            assert (await proxy.get("/api/v1/pods")).status_code == 200
        finally:
            await demo_server.start()


POLICY = {
    "users": [
        {"name": "cacheproxy", "token": "daemon-token", "groups": ["system:masters"]},
        {"name": "admin", "token": "admin-token", "groups": ["system:masters"]},
        {"name": "reader", "token": "reader-token", "groups": ["readers"]},
    ],
    "rules": [
        {
            "name": "cluster-reader",
            "subjects": [{"kind": "Group", "name": "readers"}],
            "verbs": ["get", "list", "watch"],
            "apiGroups": ["*"],
            "resources": ["*"],
        }
    ],
}


@pytest.mark.parametrize("mode", [AuthMode.NONE, AuthMode.DELEGATED])
async def test_a_forwarded_request_carries_its_callers_identity_never_the_daemons(
    mode: AuthMode,
) -> None:
    sim = Simulator(config=SimConfig(policy=Policy.from_mapping(POLICY)))
    async with (
        SimServer(sim) as server,
        daemon_for(
            server.url,
            resources=(ResourceConfig(rtype=builtin("pods")),),
            upstream=UpstreamConfig(
                server=server.url, token_source=TokenSource.static("daemon-token")
            ),
            auth=AuthSettings(mode=mode),
        ) as daemon,
        httpx.AsyncClient(base_url=daemon.url, timeout=10) as proxy,
        httpx.AsyncClient(base_url=server.url, timeout=10) as upstream,
    ):
        who = {"admin-token": "admin", "reader-token": "reader", None: "system:anonymous"}
        for token in ("admin-token", "reader-token", "garbage", None):
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            logged = len(sim.request_log)
            cm = {"metadata": {"name": f"by-{token}"}}
            mine = await proxy.post(
                "/api/v1/namespaces/default/configmaps", json=cm, headers=headers
            )
            theirs = await upstream.post(
                "/api/v1/namespaces/default/configmaps",
                json={"metadata": {"name": f"direct-{token}"}},
                headers=headers,
            )
            assert mine.status_code == theirs.status_code, (token, mine.text)
            if mine.status_code == 201:
                # The simulator's record of who created it.
                [created] = [r for r in list(sim.request_log)[logged:] if r.verb == "create"][:1]
                assert created.user == who[token]
            else:
                # Upstream's own refusal, which names whom it saw.
                assert mine.json() == theirs.json(), token
                if token != "garbage":
                    assert f'User "{who[token]}" cannot create' in mine.json()["message"]
        creators = {r.user for r in sim.request_log if r.verb == "create"}
        assert "cacheproxy" not in creators


async def test_reads_after_a_write_through_the_daemon_see_it_without_asking_upstream(
    daemon: Daemon, proxy: httpx.AsyncClient
) -> None:
    assert daemon.server is not None
    configmaps = daemon.server.resources[builtin("configmaps")]
    assert configmaps.consistency is not None
    stats = configmaps.consistency.stats
    made = await proxy.post(CONFIGMAPS, json={"metadata": {"name": "ryw"}, "data": {"n": "0"}})
    assert made.status_code == 201
    probes = stats.probes
    stale = 0
    for n in range(1, 101):
        update = await proxy.patch(
            f"{CONFIGMAPS}/ryw",
            content=orjson.dumps({"data": {"n": str(n)}}),
            headers={"Content-Type": "application/merge-patch+json"},
        )
        rv = update.json()["metadata"]["resourceVersion"]
        got = (await proxy.get(f"{CONFIGMAPS}/ryw")).json()
        listed = (await proxy.get(CONFIGMAPS)).json()
        mine = [i for i in listed["items"] if i["metadata"]["name"] == "ryw"]
        if got["metadata"]["resourceVersion"] != rv or mine[0]["data"] != {"n": str(n)}:
            stale += 1
    assert stale == 0
    assert stats.probes == probes  # no read after a write asked upstream
    # Each served from the cache: at once when the write's event was in, else once it came.
    assert stats.after_write + stats.live >= 200
    assert stats.forwarded == 0


@pytest.mark.kubectl
async def test_kubectl_writes_through_the_daemon_as_straight_to_upstream(
    kubectl: str, daemon: Daemon, demo_server: SimServer, tmp_path: Path
) -> None:
    async def both(*args: str) -> tuple[tuple[int, str, str], tuple[int, str, str]]:
        for_daemon = [a.replace("{cm}", "via-daemon") for a in args]
        direct = [a.replace("{cm}", "direct") for a in args]
        mine = await run_kubectl(kubectl, daemon.url, tmp_path / "d", *for_daemon)
        theirs = await run_kubectl(kubectl, demo_server.url, tmp_path / "u", *direct)
        return mine, theirs

    for name in ("via-daemon", "direct"):
        (tmp_path / f"{name}.yaml").write_text(
            f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: ns-0}}\n"
            "data: {a: b}\n"
        )
    steps = [
        ("create", "-f", str(tmp_path / "{cm}.yaml")),
        ("label", "configmap", "-n", "ns-0", "{cm}", "team=blue"),
        ("annotate", "configmap", "-n", "ns-0", "{cm}", "note=yes"),
        ("patch", "configmap", "-n", "ns-0", "{cm}", "--type", "merge", "-p", '{"data":{"c":"d"}}'),
        ("patch", "configmap", "-n", "ns-0", "{cm}", "--type", "json", "-p", '[{"op":"remove","path":"/data/a"}]'),
        ("get", "configmap", "-n", "ns-0", "{cm}", "-o", "jsonpath={.data}{.metadata.labels}"),
        ("get", "secrets", "-A"),
        ("delete", "configmap", "-n", "ns-0", "{cm}"),
        ("get", "configmap", "-n", "ns-0", "{cm}"),
    ]  # fmt: skip
    for step in steps:
        mine, theirs = await both(*step)
        assert mine[0] == theirs[0], (step, mine, theirs)
        assert mine[1].replace("via-daemon", "{cm}") == theirs[1].replace("direct", "{cm}"), step
        assert mine[2].replace("via-daemon", "{cm}") == theirs[2].replace("direct", "{cm}"), step
    code, out, err = await run_kubectl(kubectl, daemon.url, tmp_path / "d", "api-resources")
    direct = await run_kubectl(kubectl, demo_server.url, tmp_path / "u", "api-resources")
    assert (code, out) == direct[:2], err


async def test_concurrent_writes_and_reads_do_not_mix_their_answers(
    both: tuple[httpx.AsyncClient, httpx.AsyncClient],
) -> None:
    proxy, _ = both

    async def one(i: int) -> None:
        made = await proxy.post(
            CONFIGMAPS, json={"metadata": {"name": f"c-{i}"}, "data": {"i": str(i)}}
        )
        assert made.json()["data"] == {"i": str(i)}
        secret = await proxy.get(f"/api/v1/namespaces/ns-0/secrets/nope-{i}")
        assert secret.json()["message"] == f'secrets "nope-{i}" not found'

    await asyncio.gather(*(one(i) for i in range(40)))
