"""A slow link for tests: a byte-level TCP relay that can add latency, limit bandwidth and stall.

:class:`Relay` listens on 127.0.0.1 and forwards every connection to one target, byte for byte
(TLS passes through untouched: point a kubeconfig at the relay, and a certificate with the SAN
``127.0.0.1`` still verifies). Each direction of each connection is a reader and a writer around
a bounded queue of chunks, so a slowed or stalled relay stops reading and the sender feels TCP
backpressure, as behind a real slow link. Knobs, changed at any time:

- ``latency`` (seconds, one way): each chunk is forwarded that long after it was read, in order;
- ``bandwidth`` (bytes/s per direction, shared by all connections; 0 = unlimited);
- ``stall()`` / ``flow()``: nothing is forwarded (bytes wait, nothing is lost) until ``flow()``;
- ``cut()``: every open connection is closed at once (a middlebox dropping its flows).

A target that refuses a connection (the API server is down) gets the client's connection closed
at once: a relay cannot refuse a connection it already accepted.

``python -m loadtest.harness.relay --target 127.0.0.1:PORT`` runs one in its own process (so that the
work of the process driving a soak does not bend its timing): it prints ``listening on
127.0.0.1:PORT`` and takes one command per line on stdin (``latency 0.2``, ``bandwidth 40000``,
``stall``, ``flow``, ``cut``, ``stats``), answering each with one JSON line.
:class:`RelayProcess` drives it from asyncio.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson

__all__ = ["Relay", "RelayProcess", "RelayStats", "main"]

_CHUNK = 16 * 1024
_QUEUE_CHUNKS = 16
"""Chunks in flight per direction: 256 KiB, then the relay stops reading (backpressure)."""


@dataclass
class RelayStats:
    connections: int = 0
    """Accepted since the start."""
    open: int = 0
    refused: int = 0
    """Accepted connections closed because the target refused."""
    cut: int = 0
    """Connections closed by :meth:`Relay.cut`."""
    bytes_up: int = 0
    """Client → target."""
    bytes_down: int = 0


class _Bucket:
    """A shared rate limit: ``take(n)`` returns when ``n`` more bytes fit into ``rate`` bytes/s."""

    def __init__(self) -> None:
        self.rate = 0.0
        self._free_at = 0.0

    async def take(self, n: int) -> None:
        if self.rate <= 0:
            return
        loop = asyncio.get_running_loop()
        start = max(loop.time(), self._free_at)
        self._free_at = start + n / self.rate
        await asyncio.sleep(self._free_at - loop.time())


class Relay:
    """See the module docstring. ``async with Relay(host, port) as relay: relay.port``."""

    def __init__(self, target_host: str, target_port: int, *, port: int = 0) -> None:
        self.target = (target_host, target_port)
        self.listen_port = port
        self.latency = 0.0
        self._buckets = {"up": _Bucket(), "down": _Bucket()}
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._server: asyncio.Server | None = None
        self._links: set[_Link] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.stats = RelayStats()

    @property
    def bandwidth(self) -> float:
        return self._buckets["up"].rate

    @bandwidth.setter
    def bandwidth(self, rate: float) -> None:
        for bucket in self._buckets.values():
            bucket.rate = max(0.0, rate)

    @property
    def stalled(self) -> bool:
        return not self._flowing.is_set()

    def stall(self) -> None:
        self._flowing.clear()

    def flow(self) -> None:
        self._flowing.set()

    def cut(self) -> int:
        """Close every open connection; how many there were."""
        links = list(self._links)
        for link in links:
            link.close()
        self.stats.cut += len(links)
        return len(links)

    @property
    def port(self) -> int:
        assert self._server is not None, "the relay is not started"
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.listen_port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        self.cut()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def __aenter__(self) -> Relay:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.stats.connections += 1
        task = asyncio.create_task(self._serve(reader, writer), name="relay-connection")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            self.stats.refused += 1
            writer.close()
            return
        link = _Link(writer, up_writer)
        self._links.add(link)
        self.stats.open += 1
        pumps = [
            asyncio.create_task(self._pump(reader, up_writer, "up"), name="relay-up"),
            asyncio.create_task(self._pump(up_reader, writer, "down"), name="relay-down"),
        ]
        closed = asyncio.create_task(link.cut.wait(), name="relay-cut")
        both = asyncio.gather(*pumps, return_exceptions=True)
        try:
            # Both directions end (a half-close passes through), or the link is cut.
            waiters: list[asyncio.Future[Any]] = [both, closed]
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (*pumps, closed):
                task.cancel()
            await asyncio.gather(*pumps, closed, return_exceptions=True)
            self.stats.open -= 1
            self._links.discard(link)
            link.close(abort=link.cut.is_set())

    async def _pump(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, way: str
    ) -> None:
        """One direction: read chunks, each released ``latency`` after it was read, in order."""
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue(_QUEUE_CHUNKS)
        send = asyncio.create_task(self._send(queue, writer, way), name=f"relay-send-{way}")
        loop = asyncio.get_running_loop()
        release = 0.0
        try:
            while True:
                try:
                    data = await reader.read(_CHUNK)
                except OSError:
                    data = b""
                release = max(release, loop.time() + self.latency)
                await queue.put((release, data))  # b"": the end, after what came before
                if not data:
                    break
            await send
        finally:
            send.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await send

    async def _send(
        self, queue: asyncio.Queue[tuple[float, bytes]], writer: asyncio.StreamWriter, way: str
    ) -> None:
        loop = asyncio.get_running_loop()
        while True:
            release, data = await queue.get()
            delay = release - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            await self._flowing.wait()
            if not data:
                with contextlib.suppress(OSError):
                    if writer.can_write_eof():
                        writer.write_eof()
                return
            await self._buckets[way].take(len(data))
            await self._flowing.wait()
            try:
                writer.write(data)
                await writer.drain()
            except OSError:
                return
            if way == "up":
                self.stats.bytes_up += len(data)
            else:
                self.stats.bytes_down += len(data)

    def describe(self) -> dict[str, Any]:
        return {
            "latency": self.latency,
            "bandwidth": self.bandwidth,
            "stalled": self.stalled,
            **asdict(self.stats),
        }


class _Link:
    """The two sockets of one relayed connection."""

    def __init__(self, client: asyncio.StreamWriter, target: asyncio.StreamWriter) -> None:
        self.writers = (client, target)
        self.cut = asyncio.Event()

    def close(self, *, abort: bool = True) -> None:
        """Close both sockets: reset them (a cut: the peer must not take it for a clean end of
        a response), or, once both directions ended, after what is buffered is sent."""
        if abort:
            self.cut.set()
        for w in self.writers:
            if not w.is_closing():
                with contextlib.suppress(OSError, RuntimeError):
                    if abort:
                        w.transport.abort()
                    else:
                        w.close()


# ---------------------------------------------------------------------- as a process


async def _control(relay: Relay) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while line := await reader.readline():
        words = line.decode().split()
        answer: dict[str, Any] = {"ok": True}
        try:
            match words:
                case ["latency", seconds]:
                    relay.latency = float(seconds)
                case ["bandwidth", rate]:
                    relay.bandwidth = float(rate)
                case ["stall"]:
                    relay.stall()
                case ["flow"]:
                    relay.flow()
                case ["cut"]:
                    answer["closed"] = relay.cut()
                case ["stats"]:
                    pass
                case _:
                    answer = {"ok": False, "error": f"unknown command {line.decode()!r}"}
        except ValueError as err:
            answer = {"ok": False, "error": str(err)}
        answer.update(relay.describe())
        sys.stdout.write(orjson.dumps(answer).decode() + "\n")
        sys.stdout.flush()


async def _serve_forever(target: str, port: int) -> None:
    host, _, target_port = target.rpartition(":")
    async with Relay(host or "127.0.0.1", int(target_port), port=port) as relay:
        print(f"listening on 127.0.0.1:{relay.port}", flush=True)
        await _control(relay)  # until stdin closes


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m loadtest.harness.relay", description=__doc__.split("\n")[0]
    )
    p.add_argument("--target", required=True, help="HOST:PORT to forward to")
    p.add_argument("--port", type=int, default=0, help="where to listen on 127.0.0.1 (0: any)")
    args = p.parse_args(argv)
    asyncio.run(_serve_forever(args.target, args.port))
    return 0


class RelayProcess:
    """``python -m loadtest.harness.relay`` as a child process, driven through its stdin."""

    def __init__(self, target_port: int, *, log: Path) -> None:
        self.target_port = target_port
        self.log = log
        self.port = 0
        self._proc: asyncio.subprocess.Process | None = None
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        with self.log.open("ab") as err:
            self._proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "loadtest.harness.relay",
                "--target",
                f"127.0.0.1:{self.target_port}",
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=err,
            )
        assert self._proc.stdout is not None
        line = await asyncio.wait_for(self._proc.stdout.readline(), 30)
        if not line.startswith(b"listening on "):
            await self.stop()
            raise RuntimeError(f"the relay did not start: {line!r} (log: {self.log})")
        self.port = int(line.decode().rsplit(":", 1)[1])

    async def command(self, text: str) -> dict[str, Any]:
        """Send one command; the relay's answer (with its settings and counters)."""
        proc = self._proc
        assert proc is not None
        assert proc.stdin is not None
        assert proc.stdout is not None
        async with self._lock:
            proc.stdin.write(text.encode() + b"\n")
            await proc.stdin.drain()
            answer: dict[str, Any] = orjson.loads(await proc.stdout.readline())
        if not answer.get("ok"):
            raise ValueError(answer.get("error", answer))
        return answer

    async def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 5)
        except TimeoutError:
            proc.kill()
            await proc.wait()


if __name__ == "__main__":
    sys.exit(main())
