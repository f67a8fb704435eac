"""An informer factory that reaches the API server itself: from a kubeconfig, in-cluster, a URL.

:class:`cacheproxy.informer.SharedInformerFactory` is told how to make each informer's
ListerWatcher (the informer library never touches the network). This one makes them over one
HTTP client that it opens from the kubeconfig (or the pod's service account) and closes when it
stops, and takes resources by name::

    async with InformerFactory.from_kubeconfig() as factory:
        pods = factory.informer("pods", labels="app=web", field_indexes=["spec.nodeName"])
        await factory.wait_for_cache_sync()
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import httpx

from cacheproxy.informer import (
    Collection,
    IndexFunc,
    ReflectorOptions,
    SharedInformer,
    SharedInformerFactory,
    Storage,
    Transform,
)
from cacheproxy.kube import ResourceType, builtin
from cacheproxy.upstream import UpstreamConfig, build_client, lister_watchers, load_upstream

__all__ = ["InformerFactory"]


class InformerFactory(SharedInformerFactory):
    """Shared informers over ``client`` (an ``httpx.AsyncClient`` whose ``base_url`` is the API
    server and which authenticates its requests; :meth:`from_kubeconfig` makes one).

    ``async with factory:`` starts the informers (those made later start at once) and, on the
    way out, stops them and closes the client if the factory opened it."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        *,
        owns_client: bool = False,
        reflector_options: ReflectorOptions | None = None,
    ) -> None:
        super().__init__(lister_watchers(client), reflector_options=reflector_options)
        self.client = client
        """The HTTP client the informers use, authenticated as the kubeconfig says: also the
        controller's way to write (``await factory.client.patch(path, …)``)."""
        self._owns_client = owns_client

    @classmethod
    def from_kubeconfig(
        cls,
        kubeconfig: str | Path | None = None,
        *,
        context: str | None = None,
        reflector_options: ReflectorOptions | None = None,
    ) -> InformerFactory:
        """From ``kubeconfig`` at ``context`` if given; else the pod's service account when
        running in a pod; else ``$KUBECONFIG`` or ``~/.kube/config`` (exec plugins, client
        certificates and rotated tokens all work, through the ``kubernetes`` package's loaders)."""
        path = Path(kubeconfig) if kubeconfig is not None else None
        return cls.from_config(load_upstream(path, context), reflector_options=reflector_options)

    @classmethod
    def from_url(
        cls, server: str, *, reflector_options: ReflectorOptions | None = None
    ) -> InformerFactory:
        """An API server that needs no credentials (a local simulator, ``kubectl proxy``)."""
        return cls.from_config(
            UpstreamConfig(server=server.rstrip("/")), reflector_options=reflector_options
        )

    @classmethod
    def from_config(
        cls, config: UpstreamConfig, *, reflector_options: ReflectorOptions | None = None
    ) -> InformerFactory:
        return cls(build_client(config), owns_client=True, reflector_options=reflector_options)

    def informer(
        self,
        resource: str | ResourceType | Collection,
        *,
        namespace: str | None = None,
        labels: str = "",
        fields: str = "",
        field_indexes: Sequence[str] = (),
        indexers: Mapping[str, IndexFunc] | None = None,
        transform: Transform | None = None,
        storage: Storage | None = None,
        history: int = 100_000,
        resync_period: float | None = None,
    ) -> SharedInformer:
        """The shared informer of ``resource`` (``"pods"``, ``"deployments"``,
        ``"apps/v1/deployments"``, or a :class:`~cacheproxy.kube.ResourceType` for a custom
        resource), in ``namespace`` (default: all), with the label and field selectors sent
        upstream, and the indexes named (field paths such as ``spec.nodeName``, and functions of
        the parsed object); ``storage`` keeps the objects compressed. Asked again for the same, the same informer."""
        if isinstance(resource, Collection):
            collection = resource
        else:
            rtype = _resource(resource) if isinstance(resource, str) else resource
            collection = Collection(rtype, namespace, labels, fields)
        return super().informer(
            collection,
            field_indexes=field_indexes,
            indexers=indexers,
            transform=transform,
            storage=storage,
            history=history,
            resync_period=resync_period,
        )

    async def stop(self) -> None:
        await super().stop()
        if self._owns_client:
            await self.client.aclose()

    async def __aenter__(self) -> InformerFactory:
        await super().__aenter__()
        return self


def _resource(name: str) -> ResourceType:
    try:
        return builtin(name)
    except KeyError:
        raise ValueError(
            f"{name!r} is not a built-in resource (pods, deployments, apps/v1/deployments, …); "
            "for a custom resource pass its cacheproxy.kube.ResourceType"
        ) from None
