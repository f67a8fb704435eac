"""How the workload generators derive values, so that a seed reproduces a workload.

What several objects must agree on is derived from *names* by hashing (:func:`_digest`,
:func:`_uid`, :func:`_index`, a node's IPs), never from the rng, so they match whatever order
they are made in; everything else is drawn from the caller's ``random.Random`` (timestamps after
the fixed epoch, name suffixes, hex ids). Timestamps use the API server's RFC 3339 seconds form.
"""

from __future__ import annotations

import hashlib
import random
import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

__all__ = ["JsonObject"]

JsonObject = dict[str, Any]

_EPOCH = datetime(2026, 11, 29, 14, 0, 0, tzinfo=UTC)
# k8s.io/apimachinery/pkg/util/rand: the alphabet of generated name suffixes (no vowels, no 0/1/3).
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def _digest(*parts: str) -> bytes:
    return hashlib.sha256("\x00".join(parts).encode()).digest()


def _ts(dt: datetime) -> str:
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_ts(value: str) -> datetime:
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


def _moment(rng: random.Random) -> datetime:
    return _EPOCH + timedelta(seconds=rng.randint(0, 3600))


def _suffix(rng: random.Random, n: int = 5) -> str:
    return "".join(rng.choice(_SUFFIX_ALPHABET) for _ in range(n))


def _hex(rng: random.Random, n: int) -> str:
    return f"{rng.getrandbits(4 * n):0{n}x}"


def _uid(*parts: str) -> str:
    """A stable uid for an object we reference but do not create here (an owner)."""
    return str(uuid.UUID(bytes=_digest("uid", *parts)[:16], version=4))


def _index(name: str) -> int:
    """``node-7`` → 7; other names hash to a small number."""
    m = re.search(r"(\d+)$", name)
    return int(m.group(1)) if m else _digest("index", name)[0]


def _node_ip(node: str) -> str:
    i = _index(node)
    return f"10.0.{i // 250 % 256}.{i % 250 + 4}"


def _pod_cidr_prefix(node: str) -> str:
    return f"10.244.{_index(node) % 256}"
