"""The watchers of :mod:`loadtest.scenarios.slowwatchers`: many readers in one process, and clients
that never read.

``python -m loadtest.clients.slowwatch URL PATH COUNT OUT`` opens ``COUNT`` watches of ``PATH`` on
``URL`` (HTTP/1.1, one connection each, chunked bodies decoded here), prints ``READY N`` once
``N`` of them answered 200, and keeps the type and resourceVersion of every event line each one
gets. When a line naming a JSON file of the written resourceVersions comes on its standard input,
it waits (up to ``--drain`` seconds) for every reader to reach the last of them, checks each
reader's events against the list (:func:`check_order`) and writes the summary to ``OUT``.

:func:`open_non_reader` is a client that sends the watch request and never reads, with a small
kernel receive buffer (``SO_RCVBUF``) so the daemon's own queue fills rather than the kernel's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["OrderCheck", "Reader", "check_order", "open_non_reader", "rv_of"]

_RV = b'"resourceVersion":"'


def rv_of(line: bytes) -> tuple[str, int]:
    """The type and the object's resourceVersion of one watch event line (orjson's compact
    encoding; the object's ``metadata.resourceVersion`` is the first one in the line)."""
    kind_at = line.index(b'"type":"') + 8
    kind = line[kind_at : line.index(b'"', kind_at)].decode()
    at = line.index(_RV) + len(_RV)
    return kind, int(line[at : line.index(b'"', at)])


@dataclass(frozen=True, slots=True)
class OrderCheck:
    """One reader's events against the writes: every written RV once, in order, nothing else."""

    received: int
    matched: bool
    missing: int
    duplicated: int
    out_of_order: int
    unexpected: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "received": self.received,
            "matched": self.matched,
            "missing": self.missing,
            "duplicated": self.duplicated,
            "out_of_order": self.out_of_order,
            "unexpected": self.unexpected,
        }


def check_order(received: Sequence[int], written: Sequence[int]) -> OrderCheck:
    """Compare the resourceVersions a reader got with those written, in write order.

    ``missing``: written and never received; ``duplicated``: received more than once (each extra
    copy); ``out_of_order``: received after a larger RV; ``unexpected``: received, never written.
    ``matched`` only when the two sequences are equal."""
    wrote = set(written)
    seen: set[int] = set()
    duplicated = out_of_order = unexpected = 0
    highest = -1
    for rv in received:
        if rv not in wrote:
            unexpected += 1
        elif rv in seen:
            duplicated += 1
        seen.add(rv)
        if rv < highest:
            out_of_order += 1
        highest = max(highest, rv)
    missing = len(wrote - seen)
    return OrderCheck(
        received=len(received),
        matched=list(received) == list(written),
        missing=missing,
        duplicated=duplicated,
        out_of_order=out_of_order,
        unexpected=unexpected,
    )


@dataclass
class Reader:
    """One watch that reads everything: the RVs of its ``MODIFIED``/``ADDED``/``DELETED`` lines."""

    rvs: list[int] = field(default_factory=list)
    other_lines: int = 0
    status: int = 0
    ended: str = ""
    """Why its stream ended before it was stopped (empty: it did not)."""
    bytes_read: int = 0

    async def run(self, host: str, port: int, path: str, ready: asyncio.Event) -> None:
        try:
            reader, writer = await asyncio.open_connection(host, port, limit=1 << 22)
        except OSError as err:
            self.ended = f"connect: {err}"
            ready.set()
            return
        try:
            writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
            head = await reader.readuntil(b"\r\n\r\n")
            self.status = int(head.split(b" ", 2)[1])
            ready.set()
            if self.status != 200:
                self.ended = f"status {self.status}"
                return
            pending = b""
            while True:
                size_line = await reader.readline()
                if not size_line:
                    self.ended = "connection closed"
                    return
                size = int(size_line.split(b";", 1)[0], 16)
                if size == 0:
                    self.ended = "response ended"
                    return
                chunk = await reader.readexactly(size + 2)
                self.bytes_read += size
                pending += chunk[:-2]
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if not line:
                        continue
                    kind, rv = rv_of(line)
                    if kind in ("ADDED", "MODIFIED", "DELETED"):
                        self.rvs.append(rv)
                    else:
                        self.other_lines += 1
        except (OSError, asyncio.IncompleteReadError, ValueError) as err:
            self.ended = f"{type(err).__name__}: {err}"
            ready.set()
        finally:
            writer.close()


def open_non_reader(host: str, port: int, path: str, rcvbuf: int = 1024) -> socket.socket:
    """A watch whose client sends the request and never reads (the kernel keeps about twice ``rcvbuf``
    for it, so what the daemon sends waits in the daemon)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.connect((host, port))
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    return sock


async def _serve(args: argparse.Namespace) -> dict[str, Any]:
    host, port = args.url.removeprefix("http://").rsplit(":", 1)
    readers = [Reader() for _ in range(args.count)]
    readies = [asyncio.Event() for _ in readers]
    tasks = []
    for i, (r, ready) in enumerate(zip(readers, readies, strict=True)):
        tasks.append(asyncio.create_task(r.run(host, int(port), args.path, ready)))
        if i % 50 == 49:
            await asyncio.sleep(0.05)  # no burst of 900 connects at once
    await asyncio.gather(*(ready.wait() for ready in readies))
    print(f"READY {sum(r.status == 200 for r in readers)}", flush=True)
    loop = asyncio.get_running_loop()
    line = await loop.run_in_executor(None, sys.stdin.readline)
    text = await loop.run_in_executor(None, Path(line.strip()).read_text)
    written: list[int] = json.loads(text)
    last = written[-1] if written else 0
    began = time.monotonic()
    while time.monotonic() - began < args.drain:
        if all(r.ended or (r.rvs and r.rvs[-1] >= last) for r in readers):
            break
        await asyncio.sleep(0.2)
    drained = time.monotonic() - began
    await asyncio.sleep(0.5)  # anything after the last write would be a duplicate: let it come
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    checks = [check_order(r.rvs, written) for r in readers]
    return {
        "readers": len(readers),
        "answered_200": sum(r.status == 200 for r in readers),
        "matched": sum(c.matched for c in checks),
        "missing": sum(c.missing for c in checks),
        "duplicated": sum(c.duplicated for c in checks),
        "out_of_order": sum(c.out_of_order for c in checks),
        "unexpected": sum(c.unexpected for c in checks),
        "events_received": sum(c.received for c in checks),
        "bytes_read": sum(r.bytes_read for r in readers),
        "ended_early": sorted({r.ended for r in readers if r.ended}),
        "ended_early_count": sum(bool(r.ended) for r in readers),
        "drain_seconds": round(drained, 2),
        "worst": next((c.as_dict() for c in checks if not c.matched), None),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtest.clients.slowwatch")
    parser.add_argument("url")
    parser.add_argument("path")
    parser.add_argument("count", type=int)
    parser.add_argument("out", type=Path)
    parser.add_argument("--drain", type=float, default=60.0)
    args = parser.parse_args(argv)
    summary = asyncio.run(_serve(args))
    args.out.write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
