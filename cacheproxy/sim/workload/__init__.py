"""Deterministic generators of realistic Kubernetes objects, for demos, load tests and tests.

Objects are plain JSON-ready dicts shaped like what a real API server returns (the reference is
``k8s-samples/protocol/pod.json``: key order, defaulted fields, managedFields), minus what the
server assigns itself (``uid``, ``resourceVersion``, ``creationTimestamp``, ``generation``): they
are what a client would POST. Status is included, as a controller or kubelet would have written it.

Every random choice comes from the caller's ``random.Random``, so a seed reproduces a workload.
What several generators must agree on (an app's tier, team, image and container template; a
ReplicaSet's ``pod-template-hash``; a node's IPs) is derived from *names* by hashing, not from the
rng, so a Deployment, its ReplicaSets and its Pods match whatever order they are made in.

The modules, bottom up:

- :mod:`~cacheproxy.sim.workload.derive`: values derived from names (hashing) and from the rng.
- :mod:`~cacheproxy.sim.workload.managed_fields`: managedFields entries derived from objects.
- :mod:`~cacheproxy.sim.workload.templates`: what an app's objects agree on, its pod template.
- :mod:`~cacheproxy.sim.workload.pod_status`: a pod's status as its kubelet reports it.
- :mod:`~cacheproxy.sim.workload.lifecycle`: what happens to a pod next (restarts, back-offs,
  readiness, scheduling failures), each step at a given time.
- :mod:`~cacheproxy.sim.workload.replicapods`: Pods as admitted, bound and run; and their updates.
- :mod:`~cacheproxy.sim.workload.apps`: an app's ConfigMap, Service, Deployment and ReplicaSets.
- :mod:`~cacheproxy.sim.workload.jobs`: an app's migration Job and its pods.
- :mod:`~cacheproxy.sim.workload.topology`: Namespaces and Nodes.
- :mod:`~cacheproxy.sim.workload.kubeevents`: Events about pods, Jobs and Deployments.
- :mod:`~cacheproxy.sim.workload.democluster`: a whole demo cluster from a :class:`DemoSpec`.

Time: each generator takes ``now``, the moment its object is made at, and writes no other time
(a pod's start, its containers', its Events'), so objects made at the server's time are never
dated before their creation nor after now. Without ``now``, a moment in the hour after a fixed
epoch is drawn from the rng, so that a seed alone reproduces an object (the demo, made to be
loaded at once, defaults to the current time).

Import from this package; names with a leading underscore are private to it (shared between its
modules, not API).
"""

from cacheproxy.sim.workload.apps import (
    make_configmap,
    make_deployment,
    make_replicaset,
    make_service,
)
from cacheproxy.sim.workload.democluster import DemoSpec, demo_objects
from cacheproxy.sim.workload.jobs import make_job, make_job_pod
from cacheproxy.sim.workload.kubeevents import make_event, pod_events
from cacheproxy.sim.workload.pod_status import PHASES
from cacheproxy.sim.workload.replicapods import make_pod, mutate_pod
from cacheproxy.sim.workload.templates import template_hash
from cacheproxy.sim.workload.topology import make_namespace, make_node

__all__ = [
    "PHASES",
    "DemoSpec",
    "demo_objects",
    "make_configmap",
    "make_deployment",
    "make_event",
    "make_job",
    "make_job_pod",
    "make_namespace",
    "make_node",
    "make_pod",
    "make_replicaset",
    "make_service",
    "mutate_pod",
    "pod_events",
    "template_hash",
]
