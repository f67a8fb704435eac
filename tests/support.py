"""Test support shared by the suites: a simulator served on 127.0.0.1 (port 0) with a client, a
poll for conditions on state that announces nothing, and the commands the docs show."""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import httpx
import orjson

from cacheproxy.informer import SharedInformer
from cacheproxy.sim import SimServer, Simulator


@contextlib.asynccontextmanager
async def serving(sim: Simulator) -> AsyncIterator[tuple[SimServer, httpx.AsyncClient]]:
    """``sim`` served on a free loopback port, and an HTTP client for it; both closed after."""
    async with SimServer(sim) as server, httpx.AsyncClient(base_url=server.url, timeout=10) as c:
        yield server, c


async def until(
    predicate: Callable[[], bool], what: str = "the condition holds", *, within: float = 10.0
) -> None:
    """Poll ``predicate`` until it holds; fail after ``within`` seconds (a guard, not a timing)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        await asyncio.sleep(0.005)


def marked_commands(document: Path, marker: str) -> list[str]:
    """The commands of every ``sh`` block right after ``<!-- marker -->`` in ``document`` (one per
    line; comments and blank lines skipped, trailing ``# …`` remarks kept for the shell)."""
    block = re.compile(rf"<!-- {re.escape(marker)} -->\n```sh\n(.*?)```", re.DOTALL)
    return [
        line
        for found in block.findall(document.read_text())
        for line in found.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]


@contextlib.asynccontextmanager
async def watch_events(
    client: httpx.AsyncClient,
    path: str,
    params: Mapping[str, str],
    *,
    accept: str = "",
) -> AsyncIterator[list[dict[str, Any]]]:
    """A watch of ``path`` (``params`` besides ``watch=1``; ``Accept: accept`` when given) read
    into a list of events while the block runs."""
    events: list[dict[str, Any]] = []
    headers = {"Accept": accept} if accept else {}

    async def read() -> None:
        async with client.stream(
            "GET", path, params={"watch": "1", **params}, headers=headers
        ) as response:
            assert response.status_code == 200
            async for line in response.aiter_lines():
                if line.strip():
                    events.append(orjson.loads(line))

    task = asyncio.create_task(read())
    try:
        yield events
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def start_demo(pods: int = 20) -> asyncio.subprocess.Process:
    """``cacheproxy demo`` as ``make run`` starts it, on free ports, its output on a pipe (the
    first line names both URLs; the caller stops the process)."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "cacheproxy",
        "demo",
        "--port",
        "0",
        "--sim-port",
        "0",
        "--pods",
        str(pods),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )


async def settle(predicate: Callable[[], bool], *, steps: int = 5000) -> None:
    """Let the event loop run until ``predicate`` holds (at most ``steps`` turns, no time)."""
    for _ in range(steps):
        if predicate():
            return
        await asyncio.sleep(0)
    raise AssertionError("never settled")


@contextlib.asynccontextmanager
async def running_informer(
    informer: SharedInformer, *, synced: bool = True
) -> AsyncIterator[SharedInformer]:
    """``informer`` running while the block runs (first synced unless ``synced`` is false)."""
    task = asyncio.create_task(informer.run(), name="informer-under-test")
    try:
        if synced:
            await asyncio.wait_for(informer.wait_for_sync(), timeout=5)
        yield informer
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


INITIAL_EVENTS_END = "k8s.io/initial-events-end"
BLUEPRINT = "kubernetes.io/initial-events-list-blueprint"
POD_LIST_BLUEPRINT = (
    "eyJraW5kIjoiUG9kTGlzdCIsImFwaVZlcnNpb24iOiJ2MSIsIm1ldGFkYXRhIjp7fSwiaXRlbXMiOm51bGx9Cg=="
)
"""The blueprint kube-apiserver 1.32 puts on a pods watch-list's end bookmark (an empty PodList)."""
CONFIGMAP_LIST_BLUEPRINT = "eyJraW5kIjoiQ29uZmlnTWFwTGlzdCIsImFwaVZlcnNpb24iOiJ2MSIsIm1ldGFkYXRhIjp7fSwiaXRlbXMiOm51bGx9Cg=="
"""The same of a configmaps watch-list (an empty ConfigMapList)."""


def end_annotations(blueprint: str | None) -> dict[str, str]:
    """A watch-list end bookmark's annotations: the end, and (1.32, 1.33) the list's blueprint."""
    return {INITIAL_EVENTS_END: "true", **({BLUEPRINT: blueprint} if blueprint else {})}


def metadata_initial_events_end(resource_version: str, *, blueprint: bool) -> dict[str, Any]:
    """The object of a metadata watch-list's initial-events-end bookmark, as kube-apiserver
    sends it (``as=PartialObjectMetadata``); ``blueprint``: with the list's blueprint, as 1.32
    and 1.33 send it (the empty ``PartialObjectMetadataList``, base64)."""
    annotations = end_annotations(
        "eyJraW5kIjoiUGFydGlhbE9iamVjdE1ldGFkYXRhTGlzdCIsImFwaVZlcnNpb24iOiJtZXRhLms4cy5pby92MSIs"
        "Im1ldGFkYXRhIjp7fSwiaXRlbXMiOm51bGx9Cg=="
        if blueprint
        else None
    )
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {
            "resourceVersion": resource_version,
            "creationTimestamp": None,
            "annotations": annotations,
        },
    }


def _protobuf_fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """The (field number, value) pairs of one protobuf message: varints and length-delimited
    fields, the only wire types a Status has."""
    fields: list[tuple[int, int | bytes]] = []
    i = 0

    def varint() -> int:
        nonlocal i
        value = shift = 0
        while True:
            byte = data[i]
            i += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                return value

    while i < len(data):
        key = varint()
        number, wire = key >> 3, key & 7
        if wire == 0:
            fields.append((number, varint()))
        elif wire == 2:
            size = varint()
            fields.append((number, data[i : i + size]))
            i += size
        else:
            raise AssertionError(f"wire type {wire} in a Status")
    return fields


def decode_status_protobuf(body: bytes) -> dict[str, Any]:
    """A protobuf ``metav1.Status`` (in its ``k8s\\x00`` envelope) as the JSON fields tests
    look at: kind, apiVersion, status, message, reason, code."""
    assert body.startswith(b"k8s\x00"), body[:8]
    envelope = dict(_protobuf_fields(body[4:]))
    type_meta = dict(_protobuf_fields(envelope[1]))  # type: ignore[arg-type]
    status = dict(_protobuf_fields(envelope[2]))  # type: ignore[arg-type]

    def text(value: object) -> str:
        return value.decode() if isinstance(value, bytes) else ""

    return {
        "kind": text(type_meta.get(2)),
        "apiVersion": text(type_meta.get(1)),
        "status": text(status.get(2)),
        "message": text(status.get(3)),
        "reason": text(status.get(4)),
        "code": status.get(6, 0),
    }


async def raw_watch(port: int, path: str) -> socket.socket:
    """A client that sends a watch request and then never reads (a tiny receive window)."""
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    sock.setblocking(False)
    await loop.sock_connect(sock, ("127.0.0.1", port))
    await loop.sock_sendall(sock, f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    return sock
