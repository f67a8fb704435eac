"""kubectl parity: every kind in ``k8s-samples/tables`` through the daemon looks as it did against
the API server.

The simulator is loaded with the objects the samples were rendered from (``list_*.json``, their
creation times kept); the daemon caches every kind, the CRD ``widgets.example.com`` included (its
``additionalPrinterColumns`` drive the widgets' Table). Then:

- the daemon's Table for each kind equals the sample Table (column definitions exactly; cells
  exactly except age-like ones, which depend on when they are rendered);
- ``kubectl get`` and ``kubectl get -o wide`` with the oldest and the newest pinned kubectl print
  the sample text (``kubectl_*.txt``), column by column, again apart from age-like values;
- ``kubectl get -w`` prints a row for an object created while it watches.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from cacheproxy.daemon.config import ResourceConfig
from cacheproxy.daemon.runtime import Daemon
from cacheproxy.kube.resources import ResourceType, builtin
from cacheproxy.sim import SimConfig, SimServer, Simulator
from tests.integration.clients import kubectl_binary, run_kubectl, start_kubectl
from tests.integration.daemon_support import daemon_for

pytestmark = pytest.mark.kubectl

WIDGETS = ResourceType("example.com", "v1", "widgets", "Widget", namespaced=True)
TABLE_ACCEPT = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,"
    "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
)

SAMPLED = SimConfig(git_version="v1.28.7")
"""The samples are kube-apiserver 1.28's: the simulator (and so the daemon) answers as that."""


# sample stem → (resource, API path of the list, kubectl arguments, kubectl_*.txt suffix)
KINDS: dict[str, tuple[ResourceType, str, tuple[str, ...], str]] = {
    "api_v1_namespaces": (
        builtin("namespaces"),
        "/api/v1/namespaces",
        ("namespaces",),
        "namespaces",
    ),
    "api_v1_nodes": (builtin("nodes"), "/api/v1/nodes", ("nodes",), "nodes"),
    "apis_apiextensions.k8s.io_v1_customresourcedefinitions": (
        builtin("apiextensions.k8s.io/v1/customresourcedefinitions"),
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        ("crd",),
        "crd",
    ),
}
for _stem, _resource, _args, _txt in (
    ("api_v1_namespaces_tables_pods", "pods", ("pods",), "pods"),
    ("api_v1_namespaces_tables_configmaps", "configmaps", ("configmaps",), "configmaps"),
    ("api_v1_namespaces_tables_secrets", "secrets", ("secrets",), "secrets"),
    ("api_v1_namespaces_tables_serviceaccounts", "serviceaccounts", ("sa",), "serviceaccounts"),
    ("api_v1_namespaces_tables_services", "services", ("services",), "services"),
    ("api_v1_namespaces_tables_persistentvolumeclaims", "persistentvolumeclaims", ("pvc",), "pvc"),
    ("api_v1_namespaces_tables_events", "events", ("events",), "events"),
    (
        "apis_apps_v1_namespaces_tables_deployments",
        "apps/v1/deployments",
        ("deploy",),
        "deployments",
    ),
    (
        "apis_apps_v1_namespaces_tables_statefulsets",
        "apps/v1/statefulsets",
        ("sts",),
        "statefulsets",
    ),
    ("apis_apps_v1_namespaces_tables_daemonsets", "apps/v1/daemonsets", ("ds",), "daemonsets"),
    ("apis_batch_v1_namespaces_tables_jobs", "batch/v1/jobs", ("jobs",), "jobs"),
    ("apis_batch_v1_namespaces_tables_cronjobs", "batch/v1/cronjobs", ("cronjobs",), "cronjobs"),
):
    _rtype = builtin(_resource)
    KINDS[_stem] = (_rtype, f"{_rtype.collection_path('tables')}", (*_args, "-n", "tables"), _txt)
KINDS["apis_example.com_v1_namespaces_tables_widgets"] = (
    WIDGETS,
    "/apis/example.com/v1/namespaces/tables/widgets",
    ("widgets", "-n", "tables"),
    "widgets",
)

AGE_LIKE = {"age", "last seen", "first seen", "last schedule", "duration"}
DURATION = re.compile(r"<unknown>|<invalid>|\d+[smhdy](\d+[smhd])?")
AGO = re.compile(r" \(\S+ ago\)")


def load_samples(samples_dir: Path, sim: Simulator) -> None:
    objects: list[tuple[str, dict[str, Any]]] = []
    existing = {name for _, name in sim.store.names(sim.resource("namespaces"))}
    for stem, (rtype, _path, _args, _txt) in KINDS.items():
        listed = orjson.loads((samples_dir / "tables" / f"list_{stem}.json").read_bytes())
        for item in listed["items"]:
            meta = {
                k: v
                for k, v in item["metadata"].items()
                if k not in ("resourceVersion", "uid", "managedFields", "generation")
            }
            if rtype.resource == "namespaces" and meta["name"] in existing:
                continue
            api_version = f"{rtype.group}/{rtype.version}" if rtype.group else rtype.version
            obj = {**item, "apiVersion": api_version, "kind": rtype.kind, "metadata": meta}
            objects.append((rtype.config_name, obj))
    # Namespaces first, the CRD before its custom resources: the order the cluster had.
    objects.sort(key=lambda o: (o[0] != "namespaces", o[0] == WIDGETS.config_name))
    sim.load(objects, as_captured=True)


@pytest.fixture
async def daemon(samples_dir: Path) -> AsyncIterator[Daemon]:
    sim = Simulator(config=SAMPLED, custom_resources=[WIDGETS])
    load_samples(samples_dir, sim)
    resources = tuple(ResourceConfig(rtype=rtype) for rtype, *_ in KINDS.values())
    async with SimServer(sim) as server, daemon_for(server.url, resources=resources) as d:
        yield d


def same_cell(column: str, mine: Any, theirs: Any) -> bool:
    if mine == theirs:
        return True
    if column.lower() in AGE_LIKE:
        return bool(DURATION.fullmatch(str(mine)) and DURATION.fullmatch(str(theirs)))
    if column.lower() == "restarts":
        return AGO.sub("", str(mine)) == AGO.sub("", str(theirs))
    return False


async def test_tables_equal_the_samples(daemon: Daemon, samples_dir: Path) -> None:
    differences: list[str] = []
    async with httpx.AsyncClient(base_url=daemon.url, timeout=10) as c:
        for stem, (_rtype, path, _args, _txt) in KINDS.items():
            expected = orjson.loads((samples_dir / "tables" / f"table_{stem}.json").read_bytes())
            response = await c.get(path, headers={"Accept": TABLE_ACCEPT})
            assert response.status_code == 200, (stem, response.text)
            got = response.json()
            assert got["kind"] == "Table", stem
            if got["columnDefinitions"] != expected["columnDefinitions"]:
                differences.append(f"{stem}: column definitions differ")
                continue
            names = [c["name"] for c in got["columnDefinitions"]]
            rows = {r["object"]["metadata"]["name"]: r["cells"] for r in got["rows"]}
            want = {r["object"]["metadata"]["name"]: r["cells"] for r in expected["rows"]}
            if set(rows) != set(want):
                differences.append(f"{stem}: rows {sorted(rows)} != {sorted(want)}")
                continue
            for name, cells in want.items():
                for column, mine, theirs in zip(names, rows[name], cells, strict=True):
                    if not same_cell(column, mine, theirs):
                        differences.append(f"{stem} {name} {column}: {mine!r} != {theirs!r}")
    assert differences == []
    assert len(KINDS) == 16


def kubectl_grid(text: str) -> list[list[str]]:
    """kubectl's aligned output as cells: each column starts where its header starts."""
    lines = [line for line in text.splitlines() if line.strip()]
    header = lines[0]
    starts = [m.start() for m in re.finditer(r"(?:^|(?<=\s\s))\S", header)]
    bounds = list(zip(starts, [*starts[1:], None], strict=True))
    return [[line[a:b].strip() for a, b in bounds] for line in lines]


def compare_text(label: str, mine: str, theirs: str) -> list[str]:
    got, want = kubectl_grid(mine), kubectl_grid(theirs)
    if got[0] != want[0]:
        return [f"{label}: header {got[0]} != {want[0]}"]
    if len(got) != len(want):
        return [f"{label}: {len(got) - 1} rows, the sample has {len(want) - 1}"]
    return [
        f"{label} row {i} {column}: {a!r} != {b!r}"
        for i, (row, sample_row) in enumerate(zip(got[1:], want[1:], strict=True), 1)
        for column, a, b in zip(got[0], row, sample_row, strict=True)
        if not same_cell(column, a, b)
    ]


@pytest.mark.parametrize("version", ["1.27", "1.33"])
async def test_kubectl_prints_the_sample_text(
    daemon: Daemon, samples_dir: Path, tmp_path: Path, version: str
) -> None:
    kubectl = kubectl_binary(version)
    # Fill kubectl's discovery cache once, then run every command against it at once.
    code, _out, err = await run_kubectl(kubectl, daemon.url, tmp_path, "api-resources")
    assert code == 0, err
    runs: list[tuple[str, str, tuple[str, ...]]] = [
        (f"kubectl{wide}_{txt}.txt", txt, (*args, *(("-o", "wide") if wide else ())))
        for _rtype, _path, args, txt in KINDS.values()
        for wide in ("", "_wide")
    ]
    results = await asyncio.gather(
        *(run_kubectl(kubectl, daemon.url, tmp_path, "get", *args) for _f, _t, args in runs)
    )
    differences: list[str] = []
    for (sample, _txt, args), (code, out, err) in zip(runs, results, strict=True):
        assert code == 0, (args, err)
        assert "Unable to decode" not in err
        theirs = (samples_dir / "tables" / sample).read_text()
        differences += compare_text(f"{version} {sample}", out, theirs)
    assert differences == []
    assert len(runs) == 32


@pytest.mark.parametrize("version", ["1.27", "1.33"])
async def test_kubectl_get_watch_prints_rows_as_events_arrive(
    daemon: Daemon, tmp_path: Path, version: str
) -> None:
    kubectl = kubectl_binary(version)
    proc = await start_kubectl(
        kubectl,
        daemon.url,
        tmp_path,
        "get",
        "configmaps",
        "-n",
        "tables",
        "-w",
    )
    assert proc.stdout is not None
    try:

        async def line() -> str:
            assert proc.stdout is not None
            return (await asyncio.wait_for(proc.stdout.readline(), 20)).decode()

        header = await line()
        assert re.split(r"\s{2,}", header.strip()) == ["NAME", "DATA", "AGE"]
        assert re.split(r"\s+", (await line()).strip())[0] == "settings"
        sim_url = daemon.upstream.server
        async with httpx.AsyncClient(base_url=sim_url, timeout=10) as c:
            created = await c.post(
                "/api/v1/namespaces/tables/configmaps",
                json={"metadata": {"name": f"new-{version}"}, "data": {"a": "1", "b": "2"}},
            )
            assert created.status_code == 201, created.text
        row = re.split(r"\s{2,}", (await line()).strip())
        assert row[:2] == [f"new-{version}", "2"]
        assert DURATION.fullmatch(row[2])
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()


async def test_custom_resource_columns_follow_their_crd(samples_dir: Path) -> None:
    """Without a readable CRD the widgets get the CRD default (Name, Age); once the CRD exists,
    its printer columns; after a CRD update, the new ones — without restarting anything."""
    sim = Simulator(config=SAMPLED, custom_resources=[WIDGETS])
    sim.load([("namespaces", {"metadata": {"name": "tables"}})])
    sim.load([(WIDGETS.config_name, {"metadata": {"name": "w1", "namespace": "tables"}, "spec": {"size": 3, "color": "red"}})])  # fmt: skip
    definition = orjson.loads(
        (
            samples_dir
            / "tables"
            / "list_apis_apiextensions.k8s.io_v1_customresourcedefinitions.json"
        ).read_bytes()
    )["items"][0]
    definition["metadata"] = {"name": definition["metadata"]["name"]}
    resources = (ResourceConfig(rtype=WIDGETS),)
    async with (
        SimServer(sim) as server,
        daemon_for(server.url, resources=resources) as d,
        httpx.AsyncClient(base_url=d.url, timeout=10) as c,
    ):

        async def columns() -> list[str]:
            got = await c.get(KINDS["apis_example.com_v1_namespaces_tables_widgets"][1], headers={"Accept": TABLE_ACCEPT})  # fmt: skip
            return [col["name"] for col in got.json()["columnDefinitions"]]

        async def eventually(expected: list[str]) -> None:
            for _ in range(100):
                if await columns() == expected:
                    return
                await asyncio.sleep(0.05)
            assert await columns() == expected

        assert await columns() == ["Name", "Age"]
        crds = sim.resource("customresourcedefinitions")
        sim.store.create(crds, definition)
        await eventually(["Name", "Size", "Color", "Age"])
        stored = copy.deepcopy(sim.store.get(crds, "", definition["metadata"]["name"]))
        assert stored is not None
        stored["spec"]["versions"][0]["additionalPrinterColumns"].pop(1)
        sim.store.update(crds, stored)
        await eventually(["Name", "Size", "Age"])
