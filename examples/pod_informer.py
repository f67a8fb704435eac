"""A pod informer with a custom index, handlers and a workqueue-driven worker.

Run it from the clone (after ``make run`` or ``make test`` made ``.venv``) against any API server
your kubeconfig points at, or the built-in simulator:

    .venv/bin/cacheproxy sim --pods 60 --churn 5 &
    .venv/bin/python examples/pod_informer.py --server http://127.0.0.1:8001 --seconds 10
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from collections import Counter
from pathlib import Path
from typing import Any

from cacheproxy.controller import InformerFactory
from cacheproxy.informer import FuncHandler, RateLimitingQueue, ShutDown


def images(pod: dict[str, Any]) -> list[str]:
    """A custom index: every container image of a pod."""
    return [c.get("image", "") for c in pod.get("spec", {}).get("containers", [])]


async def main(server: str | None, kubeconfig: Path | None, seconds: float) -> Counter[str]:
    factory = (
        InformerFactory.from_url(server) if server else InformerFactory.from_kubeconfig(kubeconfig)
    )
    pods = factory.informer("pods", field_indexes=["spec.nodeName"], indexers={"image": images})
    queue: RateLimitingQueue[str] = RateLimitingQueue(name="pods")
    pods.add_handler(
        FuncHandler(
            add=lambda entry, initial: queue.add(entry.key),
            update=lambda old, new: queue.add(new.key),
            delete=lambda entry: queue.add(entry.key),
        )
    )
    seen: Counter[str] = Counter()

    async def worker() -> None:
        while True:
            try:
                key = await queue.get()
            except ShutDown:
                return
            try:
                entry = pods.store.get(key)  # the latest state, or None once deleted
                seen["deleted" if entry is None else "reconciled"] += 1
                queue.forget(key)
            except Exception:
                queue.add_rate_limited(key)  # retried with per-item exponential backoff
            finally:
                queue.done(key)

    async with factory:
        await factory.wait_for_cache_sync()
        print(f"synced {len(pods.store)} pods at RV {pods.store.resource_version}")
        by_node = {
            node: len(keys) for node, keys in pods.store.index_values("spec.nodeName").items()
        }
        print(f"pods per node: {dict(sorted(by_node.items()))}")
        print(f"images: {sorted(pods.store.index_values('image'))}")
        workers = [asyncio.create_task(worker(), name=f"worker-{i}") for i in range(2)]
        await asyncio.sleep(seconds)
        queue.shut_down()
        for task in workers:
            with contextlib.suppress(asyncio.CancelledError):
                await task
    print(f"worker results: {dict(seen)}")
    return seen


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", help="API server URL without auth (e.g. the simulator)")
    parser.add_argument(
        "--kubeconfig", type=Path, help="kubeconfig (default: in-cluster or ~/.kube/config)"
    )
    parser.add_argument("--seconds", type=float, default=5.0, help="how long to keep watching")
    args = parser.parse_args()
    asyncio.run(main(args.server, args.kubeconfig, args.seconds))
