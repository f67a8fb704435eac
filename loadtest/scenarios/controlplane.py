"""The Kubernetes control plane direct and through cacheproxy: how long it takes to converge.

``python -m loadtest controlplane [--runs 3] [--restart] [--calibrate] [--out DIR]
[--skip-without-assets]`` runs the scenario of :mod:`cacheproxy.envtest.scenario` (a Deployment
scaled and rolled out, a Job, a DaemonSet, a StatefulSet, Endpoints and EndpointSlices, PDB and
quota status, garbage collection, namespace deletion) with kube-controller-manager, kube-scheduler
(1.36, the newest server folder that has them) and the fake kubelet of
:mod:`cacheproxy.envtest.kubelet`:

- **direct**: the controllers and the kubelet talk to kube-apiserver;
- **through**: they talk to ``cacheproxy serve`` (TLS, the admin's token, caching
  :data:`~cacheproxy.envtest.scenario.CACHED_RESOURCES`) in front of it;
- with ``--calibrate`` also **direct-b**, direct again: the noise that a difference between
  direct and through must exceed to mean something.

The modes alternate (direct, [direct-b,] through, direct, …), ``--runs`` each. Every run gets a
fresh etcd, kube-apiserver (with an audit log, in every mode alike), controllers and kubelet: the
counts of a run (log lines, 409s, CPU) are then its own, with no backlog of an earlier run's
deletions or garbage collection, at ~6 s of start-up per run. The steps are judged on the API
server (the scenario's own client talks to it directly, in every mode).

Per step and in total (medians over the runs): the time to converge; kube-controller-manager's
stale-cache retries and conflicts (its ``-v=2`` log, :data:`~loadtest.harness.controlplane.KCM_SIGNS`);
the 409s the API server answered the controllers and the kubelet (audit log); the latency of
their writes at the API server (audit: received → answered) and, through cacheproxy, at the
daemon (``cacheproxy_passthrough_request_duration_seconds``: arrival → end of answer, upstream
included); established TCP connections per process at the end of the scenario; CPU seconds of
every process over the scenario.

``--restart`` adds, after each through run's scenario, with the controllers running: a Deployment
of 1 available, SIGTERM to the daemon (the time it took to exit), a new daemon on the same port,
then a scale to 10 and the time until its 10 pods are scheduled (as the API server sees them),
and the ERROR lines of the old daemon's log.

Writes ``controlplane.md`` and ``controlplane.json`` to ``--out`` (default
``loadtest/results/<date>-controlplane``). Nothing is asserted; the report says what it saw.
Without a folder with kube-controller-manager it exits 2 (0 with ``--skip-without-assets``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import os
import shlex
import ssl
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import orjson

from cacheproxy.envtest import Assets, Cluster, ControlPlane, FakeKubelet, find_all_assets
from cacheproxy.envtest.convergence import ScenarioRun
from cacheproxy.envtest.scenario import CACHED_RESOURCES, deployment, run_scenario
from cacheproxy.sim.testpki import generate_pki
from loadtest.harness.controlplane import (
    WRITE_VERBS,
    DaemonProcess,
    config_label,
    conflicts,
    error_lines,
    established,
    histogram_buckets,
    histogram_quantile,
    kcm_signs,
    percentile,
    probe_writes,
    write_latencies,
)
from loadtest.harness.processes import cpu_seconds
from loadtest.harness.realcluster import ENVTEST_ROOT, cacheproxy_source
from loadtest.reports.controlplane_report import render_report

NODES = ("node-a", "node-b")
OBSERVER = "controlplane-scenario"
KUBELET = "fake-kubelet"
PROBE = "write-probe"
CONTROLLERS = ("kube-controller-manager", "kube-scheduler")
_PASSTHROUGH = "cacheproxy_passthrough_request_duration_seconds"


def _progress(text: str) -> None:
    print(f"[controlplane] {text}", flush=True)


def _assets() -> Assets | None:
    return next((a for a in reversed(find_all_assets(ENVTEST_ROOT)) if a.has_control_plane), None)


def _client(base_url: str, ca: Path, token: str, agent: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=base_url,
        verify=ssl.create_default_context(cafile=str(ca)),
        headers={"Authorization": f"Bearer {token}", "User-Agent": agent},
        timeout=30.0,
    )


async def _probe(
    cluster: Cluster,
    *,
    server: str | None,
    ca: Path,
    token: str,
    done: asyncio.Event,
) -> dict[str, list[float]]:
    """The write probe, straight to ``cluster`` and, given the daemon's ``server``, through it."""
    async with contextlib.AsyncExitStack() as stack:
        sides = {
            "direct": await stack.enter_async_context(
                _client(cluster.url, cluster.ca_file, token, PROBE)
            )
        }
        if server is not None:
            sides["through"] = await stack.enter_async_context(_client(server, ca, token, PROBE))
        return await probe_writes(sides, done)


async def _wait_for_controllers(observer: httpx.AsyncClient, deadline: float) -> None:
    """Until kube-controller-manager made the ``default`` ServiceAccount of ``default`` and every
    node is Ready: the controllers are up, the scenario may start."""
    while time.monotonic() < deadline:
        sa = await observer.get("/api/v1/namespaces/default/serviceaccounts/default")
        nodes = (await observer.get("/api/v1/nodes")).json().get("items", [])
        ready = [
            n
            for n in nodes
            if any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in n.get("status", {}).get("conditions", [])
            )
        ]
        if sa.status_code == 200 and len(ready) == len(NODES):
            return
        await asyncio.sleep(0.1)
    raise RuntimeError("the controllers did not come up within 60 s")


_CACHED_LABELS = frozenset(map(config_label, CACHED_RESOURCES))
_KINDS: dict[str, Callable[[str], bool]] = {
    "": lambda label: True,
    "_cached": lambda label: label.split("/")[0] in _CACHED_LABELS,
    "_uncached": lambda label: label.split("/")[0] not in _CACHED_LABELS,
}
"""The writes whose latency is reported, by the suffix of their figures: all of them, those on a
resource the daemon caches (its subresources included: ``pods/status``), those on the others."""


def _daemon_writes(before: str, after: str, wanted: Callable[[str], bool]) -> dict[str, float]:
    """p50 and p90 of the daemon's passed-through writes on the resources ``wanted`` accepts,
    between two readings of its ``/metrics``."""

    def keep(labels: Mapping[str, str]) -> bool:
        return labels.get("verb") in WRITE_VERBS and wanted(labels.get("resource", ""))

    start = histogram_buckets(before, _PASSTHROUGH, keep=keep)
    end = histogram_buckets(after, _PASSTHROUGH, keep=keep)
    p50, count = histogram_quantile(end, 0.5, before=start)
    p90, _ = histogram_quantile(end, 0.9, before=start)
    return {"count": count, "p50": p50, "p90": p90}


def _cpu(pids: dict[str, int]) -> dict[str, float]:
    return {name: cpu_seconds(pid) for name, pid in pids.items()}


async def _restart_phase(
    daemon: DaemonProcess, plane: ControlPlane, observer: httpx.AsyncClient, *, bound: float
) -> dict[str, Any]:
    """A Deployment of 1; the daemon restarted under the running controllers; a scale to 10
    timed until its pods are scheduled; how many of kcm's informers relisted since ("Caches
    populated": a resumed watch the new daemon could not serve)."""
    run = ScenarioRun(observer, "restart", len(NODES), bound)
    await run.create("/api/v1/namespaces", {"metadata": {"name": "restart"}})
    await run.until(lambda: run.get(run.ns_path("v1", "serviceaccounts", "default")))
    await run.create(run.ns_path("apps/v1", "deployments"), deployment("again", 1))
    await run.until(lambda: run.deployment_available("again", 1))
    old_log = daemon.log
    kcm_from = plane.kcm_log.stat().st_size
    shutdown = await asyncio.to_thread(daemon.stop)
    ready = await asyncio.to_thread(daemon.start)
    await run.patch(run.ns_path("apps/v1", "deployments", "again"), {"spec": {"replicas": 10}})
    began = time.perf_counter()
    scheduled = 0
    while time.perf_counter() - began < bound:
        pods = await run.pods("app=again")
        scheduled = sum(1 for p in pods if p["spec"].get("nodeName"))
        if scheduled >= 10:
            break
        await asyncio.sleep(0.02)
    errors = error_lines(old_log)
    with plane.kcm_log.open("rb") as f:
        f.seek(kcm_from)
        relisted = f.read().count(b"Caches populated")
    return {
        "kcm_relists": relisted,
        "shutdown_seconds": shutdown,
        "new_daemon_ready_seconds": ready,
        "scale_to_10_scheduled_seconds": time.perf_counter() - began,
        "scheduled": scheduled,
        "error_lines": len(errors),
        "first_errors": errors[:3],
    }


async def _drive(
    cluster: Cluster,
    plane: ControlPlane,
    daemon: DaemonProcess | None,
    *,
    server: str,
    ca: Path,
    restart: bool,
    step_timeout: float,
) -> dict[str, Any]:
    token = cluster.admin.token
    async with (
        _client(server, ca, token, KUBELET) as node_side,
        _client(cluster.url, cluster.ca_file, token, OBSERVER) as observer,
        FakeKubelet(node_side, NODES),
    ):
        await _wait_for_controllers(observer, time.monotonic() + 60)
        pids = {**plane.pids, "kube-apiserver": cluster.apiserver_pid, "etcd": cluster.etcd_pid}
        if daemon is not None:
            pids["cacheproxy"] = daemon.pid
        pids["kubelet+scenario (this process)"] = os.getpid()
        # The daemon's metrics read before its CPU is: an exposition is the benchmark's work,
        # not the scenario's (the one after is read after the CPU too).
        before = daemon.metrics() if daemon else ""
        cpu_before = _cpu(pids)
        audit_from = cluster.audit_end()
        kcm_from = plane.kcm_log.stat().st_size
        done = asyncio.Event()
        # Direct, the probe writes straight to the API server only (the same load on it as
        # through); through, both ways by turns, under the same load.
        probing = asyncio.create_task(
            _probe(cluster, server=server if daemon else None, ca=ca, token=token, done=done)
        )
        try:
            results = await run_scenario(
                observer, namespace="scenario", nodes=len(NODES), step_timeout=step_timeout
            )
        finally:
            done.set()
            probe = await probing
        cpu_after = _cpu(pids)
        connections = {
            name: established(pid)
            for name, pid in pids.items()
            if name not in ("etcd", "kubelet+scenario (this process)")
        }
        if daemon is not None:
            connections["cacheproxy → kube-apiserver"] = established(
                daemon.pid, remote_port=int(cluster.url.rsplit(":", 1)[1])
            )
        signs, sources = kcm_signs(plane.kcm_log, since=kcm_from)
        record: dict[str, Any] = {
            "kcm": signs,
            "kcm_by_source": sources,
            "steps": [
                {"name": r.name, "converged": r.converged, "seconds": r.seconds, "detail": r.detail}
                for r in results
            ],
            "cpu": {n: cpu_after[n] - cpu_before[n] for n in pids},
            "connections": connections,
        }
        if "through" in probe:
            record["probe"] = {
                side: {
                    "count": len(ms),
                    "p50": percentile(ms, 0.5),
                    "p90": percentile(ms, 0.9),
                }
                for side, ms in probe.items()
            }
        await asyncio.sleep(1.0)  # the audit log is written as answers complete
        events = cluster.audit_events(since=audit_from)
        clients = (*CONTROLLERS, KUBELET)
        record["conflicts"] = {
            "controllers": conflicts(events, CONTROLLERS),
            "kubelet": conflicts(events, (KUBELET,)),
        }
        after = daemon.metrics() if daemon else ""
        if daemon:  # kept beside its logs, for what the report does not show
            (daemon.workdir / "metrics-after.txt").write_text(after)
        for kind, wanted in _KINDS.items():
            at_server = write_latencies(events, clients, resources=wanted)
            record[f"writes_at_apiserver{kind}"] = {
                "count": len(at_server),
                "p50": percentile(at_server, 0.5),
                "p90": percentile(at_server, 0.9),
            }
            if daemon is not None:
                record[f"writes_at_daemon{kind}"] = _daemon_writes(before, after, wanted)
        if restart and daemon is not None:
            record["restart"] = await _restart_phase(daemon, plane, observer, bound=120.0)
        return record


def run_once(
    assets: Assets, workdir: Path, *, through: bool, restart: bool, step_timeout: float
) -> dict[str, Any]:
    """One run on a fresh cluster: the record of :func:`_drive`."""
    workdir.mkdir(parents=True, exist_ok=True)
    cluster = Cluster(assets, audit=True, workdir=workdir / "cluster").start()
    daemon: DaemonProcess | None = None
    plane: ControlPlane | None = None
    try:
        server, ca = cluster.url, cluster.ca_file
        if through:
            pki = generate_pki(workdir / "pki", hosts=("127.0.0.1",))
            daemon = DaemonProcess(
                workdir,
                cluster.admin.kubeconfig,
                CACHED_RESOURCES,
                cert=pki.server_cert,
                key=pki.server_key,
                ca=pki.ca_cert,
            )
            daemon.start()
            server, ca = daemon.url, pki.ca_cert
        assert cluster.workdir is not None
        plane = ControlPlane(
            assets,
            workdir / "control-plane",
            server=server,
            ca_file=ca,
            token=cluster.admin.token,
            service_account_key=cluster.workdir / "sa.key",
            root_ca=cluster.ca_file,
        ).start()
        return asyncio.run(
            _drive(
                cluster,
                plane,
                daemon,
                server=server,
                ca=ca,
                restart=restart,
                step_timeout=step_timeout,
            )
        )
    finally:
        if plane is not None:
            plane.stop()
        if daemon is not None:
            daemon.stop()
        cluster.stop()


def _parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m loadtest controlplane", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--runs", type=int, default=3, help="runs of each mode (default 3)")
    parser.add_argument(
        "--restart", action="store_true", help="restart the daemon after each through run"
    )
    parser.add_argument(
        "--calibrate",
        action="store_true",
        help="also run direct a second time (direct-b): the noise",
    )
    parser.add_argument(
        "--step-timeout", type=float, default=60.0, help="seconds a step may take to converge"
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="keep the runs' logs here (default: a temporary folder)",
    )
    parser.add_argument("--out", type=Path, default=None, help="where the report goes")
    parser.add_argument(
        "--skip-without-assets",
        action="store_true",
        help="without kube-controller-manager, say so and exit 0",
    )
    parser.add_argument(
        "--report-from", type=Path, help="write the report of a run's JSON again, and exit"
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parse_args(argv)
    if args.report_from is not None:
        result = orjson.loads(args.report_from.read_bytes())
        args.report_from.with_suffix(".md").write_text(render_report(result))
        return 0
    assets = _assets()
    if assets is None:
        message = "no server folder with kube-controller-manager and kube-scheduler (../shared/envtest/1.36/)"
        print(
            f"controlplane {'skipped' if args.skip_without_assets else 'failed'}: {message}",
            file=sys.stderr,
        )
        return 0 if args.skip_without_assets else 2
    today = datetime.date.today().isoformat()
    out: Path = args.out or Path("loadtest/results") / f"{today}-controlplane"
    with tempfile.TemporaryDirectory(prefix="controlplane-") as scratch:
        root = args.workdir or Path(scratch)
        modes = ["direct", *(["direct-b"] if args.calibrate else []), "through"]
        runs: list[dict[str, Any]] = []
        for index in range(args.runs):
            for mode in modes:
                _progress(f"run {index + 1}/{args.runs}: {mode}")
                record = run_once(
                    assets,
                    root / f"{index + 1}-{mode}",
                    through=mode == "through",
                    restart=args.restart and mode == "through",
                    step_timeout=args.step_timeout,
                )
                record.update(mode=mode, run=index + 1)
                total = sum(s["seconds"] for s in record["steps"])
                ok = all(s["converged"] for s in record["steps"])
                _progress(f"  {'converged' if ok else 'NOT converged'} in {total:.2f} s")
                runs.append(record)
    result = {
        "command": "python -m loadtest controlplane " + shlex.join(argv),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "server": assets.git_version,
        "cacheproxy": cacheproxy_source(),
        "modes": modes,
        "cached_resources": list(CACHED_RESOURCES),
        "runs": runs,
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "controlplane.json").write_bytes(
        orjson.dumps(result, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY)
    )
    (out / "controlplane.md").write_text(render_report(result))
    _progress(f"report: {out / 'controlplane.md'}")
    return 0
