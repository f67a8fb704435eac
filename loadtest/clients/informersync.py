"""One informer's first sync of every pod, in a process of its own: what ``informerbench`` runs.

``python -m loadtest.clients.informersync CLIENT --kubeconfig K --expect N`` prints one JSON line:
the seconds from the informer's start to its cache holding all ``N`` pods (``sync_s``), the
process's resident memory just before the informer started and after the sync (both after a full
garbage collection, and again after ``malloc_trim``), and its peak (``VmHWM``). Clients:

- ``cacheproxy``: ``cacheproxy.controller.InformerFactory.from_kubeconfig`` and one pods informer,
  every setting its default (the store keeps compact JSON without ``metadata.managedFields``);
- ``cacheproxy-full``: the same keeping every field (``Transform(drop_fields=())``), so that it
  holds what the official client holds;
- ``official``: the ``kubernetes`` package's ``kubernetes.informer.SharedInformer`` over
  ``CoreV1Api().list_pod_for_all_namespaces`` (a thread; model objects), synced once its handler
  saw ``N`` adds (its first list fires one per object after filling the cache).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import orjson

from cacheproxy.daemon.memory import release_free_memory
from loadtest.harness.processes import rss_bytes

CLIENTS = ("cacheproxy", "cacheproxy-full", "official")


def _rss() -> tuple[int, int]:
    """This process's resident memory after a full collection, and then after the allocator gave
    its free pages back to the system (``malloc_trim``: what is held, not what was once used)."""
    gc.collect()
    rss = rss_bytes(os.getpid())
    release_free_memory()
    return rss, rss_bytes(os.getpid())


async def _cacheproxy(
    kubeconfig: Path, expect: int, *, keep_all: bool
) -> tuple[float, int, tuple[int, int]]:
    """Seconds to sync, pods held, RSS with them held."""
    from cacheproxy.controller import InformerFactory
    from cacheproxy.informer import Transform

    factory = InformerFactory.from_kubeconfig(kubeconfig)
    transform = Transform(drop_fields=()) if keep_all else None
    started = time.perf_counter()
    async with factory:
        pods = factory.informer("pods", transform=transform)
        await pods.wait_for_sync()
        took = time.perf_counter() - started
        held = len(pods.store)
        if held != expect:
            raise SystemExit(f"informersync: synced {held} pods, expected {expect}")
        return took, held, _rss()


def _official(kubeconfig: Path, expect: int) -> tuple[float, int, tuple[int, int]]:
    """Seconds to sync, pods held, RSS with them held."""
    from kubernetes import client, config
    from kubernetes.informer import ADDED, SharedInformer

    api = client.CoreV1Api(config.new_client_from_config(config_file=str(kubeconfig)))
    synced = threading.Event()
    added = 0

    def on_add(_obj: object) -> None:
        nonlocal added
        added += 1
        if added >= expect:
            synced.set()

    informer = SharedInformer(list_func=api.list_pod_for_all_namespaces)
    informer.add_event_handler(ADDED, on_add)
    started = time.perf_counter()
    informer.start()
    if not synced.wait(timeout=3600):
        raise SystemExit(f"informersync: the official informer saw {added} of {expect} pods")
    took = time.perf_counter() - started
    # Not stopped: its thread is a daemon blocked in the watch until the next event (stop()
    # would wait for one); it ends with the process.
    return took, len(informer.cache.list_keys()), _rss()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("client", choices=CLIENTS)
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument("--expect", type=int, required=True, help="pods upstream holds")
    args = parser.parse_args(argv)
    # Import what each client needs first, so the baseline holds the libraries, not the data.
    if args.client == "official":
        import kubernetes.client
        import kubernetes.informer  # noqa: F401
    else:
        import cacheproxy.controller  # noqa: F401
    before, before_trimmed = _rss()
    if args.client == "official":
        took, held, (after, after_trimmed) = _official(args.kubeconfig, args.expect)
    else:
        keep_all = args.client == "cacheproxy-full"
        took, held, (after, after_trimmed) = asyncio.run(
            _cacheproxy(args.kubeconfig, args.expect, keep_all=keep_all)
        )
    result = {
        "client": args.client,
        "pods": held,
        "sync_s": took,
        "rss_before": before,
        "rss_after": after,
        "rss_before_trimmed": before_trimmed,
        "rss_after_trimmed": after_trimmed,
        "hwm": rss_bytes(os.getpid(), "VmHWM"),
    }
    sys.stdout.write(orjson.dumps(result).decode() + "\n")
    sys.stdout.flush()
    if args.client == "official":
        # Its watch thread is still reading from the socket: the interpreter's finalization
        # beside it may abort the process (SIGABRT). Nothing is left to do: leave at once.
        os._exit(0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
