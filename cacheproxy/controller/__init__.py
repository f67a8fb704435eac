"""Informers and controllers in a few lines: the informer library with its connection included.

One import for a program that watches Kubernetes objects and acts on them::

    from cacheproxy.controller import Controller, InformerFactory

    async def reconcile(key, pod):      # the latest state (parsed once, shared), None once gone
        ...

    async with InformerFactory.from_kubeconfig() as factory:
        pods = factory.informer("pods", labels="app=web", field_indexes=["spec.nodeName"])
        await Controller(pods, reconcile, workers=4).run()

- :class:`InformerFactory` (:mod:`.connect`): shared informers over a connection it opens from a
  kubeconfig or in-cluster, resources by name, selectors sent upstream;
- :class:`Controller` (:mod:`.reconciler`): the reconcile loop on a rate-limited work queue.

The informers are :class:`cacheproxy.informer.SharedInformer`s: their typed events, stores,
entries and indexes are ``cacheproxy.informer``'s. Import from here; the submodules may move.
"""

from cacheproxy.controller.connect import InformerFactory
from cacheproxy.controller.reconciler import Controller, Reconcile, Requeue, owner_keys

__all__ = ["Controller", "InformerFactory", "Reconcile", "Requeue", "owner_keys"]
