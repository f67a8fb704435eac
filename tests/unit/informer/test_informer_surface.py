"""The public surface of cacheproxy.informer is what we mean it to be."""

from __future__ import annotations

import cacheproxy.informer as informer
from tests.surface import surface_problems


def test_the_package_exports_exactly_its_public_names() -> None:
    assert sorted(informer.__all__) == [
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


def test_every_public_name_resolves_is_documented_and_nothing_private_leaks() -> None:
    assert surface_problems(informer) == []


def test_the_tombstone_is_one_class_for_handlers_and_the_coalescing_queue() -> None:
    from cacheproxy.informer import coalescing
    from cacheproxy.informer import informer as shared

    assert shared.DeletedFinalStateUnknown is coalescing.DeletedFinalStateUnknown
    assert informer.DeletedFinalStateUnknown is coalescing.DeletedFinalStateUnknown


def test_one_subscription_api_and_no_queue_type_checks_outside_the_queue_modules() -> None:
    import ast
    from pathlib import Path

    from cacheproxy.informer import SharedInformer

    listeners = [name for name in dir(SharedInformer) if "listener" in name]
    assert listeners == [] and callable(SharedInformer.subscribe)
    package = Path(informer.__file__).resolve().parents[1]
    queue_types = {"CoalescingQueue", "InOrderQueue", "EventQueue"}
    found = []
    for path in package.rglob("*.py"):
        if path.name in ("queue.py", "coalescing.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "isinstance"):
                continue
            names = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}
            names |= {n.attr for n in ast.walk(node.args[1]) if isinstance(n, ast.Attribute)}
            if queue_types & names:
                found.append(f"{path.relative_to(package)}:{node.lineno}")
    assert found == []
