"""Chaos against the real API server: the daemon in front of kube-apiserver 1.28 and etcd
(:mod:`cacheproxy.envtest`), upstream and the link broken on a schedule, every downstream view
checked against upstream's recorded history.

``python -m loadtest soakreal --seconds 600 [--out DIR]`` (``make soak-real``) prints a Markdown
report and exits 1 if an invariant was violated; ``--out`` also writes it (``soakreal.md``) with
its raw figures (``soakreal.json``).

- Upstream: pods and configmaps churned by the harness (:mod:`loadtest.clients.soakreal_writes`), the
  only writer; each write's result, completed from etcd where the answer is silent, is upstream's
  history (:class:`~loadtest.harness.soak_model.UpstreamModel`, one per resource).
- The daemon: ``cacheproxy serve --config FILE`` (:mod:`loadtest.harness.soakreal_daemon`), caching pods
  (``spec.nodeName`` indexed) and the configmaps labelled ``soak=real``; its kubeconfig names a
  relay (:mod:`loadtest.harness.relay`) in front of the API server, the slow link.
- 16 clients of the daemon: 15 :class:`~loadtest.clients.soak_clients.SoakClient`\\ s (lists, paged
  lists, watch-lists, watches, resumes, relists; five pod and three configmap selections) and a
  ``kubectl get pods -A -w`` (:mod:`loadtest.clients.soakreal_kubectl`).
- Faults, one at a time from a shuffled deck (:mod:`loadtest.harness.soakreal_faults`): kube-apiserver
  SIGKILLed and restarted, etcd compacted, etcd paused, the daemon SIGKILLed and restarted,
  latency, bandwidth limits and stalls on the link. After each, the time until the daemon's lists
  equal upstream (the model, and the API server's own list at the same RV) is its recovery.
- Throughout: ``/readyz``, ``/status`` and ``/metrics`` every half second, the daemon's log
  lines, its RSS. At the end the churn stops and the daemon and every client must equal upstream.

Invariants (each violation recorded with its detail): the clients' (RV order, no duplicate, no
lost event, no deleted object reappearing, every view equal to upstream at its RV); recovery
within ``--recovery-bound`` s of each fault's end; the daemon equal to the API server; no HTTP
500; no ERROR log line a fault does not explain; no log storm (more than ``--storm-lines``
lines in one fault's window); RSS under ``--rss-budget-mib``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import os
import platform
import random
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

import httpx
import orjson

from cacheproxy.envtest import ASSETS_HINT, Assets, Cluster, find_assets
from cacheproxy.envtest.process import free_port
from cacheproxy.kube.resources import builtin
from loadtest.clients.soak_clients import Endpoint, SoakClient
from loadtest.clients.soakreal_kubectl import KubectlClient, find_kubectl
from loadtest.clients.soakreal_writes import EtcdProbe, Recorder, Writer, WriterSpec
from loadtest.harness.relay import RelayProcess
from loadtest.harness.soak_model import (
    FILTERS,
    Filter,
    UpstreamModel,
    View,
    Violations,
    describe_diff,
)
from loadtest.harness.soak_views import ViewChecker
from loadtest.harness.soakreal_daemon import (
    DaemonProcess,
    DaemonSpec,
    LogReader,
    Probe,
    write_kubeconfig,
)
from loadtest.harness.soakreal_faults import FAULT_KINDS, Episode, FaultTimes, Injector
from loadtest.reports.soakreal_report import RealSoakReport, judge

__all__ = ["CONFIGMAP_FILTERS", "RealSoakConfig", "main", "run_real_soak"]

LABEL = ("soak", "real")
CONFIGMAP_FILTERS: tuple[Filter, ...] = (
    Filter("cm-all", "/api/v1/configmaps", (), lambda o: True),
    Filter(
        "cm-ns-1",
        "/api/v1/namespaces/ns-1/configmaps",
        (),
        lambda o: (o.get("metadata") or {}).get("namespace") == "ns-1",
    ),
    Filter(
        "cm-tier-a",
        "/api/v1/configmaps",
        (("labelSelector", "tier=a"),),
        lambda o: ((o.get("metadata") or {}).get("labels") or {}).get("tier") == "a",
    ),
)
WHOLE = {"pods": "all", "configmaps": "cm-all"}
"""Each model's filter of the whole cached collection."""
_ASSETS_FALLBACK = Path(__file__).resolve().parents[3] / "shared" / "envtest"
_POLL = 0.1


@dataclass(frozen=True)
class RealSoakConfig:
    seconds: float = 600.0
    seed: int = 1
    clients: int = 16
    """Downstream clients, the kubectl one included (when a kubectl is found)."""
    rate: float = 20.0
    """Upstream writes per second (pods and configmaps)."""
    times: FaultTimes = field(default_factory=FaultTimes)
    faults: tuple[str, ...] = FAULT_KINDS
    decks: int = 0
    """When set, exactly this many rounds of every fault (``seconds`` is then ignored)."""
    warmup: float = 8.0
    gap: tuple[float, float] = (3.0, 6.0)
    """Calm between the daemon's catching up and the next fault."""
    recovery_bound: float = 5.0
    give_up: float = 180.0
    """A fault after which the daemon has not caught up this long ends the run."""
    settle: float = 30.0
    """Once the churn stopped, how long the daemon, then the clients, may take to equal it."""
    storm_lines: int = 40
    rss_budget_mib: float = 400.0
    compaction_interval: str = "30s"
    """The API server's own etcd compaction (``--etcd-compaction-interval``)."""
    kubectl: bool = True
    strict: bool = False
    """Count known issues (tolerated otherwise) as violations."""
    sabotage: str | None = None
    """Checker self-test: ``skip-event`` or ``duplicate-event`` in the first client."""
    drop_write: int | None = None
    """Model self-test: the recorder forgets the N-th pod write after the start (a lost write
    the daemon does deliver): the run must fail."""


async def run_real_soak(
    config: RealSoakConfig, assets: Assets, *, workdir: Path | None = None
) -> RealSoakReport:
    with contextlib.ExitStack() as stack:
        if workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="soakreal-")))
        pool = stack.enter_context(ThreadPoolExecutor(1, thread_name_prefix="soakreal-cluster"))
        return await _RealSoak(config, assets, workdir, pool).run()
    raise AssertionError("unreachable")  # pragma: no cover


class _RealSoak:
    def __init__(
        self, config: RealSoakConfig, assets: Assets, workdir: Path, pool: ThreadPoolExecutor
    ) -> None:
        self.config = config
        self.assets = assets
        self.workdir = workdir
        self.pool = pool
        self.rng = random.Random(config.seed)
        self.violations = Violations()
        self.models = {
            "pods": UpstreamModel(
                builtin("pods"), FILTERS, upstream_rv=_never, complete_to=self._complete("pods")
            ),
            "configmaps": UpstreamModel(
                builtin("configmaps"),
                CONFIGMAP_FILTERS,
                upstream_rv=_never,
                complete_to=self._complete("configmaps"),
            ),
        }
        self.recorder = Recorder(self.models, drop_pod_write=config.drop_write)
        self.report = RealSoakReport(config=config, began=time.time())
        self.cluster: Cluster | None = None

    def _complete(self, resource: str) -> Callable[[], int]:
        return lambda: self.recorder.complete_to(resource)

    async def _blocking(self, call: Callable[[], object]) -> None:
        await asyncio.get_running_loop().run_in_executor(self.pool, call)

    async def run(self) -> RealSoakReport:
        cfg = self.config
        cluster = Cluster(
            self.assets,
            extra_args=(f"--etcd-compaction-interval={cfg.compaction_interval}",),
            workdir=self.workdir / "cluster",
        )
        await self._blocking(cluster.start)
        self.cluster = cluster
        try:
            for ns in WriterSpec().namespaces:
                await self._blocking(functools.partial(cluster.create_namespace, ns))
            await self._with_cluster(cluster)
        finally:
            await self._blocking(cluster.stop)
        judge(self.report, self.violations, self.models, strict=cfg.strict)
        return self.report

    async def _with_cluster(self, cluster: Cluster) -> None:
        cfg, report = self.config, self.report
        etcd = EtcdProbe(cluster.etcd_url)
        limits = httpx.Limits(max_connections=16)
        relay = RelayProcess(int(cluster.url.rsplit(":", 1)[1]), log=self.workdir / "relay.log")
        await relay.start()
        kubeconfig = write_kubeconfig(
            self.workdir / "daemon-kubeconfig.yaml",
            server=f"https://127.0.0.1:{relay.port}",
            ca_file=cluster.ca_file,
            token=cluster.admin.token,
        )
        daemon = DaemonProcess(self.workdir, DaemonSpec(kubeconfig=kubeconfig, port=free_port()))
        logs = LogReader(daemon)
        probe = Probe(daemon)
        tasks: list[asyncio.Task[None]] = []
        async with (
            cluster.async_client(limits=limits) as api,
            httpx.AsyncClient(timeout=10) as http,
        ):
            writer = Writer(api, etcd, self.recorder, WriterSpec(rate=cfg.rate, seed=cfg.seed))
            try:
                await writer.populate()
                daemon.spawn()
                report.first_sync_s = await daemon.wait_ready()
                report.rss_after_sync = daemon.rss()
                clients = self._clients(Endpoint(daemon.url))
                report.setup = await self._setup(api, etcd_url=cluster.etcd_url, writer=writer)
                tasks += [asyncio.create_task(c.run(), name=f"soakreal-{c.name}") for c in clients]
                tasks.append(asyncio.create_task(writer.run(), name="soakreal-writer"))
                tasks.append(asyncio.create_task(probe.run(), name="soakreal-probe"))
                tasks.append(asyncio.create_task(_tail(logs), name="soakreal-logs"))
                injector = Injector(
                    cluster=cluster,
                    relay=relay,
                    daemon=daemon,
                    etcd=etcd,
                    recorder=self.recorder,
                    rng=self.rng,
                    times=cfg.times,
                    pool=self.pool,
                )
                report.faults_began = time.time()
                await asyncio.sleep(cfg.warmup)
                await self._episodes(injector, http, daemon)
                report.faults_ended = time.time()
                await self._quiesce(writer, http, daemon, clients)
            finally:
                for task in tasks:
                    task.cancel()
                for task, result in zip(
                    tasks, await asyncio.gather(*tasks, return_exceptions=True), strict=True
                ):
                    if isinstance(result, Exception):  # not CancelledError: a harness bug
                        self.violations.record("harness", f"{task.get_name()} died: {result!r}")
                report.shutdown_s = await _timed(daemon.stop())
                logs.read()
                report.relay = await _relay_stats(relay)
                await relay.stop()
                await etcd.aclose()
        report.ended = time.time()
        report.setup.append(
            "load average at the end " + " ".join(f"{x:.2f}" for x in os.getloadavg())
        )
        report.writer = writer.stats
        report.lag = self.recorder.lag
        report.samples = probe.samples
        report.http_500 = probe.http_500
        report.log_lines = logs.lines
        report.unparsed_log = logs.unparsed
        report.daemon_starts = daemon.generation
        report.clients = clients
        report.monotonic_offset = time.time() - time.monotonic()

    def _clients(self, endpoint: Endpoint) -> list[SoakClient | KubectlClient]:
        cfg = self.config
        kubectl = find_kubectl() if cfg.kubectl else None
        http_clients = cfg.clients - (1 if kubectl else 0)
        clients: list[SoakClient | KubectlClient] = []
        for i in range(http_clients):
            resource = "pods" if i < http_clients * 2 // 3 else "configmaps"
            filters = FILTERS if resource == "pods" else CONFIGMAP_FILTERS
            index = i if resource == "pods" else i - http_clients * 2 // 3
            clients.append(
                SoakClient(
                    f"client-{i}",
                    selection=filters[index % len(filters)],
                    watch_list=i % 4 == 3,
                    endpoint=endpoint,
                    model=self.models[resource],
                    violations=self.violations,
                    rng=random.Random(cfg.seed * 1000 + i),
                    sabotage=cfg.sabotage if i == 0 else None,
                    tolerant=not cfg.strict,
                )
            )
        if kubectl is not None:
            clients.append(
                KubectlClient(
                    "kubectl",
                    kubectl=kubectl,
                    selection=FILTERS[0],
                    endpoint=endpoint,
                    model=self.models["pods"],
                    violations=self.violations,
                    workdir=self.workdir,
                    tolerant=not cfg.strict,
                )
            )
        self.report.kubectl = str(kubectl) if kubectl else "none found"
        return clients

    async def _setup(self, api: httpx.AsyncClient, *, etcd_url: str, writer: Writer) -> list[str]:
        """The report's header: what ran, where, with which settings."""
        cfg, spec = self.config, writer.spec
        version = orjson.loads((await api.get("/version")).content)
        async with httpx.AsyncClient(timeout=5) as http:
            etcd = orjson.loads((await http.get(f"{etcd_url}/version")).content)
        kubectl = self.report.kubectl
        if kubectl != "none found":
            done = await asyncio.create_subprocess_exec(
                kubectl, "version", "--client", "-o", "json", stdout=asyncio.subprocess.PIPE
            )
            out, _ = await done.communicate()
            with contextlib.suppress(ValueError, KeyError):
                kubectl += f" ({orjson.loads(out)['clientVersion']['gitVersion']})"
        commit = await _output("git", "rev-parse", "--short", "HEAD")
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        return [
            f"date: {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}; cacheproxy: commit "
            f"{commit or '?'}; Python {platform.python_version()}",
            f"upstream: **a real kube-apiserver {version.get('gitVersion')}** "
            f"({version.get('goVersion')}), etcd {etcd.get('etcdserver')}, on 127.0.0.1 (TLS, "
            f"bearer token), `--etcd-compaction-interval={cfg.compaction_interval}`; nothing "
            "else runs (no controllers, no kubelets)",
            "daemon: `cacheproxy serve --config FILE`: pods (`spec.nodeName` indexed) and "
            "configmaps labelled `soak=real`; upstream watches of 10-20 s, pages of 50, "
            "bookmarks every second, `readyMaxStalenessSeconds: 10`; its kubeconfig names "
            "the relay in front of the API server",
            f"upstream churn: {cfg.rate:g} writes/s from {spec.lanes} lanes ({spec.configmap_share:.0%}"
            f" configmaps): creates, label and annotation updates, status (phase) patches, "
            f"deletes; pods {spec.pods[1]}-{spec.pods[2]}, configmaps {spec.configmaps[1]}-"
            f"{spec.configmaps[2]}, in {', '.join(spec.namespaces)}",
            f"clients: {cfg.clients} (kubectl: {kubectl})",
            f"faults: {', '.join(cfg.faults)}; lengths {cfg.times}",
            f"machine: nproc {os.cpu_count()}; load average at start {load} (shared with other "
            "work: timings vary)",
        ]

    # ------------------------------------------------------------------ faults

    async def _episodes(
        self, injector: Injector, http: httpx.AsyncClient, daemon: DaemonProcess
    ) -> None:
        cfg = self.config
        end = self.report.faults_began + cfg.seconds
        deck: list[str] = []
        episodes = self.report.episodes
        dealt = 0
        while True:
            if not deck:
                if cfg.decks and dealt == cfg.decks:
                    break
                deck = list(cfg.faults)
                self.rng.shuffle(deck)
                dealt += 1
            # The next fault of the deck that fits before the end (none: the faults are over).
            fits = [
                k for k in reversed(deck) if cfg.decks or time.time() + _expected(k, cfg) <= end
            ]
            if not fits:
                break
            kind = fits[0]
            deck.remove(kind)
            episode = await injector.inject(kind)
            if episodes:
                episodes[-1].ended = episode.began
            episodes.append(episode)
            await self._catch_up(episode, http, daemon)
            if episode.caught_up is None:
                self.violations.record(
                    "no-recovery", f"{kind} ({episode.detail}): not caught up in {cfg.give_up} s"
                )
                break
            await asyncio.sleep(self.rng.uniform(*cfg.gap))
        if episodes:
            episodes[-1].ended = time.time()

    async def _catch_up(
        self, episode: Episode, http: httpx.AsyncClient, daemon: DaemonProcess
    ) -> None:
        """When the daemon's lists first equal upstream (judged once upstream's history reaches
        their RVs) at an RV above every write recorded when the fault ended: the daemon has
        heard of a write made after it (at this churn, one comes within a few tenths of a
        second for each resource)."""
        target = self.recorder.max_seen + 1
        candidates: list[tuple[float, dict[str, tuple[int, dict[str, int]]]]] = []
        give_up = episode.restored + self.config.give_up
        while time.time() < give_up:
            lists = await self._daemon_lists(http, daemon)
            if lists is not None and all(rv >= target for rv, _ in lists.values()):
                candidates.append((time.time(), lists))
            while candidates and all(
                self.models[r].knows(rv) for r, (rv, _) in candidates[0][1].items()
            ):
                at, first = candidates.pop(0)
                if all(
                    View(items).summary() == self.models[r].summary_at(WHOLE[r], rv)
                    for r, (rv, items) in first.items()
                ):
                    episode.caught_up = at
                    episode.compare = await self._compare(http, first)
                    return
            await asyncio.sleep(_POLL)

    async def _daemon_lists(
        self, http: httpx.AsyncClient, daemon: DaemonProcess
    ) -> dict[str, tuple[int, dict[str, int]]] | None:
        lists = {}
        for resource in self.models:
            try:
                resp = await http.get(f"{daemon.url}/api/v1/{resource}")
            except httpx.HTTPError:
                return None
            if resp.status_code == 500:
                self.violations.record("http-500", f"daemon list {resource}: {resp.text[:200]}")
            if resp.status_code != 200:
                return None
            lists[resource] = _items(resp.content)
        return lists

    async def _compare(
        self, http: httpx.AsyncClient, lists: dict[str, tuple[int, dict[str, int]]]
    ) -> str:
        """The daemon's lists against the API server's at the same RVs (read from etcd)."""
        parts = []
        async with self._api() as api:
            for resource, (rv, items) in lists.items():
                params = {"resourceVersion": str(rv), "resourceVersionMatch": "Exact"}
                if resource == "configmaps":
                    params["labelSelector"] = "=".join(LABEL)
                try:
                    resp = await api.get(f"/api/v1/{resource}", params=params)
                except httpx.HTTPError as exc:
                    parts.append(f"{resource}@{rv}: API server unreachable ({type(exc).__name__})")
                    continue
                if resp.status_code == 410:
                    parts.append(f"{resource} at {rv}: not comparable (etcd compacted past it)")
                    continue
                if resp.status_code != 200:
                    parts.append(f"{resource}@{rv}: API server answered {resp.status_code}")
                    continue
                _, upstream = _items(resp.content)
                if upstream == items:
                    parts.append(f"{resource} equal at {rv} ({len(items)})")
                else:
                    diff = describe_diff(items, upstream)
                    parts.append(f"{resource} DIFFERENT at {rv}: {diff}")
                    self.violations.record("daemon-vs-apiserver", f"{resource} at RV {rv}: {diff}")
        return "; ".join(parts)

    def _api(self) -> httpx.AsyncClient:
        assert self.cluster is not None
        return self.cluster.async_client(timeout=30)

    # ------------------------------------------------------------------ the end

    async def _quiesce(
        self,
        writer: Writer,
        http: httpx.AsyncClient,
        daemon: DaemonProcess,
        clients: Sequence[ViewChecker],
    ) -> None:
        """The churn stops; the daemon, then every client, must equal upstream."""
        report, record = self.report, self.violations.record
        writer.paused.clear()
        for _ in range(1200):
            if not self.recorder.in_flight():
                break
            await asyncio.sleep(_POLL)
        final = {r: m.latest_rv for r, m in self.models.items()}
        began = time.time()
        compare = ""
        while time.time() - began < self.config.settle:
            lists = await self._daemon_lists(http, daemon)
            if lists is not None and all(lists[r][0] >= final[r] for r in lists):
                compare = await self._compare(http, lists)
                if "DIFFERENT" not in compare and "API server" not in compare:
                    report.final_equal_s = time.time() - began
                    report.final_compare = compare
                    break
            await asyncio.sleep(_POLL)
        else:
            record("final-mismatch", f"not equal once the churn stopped: {compare}")
        began = time.time()
        lagging: list[str] = []
        while time.time() - began < self.config.settle:
            for c in clients:
                c.judge_waiting()
            lagging = [
                c.name
                for c in clients
                if c.waiting or c.view.summary() != c.model.summary_at(c.selection.name, _NEVER)
            ]
            if not lagging:
                report.clients_converged_s = time.time() - began
                return
            await asyncio.sleep(_POLL)
        record("clients-not-converged", f"once the churn stopped: {', '.join(lagging)}")


_NEVER = 1 << 62


def _never() -> int:
    """Upstream's current RV is not known to the model: no RV is "from the future"."""
    return _NEVER


def _expected(kind: str, cfg: RealSoakConfig) -> float:
    """A fault's likely length, with its recovery: none starts unless it fits before the end."""
    hold = {
        "etcd-pause": cfg.times.etcd_pause[1],
        "link-latency": cfg.times.link[1],
        "link-bandwidth": cfg.times.link[1],
        "link-stall": cfg.times.stall[1],
        "apiserver-kill": 6.0,
        "daemon-kill": 3.0,
    }.get(kind, 1.0)
    return hold + cfg.recovery_bound


def _items(content: bytes) -> tuple[int, dict[str, int]]:
    body = orjson.loads(content)
    items = {
        f"{i['metadata']['namespace']}/{i['metadata']['name']}": int(
            i["metadata"]["resourceVersion"]
        )
        for i in body["items"]
    }
    return int(body["metadata"]["resourceVersion"]), items


async def _output(*argv: str) -> str:
    with contextlib.suppress(OSError):
        proc = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL
        )
        out, _ = await proc.communicate()
        return out.decode().strip()
    return ""


async def _tail(logs: LogReader) -> None:
    while True:
        logs.read()
        await asyncio.sleep(1.0)


async def _timed(awaitable: Awaitable[None]) -> float:
    began = time.monotonic()
    await awaitable
    return time.monotonic() - began


async def _relay_stats(relay: RelayProcess) -> dict[str, object]:
    with contextlib.suppress(Exception):
        return await relay.command("stats")
    return {}


# ---------------------------------------------------------------------- CLI


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m loadtest soakreal", description=__doc__.split("\n")[0]
    )
    p.add_argument("--seconds", type=float, default=600.0, help="how long faults are injected")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--clients", type=int, default=16)
    p.add_argument("--rate", type=float, default=20.0, help="upstream writes per second")
    p.add_argument("--faults", default=",".join(FAULT_KINDS), help="comma-separated kinds")
    p.add_argument("--decks", type=int, default=0, help="rounds of every fault (not --seconds)")
    p.add_argument("--recovery-bound", type=float, default=5.0)
    p.add_argument("--storm-lines", type=int, default=40)
    p.add_argument("--rss-budget-mib", type=float, default=400.0)
    p.add_argument("--short-faults", action="store_true", help="the test suite's fault lengths")
    p.add_argument("--no-kubectl", action="store_true")
    p.add_argument("--strict", action="store_true", help="count known issues as violations")
    p.add_argument("--sabotage", choices=("skip-event", "duplicate-event"))
    p.add_argument("--drop-write", type=int, help="the model forgets this pod write (self-test)")
    p.add_argument("--workdir", type=Path, help="keep the logs here (default: a temporary one)")
    p.add_argument("--out", type=Path, help="write soakreal.md and soakreal.json here")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    assets = find_assets(_ASSETS_FALLBACK)
    if assets is None:
        print(ASSETS_HINT, file=sys.stderr)
        return 2
    config = RealSoakConfig(
        seconds=args.seconds,
        seed=args.seed,
        clients=args.clients,
        rate=args.rate,
        faults=tuple(k for k in args.faults.split(",") if k),
        decks=args.decks,
        recovery_bound=args.recovery_bound,
        storm_lines=args.storm_lines,
        rss_budget_mib=args.rss_budget_mib,
        kubectl=not args.no_kubectl,
        strict=args.strict,
        sabotage=args.sabotage,
        drop_write=args.drop_write,
    )
    if args.short_faults:
        config = replace(config, times=FaultTimes.short())
    if args.workdir:
        args.workdir.mkdir(parents=True, exist_ok=True)
    report = asyncio.run(run_real_soak(config, assets, workdir=args.workdir))
    command = "python -m loadtest soakreal " + " ".join(argv if argv is not None else sys.argv[1:])
    text = f"# Chaos against the real API server\n\n`{command}`\n\n{report.render()}\n"
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "soakreal.md").write_text(text)
        (args.out / "soakreal.json").write_bytes(
            orjson.dumps(report.to_json(), option=orjson.OPT_INDENT_2)
        )
    return 1 if report.violations.total else 0


if __name__ == "__main__":
    sys.exit(main())
