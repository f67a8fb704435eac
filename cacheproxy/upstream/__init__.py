"""The real API server: where it is, how we authenticate, and list/watch over HTTP.

- :mod:`~cacheproxy.upstream.config`: kubeconfig / in-cluster loading (by the ``kubernetes``
  package's loaders) into a frozen :class:`UpstreamConfig` with a refreshing :class:`TokenSource`;
- :mod:`~cacheproxy.upstream.client`: the shared ``httpx.AsyncClient`` (TLS, HTTP/2, auth,
  timeouts);
- :mod:`~cacheproxy.upstream.forwarding`: where requests forwarded as their callers sent them go
  (:class:`ForwardingTarget`, on keep-alive connections of :mod:`~.connections`);
- :mod:`~cacheproxy.upstream.apilistwatch`: :class:`ApiListerWatcher`, the informer's
  ``ListerWatcher`` protocol over HTTP (:func:`lister_watchers`: an ``SharedInformerFactory``'s
  factory of them), plus client-go's pager (:func:`list_all`) and :func:`get_version`;
- :mod:`~cacheproxy.upstream.probe`: :class:`ResourceVersionProbe`, upstream's current
  resourceVersion of a resource, :class:`CollectionKeys`, what a collection holds now, and
  :class:`ObjectVersions`, one object's resourceVersion (for consistent reads from the cache);
- :mod:`~cacheproxy.upstream.resourcediscovery`: :func:`resource_types` and
  :func:`served_resources` (:class:`Discovered`), what upstream's discovery says of the resources
  of a group version or of all (kinds, scopes and names of what the built-in table lacks);
- :mod:`~cacheproxy.upstream.reviews`: :class:`UpstreamReviews`, TokenReviews and
  SubjectAccessReviews asked of the API server (delegated authentication and authorization);
- :mod:`~cacheproxy.upstream.apierrors`: the one place where HTTP error responses, watch ``ERROR``
  events and httpx exceptions become :mod:`cacheproxy.errors`.

Imports ``cacheproxy.kube``, ``cacheproxy.errors`` and the informer's protocol types only; never
``server/`` or ``sim/`` (docs/design.md §2). Import from here; the submodules may move.
"""

from cacheproxy.upstream.apilistwatch import (
    ApiListerWatcher,
    VersionInfo,
    get_version,
    list_all,
    lister_watchers,
)
from cacheproxy.upstream.client import BearerTokenAuth, build_client
from cacheproxy.upstream.config import (
    TokenSource,
    UpstreamConfig,
    load_incluster,
    load_kubeconfig,
    load_upstream,
)
from cacheproxy.upstream.forwarding import (
    ForwardingTarget,
    ImpersonatingTarget,
    build_forwarding_target,
)
from cacheproxy.upstream.probe import (
    CollectionKeys,
    KeysListed,
    ObjectVersions,
    ResourceVersionProbe,
)
from cacheproxy.upstream.resourcediscovery import Discovered, resource_types, served_resources
from cacheproxy.upstream.reviews import UpstreamReviews

__all__ = [
    "ApiListerWatcher",
    "BearerTokenAuth",
    "CollectionKeys",
    "Discovered",
    "ForwardingTarget",
    "ImpersonatingTarget",
    "KeysListed",
    "ObjectVersions",
    "ResourceVersionProbe",
    "TokenSource",
    "UpstreamConfig",
    "UpstreamReviews",
    "VersionInfo",
    "build_client",
    "build_forwarding_target",
    "get_version",
    "list_all",
    "lister_watchers",
    "load_incluster",
    "load_kubeconfig",
    "load_upstream",
    "resource_types",
    "served_resources",
]
