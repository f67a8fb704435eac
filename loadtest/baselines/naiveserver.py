"""The naive baseline as a server: parsed dicts, one ``orjson.dumps`` per response.

``python -m loadtest.baselines.naiveserver --upstream URL`` lists the pods of ``URL`` once (pages of 500),
keeps them in a :class:`~loadtest.baselines.naive.NaiveDictCache` (managedFields dropped; namespace, label
and ``spec.nodeName`` indexes; keys sorted once for paging), then serves list / get of pods on the
Kubernetes paths from that snapshot, encoding each response with ``orjson.dumps`` of the dicts:
what a straightforward cache would do. It is a raw ASGI app under uvicorn with the daemon's
settings (httptools, uvloop, no lifespan, no access log, the socket bound by
:func:`cacheproxy.serving.bind`), and ``gc.freeze()`` after the load as the daemon after its
sync, so the comparison is about how objects are kept and encoded, not the web stack. Selectors:
``labelSelector`` equalities, ``fieldSelector`` ``spec.nodeName`` / ``metadata.namespace`` /
``metadata.name``; ``limit``/``continue``. It prints ``URL http://127.0.0.1:PORT`` when serving.
``/status`` says how many objects it holds and its RSS before and after loading them.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import bisect
import gc
import os
import sys
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any
from urllib.parse import parse_qs, quote

import orjson
import uvicorn

from cacheproxy.serving import bind, send_body
from loadtest.baselines.naive import NaiveDictCache
from loadtest.clients.httpclient import continue_token, open_connection
from loadtest.harness.processes import rss_bytes

__all__ = ["NaiveServer", "load_pods", "main"]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


async def load_pods(upstream: str, cache: NaiveDictCache, *, page: int = 500) -> str:
    """Every pod of ``upstream`` into ``cache``; the list's resourceVersion."""
    conn = await open_connection(upstream)
    token, rv = "", ""
    try:
        while True:
            target = f"/api/v1/pods?limit={page}"
            if token:
                target += f"&continue={quote(token, safe='')}"
            response = await conn.request(target, keep_body=True)
            if response.status != 200 or response.body is None:
                raise RuntimeError(f"listing {upstream}: HTTP {response.status}")
            doc = orjson.loads(response.body)
            rv = str(doc["metadata"].get("resourceVersion", rv))
            for obj in doc["items"]:
                cache.apply("ADDED", obj)
            token = continue_token(response.head)
            if not token:
                return rv
    finally:
        conn.close()


class NaiveServer:
    """Raw ASGI app answering pod list/get from a :class:`NaiveDictCache` snapshot."""

    def __init__(self, cache: NaiveDictCache, *, resource_version: str) -> None:
        self.cache = cache
        self.rv = resource_version
        self.keys = sorted(cache.objects)
        self.status: dict[str, Any] = {"objects": len(cache)}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        parts = [p for p in scope["path"].split("/") if p]
        query = {k: v[0] for k, v in parse_qs(scope.get("query_string", b"").decode()).items() if v}
        try:
            if parts in (["readyz"], ["healthz"]):
                await send_body(send, 200, b"ok", content_type=b"text/plain")
            elif parts == ["status"]:
                await send_body(send, 200, orjson.dumps(self.status))
            elif parts == ["api", "v1", "pods"]:
                await send_body(send, 200, self.list(None, query))
            elif parts[:3] == ["api", "v1", "namespaces"] and parts[4:5] == ["pods"]:
                if len(parts) == 5:
                    await send_body(send, 200, self.list(parts[3], query))
                elif len(parts) == 6:
                    await send_body(send, *self.get(parts[3], parts[5]))
                else:
                    await send_body(send, 404, b'{"kind":"Status","code":404}')
            else:
                await send_body(send, 404, b'{"kind":"Status","code":404}')
        except ValueError as err:
            body = orjson.dumps({"kind": "Status", "code": 400, "message": str(err)})
            await send_body(send, 400, body)

    def get(self, namespace: str, name: str) -> tuple[int, bytes]:
        obj = self.cache.objects.get(f"{namespace}/{name}")
        if obj is None:
            return 404, b'{"kind":"Status","code":404,"reason":"NotFound"}'
        return 200, orjson.dumps({"kind": "Pod", "apiVersion": "v1", **obj})

    def _select(self, namespace: str | None, query: dict[str, str]) -> list[str] | None:
        """Candidate keys from the indexes (None: every key), unsorted."""
        sets: list[set[str]] = []
        if namespace is not None:
            sets.append(self.cache.by_namespace.get(namespace, set()))
        for term in filter(None, query.get("labelSelector", "").split(",")):
            key, sep, value = term.partition("=")
            if not sep or key.endswith("!"):
                raise ValueError(f"only label equalities are supported, not {term!r}")
            sets.append(self.cache.by_label.get(key.strip(), {}).get(value.strip(), set()))
        for term in filter(None, query.get("fieldSelector", "").split(",")):
            field, sep, value = term.partition("=")
            value = value.lstrip("=")
            if field == "spec.nodeName" and sep:
                sets.append(self.cache.by_node.get(value, set()))
            elif field == "metadata.namespace" and sep:
                sets.append(self.cache.by_namespace.get(value, set()))
            elif field == "metadata.name" and sep:
                sets.append({k for k in self.keys if k.rpartition("/")[2] == value})
            else:
                raise ValueError(f"unsupported field selector {term!r}")
        if not sets:
            return None
        sets.sort(key=len)
        return list(sets[0].intersection(*sets[1:]))

    def list(self, namespace: str | None, query: dict[str, str]) -> bytes:
        candidates = self._select(namespace, query)
        keys = self.keys if candidates is None else sorted(candidates)
        start = 0
        if query.get("continue"):
            after = base64.urlsafe_b64decode(query["continue"].encode() + b"==").decode()
            start = bisect.bisect_right(keys, after)
        limit = int(query.get("limit") or 0)
        end = len(keys) if limit <= 0 else min(len(keys), start + limit)
        objects = self.cache.objects
        meta: dict[str, Any] = {"resourceVersion": self.rv}
        if end < len(keys):
            meta["continue"] = base64.urlsafe_b64encode(keys[end - 1].encode()).decode()
            meta["remainingItemCount"] = len(keys) - end
        doc = {
            "kind": "PodList",
            "apiVersion": "v1",
            "metadata": meta,
            "items": [objects[k] for k in keys[start:end]],
        }
        return orjson.dumps(doc)


async def _serve(upstream: str, port: int) -> None:
    before = rss_bytes(os.getpid())
    cache = NaiveDictCache()
    rv = await load_pods(upstream, cache)
    gc.collect()
    gc.freeze()
    app = NaiveServer(cache, resource_version=rv)
    app.status.update(rssBeforeLoad=before, rssAfterLoad=rss_bytes(os.getpid()))
    config = uvicorn.Config(
        app,
        http="httptools",
        loop="none",
        lifespan="off",
        log_level="warning",
        access_log=False,
    )
    server = uvicorn.Server(config)
    sock = bind("127.0.0.1", port)
    config.load()
    server.lifespan = config.lifespan_class(config)
    await server.startup(sockets=[sock])
    print(f"URL http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    await server.main_loop()
    await server.shutdown(sockets=[sock])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m loadtest.baselines.naiveserver", description=__doc__
    )
    parser.add_argument("--upstream", required=True, help="the simulator's URL")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency of uvicorn[standard]
        asyncio.run(_serve(args.upstream, args.port))
    else:
        uvloop.run(_serve(args.upstream, args.port))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
