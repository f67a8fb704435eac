"""Deterministic generators of realistic Kubernetes objects, for demos, load tests and tests.

Objects are plain JSON-ready dicts shaped like what a real API server returns (the reference is
``k8s-samples/protocol/pod.json``: key order, defaulted fields, managedFields), minus what the
server assigns itself (``uid``, ``resourceVersion``, ``creationTimestamp``, ``generation``): they
are what a client would POST. Status is included, as a controller or kubelet would have written it.

Every random choice comes from the caller's ``random.Random``, so a seed reproduces a workload.
What several generators must agree on (an app's tier, team, image and container template; a
ReplicaSet's ``pod-template-hash``; a node's IPs) is derived from *names* by hashing, not from the
rng, so a Deployment, its ReplicaSets and its Pods match whatever order they are made in.

managedFields are derived from the object (:func:`_field_set`), approximating structured-merge-diff
field sets: ``f:`` a field, ``k:`` a keyed list item, ``v:`` a set member, ``.`` a non-leaf node
its manager owns as a whole.
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
import re
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

__all__ = [
    "PHASES",
    "DemoSpec",
    "demo_objects",
    "make_configmap",
    "make_deployment",
    "make_event",
    "make_namespace",
    "make_node",
    "make_pod",
    "make_replicaset",
    "make_service",
    "mutate_pod",
    "template_hash",
]

JsonObject = dict[str, Any]

PHASES = ("Pending", "Running", "Succeeded", "Failed")
_EPOCH = datetime(2026, 11, 29, 14, 0, 0, tzinfo=UTC)
# k8s.io/apimachinery/pkg/util/rand: the alphabet of generated name suffixes (no vowels, no 0/1/3).
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_TIERS = ("backend", "frontend", "worker")
_SA_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
_CHURN_ANNOTATION = "sim.cacheproxy.dev/revision"
_CHURN_MANAGER = "cacheproxy-churn"


# ---------------------------------------------------------------------------- small helpers


def _digest(*parts: str) -> bytes:
    return hashlib.sha256("\x00".join(parts).encode()).digest()


def _ts(dt: datetime) -> str:
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_ts(value: str) -> datetime:
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


def _moment(rng: random.Random) -> datetime:
    return _EPOCH + timedelta(seconds=rng.randint(0, 3600))


def _suffix(rng: random.Random, n: int = 5) -> str:
    return "".join(rng.choice(_SUFFIX_ALPHABET) for _ in range(n))


def _hex(rng: random.Random, n: int) -> str:
    return f"{rng.getrandbits(4 * n):0{n}x}"


def _uid(*parts: str) -> str:
    """A stable uid for an object we reference but do not create here (an owner)."""
    return str(uuid.UUID(bytes=_digest("uid", *parts)[:16], version=4))


def _index(name: str) -> int:
    """``node-7`` → 7; other names hash to a small number."""
    m = re.search(r"(\d+)$", name)
    return int(m.group(1)) if m else _digest("index", name)[0]


def _node_ip(node: str) -> str:
    i = _index(node)
    return f"10.0.{i // 250 % 256}.{i % 250 + 4}"


def _pod_cidr_prefix(node: str) -> str:
    return f"10.244.{_index(node) % 256}"


# ---------------------------------------------------------------------------- managedFields

# Associative lists (``+listType=map``) and their keys, by field name; the first key tuple every
# item carries wins (container ports vs service ports).
_LIST_KEYS: dict[str, tuple[tuple[str, ...], ...]] = {
    "containers": (("name",),),
    "env": (("name",),),
    "volumes": (("name",),),
    "volumeMounts": (("mountPath",),),
    "ports": (("containerPort", "protocol"), ("port", "protocol")),
    "conditions": (("type",),),
    "podIPs": (("ip",),),
    "hostIPs": (("ip",),),
    "addresses": (("type",),),
    "ownerReferences": (("uid",),),
}
_SET_LISTS = frozenset({"finalizers", "podCIDRs", "clusterIPs", "ipFamilies"})
# ``+structType=atomic`` / ``+mapType=atomic``: owned as a leaf.
_ATOMIC = frozenset({"fieldRef", "resourceFieldRef", "configMapKeyRef", "selector"})
# Nodes that carry no ``.`` of their own in real field sets (required or pure containers).
_NO_DOT = frozenset({"metadata", "spec", "status", "containers", "template", "strategy"})


def _field_set(value: Any, name: str = "", depth: int = 0) -> JsonObject:
    node: JsonObject = {}
    if isinstance(value, dict) and name not in _ATOMIC:
        if value and depth >= 2 and name not in _NO_DOT:
            node["."] = {}
        for key in value:
            node[f"f:{key}"] = _field_set(value[key], key, depth + 1)
    elif isinstance(value, list) and value:
        keys = next(
            (
                ks
                for ks in _LIST_KEYS.get(name, ())
                if all(isinstance(item, dict) and all(k in item for k in ks) for item in value)
            ),
            None,
        )
        if keys is not None:
            if name not in _NO_DOT:
                node["."] = {}
            for item in value:
                ident = json.dumps({k: item[k] for k in sorted(keys)}, separators=(",", ":"))
                node[f"k:{ident}"] = _field_set(item, "", depth + 1)
        elif name in _SET_LISTS:
            node["."] = {}
            for item in value:
                node[f"v:{json.dumps(item)}"] = {}
    return dict(sorted(node.items()))


def _managed(
    manager: str, time: datetime, owned: JsonObject, *, api_version: str = "v1", sub: str = ""
) -> JsonObject:
    """A managedFields entry of ``manager`` owning every field of ``owned``."""
    return _entry(manager, time, _field_set(owned), api_version=api_version, sub=sub)


def _entry(
    manager: str, time: datetime, fields: JsonObject, *, api_version: str = "v1", sub: str = ""
) -> JsonObject:
    entry: JsonObject = {
        "manager": manager,
        "operation": "Update",
        "apiVersion": api_version,
        "time": _ts(time),
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    }
    if sub:
        entry["subresource"] = sub
    return entry


# ---------------------------------------------------------------------------- pod templates


@dataclass(frozen=True)
class _App:
    """What every object of one app agrees on, derived from its name."""

    name: str
    tier: str
    team: str
    image: str
    current: str
    previous: str

    @property
    def deployment(self) -> str:
        return f"{self.name}-{self.tier}"


def _app(name: str) -> _App:
    d = _digest("app", name)
    tier = _TIERS[d[0] % len(_TIERS)]
    team = f"team-{d[1] % 5}"
    image = {"backend": "api", "frontend": "web", "worker": "worker"}[tier]
    major, minor, patch = 1 + d[2] % 4, d[3] % 30, d[4] % 9
    return _App(
        name=name,
        tier=tier,
        team=team,
        image=f"registry.example.com/{team}/{image}",
        current=f"v{major}.{minor}.{patch + 1}",
        previous=f"v{major}.{minor}.{patch}",
    )


def template_hash(namespace: str, app: str, version: str) -> str:
    """The ``pod-template-hash`` of ``app``'s ReplicaSet for ``version`` (10 hex, as in samples)."""
    return _digest("template", namespace, app, version).hex()[:10]


def _template_labels(a: _App, namespace: str, version: str) -> dict[str, str]:
    return {
        "app": a.name,
        "pod-template-hash": template_hash(namespace, a.name, version),
        "team": a.team,
        "tier": a.tier,
        "version": version,
    }


def _env_value(name: str, value: str) -> JsonObject:
    return {"name": name, "value": value}


def _env_field(name: str, path: str) -> JsonObject:
    return {"name": name, "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": path}}}


def _http_probe(path: str, port: int | str, period: int) -> JsonObject:
    return {
        "httpGet": {"path": path, "port": port, "scheme": "HTTP"},
        "timeoutSeconds": 1,
        "periodSeconds": period,
        "successThreshold": 1,
        "failureThreshold": 3,
    }


_CONTAINER_TAIL = {
    "terminationMessagePath": "/dev/termination-log",
    "terminationMessagePolicy": "File",
    "imagePullPolicy": "IfNotPresent",
}


def _main_container(
    t: random.Random, a: _App, namespace: str, version: str, *, guaranteed: bool
) -> JsonObject:
    settings = [
        _env_value(f"MAIN_SETTING_{i}", f"value-{t.randrange(10**9)}")
        for i in range(t.randint(2, 4))
    ]
    cpu = t.choice(("100m", "250m", "500m", "1"))
    memory = t.choice(("128Mi", "256Mi", "512Mi"))
    limits = (
        {"cpu": cpu, "memory": memory} if guaranteed else {"memory": f"{2 * int(memory[:-2])}Mi"}
    )
    return {
        "name": "main",
        "image": f"{a.image}:{version[1:]}",
        "args": [
            "--port=8080",
            "--metrics-port=9090",
            f"--log-level={t.choice(('info', 'debug'))}",
        ],
        "ports": [
            {"name": "http", "containerPort": 8080, "protocol": "TCP"},
            {"name": "metrics", "containerPort": 9090, "protocol": "TCP"},
        ],
        "env": [
            *settings,
            _env_field("POD_NAME", "metadata.name"),
            _env_value("DATABASE_URL", f"postgres://{a.name}@db-0.{namespace}.svc:5432/{a.name}"),
        ],
        "resources": {"limits": limits, "requests": {"cpu": cpu, "memory": memory}},
        "volumeMounts": [{"name": "config", "readOnly": True, "mountPath": "/etc/app"}],
        "readinessProbe": _http_probe("/healthz", 8080, 10),
        **_CONTAINER_TAIL,
    }


def _sidecar(t: random.Random, i: int, *, guaranteed: bool) -> JsonObject:
    requests = {"cpu": "10m", "memory": "32Mi"}
    small = {"limits": dict(requests) if guaranteed else {"memory": "64Mi"}, "requests": requests}
    kinds: list[JsonObject] = [
        {
            "name": "log-shipper",
            "image": "cr.fluentbit.io/fluent/fluent-bit:3.1.9",
            "args": ["--config=/fluent-bit/etc/fluent-bit.conf"],
            "env": [_env_value("FLUENT_OUTPUT_HOST", "logs.observability.svc")],
            "resources": small,
            "volumeMounts": [{"name": "varlog", "mountPath": "/var/log/app"}],
        },
        {
            "name": "envoy",
            "image": "envoyproxy/envoy:v1.31.2",
            "args": ["-c", "/etc/envoy/envoy.yaml", f"--concurrency={t.randint(1, 4)}"],
            "ports": [{"name": "envoy-admin", "containerPort": 9901, "protocol": "TCP"}],
            "resources": small,
            "readinessProbe": _http_probe("/ready", 9901, 5),
        },
        {
            "name": "metrics-exporter",
            "image": "prom/statsd-exporter:v0.27.1",
            "ports": [{"name": "statsd-metrics", "containerPort": 9102, "protocol": "TCP"}],
            "resources": small,
        },
    ]
    if i - 1 < len(kinds):
        c = kinds[i - 1]
    else:
        c = {"name": f"helper-{i}", "image": "busybox:1.36", "command": ["sleep", "infinity"]}
        c["resources"] = {}
    return {**c, **_CONTAINER_TAIL}


def _template_spec(namespace: str, a: _App, version: str, containers: int) -> JsonObject:
    """The pod spec as the ReplicaSet controller sends it: the same for every pod of a version."""
    t = random.Random(_digest("spec", namespace, a.name, version))
    guaranteed = t.random() < 0.2  # limits == requests everywhere: the Guaranteed QoS class
    items = [_main_container(t, a, namespace, version, guaranteed=guaranteed)]
    items += [_sidecar(t, i, guaranteed=guaranteed) for i in range(1, containers)]
    volumes: list[JsonObject] = [
        {"name": "config", "configMap": {"name": f"{a.name}-config", "defaultMode": 420}}
    ]
    if any(c["name"] == "log-shipper" for c in items):
        volumes.append({"name": "varlog", "emptyDir": {}})
    return {
        "volumes": volumes,
        "containers": items,
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "securityContext": {},
        "schedulerName": "default-scheduler",
    }


def _admitted_spec(spec: JsonObject, node: str, sa_volume: str) -> JsonObject:
    """The spec after admission (ServiceAccount token volume, default tolerations) and binding."""
    mount = {"name": sa_volume, "readOnly": True, "mountPath": _SA_MOUNT}
    containers = [
        _reorder_container(c | {"volumeMounts": [*c.get("volumeMounts", []), mount]})
        for c in spec["containers"]
    ]
    token = {
        "name": sa_volume,
        "projected": {
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {
                    "configMap": {
                        "name": "kube-root-ca.crt",
                        "items": [{"key": "ca.crt", "path": "ca.crt"}],
                    }
                },
                {
                    "downwardAPI": {
                        "items": [
                            {
                                "path": "namespace",
                                "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                            }
                        ]
                    }
                },
            ],
            "defaultMode": 420,
        },
    }
    toleration = {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
    return {
        "volumes": [*spec["volumes"], token],
        "containers": containers,
        "restartPolicy": spec["restartPolicy"],
        "terminationGracePeriodSeconds": spec["terminationGracePeriodSeconds"],
        "dnsPolicy": spec["dnsPolicy"],
        "serviceAccountName": "default",
        "serviceAccount": "default",
        "nodeName": node,
        "securityContext": spec["securityContext"],
        "schedulerName": spec["schedulerName"],
        "tolerations": [
            {"key": "node.kubernetes.io/not-ready", **toleration},
            {"key": "node.kubernetes.io/unreachable", **toleration},
        ],
        "priority": 0,
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
    }


_CONTAINER_ORDER = (
    "name",
    "image",
    "command",
    "args",
    "ports",
    "env",
    "resources",
    "volumeMounts",
    "livenessProbe",
    "readinessProbe",
    "terminationMessagePath",
    "terminationMessagePolicy",
    "imagePullPolicy",
)


def _reorder_container(c: JsonObject) -> JsonObject:
    """Container keys in the Go struct's order, as the API server serialises them."""
    return {k: c[k] for k in _CONTAINER_ORDER if k in c} | c


def _qos_class(spec: JsonObject) -> str:
    resources = [c.get("resources", {}) for c in spec["containers"]]
    if not any(r.get("limits") or r.get("requests") for r in resources):
        return "BestEffort"
    guaranteed = all(
        set(r.get("limits", {})) >= {"cpu", "memory"}
        and r.get("limits") == r.get("requests", r.get("limits"))
        for r in resources
    )
    return "Guaranteed" if guaranteed else "Burstable"


# ---------------------------------------------------------------------------- pod status


def _condition(
    kind: str, ok: bool, at: datetime, reason: str = "", message: str = ""
) -> JsonObject:
    c: JsonObject = {"type": kind, "status": "True" if ok else "False", "lastProbeTime": None}
    c["lastTransitionTime"] = _ts(at)
    if reason:
        c["reason"] = reason
    if message:
        c["message"] = message
    return c


def _image_id(image: str) -> str:
    repo = image.rsplit(":", 1)[0]
    return f"{repo}@sha256:{hashlib.sha256(image.encode()).hexdigest()}"


def _pod_status(
    rng: random.Random,
    spec: JsonObject,
    *,
    phase: str,
    start: datetime,
    pod_ip: str,
) -> JsonObject:
    """Status as the kubelet reports it for ``phase``."""
    if phase not in PHASES:
        raise ValueError(f"unsupported pod phase {phase!r}; expected one of {PHASES}")
    names = [c["name"] for c in spec["containers"]]
    running, done = phase == "Running", phase in ("Succeeded", "Failed")
    ready_at = start + timedelta(seconds=rng.randint(2, 40))
    not_ready = {
        "Pending": ("ContainersNotReady", f"containers with unready status: [{' '.join(names)}]"),
        "Succeeded": ("PodCompleted", ""),
        "Failed": ("PodFailed", ""),
    }.get(phase, ("", ""))
    host_ip = _node_ip(spec["nodeName"])
    statuses: list[JsonObject] = []
    for c in spec["containers"]:
        st: JsonObject = {"name": c["name"], "state": {}, "lastState": {}}
        restarts = 0
        if running:
            st["state"] = {"running": {"startedAt": _ts(ready_at)}}
            if rng.random() < 0.15:
                restarts = rng.randint(1, 4)
                st["lastState"] = {
                    "terminated": {
                        "exitCode": rng.choice((1, 137, 143)),
                        "reason": rng.choice(("Error", "OOMKilled")),
                        "startedAt": _ts(start),
                        "finishedAt": _ts(ready_at),
                        "containerID": f"containerd://{_hex(rng, 64)}",
                    }
                }
        elif done:
            code = 0 if phase == "Succeeded" else rng.choice((1, 137))
            st["state"] = {
                "terminated": {
                    "exitCode": code,
                    "reason": {0: "Completed", 1: "Error", 137: "OOMKilled"}[code],
                    "startedAt": _ts(start),
                    "finishedAt": _ts(ready_at),
                    "containerID": f"containerd://{_hex(rng, 64)}",
                }
            }
        else:
            st["state"] = {"waiting": {"reason": "ContainerCreating"}}
        st |= {"ready": running, "restartCount": restarts, "image": c["image"]}
        st["imageID"] = "" if phase == "Pending" else _image_id(c["image"])
        if phase != "Pending":
            st["containerID"] = f"containerd://{_hex(rng, 64)}"
        st["started"] = running
        statuses.append(st)
    status: JsonObject = {
        "phase": phase,
        "conditions": [
            _condition("PodReadyToStartContainers", phase != "Pending", start),
            _condition("Initialized", True, start),
            _condition("Ready", running, ready_at, *not_ready),
            _condition("ContainersReady", running, ready_at, *not_ready),
            _condition("PodScheduled", True, start),
        ],
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
    }
    if phase != "Pending":
        status["podIP"] = pod_ip
        status["podIPs"] = [{"ip": pod_ip}]
    status["startTime"] = _ts(start)
    status["containerStatuses"] = statuses
    status["qosClass"] = _qos_class(spec)
    return status


def _kubelet_fields(status: JsonObject) -> JsonObject:
    # qosClass is set by the API server on create; containerStatuses is atomic (a leaf).
    return {"status": {k: v for k, v in status.items() if k != "qosClass"}}


# ---------------------------------------------------------------------------- generators


def _controller_meta(namespace: str, a: _App, version: str) -> JsonObject:
    """The metadata the ReplicaSet controller gives each pod of ``version`` (all but the name)."""
    rs_name = f"{a.deployment}-{template_hash(namespace, a.name, version)}"
    return {
        "generateName": f"{rs_name}-",
        "namespace": namespace,
        "labels": _template_labels(a, namespace, version),
        "annotations": {
            "checksum/config": _digest("config", namespace, a.name, version).hex(),
            "prometheus.io/port": "9090",
            "prometheus.io/scrape": "true",
        },
        "ownerReferences": [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": rs_name,
                "uid": _uid(namespace, rs_name),
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }


@functools.lru_cache(maxsize=1024)
def _controller_fields(namespace: str, app: str, version: str, containers: int) -> bytes:
    """The controller's field set, the same for every pod of a template: computed once, kept as
    JSON so that each pod gets its own copy cheaply (deriving it is most of a pod's cost)."""
    a = _app(app)
    sent = {k: v for k, v in _controller_meta(namespace, a, version).items() if k != "namespace"}
    spec = _template_spec(namespace, a, version, containers)
    return orjson.dumps(_field_set({"metadata": sent, "spec": spec}))


def make_pod(
    rng: random.Random,
    *,
    namespace: str,
    app: str,
    node: str,
    name: str | None = None,
    containers: int = 2,
    with_managed_fields: bool = True,
    phase: str = "Running",
    version: str | None = None,
) -> JsonObject:
    """A Pod of ``app``'s ReplicaSet, bound to ``node``, as pod.json shows one (~5-10 KB of JSON).

    ``version`` defaults to the app's current version, or (one pod in five) its previous one, as
    during a rollout. The name is ``<deployment>-<pod-template-hash>-<5 chars>`` unless given.
    """
    if containers < 1:
        raise ValueError("a pod has at least one container")
    a = _app(app)
    if version is None:
        version = a.previous if rng.random() < 0.2 else a.current
    rs_name = f"{a.deployment}-{template_hash(namespace, app, version)}"
    meta: JsonObject = {"name": name or f"{rs_name}-{_suffix(rng)}"}
    meta |= _controller_meta(namespace, a, version)
    template = _template_spec(namespace, a, version, containers)
    spec = _admitted_spec(template, node, f"kube-api-access-{_suffix(rng)}")
    start = _moment(rng)
    pod_ip = f"{_pod_cidr_prefix(node)}.{rng.randint(2, 254)}"
    status = _pod_status(rng, spec, phase=phase, start=start, pod_ip=pod_ip)
    if with_managed_fields:
        owned = orjson.loads(_controller_fields(namespace, app, version, containers))
        meta["managedFields"] = [
            _entry("kube-controller-manager", start, owned),
            _managed(
                "kubelet", start + timedelta(seconds=3), _kubelet_fields(status), sub="status"
            ),
        ]
    return {"kind": "Pod", "apiVersion": "v1", "metadata": meta, "spec": spec, "status": status}


def make_namespace(name: str) -> JsonObject:
    return {
        "kind": "Namespace",
        "apiVersion": "v1",
        "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }


def make_node(rng: random.Random, name: str, *, control_plane: bool | None = None) -> JsonObject:
    """A kubelet-registered Node; ``control_plane`` defaults to a one-in-five draw."""
    if control_plane is None:
        control_plane = rng.random() < 0.2
    arch = rng.choice(("amd64", "amd64", "arm64"))
    zone = f"eu-west-1{'abc'[_index(name) % 3]}"
    labels = {
        "beta.kubernetes.io/arch": arch,
        "beta.kubernetes.io/os": "linux",
        "kubernetes.io/arch": arch,
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": rng.choice(
            ("m6i.2xlarge", "m7g.2xlarge", "c6i.4xlarge")
        ),
        "topology.kubernetes.io/region": "eu-west-1",
        "topology.kubernetes.io/zone": zone,
    }
    if control_plane:
        labels["node-role.kubernetes.io/control-plane"] = ""
    else:
        labels["node-role.kubernetes.io/worker"] = ""
    meta: JsonObject = {
        "name": name,
        "labels": dict(sorted(labels.items())),
        "annotations": {
            "node.alpha.kubernetes.io/ttl": "0",
            "volumes.kubernetes.io/controller-managed-attach-detach": "true",
        },
    }
    cidr = f"{_pod_cidr_prefix(name)}.0/24"
    spec: JsonObject = {
        "podCIDR": cidr,
        "podCIDRs": [cidr],
        "providerID": f"aws:///{zone}/i-{_hex(rng, 17)}",
    }
    if control_plane:
        spec["taints"] = [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]
    seen = _moment(rng)
    cpu = rng.choice((4, 8, 16))
    mem_ki = cpu * 4 * 1024 * 1024 - rng.randint(100_000, 400_000)
    capacity = {
        "cpu": str(cpu),
        "ephemeral-storage": "203056560Ki",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": f"{mem_ki}Ki",
        "pods": "110",
    }
    allocatable = capacity | {
        "cpu": f"{cpu * 1000 - 90}m",
        "ephemeral-storage": "187136925387",
        "memory": f"{mem_ki - 614_400}Ki",
    }
    conditions = [
        {
            "type": kind,
            "status": "True" if kind == "Ready" else "False",
            "lastHeartbeatTime": _ts(seen),
            "lastTransitionTime": _ts(_EPOCH),
            "reason": reason,
            "message": message,
        }
        for kind, reason, message in (
            (
                "MemoryPressure",
                "KubeletHasSufficientMemory",
                "kubelet has sufficient memory available",
            ),
            ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
            ("Ready", "KubeletReady", "kubelet is posting ready status"),
        )
    ]
    version = "v1.31.4"
    status: JsonObject = {
        "capacity": capacity,
        "allocatable": allocatable,
        "conditions": conditions,
        "addresses": [
            {"type": "InternalIP", "address": _node_ip(name)},
            {"type": "Hostname", "address": name},
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {
            "machineID": _hex(rng, 32),
            "systemUUID": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            "bootID": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            "kernelVersion": rng.choice(("6.1.0-28-cloud-amd64", "6.8.0-1019-aws")),
            "osImage": rng.choice(("Debian GNU/Linux 12 (bookworm)", "Ubuntu 24.04.1 LTS")),
            "containerRuntimeVersion": rng.choice(("containerd://1.7.24", "containerd://2.0.1")),
            "kubeletVersion": version,
            "kubeProxyVersion": version,
            "operatingSystem": "linux",
            "architecture": arch,
        },
        "images": [
            {"names": [f"registry.k8s.io/kube-proxy:{version}"], "sizeBytes": 30_512_143},
            {"names": ["registry.k8s.io/pause:3.10"], "sizeBytes": 320_368},
        ],
    }
    meta["managedFields"] = [
        _managed(
            "kubelet",
            _EPOCH,
            {
                "metadata": {"annotations": meta["annotations"], "labels": meta["labels"]},
                "spec": {"providerID": spec["providerID"]},
            },
        ),
        _managed(
            "kube-controller-manager", _EPOCH, {"spec": {"podCIDR": cidr, "podCIDRs": [cidr]}}
        ),
        _managed("kubelet", seen, {"status": status}, sub="status"),
    ]
    return {"kind": "Node", "apiVersion": "v1", "metadata": meta, "spec": spec, "status": status}


def make_configmap(rng: random.Random, *, namespace: str, name: str) -> JsonObject:
    """An app's configuration; ``<app>-config`` is what that app's pods mount."""
    app = name.removesuffix("-config")
    settings = "\n".join(f"  key{i}: {_hex(rng, 8)}" for i in range(rng.randint(2, 6)))
    return {
        "kind": "ConfigMap",
        "apiVersion": "v1",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": app}},
        "data": {
            "FEATURE_FLAGS": ",".join(
                rng.sample(("beta-ui", "fast-path", "new-cache", "v2-api"), 2)
            ),
            "LOG_LEVEL": rng.choice(("info", "debug", "warn")),
            "application.yaml": f"server:\n  port: 8080\nsettings:\n{settings}\n",
        },
    }


def make_service(rng: random.Random, *, namespace: str, app: str) -> JsonObject:
    """A ClusterIP Service named ``app``, selecting the app's pods."""
    a = _app(app)
    ip = f"10.96.{rng.randint(0, 255)}.{rng.randint(1, 254)}"
    return {
        "kind": "Service",
        "apiVersion": "v1",
        "metadata": {"name": app, "namespace": namespace, "labels": {"app": app, "team": a.team}},
        "spec": {
            "ports": [
                {"name": "http", "protocol": "TCP", "port": 80, "targetPort": "http"},
                {"name": "metrics", "protocol": "TCP", "port": 9090, "targetPort": 9090},
            ],
            "selector": {"app": app, "tier": a.tier},
            "clusterIP": ip,
            "clusterIPs": [ip],
            "type": "ClusterIP",
            "sessionAffinity": "None",
            "ipFamilies": ["IPv4"],
            "ipFamilyPolicy": "SingleStack",
            "internalTrafficPolicy": "Cluster",
        },
        "status": {"loadBalancer": {}},
    }


def _pod_template(namespace: str, a: _App, version: str, containers: int) -> JsonObject:
    labels = _template_labels(a, namespace, version)
    return {
        "metadata": {
            "creationTimestamp": None,
            "labels": labels,
            "annotations": {"checksum/config": _digest("config", namespace, a.name, version).hex()},
        },
        "spec": _template_spec(namespace, a, version, containers),
    }


def make_deployment(
    rng: random.Random, *, namespace: str, app: str, replicas: int, containers: int = 2
) -> JsonObject:
    """``app``'s Deployment (``<app>-<tier>``), at its current version, fully rolled out."""
    a = _app(app)
    template = _pod_template(namespace, a, a.current, containers)
    template["metadata"]["labels"].pop("pod-template-hash")
    at = _moment(rng)
    conditions = [
        {
            "type": "Available",
            "status": "True",
            "lastUpdateTime": _ts(at),
            "lastTransitionTime": _ts(at),
            "reason": "MinimumReplicasAvailable",
            "message": "Deployment has minimum availability.",
        },
        {
            "type": "Progressing",
            "status": "True",
            "lastUpdateTime": _ts(at),
            "lastTransitionTime": _ts(_EPOCH),
            "reason": "NewReplicaSetAvailable",
            "message": f'ReplicaSet "{a.deployment}-{template_hash(namespace, app, a.current)}" '
            "has successfully progressed.",
        },
    ]
    spec: JsonObject = {
        "replicas": replicas,
        "selector": {"matchLabels": {"app": app, "tier": a.tier}},
        "template": template,
        "strategy": {
            "type": "RollingUpdate",
            "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"},
        },
        "revisionHistoryLimit": 10,
        "progressDeadlineSeconds": 600,
    }
    meta: JsonObject = {
        "name": a.deployment,
        "namespace": namespace,
        "labels": {"app": app, "team": a.team, "tier": a.tier},
        "annotations": {"deployment.kubernetes.io/revision": "2"},
    }
    meta["managedFields"] = [
        _managed(
            "helm",
            _EPOCH,
            {"metadata": {"labels": meta["labels"]}, "spec": spec},
            api_version="apps/v1",
        ),
    ]
    status = {
        "observedGeneration": 1,
        "replicas": replicas,
        "updatedReplicas": replicas,
        "readyReplicas": replicas,
        "availableReplicas": replicas,
        "conditions": conditions,
    }
    return {
        "kind": "Deployment",
        "apiVersion": "apps/v1",
        "metadata": meta,
        "spec": spec,
        "status": status,
    }


def make_replicaset(
    rng: random.Random,
    *,
    namespace: str,
    app: str,
    replicas: int,
    version: str | None = None,
    containers: int = 2,
) -> JsonObject:
    """The ReplicaSet owning ``app``'s pods of ``version`` (default: current; revision 2)."""
    a = _app(app)
    version = version or a.current
    template = _pod_template(namespace, a, version, containers)
    labels = template["metadata"]["labels"]
    name = f"{a.deployment}-{labels['pod-template-hash']}"
    ready = replicas if rng.random() < 0.8 else max(0, replicas - 1)
    meta: JsonObject = {
        "name": name,
        "namespace": namespace,
        "labels": dict(labels),
        "annotations": {
            "deployment.kubernetes.io/desired-replicas": str(replicas),
            "deployment.kubernetes.io/max-replicas": str(replicas + (replicas + 3) // 4),
            "deployment.kubernetes.io/revision": "2" if version == a.current else "1",
        },
        "ownerReferences": [
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "name": a.deployment,
                "uid": _uid(namespace, a.deployment),
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    return {
        "kind": "ReplicaSet",
        "apiVersion": "apps/v1",
        "metadata": meta,
        "spec": {
            "replicas": replicas,
            "selector": {
                "matchLabels": {
                    "app": app,
                    "pod-template-hash": labels["pod-template-hash"],
                    "tier": a.tier,
                }
            },
            "template": template,
        },
        "status": {
            "replicas": replicas,
            "fullyLabeledReplicas": replicas,
            "readyReplicas": ready,
            "availableReplicas": ready,
            "observedGeneration": 1,
        },
    }


def make_event(rng: random.Random, *, namespace: str, involved_pod: JsonObject) -> JsonObject:
    """A core/v1 Event the scheduler or kubelet would record about ``involved_pod``."""
    meta = involved_pod["metadata"]
    pod, spec = meta["name"], involved_pod.get("spec", {})
    node = spec.get("nodeName", "")
    containers = spec.get("containers") or [{"name": "main", "image": "busybox:1.36"}]
    c = rng.choice(containers)
    choices: list[tuple[str, str, str]] = [
        ("Normal", "Scheduled", f"Successfully assigned {namespace}/{pod} to {node}"),
        ("Normal", "Pulled", f'Container image "{c["image"]}" already present on machine'),
        ("Normal", "Created", f"Created container: {c['name']}"),
        ("Normal", "Started", f"Started container {c['name']}"),
        ("Warning", "Unhealthy", "Readiness probe failed: HTTP probe failed with statuscode: 503"),
        ("Warning", "BackOff", f"Back-off restarting failed container {c['name']} in pod {pod}"),
    ]
    kind, reason, message = rng.choice(choices)
    involved: JsonObject = {"kind": "Pod", "namespace": namespace, "name": pod}
    if "uid" in meta:
        involved["uid"] = meta["uid"]
    involved["apiVersion"] = "v1"
    if "resourceVersion" in meta:
        involved["resourceVersion"] = meta["resourceVersion"]
    if reason != "Scheduled":
        involved["fieldPath"] = f"spec.containers{{{c['name']}}}"
    start = involved_pod.get("status", {}).get("startTime")
    first = _parse_ts(start) if start else _moment(rng)
    count = rng.randint(2, 30) if kind == "Warning" else 1
    last = first + timedelta(seconds=rng.randint(0, 600) if count > 1 else 0)
    source = (
        {"component": "default-scheduler"}
        if reason == "Scheduled"
        else {"component": "kubelet", "host": node}
    )
    return {
        "kind": "Event",
        "apiVersion": "v1",
        "metadata": {"name": f"{pod}.{_hex(rng, 16)}", "namespace": namespace},
        "involvedObject": involved,
        "reason": reason,
        "message": message,
        "source": source,
        "firstTimestamp": _ts(first),
        "lastTimestamp": _ts(last),
        "count": count,
        "type": kind,
        "eventTime": None,
        "reportingComponent": source["component"],
        "reportingInstance": node if reason != "Scheduled" else "",
    }


# ---------------------------------------------------------------------------- demo cluster


@dataclass(frozen=True)
class DemoSpec:
    """A demo cluster's size: ``ns-<i>``, ``node-<i>``, ``app-<i>``, and pods spread over them."""

    namespaces: int = 3
    nodes: int = 5
    apps: int = 4
    pods: int = 60
    seed: int = 1

    def __post_init__(self) -> None:
        if min(self.namespaces, self.nodes, self.apps, self.pods) < 0:
            raise ValueError("DemoSpec counts must not be negative")
        if self.pods and not (self.namespaces and self.nodes and self.apps):
            raise ValueError("pods need at least one namespace, node and app")


def demo_objects(spec: DemoSpec) -> list[tuple[str, JsonObject]]:
    """A small, realistic cluster as ``(resource config name, object)`` in creatable order.

    Namespaces and nodes first, then per namespace the apps' ConfigMaps, Services, Deployments and
    ReplicaSets, then Pods (round-robin over namespaces, apps and nodes, so every combination has
    pods when ``pods`` is a multiple of their product; mostly Running, some Pending or Failed),
    then Events about some pods. Same spec, same objects.
    """
    rng = random.Random(spec.seed)
    namespaces = [f"ns-{i}" for i in range(spec.namespaces)]
    nodes = [f"node-{i}" for i in range(spec.nodes)]
    apps = [f"app-{i}" for i in range(spec.apps)]
    out: list[tuple[str, JsonObject]] = [("namespaces", make_namespace(ns)) for ns in namespaces]
    out += [("nodes", make_node(rng, n, control_plane=i == 0)) for i, n in enumerate(nodes)]
    pods: list[JsonObject] = []
    for i in range(spec.pods):
        ns, app = namespaces[i % spec.namespaces], apps[(i // spec.namespaces) % spec.apps]
        roll = rng.random()
        phase = "Running" if roll < 0.88 else "Pending" if roll < 0.96 else "Failed"
        pods.append(make_pod(rng, namespace=ns, app=app, node=nodes[i % spec.nodes], phase=phase))
    for ns in namespaces:
        for app in apps:
            mine = [
                p
                for p in pods
                if p["metadata"]["namespace"] == ns and p["metadata"]["labels"]["app"] == app
            ]
            versions = {p["metadata"]["labels"]["version"] for p in mine} | {_app(app).current}
            out.append(("configmaps", make_configmap(rng, namespace=ns, name=f"{app}-config")))
            out.append(("services", make_service(rng, namespace=ns, app=app)))
            out.append(
                (
                    "apps/v1/deployments",
                    make_deployment(rng, namespace=ns, app=app, replicas=len(mine)),
                )
            )
            for version in sorted(versions):
                n = sum(1 for p in mine if p["metadata"]["labels"]["version"] == version)
                rs = make_replicaset(rng, namespace=ns, app=app, replicas=n, version=version)
                out.append(("apps/v1/replicasets", rs))
    out += [("pods", p) for p in pods]
    for p in rng.sample(pods, len(pods) // 2):
        out.append(
            ("events", make_event(rng, namespace=p["metadata"]["namespace"], involved_pod=p))
        )
    return out


# ---------------------------------------------------------------------------- updates


def _latest(pod: JsonObject) -> datetime:
    stamps = [m.get("time", "") for m in pod.get("metadata", {}).get("managedFields", [])]
    stamps += [
        pod.get("status", {}).get("startTime", ""),
        pod["metadata"].get("creationTimestamp", ""),
    ]
    return max((_parse_ts(s) for s in stamps if s), default=_EPOCH)


def _touch_manager(meta: JsonObject, entry: JsonObject) -> None:
    """Replace ``entry``'s manager's entry; the newest goes last, as the API server sorts them."""
    if "managedFields" not in meta:
        return
    same = (entry["manager"], entry.get("subresource", ""))
    meta["managedFields"] = [
        m for m in meta["managedFields"] if (m.get("manager"), m.get("subresource", "")) != same
    ] + [entry]


def mutate_pod(rng: random.Random, pod: JsonObject) -> JsonObject:
    """A realistic update of ``pod``, as a new dict (``pod`` is not modified).

    Always bumps a revision annotation (a controller touching the pod); then, by chance, flips
    readiness, restarts a container, or moves the phase on (Pending → Running, now and then
    Running → Failed). Identity and ``resourceVersion`` are kept, so the result can be PUT.
    """
    new: JsonObject = orjson.loads(orjson.dumps(pod))  # a deep copy, ~10x faster than deepcopy
    meta = new.setdefault("metadata", {})
    at = _latest(new) + timedelta(seconds=rng.randint(1, 90))
    annotations = meta.setdefault("annotations", {})
    annotations[_CHURN_ANNOTATION] = str(int(annotations.get(_CHURN_ANNOTATION, "0")) + 1)
    meta["annotations"] = dict(sorted(annotations.items()))
    # Another manager owns the annotations map itself: this one owns only its key (no ".").
    owned: JsonObject = {"f:metadata": {"f:annotations": {f"f:{_CHURN_ANNOTATION}": {}}}}
    _touch_manager(meta, _entry(_CHURN_MANAGER, at, owned))
    status, spec = new.get("status"), new.get("spec")
    if not isinstance(status, dict) or not isinstance(spec, dict) or "containers" not in spec:
        return new
    phase, roll = status.get("phase"), rng.random()
    statuses = status.get("containerStatuses") or []
    if phase == "Pending" and roll < 0.6 and spec.get("nodeName"):
        prefix = _pod_cidr_prefix(spec["nodeName"])
        new["status"] = _pod_status(
            rng, spec, phase="Running", start=at, pod_ip=f"{prefix}.{rng.randint(2, 254)}"
        )
    elif phase == "Running" and roll < 0.03 and spec.get("nodeName"):
        start = _parse_ts(status["startTime"]) if status.get("startTime") else at
        new["status"] = _pod_status(
            rng, spec, phase="Failed", start=start, pod_ip=status.get("podIP", "")
        )
    elif phase == "Running" and roll < 0.45 and statuses:
        # Readiness flaps: one container's probe fails, or every container recovers.
        if all(s.get("ready") for s in statuses):
            rng.choice(statuses)["ready"] = False
        else:
            for s in statuses:
                s["ready"] = True
        unready = [s["name"] for s in statuses if not s["ready"]]
        why = ("ContainersNotReady", f"containers with unready status: [{' '.join(unready)}]")
        status["conditions"] = [
            _condition(c["type"], not unready, at, *(why if unready else ()))
            if c.get("type") in ("Ready", "ContainersReady")
            else c
            for c in status.get("conditions", [])
        ]
    elif phase == "Running" and roll < 0.7 and statuses:
        s = rng.choice(statuses)
        began = s.get("state", {}).get("running", {}).get("startedAt", _ts(at))
        s["lastState"] = {
            "terminated": {
                "exitCode": rng.choice((1, 137)),
                "reason": rng.choice(("Error", "OOMKilled")),
                "startedAt": began,
                "finishedAt": _ts(at),
                "containerID": s.get("containerID", ""),
            }
        }
        s["state"] = {"running": {"startedAt": _ts(at)}}
        s["restartCount"] = int(s.get("restartCount", 0)) + 1
        s["containerID"] = f"containerd://{_hex(rng, 64)}"
    else:
        return new
    _touch_manager(meta, _managed("kubelet", at, _kubelet_fields(new["status"]), sub="status"))
    return new
