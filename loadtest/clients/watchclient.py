"""Many watchers in one process, cheap enough per line that the clients are not the bottleneck.

``python -m loadtest.clients.watchclient --url URL --path PATH --watchers K --out FILE`` opens ``K``
keep-alive connections to ``URL`` and sends ``GET PATH`` (a watch) on each. Once every response
has started it prints ``CONNECTED ok failed`` and reads commands on stdin: ``COUNT`` prints
``COUNT n`` (stamped lines received so far), ``STOP`` (or EOF) ends: it writes its summary (JSON) to ``FILE`` and every lag (native doubles) to ``FILE.lags``,
prints ``DONE`` and exits.

Each watcher is an ``asyncio.Protocol``: chunked framing decoded in place
(:class:`~loadtest.clients.httpclient.ChunkedDecoder`), lines split without copying
(:class:`~loadtest.clients.httpclient.LineSplitter`), and per line only a ``bytes.find`` for the
creation stamp the load generator put in the object (the annotation :data:`STAMP_KEY`, seconds
since the epoch): its lag is the wall-clock time of the read that completed the line minus that
stamp. Both ends read the same machine clock. Lines without a stamp (bookmarks, initial
``ADDED`` events) are only counted. A watcher whose stream ends before ``STOP`` counts as closed
by the server (an eviction, as the daemon closes watchers that fall behind).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import sys
import time
from array import array
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import cast

from loadtest.clients.httpclient import ChunkedDecoder, LineSplitter

__all__ = ["STAMP_KEY", "WatchStream", "main"]

STAMP_KEY = "loadtest/created-at"
_MARKER = b'"' + STAMP_KEY.encode() + b'":"'
_CONNECT_BATCH = 100


class WatchStream(asyncio.Protocol):
    """One watch: counts lines and records each stamped line's lag into the shared ``lags``."""

    def __init__(self, request: bytes, lags: array[float]) -> None:
        self.request = request
        self.lags = lags
        self.transport: asyncio.Transport | None = None
        self.status = 0
        self.started: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.stamped = 0
        self.other = 0
        self.ended = False
        self.stopping = False
        self._head = b""
        self._now = 0.0
        self._lines = LineSplitter(self._line)
        self._body = ChunkedDecoder(self._lines.feed)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        self.transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        self._now = time.time()
        if not self.status:
            self._head += data
            end = self._head.find(b"\r\n\r\n")
            if end < 0:
                return
            self.status = int(self._head.split(b" ", 2)[1])
            data, self._head = self._head[end + 4 :], b""
            if not self.started.done():
                self.started.set_result(self.status)
        if data and self._body.feed(data):
            self.ended = True

    def _line(self, buf: bytes, start: int, end: int) -> None:
        at = buf.find(_MARKER, start, end)
        if at < 0:
            self.other += 1
            return
        at += len(_MARKER)
        stamp = float(buf[at : buf.find(b'"', at, end)])
        self.lags.append(self._now - stamp)
        self.stamped += 1

    def connection_lost(self, exc: Exception | None) -> None:
        self.ended = True
        if not self.started.done():
            self.started.set_result(0)


async def _open(url: str, request: bytes, lags: array[float]) -> WatchStream:
    host, _, port = url.split("://", 1)[-1].split("/", 1)[0].rpartition(":")
    loop = asyncio.get_running_loop()
    _, stream = await loop.create_connection(lambda: WatchStream(request, lags), host, int(port))
    return stream


async def run(url: str, path: str, watchers: int, out: Path) -> None:
    lags: array[float] = array("d")
    request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json\r\n\r\n"
    streams: list[WatchStream] = []
    failed = 0
    for first in range(0, watchers, _CONNECT_BATCH):
        batch = range(first, min(watchers, first + _CONNECT_BATCH))
        opened = await asyncio.gather(
            *(_open(url, request.encode(), lags) for _ in batch), return_exceptions=True
        )
        for item in opened:
            if isinstance(item, WatchStream):
                streams.append(item)
            else:
                failed += 1
    codes = await asyncio.gather(*(s.started for s in streams))
    ok = sum(1 for code in codes if code == 200)
    failed += len(codes) - ok
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu_start = usage.ru_utime + usage.ru_stime
    wall_start = time.perf_counter()
    print(f"CONNECTED {ok} {failed}", flush=True)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_stdin() -> None:
        data = os.read(sys.stdin.fileno(), 4096)
        if not data:
            stop.set()
        for command in data.decode().split():
            if command == "COUNT":
                print(f"COUNT {sum(s.stamped for s in streams)}", flush=True)
            elif command == "STOP":
                stop.set()

    loop.add_reader(sys.stdin.fileno(), on_stdin)
    await stop.wait()
    loop.remove_reader(sys.stdin.fileno())
    usage = resource.getrusage(resource.RUSAGE_SELF)
    summary = {
        "watchers": watchers,
        "connected": ok,
        "failed": failed,
        "stamped": sum(s.stamped for s in streams),
        "other": sum(s.other for s in streams),
        "min_stamped": min((s.stamped for s in streams), default=0),
        "closed_by_server": sum(1 for s in streams if s.ended),
        "cpu_s": usage.ru_utime + usage.ru_stime - cpu_start,
        "wall_s": time.perf_counter() - wall_start,
    }
    for s in streams:
        if s.transport is not None:
            s.transport.close()
    _write(out, summary, lags)
    print("DONE", flush=True)


def _write(out: Path, summary: Mapping[str, object], lags: array[float]) -> None:
    with (out.parent / (out.name + ".lags")).open("wb") as f:
        lags.tofile(f)
    out.write_text(json.dumps(summary))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m loadtest.clients.watchclient", description=__doc__
    )
    parser.add_argument("--url", required=True)
    parser.add_argument("--path", default="/api/v1/pods?watch=1")
    parser.add_argument("--watchers", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        import uvloop
    except ImportError:  # pragma: no cover
        asyncio.run(run(args.url, args.path, args.watchers, args.out))
    else:
        uvloop.run(run(args.url, args.path, args.watchers, args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
