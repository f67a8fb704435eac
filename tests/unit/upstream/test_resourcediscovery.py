"""Reading every resource upstream serves from its discovery: the aggregated documents where the
server answers with them, else the legacy group list and each group version's list (a fake
upstream answering with the real API server's captured documents)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import orjson

from cacheproxy.kube.resources import GroupVersion
from cacheproxy.upstream import served_resources
from tests.unit.kube.test_discovery import protocol


def _fake_upstream(documents: dict[str, Any]) -> httpx.AsyncClient:
    """An upstream answering each path of ``documents`` with it, any other with a 404 Status."""

    def answer(request: httpx.Request) -> httpx.Response:
        doc = documents.get(request.url.path)
        if doc is None:
            status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404}
            return httpx.Response(404, content=orjson.dumps(status))
        return httpx.Response(200, content=orjson.dumps(doc))

    return httpx.AsyncClient(transport=httpx.MockTransport(answer), base_url="http://upstream")


async def test_aggregated_discovery_describes_every_group_in_two_requests(
    samples_dir: Path,
) -> None:
    documents = {
        "/api": protocol(samples_dir, "discovery_api_aggregated_v2beta1.http"),
        "/apis": protocol(samples_dir, "discovery_apis_aggregated_v2beta1.http"),
    }
    async with _fake_upstream(documents) as client:
        served = await served_resources(client, verbs=("list", "watch"))
    assert served.aggregated
    by_name = {t.config_name: t for ts in served.resources.values() for t in ts}
    pods, rcs = by_name["pods"], by_name["replicationcontrollers"]
    assert (pods.kind, pods.namespaced, pods.short_names, pods.categories) == (
        "Pod",
        True,
        ("po",),
        ("all",),
    )
    assert (rcs.kind, rcs.short_names) == ("ReplicationController", ("rc",))
    leases = by_name["coordination.k8s.io/v1/leases"]
    assert (leases.kind, leases.namespaced, leases.singular) == ("Lease", True, "lease")
    assert by_name["storage.k8s.io/v1/storageclasses"].namespaced is False
    # Resources that cannot be listed and watched are left out.
    assert "authorization.k8s.io/v1/subjectaccessreviews" not in by_name


async def test_without_aggregated_discovery_each_group_versions_list_is_read(
    samples_dir: Path,
) -> None:
    documents = {
        "/api": protocol(samples_dir, "discovery_api_legacy.json"),
        "/apis": protocol(samples_dir, "discovery_apis_legacy.json"),
        "/api/v1": protocol(samples_dir, "discovery_api_v1_resourcelist.json"),
    }
    async with _fake_upstream(documents) as client:
        served = await served_resources(client, verbs=("list", "watch"))
    assert not served.aggregated
    core = {t.resource: t for t in served.resources[GroupVersion("", "v1")]}
    assert (core["limitranges"].kind, core["limitranges"].short_names) == (
        "LimitRange",
        ("limits",),
    )
    assert core["pods"].storage_version_hash  # the legacy list says it
    assert "pods/status" not in core and "bindings" not in core
    # A group version that does not answer is named, not taken for one serving nothing.
    assert GroupVersion("apps", "v1") in served.unanswered
    assert GroupVersion("apps", "v1") not in served.resources
