"""``cacheproxy demo`` (``make run``): the simulator with demo data and churn, the cache proxy in
front of it, and commands to try against both."""

from __future__ import annotations

import argparse
import asyncio
import sys
import threading
import time
from typing import Any

from cacheproxy.cli.running import HelpFormatter, env_default, stop_on_signals
from cacheproxy.errors import ListenError
from cacheproxy.tasks import cancel_and_wait

__all__ = ["add_parser", "demo_main"]

_RESOURCES = (
    "pods",
    "namespaces",
    "nodes",
    "configmaps",
    "services",
    "events",
    "apps/v1/deployments",
    "apps/v1/replicasets",
)
_POD_INDEXES = ("spec.nodeName", "metadata.ownerReferences[*].uid")


def add_parser(sub: Any, parent: argparse.ArgumentParser) -> None:
    demo = sub.add_parser(
        "demo",
        parents=[parent],
        formatter_class=HelpFormatter,
        help="the simulator with demo data and churn, the proxy in front of it",
        description="Start the built-in API server simulator with demo data and churn and the "
        "cache proxy in front of it, and print commands to try against both.",
        epilog="examples:\n"
        "  cacheproxy demo --pods 60 --churn 2      # what make run starts\n"
        "  cacheproxy demo --pods 20000 --churn 0   # more pods, no changes\n"
        "  cacheproxy demo --port 9090 --sim-port 9091",
    )
    demo.add_argument(
        "--port", type=int, default=int(env_default("DEMO_PORT", "8080")), help="proxy port"
    )
    demo.add_argument(
        "--sim-port",
        type=int,
        default=int(env_default("DEMO_SIM_PORT", "8001")),
        help="simulator port",
    )
    demo.add_argument("--pods", type=int, default=60, help="demo pods")
    demo.add_argument("--churn", type=float, default=2.0, help="pod writes per second")
    demo.add_argument("--seed", type=int, default=1, help="random seed of demo data and churn")


async def demo_main(args: argparse.Namespace) -> int:
    from cacheproxy.daemon.config import DaemonConfig, ResourceConfig, ServerSettings
    from cacheproxy.daemon.runtime import Daemon
    from cacheproxy.kube.resources import builtin
    from cacheproxy.sim import SimServer, Simulator
    from cacheproxy.sim.churn import demo_churn
    from cacheproxy.sim.workload import DemoSpec, demo_objects
    from cacheproxy.upstream import UpstreamConfig

    spec = DemoSpec(pods=args.pods, seed=args.seed)
    sim = Simulator()
    began = time.monotonic()
    print(f"making a demo cluster of {spec.pods} pods…", file=sys.stderr, flush=True)
    with _Progress(began) as progress:
        objects = demo_objects(spec)
        progress.loading(len(objects))
        sim.load(objects, progress=progress.loaded)
    print(
        f"loaded in {time.monotonic() - began:.1f} s; starting cacheproxy in front of it",
        file=sys.stderr,
        flush=True,
    )
    sim_server = SimServer(sim, port=args.sim_port)
    try:
        await sim_server.start()
    except ListenError as err:
        raise err.with_hint(
            "the simulator's port: choose another with --sim-port or CACHEPROXY_DEMO_SIM_PORT"
        ) from None
    resources = tuple(
        ResourceConfig(rtype=builtin(name), indexes=_POD_INDEXES if name == "pods" else ())
        for name in _RESOURCES
    )
    config = DaemonConfig(resources=resources, server=ServerSettings(port=args.port), source="demo")
    daemon = Daemon(config, UpstreamConfig(server=sim_server.url))
    stop = asyncio.Event()
    driver = demo_churn(sim.store, rate=args.churn, seed=spec.seed, apps=spec.apps, pods=spec.pods)

    async def announce() -> None:
        await daemon.wait_ready()
        _print_banner(daemon.url, sim_server.url)

    banner: asyncio.Task[None] | None = None
    churn: asyncio.Task[Any] | None = None
    try:
        stop_on_signals(stop)
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


def _print_banner(proxy: str, upstream: str) -> None:
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
        f"  {kubectl} annotate namespace ns-0 --overwrite note=hello  # a write: passes through",
        f"  curl -s '{proxy}/status'  # the cache, and what was read upstream (not cached)",
        "",
        "The simulator directly (the upstream):",
        f"  curl -s {upstream}/version",
        f"  kubectl --server {upstream} --cache-dir $(mktemp -d) get pods -A",
        "",
        "Press Ctrl-C to stop.",
    ]
    print("\n".join(lines), flush=True)


class _Progress:
    """A line every :attr:`EVERY` seconds while the demo cluster is made and loaded (both hold
    the thread: the lines come from one of their own)."""

    EVERY = 5.0

    def __init__(self, began: float) -> None:
        self._began = began
        self._total = 0
        self._done = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tell, name="demo-progress", daemon=True)

    def __enter__(self) -> _Progress:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def loading(self, total: int) -> None:
        self._total = total
        print(
            f"loading {total} objects into the simulator "
            f"({time.monotonic() - self._began:.1f} s so far)…",
            file=sys.stderr,
            flush=True,
        )

    def loaded(self, done: int) -> None:
        self._done = done

    def _tell(self) -> None:
        while not self._stop.wait(self.EVERY):
            elapsed = time.monotonic() - self._began
            if self._total:
                what = f"loaded {self._done} of {self._total} objects"
            else:
                what = "still making the demo cluster"
            print(f"  … {what} ({elapsed:.0f} s)", file=sys.stderr, flush=True)
