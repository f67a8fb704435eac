"""Listening sockets we bind ourselves, before any server runs on them.

Binding first means port 0 works (the kernel picks a free port, which tests read back) and a
restart can listen again on the same port. A bind that fails says why in words a person can act
on (:class:`~cacheproxy.errors.ListenError`).
"""

from __future__ import annotations

import errno
import socket

from cacheproxy.errors import ListenError

__all__ = ["bind"]


def bind(host: str, port: int) -> socket.socket:
    """A non-blocking TCP socket listening on ``host:port`` (IPv6 when ``host`` has a colon)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio turns Nagle off (TCP_NODELAY) on accepted connections only
    # when the listening socket says TCP; with proto 0 every multi-part response on a kept-alive
    # connection waited ~40 ms for a delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        reason = {
            errno.EADDRINUSE: "the address is already in use (another process listens there)",
            errno.EACCES: "permission denied (ports below 1024 need privileges)",
            errno.EADDRNOTAVAIL: "no interface of this machine has that address",
        }.get(exc.errno or 0, exc.strerror or str(exc))
        raise ListenError(host, port, reason) from exc
    sock.listen(1024)
    sock.setblocking(False)
    return sock
