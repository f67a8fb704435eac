"""Metadata-only reads (``as=PartialObjectMetadata[List]``) and sharded reads (``shardSelector``,
KEP-5866) served from one cached resource over fakes of the connection: lists (pages,
selectors, ``shardInfo``), get, and watches (initial state, history, live events, bookmarks)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any
from urllib.parse import urlencode

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cacheproxy.errors import ApiError
from cacheproxy.informer import FakeListerWatcher, SharedInformer, Store
from cacheproxy.kube.listoptions import parse_list_options
from cacheproxy.kube.resources import builtin
from cacheproxy.kube.sharding import fnv1a64, parse_shard_selector
from cacheproxy.server.admission import ServedRequest
from cacheproxy.server.options import ServerOptions
from cacheproxy.server.query import Query, uid_of
from cacheproxy.server.reads import build_query, negotiate, serve_get, serve_list
from cacheproxy.server.resource import ServedResource
from cacheproxy.server.watchhub import WatchHub
from cacheproxy.server.watching import serve_watch
from cacheproxy.serving import Message
from tests.support import metadata_initial_events_end, until

PODS = builtin("pods")
METADATA_LIST = (
    "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,"
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
)
UID_P01 = str(uuid.uuid5(uuid.NAMESPACE_URL, "p01"))
METADATA = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
LOWER = "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"
UPPER = "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')"


def pod(
    name: str, rv: int, *, uid: str = "", labels: dict[str, str] | None = None
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "default",
        "uid": uid or str(uuid.uuid5(uuid.NAMESPACE_URL, name)),
        "resourceVersion": str(rv),
        "creationTimestamp": "2026-12-01T10:00:00Z",
    }
    if labels:
        meta["labels"] = labels
    return {"metadata": meta, "spec": {"nodeName": "node-1"}, "status": {"phase": "Running"}}


class Rig:
    """A cached pod collection changed by hand, its hub, and requests against it."""

    def __init__(self) -> None:
        self.store = Store(kind="Pod", api_version="v1")
        self.informer = SharedInformer(FakeListerWatcher(), name="pods", store=self.store)
        self.informer._synced.set()
        self.res = ServedResource(PODS, self.informer)
        self.hub = WatchHub(PODS, self.store)
        self.options = ServerOptions()
        self.rv = 0
        self.gone = asyncio.Event()

    def put(self, name: str, *, labels: dict[str, str] | None = None) -> None:
        self.rv += 1
        entry = self.store.make_entry(pod(name, self.rv, labels=labels))
        prev = self.store.put(entry, rv=self.rv)
        event_type = "ADDED" if prev is None else "MODIFIED"
        self.hub.on_event(self.informer.event_log.append(event_type, entry, prev, self.rv))

    def request(self, accept: str = "", verb: str = "list", **params: str) -> ServedRequest:
        scope = {
            "type": "http",
            "method": "GET",
            "path": "/api/v1/pods",
            "query_string": urlencode(params).encode(),
            "headers": [(b"accept", accept.encode())] if accept else [],
        }

        async def receive() -> dict[str, Any]:
            await self.gone.wait()
            return {"type": "http.disconnect"}

        req = ServedRequest(scope, receive)
        req.verb = verb
        return req

    async def list(self, accept: str = "", **params: str) -> dict[str, Any]:
        req = self.request(accept, **params)
        sent: list[Message] = []

        async def send(message: Message) -> None:
            sent.append(message)

        opts = parse_list_options(req.query)
        await serve_list(
            req,
            send,
            self.res,
            query=build_query(req, self.res, None, opts),
            opts=opts,
            form=negotiate(req),
            max_page_size=500,
        )
        body = b"".join(m.get("body", b"") for m in sent)
        return dict(orjson.loads(body), _raw=body)


def names(doc: dict[str, Any]) -> list[str]:
    return [item["metadata"]["name"] for item in doc["items"]]


def filled(n: int = 12) -> Rig:
    rig = Rig()
    for i in range(n):
        rig.put(f"p{i:02d}", labels={"app": "a" if i % 2 else "b"})
    return rig


async def test_a_metadata_list_is_a_partial_object_metadata_list_of_the_same_items() -> None:
    rig = filled()
    plain = await rig.list()
    partial = await rig.list(METADATA_LIST)
    assert partial["_raw"].startswith(
        b'{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":'
        b'{"resourceVersion":"12"},"items":[{"kind":"PartialObjectMetadata",'
        b'"apiVersion":"meta.k8s.io/v1","metadata":{"name":"p00",'
    )
    assert [item["metadata"] for item in partial["items"]] == [
        item["metadata"] for item in plain["items"]
    ]
    assert {tuple(item) for item in partial["items"]} == {("kind", "apiVersion", "metadata")}


async def test_a_metadata_list_pages_and_selects_like_the_plain_one() -> None:
    rig = filled()
    first = await rig.list(METADATA_LIST, limit="5")
    assert names(first) == [f"p{i:02d}" for i in range(5)]
    assert first["metadata"]["remainingItemCount"] == 7
    second = await rig.list(METADATA_LIST, limit="5", **{"continue": first["metadata"]["continue"]})
    assert names(second) == [f"p{i:02d}" for i in range(5, 10)]
    selected = await rig.list(METADATA_LIST, labelSelector="app=a")
    assert names(selected) == [f"p{i:02d}" for i in range(1, 12, 2)]


async def test_a_metadata_get_is_one_partial_object_metadata() -> None:
    rig = filled(2)
    req = rig.request(METADATA, verb="get")
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    await serve_get(req, send, rig.res, namespace="default", name="p01", form=negotiate(req))
    body = b"".join(m.get("body", b"") for m in sent)
    assert body.startswith(
        b'{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":'
        b'{"name":"p01","namespace":"default","uid":"%s","resourceVersion":"2",' % UID_P01.encode()
    )
    assert b"spec" not in body


async def test_two_shards_partition_a_list_and_echo_their_selector() -> None:
    rig = filled(40)
    everything = await rig.list()
    lower = await rig.list(shardSelector=LOWER)
    upper = await rig.list(shardSelector=UPPER)
    assert sorted(names(lower) + names(upper)) == names(everything)
    assert not set(names(lower)) & set(names(upper))
    assert names(lower) and names(upper)
    assert lower["metadata"] == {"resourceVersion": "40", "shardInfo": {"selector": LOWER}}
    for item in lower["items"]:
        assert fnv1a64(item["metadata"]["uid"]) < 1 << 63
    assert everything["metadata"] == {"resourceVersion": "40"}  # no shardInfo without a selector


async def test_a_sharded_list_pages_without_a_remaining_count_and_mixes_with_metadata() -> None:
    rig = filled(40)
    whole = names(await rig.list(shardSelector=LOWER))
    walked: list[str] = []
    params = {"shardSelector": LOWER, "limit": "3"}
    while True:
        page = await rig.list(METADATA_LIST, **params)
        assert "remainingItemCount" not in page["metadata"]
        assert page["metadata"]["shardInfo"] == {"selector": LOWER}
        assert page["kind"] == "PartialObjectMetadataList"
        walked += names(page)
        token = page["metadata"].get("continue")
        if not token:
            break
        params["continue"] = token
    assert walked == whole


async def test_a_bad_shard_selector_is_a_400() -> None:
    rig = filled(1)
    with pytest.raises(ApiError) as refused:
        await rig.list(shardSelector="shardRange(object.metadata.name, '0x0', '0x1')")
    assert refused.value.code == 400
    assert refused.value.message.startswith("invalid shard selector: unsupported field path")


def test_the_uid_is_read_from_the_bytes_or_parsed() -> None:
    store = Store(kind="Pod", api_version="v1")
    typed = store.make_entry(pod("a", 1, uid="u-1"))
    assert uid_of(typed) == "u-1"
    widgets = Store(kind="Widget", api_version="example.com/v1")
    alphabetical = widgets.make_entry(
        {
            "metadata": {
                "labels": {"a": "b"},
                "name": "w",
                "namespace": "default",
                "ownerReferences": [{"uid": "owner"}],
                "uid": "u-2",
            }
        }
    )
    assert uid_of(alphabetical) == "u-2"
    assert uid_of(store.make_entry({"metadata": {"name": "n"}, "spec": {"uid": "x"}})) == ""


class Client:
    """One watch request of the rig, its chunks read back as events."""

    def __init__(self, rig: Rig, accept: str = "", *, shard: str = "", **params: str) -> None:
        if shard:
            params["shardSelector"] = shard
        self.rig = rig
        self.sent: list[Message] = []
        req = rig.request(accept, verb="watch", watch="1", **params)
        opts = parse_list_options(req.query, watch=True)
        self.task = asyncio.create_task(
            serve_watch(
                req,
                self.send,
                res=rig.res,
                hub=rig.hub,
                query=build_query(req, rig.res, None, opts),
                opts=opts,
                tables=None,
                options=rig.options,
                refusing=lambda: False,
            )
        )

    async def send(self, message: Message) -> None:
        self.sent.append(message)

    def events(self) -> list[dict[str, Any]]:
        body = b"".join(m.get("body", b"") for m in self.sent[1:])
        return [orjson.loads(line) for line in body.splitlines()]

    async def close(self) -> None:
        self.rig.gone.set()
        await asyncio.wait_for(self.task, 5)


async def test_a_metadata_watch_list_sends_partial_objects_and_a_partial_end_bookmark() -> None:
    rig = filled(2)
    client = Client(
        rig,
        METADATA,
        sendInitialEvents="true",
        allowWatchBookmarks="true",
        resourceVersionMatch="NotOlderThan",
    )
    await until(lambda: len(rig.hub.watchers) == 1, "the watcher is registered")
    rig.put("p02")
    await until(lambda: len(client.events()) == 4, "initial events, bookmark, live event")
    await client.close()
    events = client.events()
    assert [e["type"] for e in events] == ["ADDED", "ADDED", "BOOKMARK", "ADDED"]
    assert {e["object"]["kind"] for e in events} == {"PartialObjectMetadata"}
    assert events[2]["object"] == metadata_initial_events_end("2", blueprint=True)
    assert "spec" not in events[3]["object"]


async def test_a_metadata_watch_from_an_rv_replays_history_as_partial_objects() -> None:
    rig = filled(3)
    client = Client(rig, METADATA, resourceVersion="1")
    await until(lambda: len(client.events()) == 2, "the history is written")
    await client.close()
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in client.events()] == [
        ("ADDED", "p01"),
        ("ADDED", "p02"),
    ]
    assert {e["object"]["kind"] for e in client.events()} == {"PartialObjectMetadata"}


async def test_sharded_watches_each_see_their_objects_and_together_all() -> None:
    rig = filled(10)
    lower = Client(rig, shard=LOWER)
    upper = Client(rig, METADATA, shard=UPPER)
    await until(lambda: len(rig.hub.watchers) == 2, "both watchers are registered")
    for i in range(10, 30):
        rig.put(f"p{i:02d}")
    rig.put("p03")  # a change keeps an object in its shard: uid and namespace never change

    def seen(client: Client) -> list[tuple[str, str]]:
        return [(e["type"], e["object"]["metadata"]["name"]) for e in client.events()]

    await until(lambda: len(seen(lower)) + len(seen(upper)) == 31, "every event reached a shard")
    await lower.close()
    await upper.close()
    assert not {n for _, n in seen(lower)} & {n for _, n in seen(upper)}
    assert sorted(n for t, n in seen(lower) + seen(upper) if t == "ADDED") == [
        f"p{i:02d}" for i in range(30)
    ]
    modified = [c for c in (lower, upper) if ("MODIFIED", "p03") in seen(c)]
    assert len(modified) == 1
    assert {e["object"]["kind"] for e in upper.events()} == {"PartialObjectMetadata"}


def in_lower(name: str) -> bool:
    return fnv1a64(str(uuid.uuid5(uuid.NAMESPACE_URL, name))) < 1 << 63


async def test_a_sharded_watch_sees_an_object_leave_only_when_another_selector_drops_it() -> None:
    # uid and namespace never change, so a change never moves an object between shards; with a
    # label selector too, the transition rule applies to the conjunction (as the watch cache's
    # one filter does): leaving the label selector inside the shard is DELETED, outside nothing.
    names_in = [n for n in (f"x{i}" for i in range(50)) if in_lower(n)][:2]
    names_out = [n for n in (f"x{i}" for i in range(50)) if not in_lower(n)][:2]
    rig = Rig()
    client = Client(rig, shard=LOWER, labelSelector="app=a", resourceVersion="0")
    await until(lambda: len(rig.hub.watchers) == 1, "the watcher is registered")
    for name in names_in + names_out:
        rig.put(name, labels={"app": "a"})
    for name in names_in + names_out:
        rig.put(name, labels={"app": "b"})
    await until(lambda: len(client.events()) == 4, "the shard's events")
    await client.close()
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in client.events()] == [
        ("ADDED", names_in[0]),
        ("ADDED", names_in[1]),
        ("DELETED", names_in[0]),
        ("DELETED", names_in[1]),
    ]
    # The DELETED of an object that left carries the change's RV (the transition rule).
    assert [e["object"]["metadata"]["resourceVersion"] for e in client.events()[2:]] == ["5", "6"]


@settings(max_examples=60, deadline=None)
@given(
    uids=st.lists(st.uuids().map(str), unique=True, max_size=40),
    namespaces=st.lists(
        st.sampled_from(["a", "b", "kube-system", "ns-1"]), min_size=40, max_size=40
    ),
    n=st.integers(min_value=1, max_value=9),
    by_namespace=st.booleans(),
)
def test_n_shards_partition_the_served_collection_exactly(
    uids: list[str], namespaces: list[str], n: int, by_namespace: bool
) -> None:
    store = Store(kind="Pod", api_version="v1")
    for i, uid in enumerate(uids):
        obj = pod(f"p{i}", i + 1, uid=uid)
        obj["metadata"]["namespace"] = namespaces[i]
        store.put(store.make_entry(obj), rv=i + 1)
    informer = SharedInformer(FakeListerWatcher(), name="pods", store=store)
    res = ServedResource(PODS, informer)
    field = "object.metadata.namespace" if by_namespace else "object.metadata.uid"
    width = ((1 << 64) - 1) // n
    seen: list[str] = []
    for i in range(n):
        end = "0x10000000000000000" if i == n - 1 else f"0x{(i + 1) * width:016x}"
        shard = parse_shard_selector(f"shardRange({field}, '0x{i * width:016x}', '{end}')")
        seen += res.current_keys(Query(shard=shard))
    assert sorted(seen) == sorted(res.current_keys(Query()))
