"""``python -m loadtest <scenario> [options]``: run one benchmark scenario; ``--help`` lists them,
``python -m loadtest <scenario> --help`` shows a scenario's options."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

SCENARIOS = {
    "ingest": "ingest rate and memory per object of the informer pipeline",
    "serve": "lists, gets, watch fan-out and memory against the simulator and baselines",
    "authbench": "the latency access control adds, with warm caches",
    "overload": "ten times more clients than the daemon serves at once",
    "pagewalk": "a limit walk at an older resourceVersion against one full list",
    "fanoutindex": "watch fan-out by index against the scan, 5 000 node watchers in process",
    "realserver": "against a real kube-apiserver: first sync, memory, relists, event lag",
    "syncmodes": "watch-list against paged-list first syncs on a real kube-apiserver",
    "tiers": "a node tier over a central tier over a real kube-apiserver",
    "consistentbench": "consistent reads against a real kube-apiserver, quiet and under writes",
    "defaultreads": "reads with resourceVersion unset: default and strict beside the API server",
    "passthroughbench": "what pass-through costs beside the same requests sent straight upstream",
    "gzipbench": "a 10 000-pod list gzipped and not, beside the API server's, over 1 Gbit/s and 10 Mbit/s",
    "informerbench": "cacheproxy's informer beside the official Python client's: memory, sync",
    "warmrestart": "a restart from snapshots against a cold start, on a real kube-apiserver",
    "storebench": "the compressed store beside the plain one: memory, ingest, sync, lists, GETs",
    "slowwatchers": "1 000 watchers of pod-sized events, 100 never reading: RSS with byte bounds and without",
    "scale": "every cost against 10 000 to 200 000 pods, its growth in N fitted and judged",
    "controlplane": "kube-controller-manager and kube-scheduler 1.36 direct and through cacheproxy: convergence, retries, CPU",
    "soak": "the chaos soak against the simulator (make soak)",
    "soakreal": "the chaos soak against a real kube-apiserver (make soak-real)",
}
"""Every scenario (a module of :mod:`loadtest.scenarios` with a ``main(argv)``), and what it
measures."""


def usage() -> str:
    width = max(map(len, SCENARIOS))
    lines = [line.strip() for line in (__doc__ or "").splitlines()]
    lines += ["", "scenarios:"]
    lines += [f"  {name:<{width}}  {what}" for name, what in SCENARIOS.items()]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(usage())
        return 0 if args else 2
    name, rest = args[0], args[1:]
    if name not in SCENARIOS:
        print(f"python -m loadtest: no scenario {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(f"loadtest.scenarios.{name}")
    code = module.main(rest)
    return int(code or 0)


if __name__ == "__main__":
    raise SystemExit(main())
