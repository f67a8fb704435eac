"""The informer library: Reflector → EventQueue → Store (+ indexes, EventLog) → SharedInformer.

client-go's ``tools/cache`` design on asyncio. It talks to the network only through the
:class:`ListerWatcher` protocol, which ``cacheproxy.upstream`` implements over HTTP and
:class:`FakeListerWatcher` implements in memory for tests. It imports only ``cacheproxy.kube`` and
``cacheproxy.errors``.

Import from here; the submodules may move. Where things are:

- :class:`SharedInformer` (subscribers of its typed events — :class:`Changed`, :class:`Relisted`,
  :class:`Progressed`, :class:`Synced` — handlers, tombstones: :class:`DeletedFinalStateUnknown`),
  :class:`CoalescingInformer` (the latest state per key, batched) and :class:`SharedInformerFactory`
  (one informer per :class:`Collection`);
- :class:`Reflector` and its :class:`ReflectorOptions`: list + watch with client-go's rules;
  :func:`list_pages`, client-go's pager;
- :class:`EventQueue`: :class:`InOrderQueue` (every event, in order) or :class:`CoalescingQueue`
  (client-go's ``DeltaFIFO``, for latest-state consumers);
- :class:`Store` of :class:`Entry` objects (with its :class:`Transform` and indexes) and the
  :class:`EventLog` of recent changes;
- :class:`WorkQueue`, :class:`DelayingQueue`, :class:`RateLimitingQueue` and their rate limiters;
- :class:`InformerMetrics` and :class:`WorkQueueMetrics`: the protocols a metrics backend
  implements (the library never imports one).
"""

from cacheproxy.informer.backoff import Backoff
from cacheproxy.informer.coalescing import (
    CoalescedDelta,
    CoalescingInformer,
    CoalescingQueue,
    Deltas,
    DeltaType,
    KnownObjects,
)
from cacheproxy.informer.eventlog import EventLog, TooOld
from cacheproxy.informer.events import Changed, InformerEvent, Progressed, Relisted, Synced
from cacheproxy.informer.factory import Collection, ListerWatcherFactory, SharedInformerFactory
from cacheproxy.informer.fake import FakeListerWatcher
from cacheproxy.informer.handlers import (
    FuncHandler,
    HandlerRegistration,
    Overflow,
    ResourceEventHandler,
)
from cacheproxy.informer.indexes import IndexFunc
from cacheproxy.informer.informer import SharedInformer
from cacheproxy.informer.instruments import InformerMetrics
from cacheproxy.informer.listwatch import (
    Decode,
    ListerWatcher,
    ListPage,
    ListRequest,
    WatchEvent,
    WatchRequest,
    WatchStream,
    as_parsed,
)
from cacheproxy.informer.packing import Storage
from cacheproxy.informer.queue import (
    Bookmark,
    DeletedFinalStateUnknown,
    Delta,
    EventQueue,
    InOrderQueue,
    QueueItem,
    Replaced,
)
from cacheproxy.informer.ratelimit import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    RateLimiter,
    default_controller_rate_limiter,
)
from cacheproxy.informer.reflector import Phase, Reflector, ReflectorOptions
from cacheproxy.informer.store import Entry, Store, Transform
from cacheproxy.informer.syncing import list_pages
from cacheproxy.informer.workqueue import (
    DelayingQueue,
    RateLimitingQueue,
    ShutDown,
    WorkQueue,
    WorkQueueMetrics,
)

__all__ = [
    "Backoff",
    "Bookmark",
    "BucketRateLimiter",
    "Changed",
    "CoalescedDelta",
    "CoalescingInformer",
    "CoalescingQueue",
    "Collection",
    "Decode",
    "DelayingQueue",
    "DeletedFinalStateUnknown",
    "Delta",
    "DeltaType",
    "Deltas",
    "Entry",
    "EventLog",
    "EventQueue",
    "FakeListerWatcher",
    "FuncHandler",
    "HandlerRegistration",
    "InOrderQueue",
    "IndexFunc",
    "InformerEvent",
    "InformerMetrics",
    "ItemExponentialFailureRateLimiter",
    "KnownObjects",
    "ListPage",
    "ListRequest",
    "ListerWatcher",
    "ListerWatcherFactory",
    "MaxOfRateLimiter",
    "Overflow",
    "Phase",
    "Progressed",
    "QueueItem",
    "RateLimiter",
    "RateLimitingQueue",
    "Reflector",
    "ReflectorOptions",
    "Relisted",
    "Replaced",
    "ResourceEventHandler",
    "SharedInformer",
    "SharedInformerFactory",
    "ShutDown",
    "Storage",
    "Store",
    "Synced",
    "TooOld",
    "Transform",
    "WatchEvent",
    "WatchRequest",
    "WatchStream",
    "WorkQueue",
    "WorkQueueMetrics",
    "as_parsed",
    "default_controller_rate_limiter",
    "list_pages",
]
