"""The fan-out baseline: a bare asyncio broadcaster of the simulator's watch events.

``python -m loadtest.baselines.broadcaster --upstream URL`` watches the pods of ``URL`` from its current
resourceVersion (re-watching from the last one when a watch ends) and, for each event line,
does the least a cache relaying watches must do: parse it (``orjson.loads``), drop
``metadata.managedFields`` (as the daemon's default transform), encode it once
(``orjson.dumps``), frame it as one HTTP chunk, and ``transport.write`` those same bytes to every
connected client. A request with ``watch=`` in its target starts a chunked ``200`` response that
gets every later event; ``/readyz`` answers ok once the upstream watch is open, ``/status`` the
counters, any other request an empty list at the relayed resourceVersion. A client whose socket buffer holds more than
``--buffer`` events' worth of bytes is closed (evicted), like the daemon's bounded watcher buffer.
No selectors, no resume, no history, no metrics: the floor of fan-out in Python. It prints
``URL http://127.0.0.1:PORT``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

import orjson

from cacheproxy.serving import bind
from loadtest.clients.httpclient import ChunkedDecoder, LineSplitter, RequestReader, open_connection

__all__ = ["Broadcaster", "main"]

_WATCH_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
    b"Cache-Control: no-cache, private\r\nTransfer-Encoding: chunked\r\n\r\n"
)


class Broadcaster:
    """The connected clients and the counters; ``publish`` one upstream line to all of them."""

    def __init__(self, buffer_events: int) -> None:
        self.buffer_events = buffer_events
        self.clients: set[asyncio.Transport] = set()
        self.events = 0
        self.delivered = 0
        self.evicted = 0
        self.watching = False
        self.rv = ""

    def publish(self, buf: bytes, start: int, end: int) -> None:
        event = orjson.loads(buf[start:end])
        obj = event.get("object") or {}
        meta = obj.get("metadata") or {}
        meta.pop("managedFields", None)
        self.rv = meta.get("resourceVersion", self.rv)
        if event.get("type") == "BOOKMARK":
            return
        line = orjson.dumps(event) + b"\n"
        frame = b"%x\r\n%b\r\n" % (len(line), line)
        limit = self.buffer_events * len(frame)
        self.events += 1
        for transport in list(self.clients):
            if transport.get_write_buffer_size() > limit:
                self.clients.discard(transport)
                transport.close()
                self.evicted += 1
                continue
            transport.write(frame)
            self.delivered += 1

    def status(self) -> bytes:
        return orjson.dumps(
            {
                "clients": len(self.clients),
                "events": self.events,
                "delivered": self.delivered,
                "evicted": self.evicted,
                "resourceVersion": self.rv,
            }
        )


class _Client(RequestReader):
    def __init__(self, hub: Broadcaster) -> None:
        super().__init__()
        self.hub = hub

    def on_request(self, head: bytes) -> None:
        assert self.transport is not None
        target = head.split(b" ", 2)[1]
        if b"watch=" not in target:
            code, body = b"200 OK", self.hub.status()
            if target.startswith(b"/readyz"):
                code, body = (b"200 OK", b"ok") if self.hub.watching else (b"503 No", b"no")
            elif not target.startswith(b"/status"):  # a list: empty, at the relayed RV
                body = (
                    b'{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"%b"},"items":[]}'
                    % (self.hub.rv.encode())
                )
            self.transport.write(
                b"HTTP/1.1 %b\r\nContent-Length: %d\r\n\r\n%b" % (code, len(body), body)
            )
            return
        self.transport.write(_WATCH_HEAD)
        self.hub.clients.add(self.transport)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.transport is not None:
            self.hub.clients.discard(self.transport)


class _Upstream(asyncio.Protocol):
    """The upstream watch response: headers, then chunked event lines to ``publish``."""

    def __init__(self, hub: Broadcaster) -> None:
        self.hub = hub
        self.head = b""
        self.in_body = False
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.decoder = ChunkedDecoder(LineSplitter(hub.publish).feed)

    def data_received(self, data: bytes) -> None:
        if not self.in_body:
            self.head += data
            end = self.head.find(b"\r\n\r\n")
            if end < 0:
                return
            data, self.in_body = self.head[end + 4 :], True
            self.hub.watching = True
        if data and self.decoder.feed(data) and not self.done.done():
            self.done.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(None)


async def _relay(upstream: str, hub: Broadcaster) -> None:
    conn = await open_connection(upstream)
    first = await conn.request("/api/v1/pods?limit=1", keep_body=True)
    conn.close()
    assert first.body is not None
    hub.rv = orjson.loads(first.body)["metadata"]["resourceVersion"]
    host, _, port = upstream.split("://", 1)[1].rpartition(":")
    loop = asyncio.get_running_loop()
    while True:
        transport, protocol = await loop.create_connection(lambda: _Upstream(hub), host, int(port))
        request = f"GET /api/v1/pods?watch=1&resourceVersion={hub.rv} HTTP/1.1\r\nHost: x\r\n\r\n"
        transport.write(request.encode())
        await protocol.done
        transport.close()


async def _serve(upstream: str, port: int, buffer_events: int) -> None:
    hub = Broadcaster(buffer_events)
    relay = asyncio.create_task(_relay(upstream, hub), name="broadcaster-relay")
    sock = bind("127.0.0.1", port)
    server = await asyncio.get_running_loop().create_server(lambda: _Client(hub), sock=sock)
    print(f"URL http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    async with server:
        await asyncio.gather(server.serve_forever(), relay)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m loadtest.baselines.broadcaster", description=__doc__
    )
    parser.add_argument("--upstream", required=True, help="the simulator's URL")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--buffer", type=int, default=1000, help="events buffered per client")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        import uvloop
    except ImportError:  # pragma: no cover
        asyncio.run(_serve(args.upstream, args.port, args.buffer))
    else:
        uvloop.run(_serve(args.upstream, args.port, args.buffer))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
