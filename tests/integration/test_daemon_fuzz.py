"""Fuzzing the daemon's HTTP surface: whatever the path, query, headers or method, the answer is
never a 500 and never a crash, and every error is a ``metav1.Status`` whose code is the HTTP code.

Hypothesis draws requests from the vocabulary of the API (so most reach deep into the handlers:
selectors, continue tokens, resource versions, Table negotiation, watches) mixed with noise. The
daemon (in front of a simulator with demo data, auth by static tokens so authentication and
authorization are fuzzed too) runs in a thread of its own; each example is one real HTTP request.
"""

from __future__ import annotations

import asyncio
import base64
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import cast
from urllib.parse import quote

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cacheproxy.daemon.config import AuthMode, AuthSettings
from cacheproxy.sim import SimServer, Simulator
from cacheproxy.sim.workload import DemoSpec, demo_objects
from tests.integration.daemon_support import daemon_for
from tests.support import decode_status_protobuf

SEGMENTS = [
    "api", "apis", "v1", "v2", "apps", "batch", "namespaces", "ns-0", "ns-1", "default", "pods",
    "configmaps", "deployments", "nodes", "watch", "status", "log", "pod-0", "node-0", "version",
    "healthz", "readyz", "metrics", "openapi", "..", ".", "%2F", "%00", "💥", "a" * 300,
]  # fmt: skip
PARAMS = [
    "labelSelector", "fieldSelector", "limit", "continue", "resourceVersion",
    "resourceVersionMatch", "watch", "timeoutSeconds", "allowWatchBookmarks", "sendInitialEvents",
    "includeObject", "indexSelector", "pretty", "fieldValidation", "x",
]  # fmt: skip
VALUES = [
    "", "0", "1", "-1", "500", "999999999999999999999", "true", "false", "1.5", "NotOlderThan",
    "Exact", "app=app-1", "app!=app-1", "app in (app-1,app-2)", "!app", "app", "a=b,c!=d",
    "spec.nodeName=node-1", "metadata.name=pod-1", "status.phase!=Running", "bad field=x",
    "metadata.namespace==ns-1", "(((", "app in (", "x=" + "y" * 70, "Object", "Metadata", "None",
]  # fmt: skip
ACCEPTS = [
    "application/json",
    "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
    "application/json;as=Table;v=v1beta1;g=meta.k8s.io",
    "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io",
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
    "*/*",
    "text/html",
    ";;;,,,",
]
TOKENS = ["admin-token"] * 6 + ["viewer-token", "nobody-token", "wrong", ""]


def api_paths() -> st.SearchStrategy[list[str]]:
    """Paths the daemon serves (most of the time) and near misses."""
    collection = st.sampled_from(
        [["api", "v1", "pods"], ["api", "v1", "configmaps"], ["apis", "apps", "v1", "deployments"]]
    )
    namespace = st.sampled_from(["ns-0", "ns-1", "default", "nope", ""])
    name = st.one_of(st.sampled_from(["pod-0", "pod-1", "web", "x"]), st.text(max_size=10))

    def build(c: list[str], ns: str | None, n: str | None, watch: bool) -> list[str]:
        prefix, resource = c[:-1], c[-1]
        out = [*prefix, *(["watch"] if watch else [])]
        out += ["namespaces", ns] if ns is not None else []
        return [*out, resource, *([n] if n is not None else [])]

    return st.one_of(
        st.builds(build, collection, st.none() | namespace, st.none() | name, st.booleans()),
        st.sampled_from([["api"], ["apis"], ["api", "v1"], ["apis", "apps", "v1"], ["version"]]),
        st.builds(
            lambda c, n: [*c[:-1], c[-1], n],
            st.just(["api", "v1", "nodes"]) | st.just(["api", "v1", "namespaces"]),
            st.none() | name,
        ).map(lambda parts: [p for p in parts if p is not None]),
    )


def continue_tokens() -> st.SearchStrategy[str]:
    payload = st.fixed_dictionaries(
        {
            "v": st.sampled_from(["meta.k8s.io/v1", "v2", ""]),
            "rv": st.one_of(st.integers(-5, 10**12), st.text(max_size=5)),
            "start": st.text(max_size=20),
        }
    )
    return st.one_of(
        payload.map(lambda d: base64.urlsafe_b64encode(orjson.dumps(d)).decode()),
        st.text(max_size=40),
        st.binary(max_size=30).map(lambda b: base64.b64encode(b).decode()),
    )


requests = st.fixed_dictionaries(
    {
        "method": st.sampled_from(
            ["GET"] * 8 + ["HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
        ),
        "segments": st.one_of(
            api_paths(),
            api_paths(),
            api_paths(),
            st.lists(
                st.one_of(st.sampled_from(SEGMENTS), st.text(min_size=1, max_size=12)), max_size=8
            ),
        ),
        "params": st.lists(
            st.tuples(
                st.sampled_from(PARAMS),
                st.one_of(st.sampled_from(VALUES), st.text(max_size=30), continue_tokens()),
            ),
            max_size=4,
        ),
        # Header values as HTTP allows them (visible ASCII and spaces inside).
        "accept": st.one_of(
            st.sampled_from(ACCEPTS),
            st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=40),
        ),
        "token": st.sampled_from(TOKENS),
    }
)


class BackgroundDaemon:
    """A simulator and a daemon running in their own event loop thread."""

    def __init__(self, tokens: Path) -> None:
        self.tokens = tokens
        self.url = ""
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=self._run, name="fuzz-daemon", daemon=True)
        self.error: BaseException | None = None

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:
            self.error = exc
            self._ready.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        sim = Simulator()
        sim.load(demo_objects(DemoSpec(pods=30)))
        async with (
            SimServer(sim) as server,
            daemon_for(
                server.url, auth=AuthSettings(mode=AuthMode.TOKEN, token_file=self.tokens)
            ) as d,
        ):
            self.url = d.url
            self._ready.set()
            await self._stop.wait()

    def __enter__(self) -> BackgroundDaemon:
        self._thread.start()
        assert self._ready.wait(30), "the daemon did not start"
        if self.error is not None:
            raise self.error
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._loop is not None and self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)


@pytest.fixture(scope="module")
def daemon_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tokens = tmp_path_factory.mktemp("fuzz") / "tokens.csv"
    # The simulator answers SubjectAccessReviews with its bootstrap roles: the admin
    # (system:masters) may read everything, the viewer only discovery.
    tokens.write_text("admin-token,admin,1,system:masters\nviewer-token,viewer,2\n")
    with BackgroundDaemon(tokens) as daemon:
        yield daemon.url


def send_one(daemon_url: str, request: dict[str, object], by_code: dict[int, int]) -> None:
    segments = [quote(s, safe="%") for s in request["segments"]]  # type: ignore[attr-defined]
    path = "/" + "/".join(segments)
    headers = {"Accept": str(request["accept"])}
    if request["token"]:
        headers["Authorization"] = f"Bearer {request['token']}"
    with httpx.Client(base_url=daemon_url, timeout=15) as client:
        try:
            built = client.build_request(
                str(request["method"]),
                path,
                params=tuple(cast(list[tuple[str, str]], request["params"])),
                headers=headers,
            )
        except (httpx.InvalidURL, UnicodeEncodeError):
            return  # not a request a client could send
        try:
            response = client.send(built, stream=True)
        except httpx.LocalProtocolError:
            return  # the client refuses to send it
        try:
            code = response.status_code
            by_code[code] = by_code.get(code, 0) + 1
            assert code < 500 or code in (503, 504), f"{request}: {code}"
            if code < 400 or request["method"] == "HEAD":
                return
            raw = response.read()
            protobuf = response.headers["content-type"] == "application/vnd.kubernetes.protobuf"
            # A client that accepts only protobuf gets its Status in protobuf.
            body = decode_status_protobuf(raw) if protobuf else orjson.loads(raw)
        finally:
            response.close()
    assert body["kind"] == "Status", body
    assert body["apiVersion"] == "v1"
    assert body["status"] == "Failure"
    assert body["code"] == code
    assert isinstance(body["message"], str) and body["message"]


def test_no_request_gets_a_500_and_every_error_is_a_status(daemon_url: str) -> None:
    by_code: dict[int, int] = {}

    @settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(request=requests)
    def fuzz(request: dict[str, object]) -> None:
        send_one(daemon_url, request, by_code)

    fuzz()
    print(
        f"fuzzed {sum(by_code.values())} requests, by status code: {dict(sorted(by_code.items()))}"
    )
    # The requests were not all refused at the door: successes, client errors and
    # authentication and authorization failures all occurred.
    assert sum(by_code.values()) >= 300
    assert by_code.get(200, 0) > 10
    assert {401, 403, 404}.issubset(by_code)
    assert sum(n for c, n in by_code.items() if c in (400, 406, 410, 422)) > 5
