"""The cluster's own objects: Namespaces and the Nodes pods are bound to.

A node's IPs and pod CIDR are derived from its name (see :mod:`~cacheproxy.sim.workload.derive`),
so the pods bound to it agree with it.
"""

from __future__ import annotations

import random
import uuid
from datetime import datetime

from cacheproxy.sim.workload.derive import (
    JsonObject,
    _hex,
    _index,
    _moment,
    _node_ip,
    _pod_cidr_prefix,
    _ts,
)
from cacheproxy.sim.workload.managed_fields import _managed

__all__ = ["make_namespace", "make_node"]


def make_namespace(name: str) -> JsonObject:
    return {
        "kind": "Namespace",
        "apiVersion": "v1",
        "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }


def make_node(
    rng: random.Random,
    name: str,
    *,
    control_plane: bool | None = None,
    now: datetime | None = None,
) -> JsonObject:
    """A kubelet-registered Node, Ready; ``control_plane`` defaults to a one-in-five draw.

    A control-plane node is untainted, as small clusters run workloads on it (kubeadm's and kind's
    single-node setups remove the ``NoSchedule`` taint), so that pods bound to it belong there.
    ``now``: when it registered and last sent a heartbeat (as :func:`make_pod`'s ``now``).
    """
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
    seen = now if now is not None else _moment(rng)
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
            "lastTransitionTime": _ts(seen),
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
            seen,
            {
                "metadata": {"annotations": meta["annotations"], "labels": meta["labels"]},
                "spec": {"providerID": spec["providerID"]},
            },
        ),
        _managed("kube-controller-manager", seen, {"spec": {"podCIDR": cidr, "podCIDRs": [cidr]}}),
        _managed("kubelet", seen, {"status": status}, sub="status"),
    ]
    return {"kind": "Node", "apiVersion": "v1", "metadata": meta, "spec": spec, "status": status}
