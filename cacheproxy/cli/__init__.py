"""The ``cacheproxy`` command line. It only maps flags to configuration and starts things.

Subcommands:
  serve         run the cache proxy in front of the API server a config file names
  demo          the simulator with demo data and churn, and the proxy in front of it
  check-config  validate a config file and say what it would do
  rbac          print the least-privilege ClusterRole a config needs
  sim           run the built-in Kubernetes API server simulator (demo data, churn, faults, TLS, auth)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import random
import signal
import sys
import tempfile
from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import Any

from cacheproxy import __version__
from cacheproxy.errors import ConfigError, ListenError
from cacheproxy.kube.resources import ResourceType
from cacheproxy.tasks import cancel_and_wait

__all__ = ["main"]

log = logging.getLogger("cacheproxy")


def _env_default(name: str, default: str) -> str:
    return os.environ.get(f"CACHEPROXY_{name}", default)


def _custom_resource(text: str) -> ResourceType:
    """``group/version/plural:Kind[:cluster]`` → a custom resource type."""
    try:
        path, kind, *rest = text.split(":")
        group, version, plural = path.split("/")
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected GROUP/VERSION/PLURAL:Kind[:cluster], e.g. example.com/v1/widgets:Widget"
        ) from None
    if rest not in ([], ["cluster"], ["namespaced"]) or not (group and version and plural and kind):
        raise argparse.ArgumentTypeError(f"{text!r}: expected GROUP/VERSION/PLURAL:Kind[:cluster]")
    return ResourceType(group, version, plural, kind, namespaced=rest != ["cluster"])


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cacheproxy",
        description="A fast, indexed, read-only cache in front of the Kubernetes API server.",
    )
    parser.add_argument("--version", action="version", version=f"cacheproxy {__version__}")
    parser.add_argument(
        "--log-level", default=_env_default("LOG_LEVEL", "info"), help="debug, info, warning, error"
    )
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser(
        "serve",
        help="run the cache proxy",
        description="List and watch the configured resources upstream; serve list/get/watch.",
    )
    _config_flags(serve)
    check = sub.add_parser("check-config", help="validate a config file")
    _config_flags(check)
    rbac = sub.add_parser("rbac", help="print the ClusterRole a config file needs (read-only)")
    _config_flags(rbac)
    rbac.add_argument("--name", default="cacheproxy", help="the ClusterRole's name")

    demo = sub.add_parser(
        "demo",
        help="the simulator with demo data and churn, the proxy in front of it",
        description="Start the built-in API server simulator with demo data and churn and the "
        "cache proxy in front of it, and print commands to try against both.",
    )
    demo.add_argument(
        "--port", type=int, default=int(_env_default("DEMO_PORT", "8080")), help="proxy port"
    )
    demo.add_argument(
        "--sim-port",
        type=int,
        default=int(_env_default("DEMO_SIM_PORT", "8001")),
        help="simulator port",
    )
    demo.add_argument("--pods", type=int, default=60, help="demo pods")
    demo.add_argument("--churn", type=float, default=2.0, help="pod writes per second")
    demo.add_argument("--seed", type=int, default=1, help="random seed of demo data and churn")

    sim = sub.add_parser(
        "sim",
        help="run the built-in Kubernetes API server simulator",
        description="An in-memory Kubernetes API server: list/watch/get/create/update/patch/delete, "
        "resource versions, paging, bookmarks, watch-list, discovery, faults, optional TLS and auth.",
    )
    sim.add_argument(
        "--host",
        default=_env_default("SIM_HOST", "127.0.0.1"),
        help="address to bind (default 127.0.0.1)",
    )
    sim.add_argument(
        "--port",
        type=int,
        default=int(_env_default("SIM_PORT", "8001")),
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
        choices=("current", "1.28"),
        default=_env_default("SIM_BEHAVE_AS", "current"),
        help="current: as current kube-apiserver versions; 1.28: every version switch as "
        "kube-apiserver 1.28 (no WatchList gate, per-resource watch caches, RV=0 lists that "
        "ignore limit, ...; docs/simulator.md)",
    )
    sim.add_argument(
        "--server-version",
        default=None,
        help="gitVersion reported by /version (default: v1.33.0, or v1.28.7 with --behave-as 1.28)",
    )
    sim.add_argument(
        "--crd",
        action="append",
        type=_custom_resource,
        default=[],
        metavar="G/V/PLURAL:Kind[:cluster]",
        help="declare a custom resource (repeatable)",
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
    return parser


def _config_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        type=Path,
        default=Path(os.environ["CACHEPROXY_CONFIG"])
        if os.environ.get("CACHEPROXY_CONFIG")
        else None,
        help="the YAML config file (docs/configuration.md)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="PATH=VALUE",
        help="override one field, e.g. --set server.port=9090 (repeatable)",
    )
    parser.add_argument("--kubeconfig", type=Path, help="same as --set upstream.kubeconfig=PATH")
    parser.add_argument("--context", help="same as --set upstream.context=NAME")
    parser.add_argument("--port", type=int, help="same as --set server.port=PORT")
    parser.add_argument("--address", help="same as --set server.address=ADDRESS")


def _overrides(args: argparse.Namespace) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in args.set:
        path, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--set {item!r}: expected PATH=VALUE, e.g. server.port=9090")
        out[path.strip()] = value
    for flag, path in (
        ("kubeconfig", "upstream.kubeconfig"),
        ("context", "upstream.context"),
        ("port", "server.port"),
        ("address", "server.address"),
    ):
        value = getattr(args, flag)
        if value is not None:
            out[path] = str(value)
    return out


async def _run_daemon(daemon: Any, stop: asyncio.Event, reloader: Any = None) -> None:
    """Start, wait for a signal, shut down in order (not ready → stop accepting → close
    watches → stop informers). SIGHUP (and a changed config file) reload the resources."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await daemon.start()
    if reloader is not None:
        loop.add_signal_handler(signal.SIGHUP, reloader.request)
        reloader.start()
    ready = asyncio.create_task(daemon.wait_ready(), name="wait-ready")
    ready.add_done_callback(
        lambda t: (
            log.info("ready: every resource synced") if not t.cancelled() and t.result() else None
        )
    )
    await stop.wait()
    log.info("shutting down")
    if reloader is not None:
        await reloader.stop()
    await cancel_and_wait(ready)
    await daemon.stop()


async def _serve_main(args: argparse.Namespace) -> int:
    from cacheproxy.daemon.config import describe, load_config, resolve_upstream
    from cacheproxy.daemon.logs import configure_logging
    from cacheproxy.daemon.reload import ConfigReloader
    from cacheproxy.daemon.runtime import Daemon

    config = load_config(args.config, overrides=_overrides(args))
    configure_logging(config.logging.level, config.logging.format.value)
    for warning in config.warnings:
        log.warning("%s", warning)
    log.info("%s", describe(config))
    upstream = resolve_upstream(config.upstream)
    daemon = Daemon(config, upstream)
    reloader = ConfigReloader(
        args.config, lambda: load_config(args.config, overrides=_overrides(args)), daemon.reload
    )
    try:
        await _run_daemon(daemon, asyncio.Event(), reloader)
    except ListenError as err:
        raise err.with_hint(
            "choose another with --port, --set server.port=PORT, CACHEPROXY_SERVER_PORT or "
            "server.port in the config file"
        ) from None
    return 0


async def _demo_main(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from cacheproxy.daemon.config import CachedResource, DaemonConfig, ServerSettings
    from cacheproxy.daemon.runtime import Daemon
    from cacheproxy.kube.resources import builtin
    from cacheproxy.sim import SimServer, Simulator
    from cacheproxy.sim.churn import ChurnDriver
    from cacheproxy.sim.workload import DemoSpec, demo_objects
    from cacheproxy.upstream import UpstreamConfig

    sim = Simulator()
    sim.load(demo_objects(DemoSpec(pods=args.pods, seed=args.seed)))
    sim_server = SimServer(sim, port=args.sim_port)
    try:
        await sim_server.start()
    except ListenError as err:
        raise err.with_hint(
            "the simulator's port: choose another with --sim-port or CACHEPROXY_DEMO_SIM_PORT"
        ) from None
    resources = (
        CachedResource(
            rtype=builtin("pods"), indexes=("spec.nodeName", "metadata.ownerReferences[*].uid")
        ),
        CachedResource(rtype=builtin("namespaces")),
        CachedResource(rtype=builtin("nodes")),
        CachedResource(rtype=builtin("configmaps")),
        CachedResource(rtype=builtin("services")),
        CachedResource(rtype=builtin("events")),
        CachedResource(rtype=builtin("apps/v1/deployments")),
        CachedResource(rtype=builtin("apps/v1/replicasets")),
    )
    config = DaemonConfig(
        resources=resources, server=replace(ServerSettings(), port=args.port), source="demo"
    )
    daemon = Daemon(config, UpstreamConfig(server=sim_server.url))
    stop = asyncio.Event()
    namespaces = sorted({ns for ns, _ in sim.store.names(sim.resource("pods"))}) or ["default"]
    nodes = [name for _, name in sim.store.names(sim.resource("nodes"))] or ["node-0"]
    driver = ChurnDriver(
        sim.store,
        rate=args.churn,
        rng=random.Random(args.seed),
        namespaces=namespaces,
        nodes=nodes,
        apps=[f"app-{i}" for i in range(4)],
        max_pods=max(args.pods * 2, 10),
    )

    async def announce() -> None:
        await daemon.wait_ready()
        _print_demo_banner(daemon.url, sim_server.url)

    banner: asyncio.Task[None] | None = None
    churn: asyncio.Task[Any] | None = None
    try:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        try:
            await daemon.start()
        except ListenError as err:
            raise err.with_hint(
                "the proxy's port: choose another with --port or CACHEPROXY_DEMO_PORT"
            ) from None
        churn = asyncio.create_task(driver.run(), name="demo-churn")
        banner = asyncio.create_task(announce(), name="demo-banner")
        await stop.wait()
    finally:
        await cancel_and_wait(banner, churn)
        await daemon.stop()
        await sim_server.stop()
    return 0


def _print_demo_banner(proxy: str, upstream: str) -> None:
    kubectl = f"kubectl --server {proxy} --cache-dir $(mktemp -d)"
    lines = [
        f"cacheproxy is ready on {proxy}, caching the simulator on {upstream}",
        "",
        "Through the proxy:",
        f"  curl -s '{proxy}/api/v1/pods?limit=2'",
        f"  curl -s '{proxy}/api/v1/pods?labelSelector=app%3Dapp-1'",
        f"  curl -s '{proxy}/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1'",
        f"  curl -s '{proxy}/api/v1/pods?indexSelector=spec.nodeName+in+(node-1,node-2)'",
        f"  curl -s -N '{proxy}/api/v1/pods?watch=1&allowWatchBookmarks=true'",
        f"  {kubectl} get pods -A",
        f"  {kubectl} get pods -A -w",
        f"  {kubectl} api-resources",
        "",
        "The simulator directly (the upstream):",
        f"  curl -s {upstream}/version",
        f"  kubectl --server {upstream} --cache-dir $(mktemp -d) get pods -A",
        "",
        "Press Ctrl-C to stop.",
    ]
    print("\n".join(lines), flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # One line per upstream request is too much at INFO: the reflectors log what matters.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        if args.command == "check-config":
            from cacheproxy.daemon.config import check_config_main

            return check_config_main(args.config, overrides=_overrides(args))
        if args.command == "rbac":
            from cacheproxy.daemon.rbac import rbac_main

            return rbac_main(args.config, overrides=_overrides(args), name=args.name)
        if args.command == "serve":
            return _run(_serve_main(args))
        if args.command == "demo":
            return _run(_demo_main(args))
        return _run(_sim_main(args))
    except ConfigError as err:
        print(f"cacheproxy: {err}", file=sys.stderr)
        return 2


def _run(coro: Coroutine[Any, Any, int]) -> int:
    """Run the main coroutine on uvloop when installed (DESIGN §3), else asyncio."""
    with contextlib.suppress(KeyboardInterrupt):
        try:
            import uvloop
        except ImportError:  # pragma: no cover - uvloop is optional
            return asyncio.run(coro)
        return uvloop.run(coro)
    return 130


async def _sim_main(args: argparse.Namespace) -> int:
    from cacheproxy.sim import SimConfig, SimServer, Simulator
    from cacheproxy.sim.policy import Policy
    from cacheproxy.sim.tls import generate_pki
    from cacheproxy.sim.workload import DemoSpec, demo_objects

    policy = Policy.load(args.policy) if args.policy else None
    settings: dict[str, Any] = {
        "history_limit": args.history,
        "bookmark_interval": args.bookmark_interval,
        "policy": policy,
    }
    if args.server_version:
        settings["git_version"] = args.server_version
    config = SimConfig.kube_1_28(**settings) if args.behave_as == "1.28" else SimConfig(**settings)
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
        created = sim.load(demo_objects(spec))
        log.info("created %d demo objects", created)
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
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    churn_task = None
    if args.churn > 0:
        from cacheproxy.sim.churn import ChurnDriver

        namespaces = sorted({ns for ns, _ in sim.store.names(sim.resource("pods"))}) or ["default"]
        nodes = [name for _, name in sim.store.names(sim.resource("nodes"))] or ["node-0"]
        driver = ChurnDriver(
            sim.store,
            rate=args.churn,
            rng=random.Random(args.seed),
            namespaces=namespaces,
            nodes=nodes,
            apps=[f"app-{i}" for i in range(max(args.apps, 1))],
            max_pods=max(args.pods * 2, 10),
        )
        churn_task = asyncio.create_task(driver.run(), name="sim-churn")
    await stop.wait()
    print("\nshutting down", file=sys.stderr)
    await cancel_and_wait(churn_task)
    await server.stop()
    return 0


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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
