"""Pure Kubernetes data: resources, keys, selectors, resource versions, list options, Status
builders and discovery documents. No I/O: every other layer builds on it (docs/design.md §2).

The names a user of the informer library needs are exported here: resource types (what to
list and watch), object keys (how the store names objects) and label and field selectors. The
rest is the servers' vocabulary, in its modules: :mod:`.status` (``metav1.Status`` errors),
:mod:`.rv` and :mod:`.listoptions` (list semantics), :mod:`.table` and :mod:`.printers`
(``kubectl get`` Tables), :mod:`.partial` and :mod:`.negotiation` (metadata-only answers and the
form a read is answered in), :mod:`.sharding` (``shardSelector``, KEP-5866), :mod:`.discovery`,
:mod:`.attributes`, :mod:`.request`.
"""

from cacheproxy.kube.fields import FieldSelector, parse_field_selector
from cacheproxy.kube.keys import object_key, object_namespace_name, split_key
from cacheproxy.kube.labels import LabelSelector, parse_label_selector, selector_from_match_labels
from cacheproxy.kube.resources import (
    BUILTIN_RESOURCES,
    GroupVersion,
    ResourceRegistry,
    ResourceType,
    builtin,
)

__all__ = [
    "BUILTIN_RESOURCES",
    "FieldSelector",
    "GroupVersion",
    "LabelSelector",
    "ResourceRegistry",
    "ResourceType",
    "builtin",
    "object_key",
    "object_namespace_name",
    "parse_field_selector",
    "parse_label_selector",
    "selector_from_match_labels",
    "split_key",
]
