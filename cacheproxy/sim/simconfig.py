"""The simulator's settings, and the switches for the behaviours that differ between Kubernetes
versions (or that the simulator long simplified).

Every switch defaults to what the simulator always did, which is current Kubernetes where the two
differ; :meth:`SimConfig.kube_1_28`, :meth:`SimConfig.kube_1_32` and :meth:`SimConfig.kube_1_36`
set them all as those kube-apiserver versions behave (the project's real-server tests run them). ``docs/simulator.md``
describes each one for users.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from cacheproxy.kube.versions import UNCACHED
from cacheproxy.sim.policy import Policy

__all__ = ["SimConfig"]


@dataclass
class SimConfig:
    """Settings of one :class:`~cacheproxy.sim.Simulator`."""

    git_version: str = "v1.33.0"
    """What ``/version`` reports."""
    history_limit: int = 10_000
    """Writes kept for watches to resume from; older ones are compacted away (→ 410)."""
    bookmark_interval: float = 60.0
    """Seconds between the bookmarks of a watch that asked for them."""
    rv_wait: float = 3.0
    """How long a read at an RV not yet reached waits before its 504 (the watch cache's 3 s)."""
    watch_buffer: int = 10_000
    """Events a watcher may have pending before it is closed as too slow."""
    policy: Policy | None = None
    """Auth policy; None = no authentication, everything allowed."""

    # ---------------------------------------------------------------- version switches

    watch_list: bool = True
    """The ``WatchList`` feature gate (on in current servers, off by default in 1.28). Off, a watch
    with ``sendInitialEvents`` is a 422. On, a watch from RV "" or "0" that sets neither
    ``sendInitialEvents`` nor ``resourceVersionMatch`` is served as a watch-list (its initial
    events end with the ``k8s.io/initial-events-end`` bookmark when it allows bookmarks), as the
    API server defaults it."""
    per_resource_cache: bool = False
    """Each resource's watch cache knows only the RVs of its own writes and of etcd's progress
    notifications, as in kube-apiserver; lists at RV 0 carry that RV, reads at a newer RV wait for
    it (and 504 after ``rv_wait``), bookmarks carry it and come only once it moved past the
    watch's RV. Reads the 1.28 cacher hands to etcd (RV unset, exact RVs, ``limit`` with an RV
    other than 0, continue tokens) are answered at the global RV. Off: one RV for every cache."""
    progress_notify_interval: float | None = 600.0
    """With ``per_resource_cache``: how often every cache learns the current RV from etcd (etcd's
    ``--experimental-watch-progress-notify-interval``, 10 min). None: only when asked
    (:meth:`Simulator.progress_notify`)."""
    late_initial_events_end: bool = False
    """With ``per_resource_cache`` (1.27-1.30): a watch-list's end bookmark waits until the
    resource's cache reaches the RV the watch-list asked for (for RV "": the current RV), which on
    a quiet resource takes until its next write or progress notification. Off: the cache catches
    up first and the bookmark follows the initial events at once."""
    rv0_list_ignores_limit: bool = False
    """A list at RV "0" served from the watch cache is the whole collection whatever its
    ``limit`` (1.28, 1.32 and 1.36). Off: ``limit`` is honoured (as cacheproxy
    does), so pages and continue tokens are exercised."""
    uncached_resources: frozenset[str] = field(default_factory=frozenset)
    """Resources without a watch cache (kube-apiserver: ``events``, in every version): their
    reads and watches are etcd's (a future RV is a 504 at once, a compacted one "too old" in
    etcd's words) and a watch-list of them is a 422."""
    future_watch_waits: bool = True
    """A watch from an RV the cache has not reached waits ``rv_wait``, then 504s. Off (1.28): it
    starts at once and sends the events after that RV as they come."""
    pod_generation: bool = True
    """Pods get ``metadata.generation`` (current servers; 1.28 set none)."""
    compaction_interval: float | None = None
    """Compact the storage every so many seconds up to the RV of the previous round, as
    kube-apiserver's ``--etcd-compaction-interval`` (5 min) has etcd do: exact lists and continue
    tokens then expire. None: only by ``history_limit`` and on request."""
    consistent_list_from_cache: bool = True
    """With ``per_resource_cache`` (``ConsistentListFromCache``, on from 1.31; KEP-2340): a list
    with RV unset and no ``limit`` is the resource's cache's, once the cache caught up with etcd
    (it asks etcd for progress), and a read waiting for an RV its cache has not reached makes it
    ask at once (so an RV of another resource's write arrives without a write of its own). Off
    (1.28): such lists are etcd's, and a cache learns newer RVs only from its resource's writes
    and the periodic progress notifications."""
    watch_list_from_storage: bool = True
    """A watch-list of a resource without a watch cache (``uncached_resources``) is served from
    etcd: its objects, then the initial-events-end bookmark (1.32). Off (1.28): a 422."""
    service_status_validation: bool = True
    """A ``/status`` write giving a Service that is not of type LoadBalancer load-balancer
    ingress points is a 422 (1.32). Off (1.28): it is stored."""
    list_from_cache_snapshot: bool = False
    """``ListFromCacheSnapshot`` (KEP-4988, beta and on in 1.36): a resource's watch cache keeps
    a snapshot of every RV of its history and serves exact lists and continue tokens from them,
    also after etcd compacted that RV (200, not 410); an exact list at an RV it has not reached
    waits for it as the cache's reads do (504 after ``rv_wait``). Older than its history, etcd's
    rules apply. Off (1.28, 1.32): etcd serves them."""

    @classmethod
    def kube_1_28(cls, **overrides: Any) -> SimConfig:
        """Every switch as kube-apiserver v1.28.7 behaves (``WatchList`` off, as by default), with
        ``overrides`` on top (``watch_list=True`` for a server started with the gate)."""
        settings: dict[str, Any] = {
            "git_version": "v1.28.7",
            "watch_list": False,
            "per_resource_cache": True,
            "late_initial_events_end": True,
            "rv0_list_ignores_limit": True,
            "uncached_resources": UNCACHED,
            "future_watch_waits": False,
            "pod_generation": False,
            "compaction_interval": 300.0,
            "consistent_list_from_cache": False,
            "watch_list_from_storage": False,
            "service_status_validation": False,
        }
        return cls(**{**settings, **overrides})

    @classmethod
    def kube_1_32(cls, **overrides: Any) -> SimConfig:
        """Every switch as kube-apiserver v1.32 behaves (``WatchList`` and
        ``ConsistentListFromCache`` on, as by default), with ``overrides`` on top."""
        settings: dict[str, Any] = {
            "git_version": "v1.32.0",
            "watch_list": True,
            "per_resource_cache": True,
            "late_initial_events_end": False,
            "rv0_list_ignores_limit": True,
            "uncached_resources": UNCACHED,
            "future_watch_waits": False,
            "pod_generation": False,
            "compaction_interval": 300.0,
            "consistent_list_from_cache": True,
            "watch_list_from_storage": True,
            "service_status_validation": True,
        }
        return cls(**{**settings, **overrides})

    @classmethod
    def kube_1_36(cls, **overrides: Any) -> SimConfig:
        """Every switch as kube-apiserver v1.36 behaves (``ListFromCacheSnapshot`` on, pods with
        ``metadata.generation``), with ``overrides`` on top."""
        settings: dict[str, Any] = {
            **dataclasses.asdict(cls.kube_1_32()),
            "git_version": "v1.36.2",
            "pod_generation": True,
            "list_from_cache_snapshot": True,
        }
        settings.pop("policy")
        return cls(**{**settings, **overrides})

    @classmethod
    def behaving_as(cls, version: str, **overrides: Any) -> SimConfig:
        """The preset of kube-apiserver ``version`` (``1.28``, ``1.32``, ``1.36``), with
        ``overrides`` on top."""
        presets = {"1.28": cls.kube_1_28, "1.32": cls.kube_1_32, "1.36": cls.kube_1_36}
        preset = presets.get(version)
        if preset is None:
            raise ValueError(f"no preset for kube-apiserver {version}: {', '.join(presets)}")
        return preset(**overrides)

    def replace(self, **changes: Any) -> SimConfig:
        return dataclasses.replace(self, **changes)
