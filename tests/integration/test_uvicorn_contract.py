"""The uvicorn internals the adapter relies on, checked against the installed uvicorn.

``cacheproxy.serving.uvicorn_adapter`` names them in ``RELIED_ON``; these tests fail when a uvicorn
renames, removes or re-signs one of them, or when a request through our protocol no longer gets
the extensions and the bytes it should. Run them before widening the pin in ``pyproject.toml``.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import inspect
import tomllib
from pathlib import Path
from typing import Any, ClassVar

import pytest
import uvicorn
from packaging.requirements import Requirement
from uvicorn.protocols.http.flow_control import FlowControl
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from cacheproxy.serving import (
    BODY_WRITER,
    RESPONSE_FLOW,
    UPGRADE,
    ResponseFlow,
    ServingProtocol,
    UvicornRunner,
)
from cacheproxy.serving.uvicorn_adapter import RELIED_ON
from tests.support import until

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def _uvicorn_requirement() -> Requirement:
    deps = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    [req] = [Requirement(d) for d in deps if Requirement(d).name == "uvicorn"]
    return req


def test_the_installed_uvicorn_is_within_the_range_the_adapter_was_checked_against() -> None:
    req = _uvicorn_requirement()
    assert req.specifier, "uvicorn must be pinned to the versions the adapter was checked against"
    assert req.specifier.contains(importlib.metadata.version("uvicorn"))


def test_the_methods_the_adapter_calls_keep_their_signatures() -> None:
    def params(func: Any) -> list[str]:
        return list(inspect.signature(func).parameters)

    assert params(uvicorn.Server.startup) == ["self", "sockets"]
    assert params(uvicorn.Server.shutdown) == ["self", "sockets"]
    assert params(uvicorn.Server.main_loop) == ["self"]
    for coroutine in (uvicorn.Server.startup, uvicorn.Server.main_loop, FlowControl.drain):
        assert inspect.iscoroutinefunction(coroutine)
    assert params(HttpToolsProtocol.__init__)[:4] == ["self", "config", "server_state", "app_state"]
    assert params(HttpToolsProtocol.connection_made) == ["self", "transport"]
    assert params(HttpToolsProtocol.connection_lost) == ["self", "exc"]
    assert params(HttpToolsProtocol.on_message_begin) == ["self"]
    assert params(HttpToolsProtocol.on_headers_complete) == ["self"]
    assert params(HttpToolsProtocol.shutdown) == ["self"]
    assert params(uvicorn.Config.load) == ["self"]


class _Capturing(ServingProtocol):
    """Our protocol, keeping each request's protocol and cycle for inspection."""

    captured: ClassVar[list[tuple[HttpToolsProtocol, RequestResponseCycle]]] = []

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        _Capturing.captured.append((self, self.cycle))


_told: list[list[str]] = []
"""Who each ``/hold`` request's ``on_disconnect`` told, in order."""

_chunks_written: list[bool] = []
"""What each ``write_chunk`` of the app returned."""


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Writes its bodies through the adapter's extensions, as the servers do."""
    extensions = scope["extensions"]
    writer, flow = extensions[BODY_WRITER], extensions[RESPONSE_FLOW]
    assert await flow.writable(1.0)
    if scope["path"] == "/upgrade":
        # Switch, then answer each piece the client sends with it in upper case.
        tunnel = await extensions[UPGRADE].accept(
            101, [(b"upgrade", b"echo"), (b"connection", b"Upgrade")]
        )
        while data := await tunnel.receive():
            await tunnel.send(data.upper())
        tunnel.close()
        return
    if scope["path"] == "/hold":
        # Answers nothing: notes who was told that the client went away.
        told: list[str] = []
        gone = asyncio.Event()
        flow.on_disconnect(lambda: told.append("registered"))
        stop = flow.on_disconnect(lambda: told.append("stopped"))
        stop()
        flow.on_disconnect(gone.set)
        await asyncio.wait_for(gone.wait(), 10)
        flow.on_disconnect(lambda: told.append("after"))
        _told.append(told)
        return
    if scope["path"] == "/abort":
        headers = [(b"content-length", b"100")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await writer.write([b"partial"], 7)
        flow.abort()
        return
    if scope["path"] == "/parts":
        headers = [(b"content-length", b"11")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await writer.write([b"hello", b" ", b"world"], 11)
    else:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        _chunks_written.append(await writer.write_chunk([b"line-1\n", b"line-2\n"]))
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _request(port: int, path: str, method: str = "GET") -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"{method} {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n".encode())
    data = await reader.read()
    writer.close()
    await writer.wait_closed()
    return data


@pytest.fixture
async def runner() -> Any:
    _Capturing.captured.clear()
    _chunks_written.clear()
    config = uvicorn.Config(_app, http=_Capturing, lifespan="off", log_level="warning", ws="none")
    runner = UvicornRunner(config, host="127.0.0.1", port=0, name="contract")
    await runner.start()
    try:
        yield runner
    finally:
        await runner.stop()


async def test_every_internal_the_adapter_relies_on_exists_on_a_serving_uvicorn(
    runner: UvicornRunner,
) -> None:
    await _request(runner.port, "/parts")
    [(protocol, cycle)] = _Capturing.captured
    server = runner._server
    owners: dict[str, object] = {
        "uvicorn.Config": runner.config,
        "uvicorn.Server": server,
        "uvicorn.server.ServerState": server.server_state if server else None,
        "HttpToolsProtocol": protocol,
        "RequestResponseCycle": cycle,
        "FlowControl": cycle.flow,
    }
    assert set(owners) == set(RELIED_ON)
    missing = [
        f"{owner}.{name}"
        for owner, names in RELIED_ON.items()
        for name in names
        if not hasattr(owners[owner], name)
    ]
    assert missing == []


async def test_a_body_written_from_parts_arrives_whole_with_its_length(
    runner: UvicornRunner,
) -> None:
    response = await _request(runner.port, "/parts")
    head, _, body = response.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200") and b"content-length: 11" in head.lower()
    assert body == b"hello world"


async def test_a_chunk_written_from_parts_is_framed_as_one_chunk(runner: UvicornRunner) -> None:
    response = await _request(runner.port, "/chunks")
    head, _, body = response.partition(b"\r\n\r\n")
    assert b"transfer-encoding: chunked" in head.lower()
    assert body == b"e\r\nline-1\nline-2\n\r\n0\r\n\r\n"
    assert _chunks_written == [True]


async def test_a_chunk_is_not_written_for_a_head_or_a_client_gone(runner: UvicornRunner) -> None:
    response = await _request(runner.port, "/chunks", method="HEAD")
    head, _, body = response.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200") and body == b""
    assert _chunks_written == [False]
    [(protocol, cycle)] = _Capturing.captured
    cycle.disconnected = True
    writer = protocol.scope["extensions"][BODY_WRITER]
    assert await writer.write_chunk([b"late\n"]) is False


async def test_abort_drops_the_connection_without_ending_the_response(
    runner: UvicornRunner,
) -> None:
    response = await _request(runner.port, "/abort")
    assert response.endswith(b"\r\n\r\npartial")
    [(_, cycle)] = _Capturing.captured
    assert cycle.disconnected


async def test_a_client_going_away_is_told_once_to_each_callback_not_stopped(
    runner: UvicornRunner,
) -> None:
    _told.clear()
    _, writer = await asyncio.open_connection("127.0.0.1", runner.port)
    writer.write(b"GET /hold HTTP/1.1\r\nHost: t\r\n\r\n")
    await writer.drain()
    await until(lambda: bool(_Capturing.captured), what="the request read")
    writer.close()
    await writer.wait_closed()
    await until(lambda: bool(_told), what="the app told that its client went away")
    # Registered before: told once; stopped: never; registered after: at once.
    assert _told == [["registered", "after"]]


async def test_a_paused_response_is_not_writable_until_it_resumes(runner: UvicornRunner) -> None:
    await _request(runner.port, "/parts")
    [(protocol, cycle)] = _Capturing.captured
    flow: ResponseFlow = protocol.scope["extensions"][RESPONSE_FLOW]  # type: ignore[assignment]
    cycle.disconnected = False
    cycle.flow.pause_writing()
    assert not await flow.writable(0.01)
    cycle.flow.resume_writing()
    assert await flow.writable(0.01)


_OFFER = "GET {path} HTTP/1.1\r\nHost: t\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n"


async def test_an_upgrade_accepted_hands_the_connection_over_both_ways(
    runner: UvicornRunner,
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", runner.port)
    writer.write(_OFFER.format(path="/upgrade").encode())
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 101 Switching Protocols\r\n")
    assert b"upgrade: echo\r\n" in head
    for piece in (b"first", b"second" * 50_000):
        writer.write(piece)
        assert await reader.readexactly(len(piece)) == piece.upper()
    writer.close()
    await writer.wait_closed()
    [(protocol, _)] = _Capturing.captured
    assert protocol.scope["extensions"][UPGRADE] is not None


async def test_an_upgrade_answered_without_switching_closes_the_connection_after(
    runner: UvicornRunner,
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", runner.port)
    writer.write(_OFFER.format(path="/parts").encode())
    # The answer, then the end of the connection: what follows the offer is not HTTP.
    answer = await asyncio.wait_for(reader.read(), 10)
    assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(b"hello world")
    writer.close()


async def test_a_plain_request_is_offered_no_upgrade(runner: UvicornRunner) -> None:
    await _request(runner.port, "/parts")
    [(protocol, _)] = _Capturing.captured
    assert UPGRADE not in protocol.scope["extensions"]
