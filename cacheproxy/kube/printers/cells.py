"""Cell formatting shared by the printers: ages, durations, selectors, labels, containers.

The Go originals are named in each docstring (apimachinery ``duration``, ``metav1``, ``labels``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

__all__ = [
    "NONE",
    "UNKNOWN",
    "Obj",
    "Printer",
    "age",
    "as_int",
    "as_list",
    "containers",
    "dig",
    "format_label_selector",
    "format_labels",
    "human_duration",
    "metadata",
    "name_of",
    "parse_time",
    "selector_string",
    "since",
]

Obj = Mapping[str, Any]
Printer = Callable[[Obj, datetime], list[Any]]

NONE = "<none>"
UNKNOWN = "<unknown>"


def parse_time(text: object) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def human_duration(seconds_float: float) -> str:
    """apimachinery ``duration.HumanDuration``."""
    seconds = int(seconds_float)
    if seconds_float < 0 and seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        s = seconds % 60
        return f"{minutes}m" if s == 0 else f"{minutes}m{s}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = seconds // 3600
    if hours < 8:
        m = minutes % 60
        return f"{hours}h" if m == 0 else f"{hours}h{m}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        h = hours % 24
        return f"{hours // 24}d" if h == 0 else f"{hours // 24}d{h}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        dy = (hours // 24) % 365
        years = hours // 24 // 365
        return f"{years}y" if dy == 0 else f"{years}y{dy}d"
    return f"{hours // 24 // 365}y"


def since(text: object, now: datetime) -> str:
    """``translateTimestampSince``: the age of an RFC 3339 timestamp, ``<unknown>`` if unset."""
    when = parse_time(text)
    if when is None:
        return UNKNOWN
    return human_duration((now - when).total_seconds())


def metadata(obj: Obj) -> Obj:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def dig(obj: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def as_int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def name_of(obj: Obj) -> str:
    return str(metadata(obj).get("name", ""))


def age(obj: Obj, now: datetime) -> str:
    return since(metadata(obj).get("creationTimestamp"), now)


def selector_string(selector: Any) -> str:
    """``metav1.LabelSelectorAsSelector(sel).String()``: requirements sorted by key."""
    if not isinstance(selector, Mapping):
        return ""
    reqs: list[tuple[str, str]] = []
    for key, value in (selector.get("matchLabels") or {}).items():
        reqs.append((key, f"{key}={value}"))
    for expr in as_list(selector.get("matchExpressions")):
        key, op = expr.get("key", ""), expr.get("operator", "")
        values = ",".join(sorted(expr.get("values") or []))
        if op == "In":
            reqs.append((key, f"{key} in ({values})"))
        elif op == "NotIn":
            reqs.append((key, f"{key} notin ({values})"))
        elif op == "Exists":
            reqs.append((key, key))
        elif op == "DoesNotExist":
            reqs.append((key, f"!{key}"))
    return ",".join(text for _, text in sorted(reqs, key=lambda r: r[0]))


def containers(spec: Any) -> tuple[str, str]:
    containers = as_list(dig(spec, "containers"))
    return (
        ",".join(str(c.get("name", "")) for c in containers),
        ",".join(str(c.get("image", "")) for c in containers),
    )


def format_labels(labels: Any) -> str:
    """``labels.FormatLabels``: ``k=v`` sorted by key, ``<none>`` if empty."""
    if not isinstance(labels, Mapping) or not labels:
        return NONE
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def format_label_selector(selector: Any) -> str:
    """``metav1.FormatLabelSelector``: the selector string, ``<none>`` if it selects all/none."""
    return selector_string(selector) or NONE
