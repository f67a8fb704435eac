"""What every object of one app agrees on, derived from the app's name, and its pod template.

An app's tier, team, image and versions (:class:`_App`), the ``pod-template-hash`` of each
version, and the pod spec the ReplicaSet controller sends for a version (containers, sidecars,
volumes) are the same for the Deployment, its ReplicaSets and its Pods, whatever the order they
are made in.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from cacheproxy.sim.workload.derive import JsonObject, _digest

__all__ = ["template_hash"]

_TIERS = ("backend", "frontend", "worker")


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
