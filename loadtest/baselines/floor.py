"""The physical floor of serving a list: the same response bytes through a bare asyncio socket.

``python -m loadtest.baselines.floor --body FILE`` answers every HTTP/1.1 request on a keep-alive
connection with ``FILE``'s bytes (read once at start), a ``Content-Length`` header and one
``transport.write``: nothing is computed per request, so the time a client measures is what
moving that many bytes over loopback into that client costs. The socket is bound by
:func:`cacheproxy.serving.bind` (as the servers under test) and the loop is uvloop when installed.
It prints ``URL http://127.0.0.1:PORT``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from pathlib import Path

from cacheproxy.serving import bind
from loadtest.clients.httpclient import RequestReader

__all__ = ["FloorProtocol", "main"]


class FloorProtocol(RequestReader):
    """Answers each request with the same response."""

    def __init__(self, response: bytes) -> None:
        super().__init__()
        self.response = response

    def on_request(self, head: bytes) -> None:
        assert self.transport is not None
        if head.startswith(b"GET /readyz "):
            self.transport.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        else:
            self.transport.write(self.response)


async def _serve(body: bytes, port: int) -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
    response = head % len(body) + body
    sock = bind("127.0.0.1", port)
    server = await asyncio.get_running_loop().create_server(
        lambda: FloorProtocol(response), sock=sock
    )
    print(f"URL http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtest.baselines.floor", description=__doc__)
    parser.add_argument("--body", type=Path, required=True)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    body = args.body.read_bytes()
    try:
        import uvloop
    except ImportError:  # pragma: no cover
        asyncio.run(_serve(body, args.port))
    else:
        uvloop.run(_serve(body, args.port))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
