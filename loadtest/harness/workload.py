"""N distinct realistic pods as pre-encoded watch lines: the input of the ingest benchmark.

Two shapes of pod (``shape``):

- ``sample`` (the budget's reference, docs/design.md §6): every pod is ``k8s-samples/protocol/pod.json``
  itself, read and parsed once, with what differs between real pods varied (:func:`vary_sample_pod`):
  name suffix and pod-template-hash, namespace, uid, labels, checksum annotation, the
  ServiceAccount volume suffix, per-app env values, ``spec.nodeName``, creation and managedFields
  times; and, when the sample has them, ``generateName``, ownerReferences, host and pod IPs and
  container restart counts. Keys, managedFields, containers and status are the sample's: the
  shape and size stay its own (~4.3 KB compact).
- ``generated``: pods from :func:`cacheproxy.sim.workload.make_pod`, a ReplicaSet's Running pod
  with its kubelet status and both managers' managedFields (1 or 2 containers, ~7.8 KB a line),
  one pod in ten Pending.

Either way the pods carry what the API server would have added (``uid``, ``resourceVersion``,
``creationTimestamp``) and are spread as in a real cluster: 25 pods per app, 10 apps per
namespace, 30 pods per node.

The lines are what a watch stream carries, one compact JSON event each:

- ``added``: ``ADDED`` events, RVs 1..N (the initial events of a watch-list);
- ``initial_end``: the ``BOOKMARK`` annotated ``k8s.io/initial-events-end`` at RV N;
- ``modified``: one ``MODIFIED`` event per pod, in shuffled pod order, RVs N+1..2N:
  :func:`~cacheproxy.sim.workload.mutate_pod` for ``generated``, :func:`mutate_sample_pod` (the
  same kind of update, on the fields the sample has) for ``sample``.

Building a generated pod costs ~2 ms (more than ingesting it), so pods are built in processes, in
chunks whose seeds depend only on ``seed`` and the chunk's position: the same ``seed`` gives the
same lines whatever ``jobs`` is.
"""

from __future__ import annotations

import hashlib
import random
import uuid
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import orjson

from cacheproxy.sim.workload import make_pod, mutate_pod

__all__ = [
    "DEFAULT_SAMPLE",
    "SHAPES",
    "Shape",
    "Workload",
    "build_workload",
    "load_sample",
    "mutate_sample_pod",
    "vary_sample_pod",
]

Shape = Literal["generated", "sample"]
SHAPES: tuple[Shape, ...] = ("sample", "generated")
DEFAULT_SAMPLE = (
    Path(__file__).resolve().parents[3] / "shared" / "k8s-samples" / "protocol" / "pod.json"
)
"""The reference pod of the budget (``../shared`` beside the repository, as the tests find it)."""

PODS_PER_APP = 25
APPS_PER_NAMESPACE = 10
PODS_PER_NODE = 30
_CHUNK = 2_000  # a multiple of PODS_PER_APP: an app's pods are built in one chunk

# ObjectMeta keys in the order the API server serialises them.
_META_ORDER = (
    "name",
    "generateName",
    "namespace",
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
)


@dataclass(frozen=True, slots=True)
class Workload:
    """Pre-encoded watch lines for ``n`` pods (bytes only: nothing here is tracked by the GC)."""

    n: int
    seed: int
    added: list[bytes]
    initial_end: bytes
    modified: list[bytes]
    shape: Shape = "generated"

    @property
    def last_rv(self) -> int:
        return 2 * self.n

    def mean_line_bytes(self) -> float:
        """Mean size of an ``ADDED`` line (the pod, managedFields included, in its event)."""
        return sum(map(len, self.added)) / max(1, self.n)

    def mean_modified_line_bytes(self) -> float:
        return sum(map(len, self.modified)) / max(1, self.n)


def load_sample(path: Path | str = DEFAULT_SAMPLE) -> dict[str, Any]:
    """The reference pod, parsed (once per workload)."""
    pod = orjson.loads(Path(path).read_bytes())
    if not isinstance(pod, dict) or pod.get("kind") != "Pod" or "metadata" not in pod:
        raise ValueError(f"{path} is not a Pod")
    return pod


def build_workload(
    n: int,
    *,
    seed: int = 1,
    jobs: int = 1,
    shape: Shape = "generated",
    sample: dict[str, Any] | Path | str | None = None,
) -> Workload:
    """The lines for ``n`` pods of ``shape``; ``jobs`` > 1 builds chunks in that many processes.

    ``sample`` is the reference pod of the ``sample`` shape (parsed, or its path; default
    :data:`DEFAULT_SAMPLE`); the ``generated`` shape ignores it.
    """
    if n < 1:
        raise ValueError("a workload has at least one pod")
    if shape not in SHAPES:
        raise ValueError(f"unknown workload shape {shape!r}; expected one of {SHAPES}")
    template = b""
    if shape == "sample":
        pod = sample if isinstance(sample, dict) else load_sample(sample or DEFAULT_SAMPLE)
        template = orjson.dumps(pod)
    order = list(range(n))
    random.Random(f"{seed}-order").shuffle(order)  # order[i]: position of pod i's MODIFIED
    chunks = [
        _ChunkSpec(
            n=n,
            seed=seed,
            start=start,
            stop=min(n, start + _CHUNK),
            slots=tuple(order[start : start + _CHUNK]),
            template=template,
        )
        for start in range(0, n, _CHUNK)
    ]
    if jobs > 1 and len(chunks) > 1:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            built = list(pool.map(_build_chunk, chunks))
    else:
        built = [_build_chunk(c) for c in chunks]
    added: list[bytes] = []
    modified: list[bytes] = [b""] * n
    for spec, (chunk_added, chunk_modified) in zip(chunks, built, strict=True):
        added.extend(chunk_added)
        for slot, line in zip(spec.slots, chunk_modified, strict=True):
            modified[slot] = line
    end = {
        "type": "BOOKMARK",
        "object": {
            "kind": "Pod",
            "apiVersion": "v1",
            "metadata": {
                "resourceVersion": str(n),
                "annotations": {"k8s.io/initial-events-end": "true"},
            },
        },
    }
    return Workload(
        n=n,
        seed=seed,
        added=added,
        initial_end=orjson.dumps(end),
        modified=modified,
        shape=shape,
    )


@dataclass(frozen=True, slots=True)
class _ChunkSpec:
    n: int
    seed: int
    start: int
    stop: int
    slots: tuple[int, ...]
    """Positions of this chunk's MODIFIED events in the whole shuffled sequence."""
    template: bytes = b""
    """The sample pod, compact JSON (``sample`` shape); empty for ``generated``."""


def _build_chunk(spec: _ChunkSpec) -> tuple[list[bytes], list[bytes]]:
    rng = random.Random(f"{spec.seed}-chunk-{spec.start}")
    nodes = max(1, spec.n // PODS_PER_NODE)
    added: list[bytes] = []
    modified: list[bytes] = []
    names: set[tuple[str, str]] = set()
    for i in range(spec.start, spec.stop):
        app_no = i // PODS_PER_APP
        node = f"node-{i % nodes}"
        if spec.template:
            # Each pod is the sample parsed anew: a deep copy ~10x faster than copy.deepcopy.
            pod = vary_sample_pod(rng, orjson.loads(spec.template), app_no=app_no, node=node)
        else:
            pod = _generated_pod(rng, app_no=app_no, node=f"node-{i % nodes:05d}")
        meta = pod["metadata"]
        key = (meta["namespace"], meta["name"])
        if key in names:  # a 1-in-10^7 suffix clash: keep names distinct
            meta["name"] = f"{meta['name']}{i}"
        names.add((meta["namespace"], meta["name"]))
        meta["resourceVersion"] = str(i + 1)
        pod["metadata"] = _ordered(meta)
        added.append(orjson.dumps({"type": "ADDED", "object": pod}))
        new = mutate_sample_pod(rng, pod) if spec.template else mutate_pod(rng, pod)
        new["metadata"]["resourceVersion"] = str(spec.n + 1 + spec.slots[i - spec.start])
        modified.append(orjson.dumps({"type": "MODIFIED", "object": new}))
    return added, modified


def _generated_pod(rng: random.Random, *, app_no: int, node: str) -> dict[str, Any]:
    pod = make_pod(
        rng,
        namespace=f"ns-{app_no // APPS_PER_NAMESPACE:04d}",
        app=f"app-{app_no:05d}",
        node=node,
        containers=1 + app_no % 2,
        phase="Pending" if rng.random() < 0.1 else "Running",
    )
    meta = pod["metadata"]
    meta["uid"] = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    meta["creationTimestamp"] = meta["managedFields"][0]["time"]
    return pod


def _ordered(meta: dict[str, Any]) -> dict[str, Any]:
    out = {k: meta[k] for k in _META_ORDER if k in meta}
    out.update((k, v) for k, v in meta.items() if k not in out)
    return out


# ---------------------------------------------------------------------- the sample shape

# k8s.io/apimachinery/pkg/util/rand: the alphabet of generated name suffixes.
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_TIERS = ("backend", "frontend", "worker", "api")
_TEAMS = 8
_COUNTER_ANNOTATION = "bench/seq"
"""The sample's annotation a controller keeps bumping (its manager owns only this key)."""
_TS = "%Y-%m-%dT%H:%M:%SZ"
_SA_VOLUME = "kube-api-access-"


def _ts(moment: datetime) -> str:
    return moment.strftime(_TS)


def _parse_ts(value: str) -> datetime:
    return datetime.strptime(value, _TS).replace(tzinfo=UTC)


def _hash(*parts: object) -> str:
    return hashlib.sha256("\x00".join(map(str, parts)).encode()).hexdigest()


def _suffix(rng: random.Random, n: int = 5) -> str:
    return "".join(rng.choice(_SUFFIX_ALPHABET) for _ in range(n))


def _node_ip(node: str) -> str:
    i = int(_hash("node", node)[:6], 16)
    return f"10.0.{i // 250 % 256}.{i % 250 + 4}"


def _version(app: str, previous: bool) -> str:
    """An app's current version (or the one before, during a rollout), e.g. ``v3.4.5``."""
    h = int(_hash("version", app)[:8], 16)
    major, minor, patch = 1 + h % 9, h // 9 % 20, 1 + h // 180 % 20
    return f"v{major}.{minor}.{patch - 1 if previous else patch}"


def vary_sample_pod(
    rng: random.Random, pod: dict[str, Any], *, app_no: int, node: str
) -> dict[str, Any]:
    """``pod`` (a fresh copy of the sample, changed in place and returned) made pod ``app_no``'s.

    What two pods of a cluster differ in is changed; what is absent from the sample is not added,
    so the pod keeps the sample's keys and about its size. Values an app's pods share (env values,
    config checksum, template hash) derive from the app's name, the rest from ``rng``.
    """
    app = f"app-{app_no}"
    namespace = f"ns-{app_no // APPS_PER_NAMESPACE}"
    tier = _TIERS[app_no % len(_TIERS)]
    version = _version(app, previous=rng.random() < 0.2)  # one pod in five: a rollout
    template_hash = _hash("template", namespace, app, version)[:10]
    replica_set = f"{app}-{tier}-{template_hash}"
    meta = pod["metadata"]
    meta["name"] = f"{replica_set}-{_suffix(rng)}"
    if "generateName" in meta:
        meta["generateName"] = f"{replica_set}-"
    meta["namespace"] = namespace
    meta["uid"] = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    labels = meta.get("labels")
    if isinstance(labels, dict):
        values = {
            "app": app,
            "pod-template-hash": template_hash,
            "team": f"team-{app_no % _TEAMS}",
            "tier": tier,
            "version": version,
        }
        labels.update((k, v) for k, v in values.items() if k in labels)
    annotations = meta.get("annotations")
    if isinstance(annotations, dict):
        if "checksum/config" in annotations:
            annotations["checksum/config"] = _hash("config", namespace, app, version)
        if _COUNTER_ANNOTATION in annotations:
            annotations[_COUNTER_ANNOTATION] = str(rng.randrange(10**8, 10**9))
    for owner in meta.get("ownerReferences") or ():
        if owner.get("kind") == "ReplicaSet":
            owner["name"] = replica_set
            owner["uid"] = str(uuid.UUID(hex=_hash("uid", namespace, replica_set)[:32], version=4))
    _vary_times(rng, pod)
    spec = pod.get("spec")
    if isinstance(spec, dict):
        _vary_spec(rng, spec, app=app, namespace=namespace, version=version, node=node)
    status = pod.get("status")
    if isinstance(status, dict):
        _vary_status(rng, status, node=node)
    return pod


def _vary_times(rng: random.Random, pod: dict[str, Any]) -> None:
    """Created within the 30 days before the sample's own creation; each later manager's write
    some minutes after the one before, as in the sample."""
    meta = pod["metadata"]
    created = meta.get("creationTimestamp")
    base = _parse_ts(created) if created else datetime(2026, 11, 29, 14, 0, tzinfo=UTC)
    moment = base - timedelta(seconds=rng.randint(0, 30 * 86_400))
    meta["creationTimestamp"] = _ts(moment)
    shift = moment - base
    for i, managed in enumerate(meta.get("managedFields") or ()):
        if i:
            moment += timedelta(seconds=rng.randint(1, 900))
        if "time" in managed:
            managed["time"] = _ts(moment)
    if isinstance(pod.get("status"), dict):
        _shift_times(pod["status"], shift)  # what the kubelet reported moves with the creation


_STATUS_TIMES = frozenset(("startTime", "lastTransitionTime", "startedAt", "finishedAt"))


def _shift_times(value: Any, shift: timedelta) -> None:
    if isinstance(value, list):
        for item in value:
            _shift_times(item, shift)
    elif isinstance(value, dict):
        for k, v in value.items():
            if k in _STATUS_TIMES and isinstance(v, str) and v:
                value[k] = _ts(_parse_ts(v) + shift)
            else:
                _shift_times(v, shift)


def _vary_spec(
    rng: random.Random, spec: dict[str, Any], *, app: str, namespace: str, version: str, node: str
) -> None:
    if "nodeName" in spec:
        spec["nodeName"] = node
    renamed: dict[str, str] = {}
    for volume in spec.get("volumes") or ():
        name = volume.get("name", "")
        if name.startswith(_SA_VOLUME):
            renamed[name] = volume["name"] = f"{_SA_VOLUME}{_suffix(rng)}"
    for container in spec.get("containers") or ():
        image = container.get("image")
        if isinstance(image, str) and ":" in image:
            container["image"] = f"{image.rsplit(':', 1)[0]}:{version.removeprefix('v')}"
        for mount in container.get("volumeMounts") or ():
            mount["name"] = renamed.get(mount.get("name", ""), mount.get("name"))
        for env in container.get("env") or ():
            value = env.get("value")
            if not isinstance(value, str):
                continue
            if value.startswith("postgres://"):
                db = int(_hash("db", app)[:4], 16) % 3
                env["value"] = f"postgres://{app}@db-{db}.{namespace}.svc:5432/{app}"
            elif value.startswith("value-"):
                env["value"] = f"value-{int(_hash(app, env.get('name'))[:12], 16) % 10**9}"


def _vary_status(rng: random.Random, status: dict[str, Any], *, node: str) -> None:
    """Addresses and restart counts, where the sample's status has them."""
    if "hostIP" in status:
        status["hostIP"] = _node_ip(node)
        if "hostIPs" in status:
            status["hostIPs"] = [{"ip": status["hostIP"]}]
    if "podIP" in status:
        prefix = int(_hash("cidr", node)[:2], 16)
        status["podIP"] = f"10.244.{prefix}.{rng.randint(2, 254)}"
        if "podIPs" in status:
            status["podIPs"] = [{"ip": status["podIP"]}]
    for container in status.get("containerStatuses") or ():
        if "restartCount" in container:
            container["restartCount"] = rng.randint(1, 4) if rng.random() < 0.15 else 0


def mutate_sample_pod(rng: random.Random, pod: dict[str, Any]) -> dict[str, Any]:
    """A realistic update of a sample-shaped pod, as a new dict (``pod`` is not modified).

    As :func:`~cacheproxy.sim.workload.mutate_pod` does, but on the fields the pod already has, so
    that its shape and size stay the sample's: always bumps the counter annotation (``bench/seq``)
    and the write time of the manager that owns it; then, when the status has them, by chance
    flips a container's readiness with the ``Ready``/``ContainersReady`` conditions'
    ``lastTransitionTime``, or restarts a container (``restartCount`` + 1).
    """
    new: dict[str, Any] = orjson.loads(orjson.dumps(pod))  # a deep copy
    meta = new["metadata"]
    managed = meta.get("managedFields") or []
    stamps = [m["time"] for m in managed if m.get("time")]
    stamps.append(meta.get("creationTimestamp") or "2026-11-29T14:00:00Z")
    at = _ts(max(map(_parse_ts, stamps)) + timedelta(seconds=rng.randint(1, 90)))
    annotations = meta.setdefault("annotations", {})
    annotations[_COUNTER_ANNOTATION] = str(int(annotations.get(_COUNTER_ANNOTATION, "0")) + 1)
    owner = f"f:{_COUNTER_ANNOTATION}"
    for entry in managed:
        owned = entry.get("fieldsV1", {}).get("f:metadata", {}).get("f:annotations", {})
        if owner in owned and "time" in entry:
            entry["time"] = at
    status = new.get("status")
    statuses = status.get("containerStatuses") if isinstance(status, dict) else None
    if not isinstance(status, dict) or not statuses:
        return new
    roll = rng.random()
    if roll < 0.45:
        # Readiness flaps: one container's probe fails, or every container recovers.
        ready = not all(s.get("ready") for s in statuses)
        if ready:
            for s in statuses:
                s["ready"] = True
        else:
            rng.choice(statuses)["ready"] = False
        for condition in status.get("conditions") or ():
            if condition.get("type") in ("Ready", "ContainersReady"):
                condition["status"] = "True" if ready else "False"
                condition["lastTransitionTime"] = at
    elif roll < 0.7:
        s = rng.choice(statuses)
        s["restartCount"] = int(s.get("restartCount", 0)) + 1
        running = s.get("state", {}).get("running")
        if isinstance(running, dict) and "startedAt" in running:
            running["startedAt"] = at
    for entry in managed:
        if entry.get("subresource") == "status" and "time" in entry:
            entry["time"] = at
    return new
