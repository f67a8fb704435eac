"""The real API server's side of :mod:`loadtest.scenarios.realserver`: what it holds, and how it is asked.

- :func:`build_objects`: N pods of ~7 KB (as the API server returns them, managedFields included)
  spread over ``ns-0..9``, labels ``app=app-0..19``, ``spec.nodeName`` ``node-0..99``; per
  namespace 20 ConfigMaps and Deployments, 10 ServiceAccounts and Secrets; an Event for one pod
  in ten. :func:`load` creates them with :meth:`Cluster.load` in chunks, printing progress.
- :func:`write_config`: the daemon's YAML config as a user writes it (the resources, the admin
  kubeconfig, port 0; every other setting its default).
- :func:`daemon_headers`: the headers the daemon's own upstream client sends (built by
  ``cacheproxy.upstream.build_client`` from that config), so that :func:`curl` asks exactly
  what the daemon asks.
- :func:`upstream_connections`: how many TCP connections a process holds to the API server;
- :func:`cacheproxy_source`: the cacheproxy a benchmark's daemons run (commit, uncommitted
  changes);
- :func:`add_kube_option` and :func:`envtest_assets`: a benchmark's ``--kube VERSION`` (the envtest
  server to run against: ``../shared/envtest`` and the folders in it, 1.28 and 1.32).
"""

from __future__ import annotations

import argparse
import base64
import random
import re
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from cacheproxy.daemon.config import load_config, resolve_upstream
from cacheproxy.envtest import ASSETS_HINT, Assets, Cluster, find_all_assets
from cacheproxy.sim.workload import make_configmap, make_deployment, make_event, make_pod
from cacheproxy.upstream import build_client

__all__ = [
    "APPS",
    "ENVTEST_ROOT",
    "NAMESPACES",
    "NODES",
    "POD_LIST",
    "RESOURCES",
    "CurlRun",
    "NoServer",
    "add_kube_option",
    "build_objects",
    "cacheproxy_source",
    "curl",
    "daemon_headers",
    "envtest_assets",
    "load",
    "port_of",
    "required_assets",
    "upstream_connections",
    "write_config",
]

RESOURCES = (
    "pods",
    "configmaps",
    "namespaces",
    "serviceaccounts",
    "secrets",
    "apps/v1/deployments",
    "events",
)
"""What the daemon caches (resource config names)."""
NAMESPACES = tuple(f"ns-{i}" for i in range(10))
APPS = tuple(f"app-{i}" for i in range(20))
NODES = 100
POD_LIST = "/api/v1/pods?resourceVersion=0&limit=500"
"""The daemon's first-sync request for pods once the API server refused its watch-list: a paged
list at RV "0" (client-go's), which v1.28 answers from its watch cache, whole, ignoring limit."""
_PER_NAMESPACE = 10  # ServiceAccounts and Secrets
_CHUNK = 1_000

Objects = list[tuple[str, dict[str, Any]]]


def build_objects(pods: int, *, seed: int = 1) -> tuple[Objects, list[tuple[str, str]]]:
    """Everything to create, in creatable order, and the (namespace, name) of every pod."""
    rng = random.Random(seed)
    replicas = max(1, pods // (len(NAMESPACES) * len(APPS)))
    objects: Objects = []
    for ns in NAMESPACES:
        for app in APPS:
            objects.append(("configmaps", make_configmap(rng, namespace=ns, name=f"{app}-config")))
            deployment = make_deployment(
                rng, namespace=ns, app=app, replicas=replicas, containers=1
            )
            objects.append(("apps/v1/deployments", deployment))
        for k in range(_PER_NAMESPACE):
            objects.append(("serviceaccounts", {"metadata": {"name": f"sa-{k}", "namespace": ns}}))
            token = base64.b64encode(rng.randbytes(48)).decode()
            secret = {
                "metadata": {"name": f"secret-{k}", "namespace": ns},
                "data": {"token": token},
            }
            objects.append(("secrets", secret))
    made: list[dict[str, Any]] = []
    names: set[tuple[str, str]] = set()
    for i in range(pods):
        ns = NAMESPACES[i % len(NAMESPACES)]
        app = APPS[(i // len(NAMESPACES)) % len(APPS)]
        phase = "Running" if rng.random() < 0.9 else "Pending"
        pod = make_pod(
            rng, namespace=ns, app=app, node=f"node-{i % NODES}", containers=1, phase=phase
        )
        meta = pod["metadata"]
        if (ns, meta["name"]) in names:  # a random suffix clash: keep names distinct
            meta["name"] = f"{meta['name']}{i}"
        names.add((ns, meta["name"]))
        made.append(pod)
    objects += [("pods", p) for p in made]
    for p in rng.sample(made, len(made) // 10):
        objects.append(
            ("events", make_event(rng, namespace=p["metadata"]["namespace"], involved_pod=p))
        )
    return objects, [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in made]


async def load(
    cluster: Cluster, objects: Objects, *, progress: Callable[[str], None] = lambda _: None
) -> float:
    """Create ``objects`` (with their statuses) in chunks; the seconds it took."""
    started = time.monotonic()
    for start in range(0, len(objects), _CHUNK):
        chunk = objects[start : start + _CHUNK]
        await cluster.load(chunk)
        done, took = start + len(chunk), time.monotonic() - started
        kinds = ", ".join(sorted({resource for resource, _ in chunk}))
        progress(f"loading: {done} of {len(objects)} objects ({kinds}), {done / took:.0f}/s")
    return time.monotonic() - started


def write_config(
    workdir: Path,
    cluster: Cluster,
    *,
    name: str,
    http2: bool = False,
    label_selector: str = "",
    server: dict[str, Any] | None = None,
) -> Path:
    """The daemon's config: :data:`RESOURCES` (each with ``label_selector`` if given), the admin
    kubeconfig, ``upstream.http2`` only when true, port 0 and any other ``server`` settings."""
    resources: list[Any] = [
        {"resource": r, "labelSelector": label_selector} if label_selector else r for r in RESOURCES
    ]
    upstream: dict[str, Any] = {"kubeconfig": str(cluster.admin.kubeconfig)}
    if http2:
        upstream["http2"] = True
    doc = {"resources": resources, "upstream": upstream, "server": {"port": 0, **(server or {})}}
    path = workdir / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


async def daemon_headers(config: Path) -> dict[str, str]:
    """The headers the daemon's upstream client sends on every request (its bearer token is
    added per request, so it is not among them)."""
    settings = load_config(config, env={})
    client = build_client(resolve_upstream(settings.upstream), http2=settings.upstream.http2)
    async with client:
        return {k.title(): v for k, v in client.headers.items() if k.lower() != "connection"}


@dataclass(frozen=True, slots=True)
class CurlRun:
    """One ``curl`` of a request: its timings (curl's own ``-w``), bytes on the wire."""

    seconds: float
    first_byte_s: float
    wire_bytes: int
    status: int


def curl(
    cluster: Cluster,
    target: str,
    headers: Mapping[str, str],
    *,
    workdir: Path,
    decode: bool,
    out: Path | None = None,
) -> CurlRun:
    """``curl --http1.1`` of ``target`` with ``headers`` and the admin's token (given in a
    header file, not on the command line); ``decode``: gunzip as it arrives (``--compressed``),
    as the daemon must. The body goes to ``out`` (default: nowhere)."""
    header_file = workdir / "curl-headers.txt"
    lines = [f"{k}: {v}" for k, v in {**headers, **cluster.admin.headers}.items()]
    header_file.write_text("\n".join(lines) + "\n")
    argv = [
        "curl", "--http1.1", "--silent", "--show-error", "--cacert", str(cluster.ca_file),
        "--header", f"@{header_file}", "--output", str(out or "/dev/null"),
        "--write-out", "%{http_code} %{size_download} %{time_starttransfer} %{time_total}",
    ]  # fmt: skip
    if decode:
        argv.append("--compressed")
    done = subprocess.run(
        [*argv, cluster.url + target], capture_output=True, text=True, check=True, timeout=600
    )
    status, size, first, total = done.stdout.split()
    return CurlRun(float(total), float(first), int(size), int(status))


def cacheproxy_source() -> str:
    """The cacheproxy the daemons run: its commit, and any uncommitted change to ``cacheproxy/``
    (the tree may be shared with other work in progress)."""
    root = Path(__file__).resolve().parents[2]

    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
        if done.returncode:
            raise OSError(done.stderr)
        return done.stdout

    try:
        commit = git("rev-parse", "--short", "HEAD").strip()
        changed = [
            line[3:] for line in git("status", "--porcelain", "--", "cacheproxy").splitlines()
        ]
    except OSError:
        return "unknown (not a git checkout)"
    if not changed:
        return f"commit {commit}"
    more = f" and {len(changed) - 6} more" if len(changed) > 6 else ""
    return f"commit {commit} with uncommitted changes to {', '.join(changed[:6])}{more}"


def upstream_connections(pid: int, port: int) -> int:
    """TCP connections (IPv4, established) of process ``pid`` to 127.0.0.1:``port``."""
    inodes = set()
    fd_dir = Path(f"/proc/{pid}/fd")
    try:
        for fd in fd_dir.iterdir():
            found = re.fullmatch(r"socket:\[(\d+)\]", _readlink(fd))
            if found:
                inodes.add(found.group(1))
    except OSError:
        return 0
    remote = f"0100007F:{port:04X}"
    count = 0
    for line in Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[2] == remote and fields[3] == "01" and fields[9] in inodes:
            count += 1
    return count


def _readlink(path: Path) -> str:
    try:
        return str(path.readlink())
    except OSError:
        return ""


def port_of(url: str) -> int:
    """The port of ``scheme://host:port[/…]``."""
    return int(url.rsplit(":", 1)[1].split("/", 1)[0])


ENVTEST_ROOT = Path(__file__).resolve().parents[3] / "shared" / "envtest"
"""``../shared/envtest`` beside the repository, where the tests find the servers too."""


def add_kube_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kube",
        default=None,
        help="the kube-apiserver version to run against (1.28, 1.32; default: the oldest found)",
    )


class NoServer(Exception):
    """No envtest server of the version asked for; :attr:`code` is the exit code to end with."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def required_assets(args: argparse.Namespace, program: str) -> Assets:
    """The server ``args.kube`` asks for (:func:`envtest_assets`). Without it: says so and raises
    :class:`NoServer` with the exit code: 0 with ``--skip-without-assets`` (``make bench``),
    else 2."""
    assets = envtest_assets(args.kube)
    if assets is not None:
        return assets
    message = f"no kube-apiserver {args.kube} ({ASSETS_HINT})" if args.kube else ASSETS_HINT
    if getattr(args, "skip_without_assets", False):
        print(f"{program} skipped: {message}", flush=True)
        raise NoServer(0)
    print(f"{program}: {message}", file=sys.stderr)
    raise NoServer(2)


def envtest_assets(version: str | None) -> Assets | None:
    """The envtest server of ``version`` (``$KUBEBUILDER_ASSETS``, else :data:`ENVTEST_ROOT` and
    its folders); the oldest found when None; None when there is none."""
    found = find_all_assets(ENVTEST_ROOT)
    if version is None:
        return found[0] if found else None
    return next((a for a in found if a.version == version), None)
