"""``cacheproxy sim``: the built-in Kubernetes API server simulator, with demo data, churn,
faults, optional TLS and auth."""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cacheproxy.cli.running import HelpFormatter, env_default, resume_collector, stop_on_signals
from cacheproxy.errors import ListenError
from cacheproxy.kube.resources import ResourceType
from cacheproxy.tasks import cancel_and_wait

__all__ = ["add_parser", "sim_main"]

log = logging.getLogger("cacheproxy")
_CRD = "GROUP/VERSION/PLURAL:Kind[:namespaced|cluster]"


def _custom_resource(text: str) -> ResourceType:
    """``--crd``: the grammar of a custom resource written as a string in ``resources``."""
    from cacheproxy.daemon.config import parse_custom_resource  # not imported by the CLI's import

    try:
        return parse_custom_resource(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{exc}, e.g. example.com/v1/widgets:Widget") from None


def add_parser(sub: Any, parent: argparse.ArgumentParser) -> None:
    sim = sub.add_parser(
        "sim",
        parents=[parent],
        formatter_class=HelpFormatter,
        help="run the built-in Kubernetes API server simulator",
        description="An in-memory Kubernetes API server: list/watch/get/create/update/patch/delete, "
        "resource versions, paging, bookmarks, watch-list, discovery, faults, optional TLS and auth.",
        epilog="examples:\n"
        "  cacheproxy sim --port 6443 --pods 1000\n"
        "  cacheproxy sim --behave-as 1.28 --churn 5\n"
        "  cacheproxy sim --crd example.com/v1/widgets:Widget",
    )
    sim.add_argument("--host", default=env_default("SIM_HOST", "127.0.0.1"), help="address to bind")
    sim.add_argument(
        "--port",
        type=int,
        default=int(env_default("SIM_PORT", "8001")),
        help="port (0 = any free port)",
    )
    sim.add_argument(
        "--pods", type=int, default=0, help="demo pods to create at start (0 = no demo data)"
    )
    sim.add_argument("--namespaces", type=int, default=3, help="demo namespaces")
    sim.add_argument("--nodes", type=int, default=5, help="demo nodes")
    sim.add_argument("--apps", type=int, default=4, help="demo apps (label app=app-N)")
    sim.add_argument(
        "--churn", type=float, default=0.0, help="pod writes per second (create/update/delete)"
    )
    sim.add_argument("--seed", type=int, default=1, help="random seed of demo data and churn")
    sim.add_argument(
        "--history", type=int, default=10_000, help="events kept for watch resume before compaction"
    )
    sim.add_argument(
        "--bookmark-interval", type=float, default=60.0, help="seconds between watch bookmarks"
    )
    sim.add_argument(
        "--behave-as",
        choices=("current", "1.36", "1.32", "1.28"),
        default=env_default("SIM_BEHAVE_AS", "current"),
        help="current: as current kube-apiserver versions; 1.36, 1.32 or 1.28: every version "
        "switch as that kube-apiserver (1.28: no WatchList gate, lists with resourceVersion "
        "unset from etcd, ...; 1.36: exact lists and continue tokens from cache snapshots; all: "
        "per-resource watch caches, RV=0 lists that ignore limit; docs/simulator.md)",
    )
    sim.add_argument(
        "--server-version",
        default=None,
        help="gitVersion reported by /version (default: v1.33.0, or that of --behave-as)",
    )
    sim.add_argument(
        "--crd",
        action="append",
        type=_custom_resource,
        default=[],
        metavar=_CRD,
        help="declare a custom resource, namespaced unless :cluster (repeatable; the grammar of "
        "a resource written as a string in the configuration's resources)",
    )
    sim.add_argument(
        "--tls", action="store_true", help="serve HTTPS with a generated CA (paths printed)"
    )
    sim.add_argument(
        "--tls-dir",
        type=Path,
        default=None,
        help="where to write the generated CA and certificates",
    )
    sim.add_argument(
        "--policy", type=Path, default=None, help="auth policy YAML: static tokens and RBAC rules"
    )


async def sim_main(args: argparse.Namespace) -> int:
    from cacheproxy.sim import SimConfig, SimServer, Simulator
    from cacheproxy.sim.policy import Policy
    from cacheproxy.sim.testpki import generate_pki
    from cacheproxy.sim.workload import DemoSpec, demo_objects

    policy = Policy.load(args.policy) if args.policy else None
    settings: dict[str, Any] = {
        "history_limit": args.history,
        "bookmark_interval": args.bookmark_interval,
        "policy": policy,
    }
    if args.server_version:
        settings["git_version"] = args.server_version
    config = (
        SimConfig(**settings)
        if args.behave_as == "current"
        else SimConfig.behaving_as(args.behave_as, **settings)
    )
    sim = Simulator(custom_resources=args.crd, config=config)
    spec = None
    if args.pods:
        spec = DemoSpec(
            namespaces=args.namespaces,
            nodes=args.nodes,
            apps=args.apps,
            pods=args.pods,
            seed=args.seed,
        )
        created = sim.load(_handed_over(demo_objects(spec)))
        log.info("created %d demo objects", created)
    # Paused by main() until now: with it on, building and loading the demo walked every object
    # made so far again and again (a start with 40 000 pods: 59 s, 44 s without). Frozen, the
    # stored objects are not walked by the first collections after it either (they would be
    # all at once, stalling the first writes: 25 000 pods, ~7 s).
    gc.freeze()
    resume_collector()
    pki = None
    if args.tls or args.tls_dir:
        tls_dir = args.tls_dir or Path(tempfile.mkdtemp(prefix="cacheproxy-sim-tls-"))
        pki = generate_pki(tls_dir, hosts=(args.host, "localhost"))
    server = SimServer(sim, host=args.host, port=args.port, pki=pki)
    try:
        await server.start()
    except ListenError as err:
        raise err.with_hint("choose another with --port or CACHEPROXY_SIM_PORT") from None
    _print_banner(server, demo=spec is not None, token_hint=policy is not None)

    stop = asyncio.Event()
    stop_on_signals(stop)
    churn_task = None
    if args.churn > 0:
        from cacheproxy.sim.churn import demo_churn

        driver = demo_churn(
            sim.store, rate=args.churn, seed=args.seed, apps=args.apps, pods=args.pods
        )
        churn_task = asyncio.create_task(driver.run(), name="sim-churn")
    await stop.wait()
    print("\nshutting down", file=sys.stderr)
    await cancel_and_wait(churn_task)
    await server.stop()
    return 0


def _handed_over(objects: list[tuple[str, dict[str, Any]]]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each of ``objects``, dropped from the list as it is taken: the store keeps a copy, so the
    memory of each demo object holds the next copy (10 000 pods: 669 MiB RSS, not 1 025)."""
    objects.reverse()
    while objects:
        yield objects.pop()


def _print_banner(server: object, *, demo: bool, token_hint: bool) -> None:
    from cacheproxy.sim import SimServer

    assert isinstance(server, SimServer)
    url = server.url
    curl = "curl -s"
    kubectl = f"kubectl --server {url} --cache-dir $(mktemp -d)"
    if server.pki is not None:
        curl += f" --cacert {server.pki.ca_cert}"
        kubectl += f" --certificate-authority {server.pki.ca_cert}"
    auth = ' -H "Authorization: Bearer <token>"' if token_hint else ""
    lines = [
        f"cacheproxy simulator listening on {url}",
        "",
        "Try:",
        f"  {curl}{auth} {url}/version",
        f"  {curl}{auth} '{url}/api/v1/pods?limit=2'",
        f"  {curl}{auth} '{url}/api/v1/pods?labelSelector=app%3Dapp-1'",
        f"  {curl}{auth} '{url}/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1'",
        f"  {curl}{auth} -N '{url}/api/v1/pods?watch=1&allowWatchBookmarks=true'",
        f"  {kubectl} get pods -A",
        f"  {kubectl} get pods -A -l app=app-1",
        f"  {kubectl} get pods -A --field-selector spec.nodeName=node-1",
        f"  {kubectl} get pods -A -w",
        f"  {kubectl} api-resources",
        "",
        "Faults (control path): "
        f"curl -s -X POST {url}/_sim/end-watches | {url}/_sim/compact | "
        f'-d \'{{"verb":"watch","code":410}}\' {url}/_sim/fail',
        "Press Ctrl-C to stop.",
    ]
    if not demo:
        lines.insert(2, "(no demo data: start with --pods N for some)")
    print("\n".join(lines), flush=True)
