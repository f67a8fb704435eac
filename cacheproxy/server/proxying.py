"""What a forwarding proxy does to headers (RFC 9110 §7.6): the hop-by-hop ones stay on their
connection, ``X-Forwarded-For`` names the caller, and an impersonated caller's identity is
written as the API server's impersonation headers, replacing whatever the caller sent.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

from cacheproxy.kube.attributes import AUTHENTICATED, UserInfo

__all__ = [
    "impersonation_headers",
    "request_headers",
    "response_headers",
    "switching_headers",
    "tunnelled_upgrade",
]

Headers = Sequence[tuple[bytes, bytes]]

HOP_BY_HOP: Final = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
    }
)
"""Headers of one connection, never forwarded, with those the ``Connection`` header names."""

_NOT_FORWARDED: Final = HOP_BY_HOP | {b"host", b"content-length", b"x-forwarded-for"}
"""Request headers set anew for upstream: its host, the length of the body as sent, the chain
of addresses with the caller's."""

_NOT_RELAYED: Final = HOP_BY_HOP | {b"date", b"server"}
"""Response headers the server writes itself."""

_IMPERSONATION: Final = b"impersonate-"

_TUNNELLED: Final = ("websocket", "spdy/")
"""``Upgrade`` protocols tunnelled (by prefix: ``SPDY/3.1``); others (``h2c``) are offers a
server may ignore, and do."""


def tunnelled_upgrade(upgrade: str, connection: str) -> str:
    """The ``Upgrade`` value of a request that offers to switch to websocket or SPDY (its
    ``Connection`` header names ``upgrade``): what ``kubectl exec``, ``attach``,
    ``port-forward`` and websocket watches send. "" for any other request."""
    if not upgrade or not upgrade.lower().startswith(_TUNNELLED):
        return ""
    tokens = {t.strip().lower() for t in connection.split(",")}
    return upgrade if "upgrade" in tokens else ""


def connection_tokens(headers: Iterable[tuple[bytes, bytes]]) -> frozenset[bytes]:
    """Header names a ``Connection`` header lists: hop-by-hop as well."""
    named: set[bytes] = set()
    for name, value in headers:
        if name.lower() == b"connection":
            named.update(t.strip().lower() for t in value.split(b",") if t.strip())
    return frozenset(named)


def request_headers(
    raw: Headers, *, peer: str, impersonating: bool = False, upgrade: str = ""
) -> list[tuple[bytes, bytes]]:
    """The caller's headers as forwarded: hop-by-hop ones dropped, ``X-Forwarded-For`` with
    ``peer`` appended; when ``impersonating``, the caller's ``Authorization`` and
    ``Impersonate-*`` dropped too (the daemon's credentials and :func:`impersonation_headers`
    take their place). ``upgrade`` (:func:`tunnelled_upgrade`): the offer to switch protocols,
    made again on the upstream connection."""
    named = connection_tokens(raw)
    headers: list[tuple[bytes, bytes]] = []
    forwarded_for = b""
    for name, value in raw:
        lower = name.lower()
        if lower in _NOT_FORWARDED or lower in named:
            if lower == b"x-forwarded-for":
                forwarded_for = value
            continue
        if impersonating and (lower == b"authorization" or lower.startswith(_IMPERSONATION)):
            continue
        headers.append((name, value))
    if peer:
        address = peer.encode()
        headers.append(
            (b"x-forwarded-for", forwarded_for + b", " + address if forwarded_for else address)
        )
    if upgrade:
        headers += [(b"connection", b"Upgrade"), (b"upgrade", upgrade.encode("latin-1"))]
    return headers


def response_headers(raw: Iterable[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """Upstream's answer's headers as relayed (names in lower case, as ASGI has them):
    hop-by-hop ones, ``Date`` and ``Server`` aside."""
    raw = [(name.lower(), value) for name, value in raw]
    named = connection_tokens(raw)
    return [(n, v) for n, v in raw if n not in _NOT_RELAYED and n not in named]


def switching_headers(raw: Iterable[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """Upstream's ``101 Switching Protocols`` headers as relayed: all of them (``Upgrade`` and
    ``Connection`` are what the switch is about; ``Sec-WebSocket-*`` and
    ``X-Stream-Protocol-Version`` name the protocol agreed) but ``Date`` and ``Server``."""
    return [(n.lower(), v) for n, v in raw if n.lower() not in (b"date", b"server")]


def impersonation_headers(user: UserInfo) -> list[tuple[bytes, bytes]]:
    """``Impersonate-User``/``-Group``/``-Uid`` of ``user`` (``system:authenticated`` is
    added by the API server itself)."""
    headers = [(b"impersonate-user", user.name.encode())]
    headers.extend(
        (b"impersonate-group", group.encode()) for group in user.groups if group != AUTHENTICATED
    )
    if user.uid:
        headers.append((b"impersonate-uid", user.uid.encode()))
    return headers
