"""The public surface of cacheproxy.informer is what we mean it to be."""

from __future__ import annotations

import cacheproxy.informer as informer
from tests.surface import surface_problems


def test_the_package_exports_exactly_its_public_names() -> None:
    assert sorted(informer.__all__) == [
        "Backoff",
        "Bookmark",
        "BucketRateLimiter",
        "CoalescedDelta",
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
        "InformerFactory",
        "InformerMetrics",
        "ItemExponentialFailureRateLimiter",
        "KnownObjects",
        "ListPage",
        "ListRequest",
        "ListerWatcher",
        "ListerWatcherFactory",
        "LogEvent",
        "MaxOfRateLimiter",
        "Overflow",
        "Phase",
        "QueueItem",
        "RateLimiter",
        "RateLimitingQueue",
        "Reflector",
        "ReflectorOptions",
        "RelistDifference",
        "Replaced",
        "ResourceEventHandler",
        "SharedInformer",
        "ShutDown",
        "Store",
        "TooOld",
        "Transform",
        "WatchEvent",
        "WatchRequest",
        "WatchStream",
        "WorkQueue",
        "WorkQueueMetrics",
        "as_parsed",
        "default_controller_rate_limiter",
    ]


def test_every_public_name_resolves_is_documented_and_nothing_private_leaks() -> None:
    assert surface_problems(informer) == []


def test_the_tombstone_is_one_class_for_handlers_and_the_coalescing_queue() -> None:
    from cacheproxy.informer import coalescing
    from cacheproxy.informer import informer as shared

    assert shared.DeletedFinalStateUnknown is coalescing.DeletedFinalStateUnknown
    assert informer.DeletedFinalStateUnknown is coalescing.DeletedFinalStateUnknown
