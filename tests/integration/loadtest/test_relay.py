"""The soak's slow link (``loadtest.harness.relay``) forwards bytes unchanged, TLS included, and its
latency, bandwidth, stall and cut do what they say."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from cacheproxy.sim.testpki import generate_pki
from loadtest.harness.relay import Relay, RelayProcess


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    writer.close()


@contextlib.asynccontextmanager
async def _echo_server(ssl_context: ssl.SSLContext | None = None) -> AsyncIterator[int]:
    server = await asyncio.start_server(_echo, "127.0.0.1", 0, ssl=ssl_context)
    try:
        yield int(server.sockets[0].getsockname()[1])
    finally:
        server.close()
        await server.wait_closed()


async def _round_trip(port: int, payload: bytes, **kwargs: object) -> tuple[bytes, float]:
    began = time.monotonic()
    reader, writer = await asyncio.open_connection("127.0.0.1", port, **kwargs)  # type: ignore[arg-type]
    writer.write(payload)
    await writer.drain()
    got = await reader.readexactly(len(payload))
    took = time.monotonic() - began
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return got, took


async def test_bytes_pass_through_unchanged_both_ways() -> None:
    async with _echo_server() as target, Relay("127.0.0.1", target) as relay:
        payload = bytes(range(256)) * 4000  # 1 MB, more than the relay queues
        got, _ = await _round_trip(relay.port, payload)
        assert got == payload
        assert relay.stats.bytes_up == relay.stats.bytes_down == len(payload)


async def test_tls_passes_through_and_the_certificate_for_127_0_0_1_verifies(
    tmp_path: Path,
) -> None:
    pki = generate_pki(tmp_path, hosts=("127.0.0.1",))
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(pki.server_cert, pki.server_key)
    client_ctx = ssl.create_default_context(cafile=str(pki.ca_cert))
    async with _echo_server(server_ctx) as target, Relay("127.0.0.1", target) as relay:
        got, _ = await _round_trip(
            relay.port, b"hello over TLS", ssl=client_ctx, server_hostname="127.0.0.1"
        )
        assert got == b"hello over TLS"


async def test_latency_delays_each_direction() -> None:
    async with _echo_server() as target, Relay("127.0.0.1", target) as relay:
        _, fast = await _round_trip(relay.port, b"x")
        relay.latency = 0.15
        _, slow = await _round_trip(relay.port, b"x")
        assert slow >= 0.3  # there and back
        assert fast < 0.15


async def test_bandwidth_limits_the_rate() -> None:
    async with _echo_server() as target, Relay("127.0.0.1", target) as relay:
        relay.bandwidth = 200_000
        _, took = await _round_trip(relay.port, b"y" * 100_000)
        assert took >= 0.45  # 100 kB each way at 200 kB/s, the directions overlapping
        relay.bandwidth = 0
        _, took = await _round_trip(relay.port, b"y" * 100_000)
        assert took < 0.3


async def test_a_stall_holds_the_bytes_and_loses_none() -> None:
    async with _echo_server() as target, Relay("127.0.0.1", target) as relay:
        reader, writer = await asyncio.open_connection("127.0.0.1", relay.port)
        relay.stall()
        writer.write(b"held")
        await writer.drain()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(reader.readexactly(4), 0.3)
        relay.flow()
        assert await asyncio.wait_for(reader.readexactly(4), 2) == b"held"
        writer.close()


async def test_cut_resets_every_open_connection() -> None:
    async with _echo_server() as target, Relay("127.0.0.1", target) as relay:
        reader, writer = await asyncio.open_connection("127.0.0.1", relay.port)
        writer.write(b"ping")
        assert await reader.readexactly(4) == b"ping"
        assert relay.cut() == 1
        with contextlib.suppress(ConnectionError):
            assert await asyncio.wait_for(reader.read(10), 2) == b""
        writer.close()
        for _ in range(100):
            if relay.stats.open == 0:
                break
            await asyncio.sleep(0.01)
        assert relay.stats.open == 0
        assert relay.stats.cut == 1


async def test_a_refusing_target_closes_the_client_connection() -> None:
    async with _echo_server() as target:
        pass  # the port is free again: nothing listens there
    async with Relay("127.0.0.1", target) as relay:
        reader, writer = await asyncio.open_connection("127.0.0.1", relay.port)
        with contextlib.suppress(ConnectionError):
            assert await asyncio.wait_for(reader.read(10), 2) == b""
        writer.close()
        assert relay.stats.refused == 1


async def test_the_relay_process_takes_commands_on_stdin(tmp_path: Path) -> None:
    async with _echo_server() as target:
        relay = RelayProcess(target, log=tmp_path / "relay.log")
        await relay.start()
        try:
            got, _ = await _round_trip(relay.port, b"through a process")
            assert got == b"through a process"
            answer = await relay.command("latency 0.1")
            assert answer["latency"] == 0.1
            _, took = await _round_trip(relay.port, b"z")
            assert took >= 0.2
            answer = await relay.command("stats")
            assert answer["connections"] == 2 and answer["bytes_up"] == len("through a process") + 1
            with pytest.raises(ValueError, match="unknown command"):
                await relay.command("explode")
        finally:
            await relay.stop()
