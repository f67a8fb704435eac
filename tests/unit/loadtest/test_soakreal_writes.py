"""The real-server soak's record of upstream: writes come back in any order and are modelled in
RV order once nothing in flight can land below them; what a response does not say (a write whose
answer was lost, a delete's RV, a pod's deletionTimestamp write) is found out afterwards.

The API server here is a fake (``httpx.MockTransport`` over a dict, one RV counter) and so is
etcd (the history of each key), so the rare cases a real run meets only by chance are certain."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from cacheproxy.kube.resources import builtin
from loadtest.clients.soakreal_writes import EtcdProbe, Recorder, Writer, WriterSpec, _Owned
from loadtest.harness.soak_model import FILTERS, UpstreamModel

POD = {"metadata": {"name": "p", "namespace": "ns-0"}}


def _models() -> dict[str, UpstreamModel]:
    return {
        "pods": UpstreamModel(builtin("pods"), FILTERS),
        "configmaps": UpstreamModel(builtin("configmaps"), FILTERS[:1]),
    }


def _wired(models: dict[str, UpstreamModel], **options: Any) -> Recorder:
    """A recorder whose models know their history is complete up to what it says."""
    recorder = Recorder(models, **options)
    for name, model in models.items():
        model.complete_to = lambda name=name: recorder.complete_to(name)
    return recorder


def test_results_are_modelled_in_rv_order_once_nothing_in_flight_can_land_below_them() -> None:
    models = _models()
    recorder = _wired(models)
    first, second = recorder.begin("pods"), recorder.begin("pods")
    assert recorder.complete_to("pods") == 0  # both may land anywhere above 0
    recorder.finish(second, [("ADDED", "ns-0/b", 11, POD)])
    assert models["pods"].rvs == []  # the first may still land below 11
    recorder.finish(first, [("ADDED", "ns-0/a", 10, POD)])
    assert models["pods"].rvs == [10, 11]
    assert models["pods"].knows(1 << 40)  # nothing in flight: all of it is known
    third = recorder.begin("pods")
    assert recorder.complete_to("pods") == 11 == recorder.floor()
    assert recorder.complete_to("configmaps") > 11  # nothing in flight there
    assert not models["pods"].knows(12)
    recorder.finish(third)  # not applied
    assert models["pods"].knows(12)
    assert not models["pods"].errors


def test_a_result_not_above_what_was_known_when_it_began_is_an_error() -> None:
    models = _models()
    recorder = Recorder(models)
    recorder.finish(recorder.begin("pods"), [("ADDED", "ns-0/a", 10, POD)])
    recorder.finish(recorder.begin("pods"), [("ADDED", "ns-0/b", 9, POD)])
    assert models["pods"].errors


def test_the_model_self_test_forgets_one_write() -> None:
    models = _models()
    recorder = Recorder(models, drop_pod_write=2)
    for rv in (10, 11, 12):
        recorder.finish(recorder.begin("pods"), [("ADDED", f"ns-0/p{rv}", rv, POD)])
    assert models["pods"].rvs == [10, 12]


# ---------------------------------------------------------------------- a fake upstream


class _Upstream:
    """Objects by path and each etcd key's history, one RV counter; ``lose_next`` applies the
    next write and then drops the connection before the answer."""

    def __init__(self) -> None:
        self.rv = 100
        self.objects: dict[str, dict[str, Any]] = {}
        self.history: dict[str, list[tuple[int, bool]]] = {}
        self.lose_next = False

    def _write(self, path: str, obj: dict[str, Any] | None) -> int:
        self.rv += 1
        parts = path.split("/")  # /api/v1/namespaces/NS/RESOURCE/NAME
        key = f"/registry/{parts[5]}/{parts[4]}/{parts[6]}"
        self.history.setdefault(key, []).append((self.rv, obj is not None))
        if obj is None:
            self.objects.pop(path, None)
        else:
            obj["metadata"]["resourceVersion"] = str(self.rv)
            self.objects[path] = obj
        return self.rv

    def handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if request.method == "GET":
            found = self.objects.get(path)
            return httpx.Response(200, json=found) if found else httpx.Response(404, json={})
        if request.method == "POST":
            body = json.loads(request.content)
            path = f"{path}/{body['metadata']['name']}"
            self._write(path, body)
            answer = httpx.Response(201, json=body)
        elif request.method == "PATCH":
            path = path.removesuffix("/status")
            obj = self.objects[path]
            patch = json.loads(request.content)
            for section, values in patch.items():
                target = obj.setdefault(section, {})
                for k, v in values.items():
                    if isinstance(v, dict):
                        target.setdefault(k, {}).update(v)
                    else:
                        target[k] = v
            self._write(path, obj)
            answer = httpx.Response(200, json=obj)
        else:  # DELETE
            obj = self.objects[path]
            if "/pods/" in path:  # as the API server: deletionTimestamp first, then the delete
                obj["metadata"]["deletionTimestamp"] = "now"
                self._write(path, obj)
                obj["metadata"]["resourceVersion"] = str(self._write(path, None))
                answer = httpx.Response(200, json=obj)
            else:
                self._write(path, None)
                answer = httpx.Response(200, json={"kind": "Status", "status": "Success"})
        if self.lose_next:
            self.lose_next = False
            raise httpx.ReadError("the connection broke before the answer")
        return answer


class _Etcd(EtcdProbe):
    def __init__(self, upstream: _Upstream) -> None:  # no HTTP: the fake's history
        self.upstream = upstream

    async def aclose(self) -> None:
        pass

    async def mod_revision(self, key: str, revision: int = 0) -> int | None:
        last = None
        for rev, present in self.upstream.history.get(key, []):
            if revision and rev > revision:
                break
            last = rev if present else None
        return last

    async def revision(self) -> int:
        return self.upstream.rv


@pytest.fixture
async def writer() -> Any:
    upstream = _Upstream()
    models = _models()
    transport = httpx.MockTransport(upstream.handle)
    async with httpx.AsyncClient(transport=transport, base_url="https://api") as http:
        w = Writer(http, _Etcd(upstream), Recorder(models), WriterSpec(lanes=1))
        w.upstream = upstream  # type: ignore[attr-defined]
        yield w


def _pod(w: Writer) -> _Owned:
    return next(o for o in w.owned() if o.resource == "pods")


async def test_a_create_whose_answer_was_lost_is_found_applied(writer: Any) -> None:
    writer.upstream.lose_next = True
    await writer._create(0, "pods")
    model = writer.recorder.models["pods"]
    (pod,) = writer.owned()
    assert model.writes == [(int(pod.obj["metadata"]["resourceVersion"]), pod.key, 1)]
    assert writer.stats.ambiguous and not writer.stats.harness_errors


async def test_an_update_whose_answer_was_lost_is_found_applied_at_its_rv(writer: Any) -> None:
    await writer._create(0, "pods")
    pod = _pod(writer)
    writer.upstream.lose_next = True
    await writer._patch(0, pod, {"metadata": {"labels": {"app": "app-2"}}})
    rvs = writer.recorder.models["pods"].rvs
    assert rvs == [101, 102] and pod.rv == 102


async def test_a_pod_delete_is_modelled_as_its_two_writes(writer: Any) -> None:
    await writer._create(0, "pods")
    await writer._delete(0, _pod(writer))
    writes = writer.recorder.models["pods"].writes
    assert [(rv, mask != 0) for rv, _, mask in writes] == [(101, True), (102, True), (103, False)]
    assert writer.recorder.models["pods"].by_type == {"ADDED": 1, "MODIFIED": 1, "DELETED": 1}


async def test_a_configmap_delete_takes_its_rv_from_etcd_even_when_its_answer_was_lost(
    writer: Any,
) -> None:
    await writer._create(0, "configmaps")
    for _ in range(5):  # other writes move the RV on
        await writer._create(0, "pods")
    cm = next(o for o in writer.owned() if o.resource == "configmaps")
    writer.upstream.lose_next = True
    await writer._delete(0, cm)
    model = writer.recorder.models["configmaps"]
    assert model.writes == [(101, cm.key, 1), (107, cm.key, 0)]
    assert not writer.stats.harness_errors


async def test_a_write_refused_before_it_was_sent_is_not_modelled() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused")

    models = _models()
    async with httpx.AsyncClient(transport=httpx.MockTransport(refuse), base_url="https://x") as h:
        w = Writer(h, _Etcd(_Upstream()), Recorder(models), WriterSpec(lanes=1))
        await w._create(0, "pods")
        await asyncio.sleep(0)
    assert models["pods"].rvs == [] and w.stats.refused == {"refused": 1}
