"""The faults of the real-server soak: what each does, how long it lasts, and when it is over.

Each fault is an *episode*: injected at ``began``, upstream (or the link, or the daemon) healthy
again at ``restored``; the soak then measures how long the daemon takes to catch up.

| kind | what happens |
|---|---|
| ``apiserver-kill`` | kube-apiserver SIGKILLed and started again over the same etcd (every other time etcd's revision moves on meanwhile); its new watch cache begins after the daemon's RVs, so the daemon relists |
| ``etcd-compact`` | etcd compacted at its current revision (beside the API server's own compaction every ``--etcd-compaction-interval``), then the daemon's upstream connections cut, so it resumes its watches from RVs etcd no longer has |
| ``etcd-pause`` | etcd frozen (SIGSTOP) longer than the daemon's watch timeouts, then resumed; writes hang meanwhile and land when it resumes |
| ``daemon-kill`` | the daemon SIGKILLed and started again on the same port (over once it listens) |
| ``link-latency`` | the relay between the daemon and the API server adds a one-way delay |
| ``link-bandwidth`` | the relay limits each direction's rate (below the churn's event rate) |
| ``link-stall`` | the relay forwards nothing, then everything (every other time it then cuts the connections) |
"""

from __future__ import annotations

import asyncio
import functools
import random
import signal
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from cacheproxy.envtest import Cluster
from loadtest.clients.soakreal_writes import EtcdProbe, Recorder
from loadtest.harness.relay import RelayProcess
from loadtest.harness.soakreal_daemon import DaemonProcess

__all__ = ["FAULT_KINDS", "Episode", "FaultTimes", "Injector"]

FAULT_KINDS = (
    "apiserver-kill",
    "etcd-compact",
    "etcd-pause",
    "daemon-kill",
    "link-latency",
    "link-bandwidth",
    "link-stall",
)


@dataclass(frozen=True)
class FaultTimes:
    """How long faults last (seconds) and how hard they are."""

    etcd_pause: tuple[float, float] = (22.0, 30.0)
    """Longer than the daemon's upstream watches (10-20 s)."""
    link: tuple[float, float] = (10.0, 20.0)
    """Latency and bandwidth limits."""
    stall: tuple[float, float] = (10.0, 25.0)
    latency: tuple[float, float] = (0.2, 0.5)
    """One way."""
    bandwidth: tuple[float, float] = (15_000.0, 40_000.0)
    """Bytes/s per direction (the churn's watch events need more)."""

    @classmethod
    def short(cls) -> FaultTimes:
        """For the 60-90 s run of the test suite."""
        return cls(etcd_pause=(21.0, 22.0), link=(4.0, 5.0), stall=(6.0, 7.0))


@dataclass
class Episode:
    """One fault, and what followed it (times are wall-clock epoch seconds)."""

    kind: str
    began: float
    restored: float = 0.0
    detail: str = ""
    caught_up: float | None = None
    """When the daemon's lists first equalled upstream after ``restored``."""
    compare: str = ""
    """The daemon's lists against the API server's, at the RV it caught up at."""
    ended: float = 0.0
    """When the next episode began (or the run ended): the window of its aftermath."""
    notes: list[str] = field(default_factory=list)

    @property
    def recovery(self) -> float | None:
        return None if self.caught_up is None else max(0.0, self.caught_up - self.restored)


class Injector:
    """Injects one fault at a time (:meth:`inject`), returning its episode once restored."""

    def __init__(
        self,
        *,
        cluster: Cluster,
        relay: RelayProcess,
        daemon: DaemonProcess,
        etcd: EtcdProbe,
        recorder: Recorder,
        rng: random.Random,
        times: FaultTimes,
        pool: ThreadPoolExecutor,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.cluster = cluster
        self.relay = relay
        self.daemon = daemon
        self.etcd = etcd
        self.recorder = recorder
        self.rng = rng
        self.times = times
        self.pool = pool
        """One long-lived thread for the cluster's blocking calls: the processes it starts die
        with the thread that started them (``PR_SET_PDEATHSIG``), so not a short-lived one."""
        self.clock = clock
        self._count: dict[str, int] = {}

    async def _blocking(self, call: Callable[[], object]) -> None:
        await asyncio.get_running_loop().run_in_executor(self.pool, call)

    async def inject(self, kind: str) -> Episode:
        n = self._count[kind] = self._count.get(kind, 0) + 1
        episode = Episode(kind, self.clock())
        rng, times = self.rng, self.times
        if kind == "apiserver-kill":
            bump = n % 2 == 0
            restart = functools.partial(
                self.cluster.restart_apiserver, signal.SIGKILL, bump_revision=bump
            )
            await self._blocking(restart)
            episode.detail = f"down {self.clock() - episode.began:.1f} s" + (
                ", etcd's revision moved on meanwhile" if bump else ""
            )
        elif kind == "etcd-compact":
            revision = await self.etcd.revision()
            # Not past a write still being resolved: the recorder may ask etcd about it.
            target = min(revision, self.recorder.floor())
            await self._blocking(functools.partial(self.cluster.compact, target))
            answer = await self.relay.command("cut")
            episode.detail = f"compacted at {target}, {answer['closed']} connections cut"
        elif kind == "etcd-pause":
            seconds = rng.uniform(*times.etcd_pause)
            self.cluster.pause_etcd()
            try:
                await asyncio.sleep(seconds)
            finally:
                self.cluster.resume_etcd()
            episode.detail = f"paused {seconds:.1f} s"
        elif kind == "daemon-kill":
            self.daemon.kill()
            pause = rng.uniform(0.0, 1.0)
            await asyncio.sleep(pause)
            self.daemon.spawn()
            # Over once the new process listens (the interpreter's start is not the daemon's).
            took = await self.daemon.wait_listening()
            episode.detail = f"started again {pause:.1f} s later, listening {took:.1f} s after"
        elif kind == "link-latency":
            latency, seconds = rng.uniform(*times.latency), rng.uniform(*times.link)
            await self._hold(f"latency {latency:.3f}", "latency 0", seconds)
            episode.detail = f"+{latency * 1000:.0f} ms each way for {seconds:.1f} s"
        elif kind == "link-bandwidth":
            rate, seconds = rng.uniform(*times.bandwidth), rng.uniform(*times.link)
            await self._hold(f"bandwidth {rate:.0f}", "bandwidth 0", seconds)
            episode.detail = f"{rate / 1000:.0f} kB/s each way for {seconds:.1f} s"
        elif kind == "link-stall":
            seconds = rng.uniform(*times.stall)
            await self._hold("stall", "flow", seconds)
            episode.detail = f"nothing forwarded for {seconds:.1f} s"
            if n % 2 == 0:
                answer = await self.relay.command("cut")
                episode.detail += f", then {answer['closed']} connections cut"
        else:
            raise ValueError(f"unknown fault {kind!r}")
        episode.restored = self.clock()
        return episode

    async def _hold(self, start: str, end: str, seconds: float) -> None:
        await self.relay.command(start)
        try:
            await asyncio.sleep(seconds)
        finally:
            await self.relay.command(end)
