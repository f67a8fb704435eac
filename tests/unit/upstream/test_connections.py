"""The forwarding connections against a server on loopback that writes its answers' bytes by
hand: what goes out, how each kind of answer ends, what is kept, what is sent again, and what
fails how. Each test runs on asyncio's own loop and on uvloop's, the daemon's (conftest.py):
their transports differ."""

from __future__ import annotations

import asyncio
import socket
import ssl
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from cacheproxy.errors import TransportError, UpstreamTimeout
from cacheproxy.serving.certificates import self_signed
from cacheproxy.upstream.connections import READ_HIGH_WATER, Answer, Connections
from tests.support import until

LOOPS = ("asyncio", "uvloop")
"""The event loops these tests run on."""

OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"

Handler = Callable[[bytes, asyncio.StreamWriter], Awaitable[bool]]
"""Given one request's head and body, answers it; False: close the connection afterwards."""


class Server:
    """An HTTP/1.1 server on 127.0.0.1: records each request as received, answers by
    ``handler``; counts its connections."""

    def __init__(self) -> None:
        self.requests: list[bytes] = []
        self.connections = 0
        self.handler: Handler = self.answer_ok
        self.server: asyncio.Server | None = None
        self.writers: list[asyncio.StreamWriter] = []
        self.serving: set[asyncio.Task[None]] = set()

    @staticmethod
    async def answer_ok(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(OK)
        return True

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.append(writer)
        task = asyncio.current_task()
        assert task is not None
        self.serving.add(task)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                request = head + (await reader.readexactly(length) if length else b"")
                self.requests.append(request)
                keep = await self.handler(request, writer)
                await writer.drain()
                if not keep:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
            self.serving.discard(task)

    async def start(self, ssl_context: ssl.SSLContext | None = None) -> None:
        self.server = await asyncio.start_server(self.serve, "127.0.0.1", 0, ssl=ssl_context)

    async def stop(self) -> None:
        """Closes every connection, and waits for their handlers to end."""
        assert self.server is not None
        self.server.close()
        for writer in self.writers:
            writer.close()
        for task in list(self.serving):
            task.cancel()
        await asyncio.gather(*self.serving, return_exceptions=True)

    @property
    def port(self) -> int:
        assert self.server is not None
        port: int = self.server.sockets[0].getsockname()[1]
        return port

    def connections_to(
        self,
        *,
        ssl_context: ssl.SSLContext | None = None,
        server_hostname: str = "",
        origin: str = "",
    ) -> Connections:
        return Connections(
            "127.0.0.1",
            self.port,
            host_header=f"127.0.0.1:{self.port}".encode(),
            ssl_context=ssl_context,
            server_hostname=server_hostname,
            origin=origin,
        )


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    fake = Server()
    await fake.start()
    yield fake
    await fake.stop()


async def read(answer: Answer) -> bytes:
    try:
        return b"".join([chunk async for chunk in answer.body()])
    finally:
        await answer.aclose()


async def test_requests_go_as_given_on_one_kept_connection(server: Server) -> None:
    connections = server.connections_to()
    headers = [(b"Authorization", b"Bearer t"), (b"accept", b"application/json")]
    answer = await connections.send(b"GET", b"/api/v1/pods?limit=1", headers, b"")
    assert answer.code == 200
    assert (b"Content-Type", b"application/json") in answer.headers
    assert await read(answer) == b"{}"
    answer = await connections.send(b"POST", b"/api/v1/namespaces", [], b"")
    assert await read(answer) == b"{}"
    answer = await connections.send(b"PATCH", b"/api/v1/namespaces/a", [], b'{"x":1}')
    assert await read(answer) == b"{}"
    assert server.connections == 1
    host = f"host: 127.0.0.1:{server.port}\r\n".encode()
    assert server.requests == [
        b"GET /api/v1/pods?limit=1 HTTP/1.1\r\n"
        + host
        + b"Authorization: Bearer t\r\naccept: application/json\r\n\r\n",
        b"POST /api/v1/namespaces HTTP/1.1\r\n" + host + b"content-length: 0\r\n\r\n",
        b"PATCH /api/v1/namespaces/a HTTP/1.1\r\n" + host + b'content-length: 7\r\n\r\n{"x":1}',
    ]
    assert connections.idle == 1
    await connections.aclose()
    assert connections.idle == 0


async def test_a_large_body_is_sent_whole(server: Server) -> None:
    connections = server.connections_to()
    body = bytes(range(256)) * 8192  # 2 MiB
    answer = await connections.send(b"PUT", b"/x", [], body)
    assert await read(answer) == b"{}"
    assert server.requests[0].endswith(b"\r\n\r\n" + body)


async def test_each_kind_of_answer_ends_where_it_ends(server: Server) -> None:
    answers = iter(
        [
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 3\r\n\r\nnew",
            b"HTTP/1.1 204 No Content\r\n\r\n",
            b"HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n",  # to a HEAD: no body follows
        ]
    )

    async def answer(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(next(answers))
        return True

    server.handler = answer
    connections = server.connections_to()
    got = []
    for method in (b"GET", b"POST", b"DELETE", b"GET"):
        reply = await connections.send(method, b"/x", [], b"")
        got.append((reply.code, await read(reply)))
    assert got == [(200, b"hello world"), (201, b"new"), (204, b""), (304, b"")]
    assert server.connections == 1  # each ended where it should: the connection was kept
    reply = await connections.send(b"HEAD", b"/x", [], b"")
    assert (reply.code, await read(reply)) == (200, b"")
    assert connections.idle == 0  # a HEAD's connection is not kept


async def test_an_answer_the_connections_end_delimits_is_read_to_it(server: Server) -> None:
    async def answer(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nall of it")
        return False

    server.handler = answer
    connections = server.connections_to()
    reply = await connections.send(b"GET", b"/x", [], b"")
    assert await read(reply) == b"all of it"
    assert connections.idle == 0


async def test_connection_close_is_obeyed(server: Server) -> None:
    async def answer(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}")
        return False

    server.handler = answer
    connections = server.connections_to()
    for _ in range(2):
        assert await read(await connections.send(b"GET", b"/x", [], b"")) == b"{}"
    assert server.connections == 2
    assert connections.idle == 0


async def test_a_kept_connection_closed_under_a_request_sends_it_again_if_idempotent(
    server: Server,
) -> None:
    """The server closes a kept connection as the next request arrives (its idle timeout
    crossing it): a GET is sent again on a new connection, a POST is not."""
    served: dict[int, int] = {}

    async def answer(request: bytes, writer: asyncio.StreamWriter) -> bool:
        count = served[id(writer)] = served.get(id(writer), 0) + 1
        if count == 2:
            return False  # closes without answering
        writer.write(OK)
        return True

    server.handler = answer
    connections = server.connections_to()
    assert await read(await connections.send(b"GET", b"/x", [], b"")) == b"{}"
    assert await read(await connections.send(b"GET", b"/y", [], b"")) == b"{}"
    assert server.connections == 2
    assert [r.split(b" ")[1] for r in server.requests] == [b"/x", b"/y", b"/y"]
    with pytest.raises(TransportError, match="not sent again: POST may not be idempotent"):
        await connections.send(b"POST", b"/z", [], b"{}")
    assert [r.split(b" ")[1] for r in server.requests][-1] == b"/z"  # sent once
    assert server.connections == 2


async def test_an_answer_broken_off_is_a_transport_error(server: Server) -> None:
    async def answer(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten b")
        return False

    server.handler = answer
    connections = server.connections_to()
    reply = await connections.send(b"GET", b"/x", [], b"")
    with pytest.raises(TransportError, match="closed the connection mid-answer"):
        await read(reply)
    assert connections.idle == 0


async def test_a_server_that_closes_without_answering_is_a_transport_error(
    server: Server,
) -> None:
    async def close(request: bytes, writer: asyncio.StreamWriter) -> bool:
        return False

    server.handler = close
    connections = server.connections_to(origin="https://api.test:6443")
    with pytest.raises(TransportError, match=r"^https://api.test:6443 closed the connection"):
        await connections.send(b"GET", b"/x", [], b"")


async def test_garbage_is_not_an_answer(server: Server) -> None:
    async def garbage(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")
        return True

    server.handler = garbage
    connections = server.connections_to()
    with pytest.raises(TransportError, match=r"not HTTP/1\.1"):
        await connections.send(b"GET", b"/x", [], b"")


async def test_a_body_not_taken_stops_the_socket_being_read(server: Server) -> None:
    size = 16 * READ_HIGH_WATER
    block = bytes(range(256)) * 256  # 64 KiB

    async def answer(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % size)
        for _ in range(size // len(block)):
            writer.write(block)
            await writer.drain()
        return True

    server.handler = answer
    connections = server.connections_to()
    reply = await connections.send(b"GET", b"/x", [], b"")
    connection = reply._connection
    await until(lambda: connection.waiting > READ_HIGH_WATER, "the body fills what is read")
    for _ in range(20):
        await asyncio.sleep(0.01)
    # Reading stopped: no more than one socket read past the mark waits.
    assert connection.waiting <= READ_HIGH_WATER + 256 * 1024
    body = await read(reply)
    assert len(body) == size and body == block * (size // len(block))
    assert connections.idle == 1


async def test_an_answer_given_up_closes_its_connection(server: Server) -> None:
    more = asyncio.Event()

    async def answer(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n")
        await writer.drain()
        await more.wait()
        return False

    server.handler = answer
    connections = server.connections_to()
    reply = await connections.send(b"GET", b"/watch", [], b"")
    chunks = reply.body()
    assert await anext(chunks) == b"a"
    waiting = asyncio.ensure_future(anext(chunks))
    await asyncio.sleep(0.01)
    waiting.cancel()  # the client went away
    with pytest.raises(asyncio.CancelledError):
        await waiting
    await reply.aclose()
    assert connections.idle == 0
    more.set()
    server.handler = Server.answer_ok
    assert await read(await connections.send(b"GET", b"/x", [], b"")) == b"{}"
    assert server.connections == 2


async def test_tls_verified_against_the_server_name_given(tmp_path: Path) -> None:
    files = self_signed(tmp_path, ["api.internal"])
    serving = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    serving.load_cert_chain(files.cert, files.key)
    fake = Server()
    await fake.start(serving)
    try:
        trusting = ssl.create_default_context(cafile=str(files.ca))
        named = fake.connections_to(ssl_context=trusting, server_hostname="api.internal")
        assert await read(await named.send(b"GET", b"/x", [], b"")) == b"{}"
        unnamed = fake.connections_to(ssl_context=trusting, origin="https://127.0.0.1")
        with pytest.raises(TransportError, match="certificate verify failed"):
            await unnamed.send(b"GET", b"/x", [], b"")
        await named.aclose()
    finally:
        await fake.stop()


async def test_nobody_listening_is_a_refused_connection() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    connections = Connections("127.0.0.1", port, host_header=b"x", origin="http://127.0.0.1")
    with pytest.raises(TransportError, match="refused") as refused:
        await connections.send(b"GET", b"/x", [], b"")
    assert refused.value.connection_refused


async def test_a_tls_handshake_that_never_ends_times_out() -> None:
    accepted: list[asyncio.StreamWriter] = []
    silent = await asyncio.start_server(lambda r, w: accepted.append(w), "127.0.0.1", 0)
    port = silent.sockets[0].getsockname()[1]
    try:
        connections = Connections(
            "127.0.0.1",
            port,
            host_header=b"x",
            ssl_context=ssl.create_default_context(),
            origin="https://127.0.0.1",
            connect_timeout=0.1,
        )
        with pytest.raises(UpstreamTimeout, match=r"timed out connecting to https://127\.0\.0\.1"):
            await connections.send(b"GET", b"/x", [], b"")
    finally:
        silent.close()
        for writer in accepted:
            writer.close()


def _stalled_tls_server(files: Any, stop: threading.Event) -> tuple[int, threading.Thread]:
    """A TLS server in a thread: it answers one request's head (a body of 100 bytes promised,
    none sent), then reads nothing more — not even TLS's close — until ``stop``."""
    listener = socket.create_server(("127.0.0.1", 0))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(files.cert, files.key)

    def serve() -> None:
        with listener, context.wrap_socket(listener.accept()[0], server_side=True) as conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n")
            stop.wait(30)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return listener.getsockname()[1], thread


async def test_closing_closes_busy_connections_and_returns_once_their_sockets_are(
    server: Server, tmp_path: Path
) -> None:
    # A busy plain connection: its answer's head came, its body was never read nor given up.
    connections = server.connections_to()
    answer = await connections.send(b"GET", b"/x", [], b"")
    busy = answer._connection
    # A TLS one whose server never answers TLS's orderly close: it is aborted.
    files = self_signed(tmp_path, ["127.0.0.1"])
    stop = threading.Event()
    port, thread = _stalled_tls_server(files, stop)
    tls = Connections(
        "127.0.0.1",
        port,
        host_header=b"127.0.0.1",
        ssl_context=ssl.create_default_context(cafile=str(files.ca)),
    )
    stalled = (await tls.send(b"GET", b"/y", [], b""))._connection
    try:
        await connections.aclose()
        await tls.aclose()
        assert busy.lost and stalled.lost  # their sockets closed before aclose returned
        with pytest.raises(TransportError, match="closed"):
            await connections.send(b"GET", b"/x", [], b"")
    finally:
        stop.set()
        await asyncio.to_thread(thread.join, 5)
