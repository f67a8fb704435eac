"""The workload generators make realistic, deterministic, creatable Kubernetes objects."""

from __future__ import annotations

import copy
import random
import re
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cacheproxy.kube.resources import builtin
from cacheproxy.sim import Simulator
from cacheproxy.sim.workload import (
    PHASES,
    DemoSpec,
    demo_objects,
    make_configmap,
    make_deployment,
    make_event,
    make_namespace,
    make_node,
    make_pod,
    make_replicaset,
    make_service,
    mutate_pod,
    template_hash,
)


def _ts(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
SERVER_SET = {"uid", "resourceVersion", "creationTimestamp", "generation"}


def pod(seed: int = 7, **kwargs: Any) -> dict[str, Any]:
    args: dict[str, Any] = {"namespace": "ns-1", "app": "app-3", "node": "node-2"} | kwargs
    return make_pod(random.Random(seed), **args)


def size(obj: dict[str, Any]) -> int:
    return len(orjson.dumps(obj))


def is_dns_label(name: str) -> bool:
    return len(name) <= 63 and DNS_LABEL.match(name) is not None


def is_dns_subdomain(name: str) -> bool:
    return len(name) <= 253 and DNS_SUBDOMAIN.match(name) is not None


# ---------------------------------------------------------------------------- determinism


def test_the_same_seed_makes_the_same_pod() -> None:
    assert pod(seed=3) == pod(seed=3)
    assert orjson.dumps(pod(seed=3)) == orjson.dumps(pod(seed=3))


def test_different_seeds_make_different_pods() -> None:
    assert pod(seed=3)["metadata"]["name"] != pod(seed=4)["metadata"]["name"]


NOW = datetime(2026, 12, 1, 18, 0, 0, tzinfo=UTC)


def test_the_same_demo_spec_makes_the_same_cluster() -> None:
    assert orjson.dumps(demo_objects(DemoSpec(seed=5), now=NOW)) == orjson.dumps(
        demo_objects(DemoSpec(seed=5), now=NOW)
    )


def test_a_different_demo_seed_makes_a_different_cluster() -> None:
    assert demo_objects(DemoSpec(seed=5), now=NOW) != demo_objects(DemoSpec(seed=6), now=NOW)


def test_another_moment_moves_the_demos_times_only() -> None:
    later = NOW + timedelta(hours=5, seconds=7)
    stamps = (_ts(NOW), _ts(later))
    before, after = (
        orjson.dumps(demo_objects(DemoSpec(seed=5), now=t)).decode() for t in (NOW, later)
    )
    assert stamps[0] in before and stamps[1] not in before
    assert before.replace(*stamps) == after


def test_every_generator_is_deterministic_by_seed() -> None:
    def everything(seed: int) -> list[dict[str, Any]]:
        rng = random.Random(seed)
        p = make_pod(rng, namespace="ns-0", app="app-0", node="node-0")
        return [
            p,
            make_node(rng, "node-0"),
            make_configmap(rng, namespace="ns-0", name="app-0-config"),
            make_service(rng, namespace="ns-0", app="app-0"),
            make_deployment(rng, namespace="ns-0", app="app-0", replicas=3),
            make_replicaset(rng, namespace="ns-0", app="app-0", replicas=3),
            make_event(rng, namespace="ns-0", involved_pod=p),
            mutate_pod(rng, p),
        ]

    assert everything(11) == everything(11)


# ---------------------------------------------------------------------------- pods


@pytest.mark.parametrize("phase", PHASES)
def test_default_pods_weigh_5_to_10_kb_of_json(phase: str) -> None:
    sizes = [size(pod(seed, app=f"app-{seed % 9}", phase=phase)) for seed in range(200)]
    assert min(sizes) >= 5_000
    assert max(sizes) <= 10_000


def test_a_pod_without_managed_fields_is_smaller_and_has_none() -> None:
    bare = pod(with_managed_fields=False)
    assert "managedFields" not in bare["metadata"]
    assert size(bare) < size(pod())


def test_a_pod_carries_what_a_real_replicaset_pod_carries() -> None:
    p = pod(phase="Running")
    assert (p["kind"], p["apiVersion"]) == ("Pod", "v1")
    meta, spec, status = p["metadata"], p["spec"], p["status"]
    assert set(meta["labels"]) == {"app", "tier", "team", "version", "pod-template-hash"}
    assert meta["labels"]["app"] == "app-3"
    assert {"checksum/config", "prometheus.io/scrape"} <= set(meta["annotations"])
    (owner,) = meta["ownerReferences"]
    assert owner["kind"] == "ReplicaSet"
    assert owner["controller"] is True
    assert meta["name"].startswith(owner["name"] + "-")
    assert meta["generateName"] == owner["name"] + "-"

    assert spec["nodeName"] == "node-2"
    assert [t["key"] for t in spec["tolerations"]] == [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ]
    assert len(spec["containers"]) == 2
    main = spec["containers"][0]
    for key in ("image", "args", "ports", "env", "resources", "volumeMounts", "readinessProbe"):
        assert key in main, key
    volume_names = {v["name"] for v in spec["volumes"]}
    for c in spec["containers"]:
        assert {m["name"] for m in c["volumeMounts"]} <= volume_names
    assert any(v["name"].startswith("kube-api-access-") for v in spec["volumes"])

    assert status["phase"] == "Running"
    assert {c["type"] for c in status["conditions"]} >= {"Ready", "PodScheduled", "Initialized"}
    assert [s["name"] for s in status["containerStatuses"]] == [
        c["name"] for c in spec["containers"]
    ]
    assert all(s["ready"] for s in status["containerStatuses"])
    assert status["podIPs"] == [{"ip": status["podIP"]}]
    assert status["hostIP"].startswith("10.")
    assert status["qosClass"] in ("Burstable", "Guaranteed")
    assert status["startTime"].endswith("Z")


def test_a_pod_has_managed_fields_shaped_like_the_api_servers() -> None:
    entries = pod()["metadata"]["managedFields"]
    assert [e["manager"] for e in entries] == ["kube-controller-manager", "kubelet"]
    for e in entries:
        assert list(e)[:6] == [
            "manager",
            "operation",
            "apiVersion",
            "time",
            "fieldsType",
            "fieldsV1",
        ]
        assert e["operation"] == "Update"
        assert e["fieldsType"] == "FieldsV1"
    spec_fields = entries[0]["fieldsV1"]["f:spec"]
    assert 'k:{"name":"main"}' in spec_fields["f:containers"]
    main = spec_fields["f:containers"]['k:{"name":"main"}']
    assert "." in main
    assert 'k:{"containerPort":8080,"protocol":"TCP"}' in main["f:ports"]
    assert main["f:env"]['k:{"name":"POD_NAME"}']["f:valueFrom"] == {".": {}, "f:fieldRef": {}}
    assert entries[1]["subresource"] == "status"
    assert "f:qosClass" not in entries[1]["fieldsV1"]["f:status"]


def test_a_pod_has_no_server_assigned_metadata() -> None:
    assert not SERVER_SET & set(pod()["metadata"])


def test_a_pod_is_named_like_a_replicaset_pod() -> None:
    for seed in range(50):
        name = pod(seed)["metadata"]["name"]
        assert re.fullmatch(r"app-3-(backend|frontend|worker)-[0-9a-f]{10}-[b-z2-9]{5}", name)
        assert is_dns_subdomain(name)


def test_a_given_name_is_used() -> None:
    assert pod(name="web-1")["metadata"]["name"] == "web-1"


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_a_pod_has_the_containers_asked_for_with_unique_names(n: int) -> None:
    names = [c["name"] for c in pod(containers=n)["spec"]["containers"]]
    assert len(names) == n == len(set(names))
    assert names[0] == "main"


def test_a_pod_needs_a_container_and_a_known_phase() -> None:
    with pytest.raises(ValueError, match="container"):
        pod(containers=0)
    with pytest.raises(ValueError, match="phase"):
        pod(phase="Exploded")


def test_a_pending_pod_has_no_ip_and_is_not_ready() -> None:
    pending = pod(phase="Pending")
    status = pending["status"]
    assert "podIP" not in status
    assert len(status["containerStatuses"]) == len(pending["spec"]["containers"])
    assert not any(s["ready"] for s in status["containerStatuses"])
    assert all("waiting" in s["state"] for s in status["containerStatuses"])
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "ContainersNotReady")


def test_finished_pods_have_terminated_containers() -> None:
    for phase in ("Succeeded", "Failed"):
        finished = pod(phase=phase)
        statuses = finished["status"]["containerStatuses"]
        assert len(statuses) == len(finished["spec"]["containers"]), phase
        assert all("terminated" in s["state"] for s in statuses)


def test_pods_of_one_app_and_version_share_their_template() -> None:
    a, b = (pod(seed, version="v9.9.9") for seed in (1, 2))
    assert a["metadata"]["labels"] == b["metadata"]["labels"]
    strip = {"volumeMounts", "name"}
    assert [{k: v for k, v in c.items() if k not in strip} for c in a["spec"]["containers"]] == [
        {k: v for k, v in c.items() if k not in strip} for c in b["spec"]["containers"]
    ]
    assert a["metadata"]["labels"]["pod-template-hash"] == template_hash("ns-1", "app-3", "v9.9.9")


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32), containers=st.integers(1, 3), phase=st.sampled_from(PHASES))
def test_any_pod_is_valid_json_with_valid_names(seed: int, containers: int, phase: str) -> None:
    p = make_pod(
        random.Random(seed),
        namespace=f"ns-{seed % 5}",
        app=f"app-{seed % 13}",
        node=f"node-{seed % 300}",
        containers=containers,
        phase=phase,
    )
    assert orjson.loads(orjson.dumps(p)) == p
    assert is_dns_subdomain(p["metadata"]["name"])
    assert len(p["spec"]["containers"]) == containers
    assert all(is_dns_label(c["name"]) for c in p["spec"]["containers"])


# ---------------------------------------------------------------------------- other kinds


def test_a_namespace_is_labelled_with_its_name() -> None:
    ns = make_namespace("ns-4")
    assert ns["metadata"] == {"name": "ns-4", "labels": {"kubernetes.io/metadata.name": "ns-4"}}
    assert ns["status"] == {"phase": "Active"}


def test_a_node_carries_what_kubectl_shows() -> None:
    node = make_node(random.Random(1), "node-3", control_plane=True)
    labels = node["metadata"]["labels"]
    assert labels["kubernetes.io/hostname"] == "node-3"
    assert "node-role.kubernetes.io/control-plane" in labels
    status = node["status"]
    assert {a["type"] for a in status["addresses"]} == {"InternalIP", "Hostname"}
    for key in ("kubeletVersion", "osImage", "kernelVersion", "containerRuntimeVersion"):
        assert status["nodeInfo"][key]
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True"
    assert {"cpu", "memory", "pods"} <= set(status["capacity"]) & set(status["allocatable"])
    assert (
        "node-role.kubernetes.io/worker"
        in make_node(random.Random(1), "node-4", control_plane=False)["metadata"]["labels"]
    )


def test_a_pods_host_ip_is_its_nodes_internal_ip() -> None:
    node = make_node(random.Random(1), "node-2")
    internal = next(a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP")
    assert pod(node="node-2")["status"]["hostIP"] == internal


def test_a_service_selects_its_apps_pods() -> None:
    svc = make_service(random.Random(1), namespace="ns-1", app="app-3")
    labels = pod()["metadata"]["labels"]
    assert svc["metadata"]["name"] == "app-3"
    assert svc["spec"]["selector"].items() <= labels.items()
    assert svc["spec"]["clusterIPs"] == [svc["spec"]["clusterIP"]]


def test_a_deployment_and_its_replicaset_select_the_pods_they_own() -> None:
    rng = random.Random(1)
    version = pod()["metadata"]["labels"]["version"]
    deploy = make_deployment(rng, namespace="ns-1", app="app-3", replicas=4)
    rs = make_replicaset(rng, namespace="ns-1", app="app-3", replicas=4, version=version)
    p = pod(version=version)
    labels = p["metadata"]["labels"]
    assert deploy["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert rs["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert rs["spec"]["template"]["metadata"]["labels"] == labels
    assert p["metadata"]["ownerReferences"][0]["name"] == rs["metadata"]["name"]
    assert rs["metadata"]["ownerReferences"][0]["name"] == deploy["metadata"]["name"]
    assert deploy["spec"]["replicas"] == rs["spec"]["replicas"] == 4


def test_an_event_is_about_its_pod() -> None:
    p = pod()
    p["metadata"] |= {"uid": "u-1", "resourceVersion": "42"}
    ev = make_event(random.Random(2), namespace="ns-1", involved_pod=p)
    assert ev["involvedObject"]["name"] == p["metadata"]["name"]
    assert ev["involvedObject"]["uid"] == "u-1"
    assert ev["metadata"]["name"].startswith(p["metadata"]["name"] + ".")
    assert ev["type"] in ("Normal", "Warning")
    assert ev["count"] >= 1
    assert ev["lastTimestamp"] >= ev["firstTimestamp"]


# ---------------------------------------------------------------------------- demo cluster


def test_demo_objects_cover_every_listed_resource() -> None:
    kinds = Counter(name for name, _ in demo_objects(DemoSpec()))
    assert set(kinds) == {
        "namespaces",
        "nodes",
        "pods",
        "apps/v1/deployments",
        "apps/v1/replicasets",
        "services",
        "configmaps",
        "events",
        "batch/v1/jobs",
    }
    assert (kinds["namespaces"], kinds["nodes"], kinds["pods"]) == (3, 5, 60)
    assert (kinds["apps/v1/deployments"], kinds["batch/v1/jobs"]) == (12, 3)
    assert kinds["apps/v1/replicasets"] == 24  # the current revision's and the previous one's


def test_demo_objects_match_their_resource_and_come_in_creatable_order() -> None:
    created_namespaces: set[str] = set()
    for name, obj in demo_objects(DemoSpec()):
        rtype = builtin(name)
        assert (obj["kind"], obj["apiVersion"]) == (rtype.kind, rtype.api_version)
        # A uid only where something refers to it (owner references, Events): the simulator's
        # load keeps it, the API server gives its own on create.
        assert not (SERVER_SET - {"uid"}) & set(obj["metadata"])
        if "uid" in obj["metadata"]:
            assert name in (
                "pods",
                "apps/v1/deployments",
                "apps/v1/replicasets",
                "batch/v1/jobs",
            ), name
        if rtype.namespaced:
            assert obj["metadata"]["namespace"] in created_namespaces
        else:
            assert "namespace" not in obj["metadata"]
        if name == "namespaces":
            created_namespaces.add(obj["metadata"]["name"])


def test_what_demo_objects_refer_to_is_there_once_loaded() -> None:
    sim = Simulator()
    objects = demo_objects(DemoSpec())
    sim.load(objects)
    uids = {
        (rtype, o["metadata"]["namespace"], o["metadata"]["name"]): o["metadata"].get("uid")
        for rtype, o in (
            (r, s.obj)
            for r in ("pods", "apps/v1/replicasets", "apps/v1/deployments", "batch/v1/jobs")
            for s in sim.store.iter_range(sim.resource(r), None)
        )
    }
    stored = set(uids.values())
    owners = [
        ref["uid"]
        for rtype in ("pods", "apps/v1/replicasets")
        for s in sim.store.iter_range(sim.resource(rtype), None)
        for ref in s.obj["metadata"].get("ownerReferences", [])
        if ref["kind"] in ("ReplicaSet", "Deployment", "Job")
    ]
    assert owners and all(uid in stored for uid in owners)
    resources = {"Pod": "pods", "Deployment": "apps/v1/deployments", "Job": "batch/v1/jobs"}
    about = [s.obj["involvedObject"] for s in sim.store.iter_range(sim.resource("events"), None)]
    assert {ref["kind"] for ref in about} == set(resources)
    for ref in about:  # what kubectl describe finds them by
        assert uids[(resources[ref["kind"]], ref["namespace"], ref["name"])] == ref["uid"]


def test_demo_names_are_unique_at_any_size() -> None:
    # Five-character suffixes collide from about a thousand pods of one ReplicaSet on.
    names = [
        (o["metadata"]["namespace"], o["metadata"]["name"])
        for kind, o in demo_objects(DemoSpec(pods=20_000, namespaces=2, apps=2))
        if kind == "pods"
    ]
    assert len(names) == len(set(names)) == 20_000


@settings(max_examples=6, deadline=None)
@given(
    pods=st.integers(min_value=1, max_value=4000),
    namespaces=st.integers(min_value=1, max_value=3),
    apps=st.integers(min_value=1, max_value=2),
    seed=st.integers(min_value=0, max_value=2**16),
)
def test_every_object_of_any_demo_has_a_name_of_its_own(
    pods: int, namespaces: int, apps: int, seed: int
) -> None:
    # Up to 4 000 pods in as few as one ReplicaSet: past where five-character suffixes collide.
    spec = DemoSpec(pods=pods, namespaces=namespaces, apps=apps, seed=seed)
    keys = [
        (kind, o["metadata"].get("namespace", ""), o["metadata"]["name"])
        for kind, o in demo_objects(spec)
    ]
    assert len(keys) == len(set(keys))
    assert sum(kind == "pods" for kind, _, _ in keys) == pods


def test_demo_names_are_valid_and_unique() -> None:
    seen: set[tuple[str, str, str]] = set()
    for name, obj in demo_objects(DemoSpec(namespaces=4, nodes=7, apps=5, pods=140, seed=9)):
        meta = obj["metadata"]
        key = (name, meta.get("namespace", ""), meta["name"])
        assert key not in seen
        seen.add(key)
        check = is_dns_label if name in ("namespaces", "services") else is_dns_subdomain
        assert check(meta["name"]), key


def test_demo_pods_give_label_and_field_selectors_something_to_select() -> None:
    pods = [o for name, o in demo_objects(DemoSpec()) if name == "pods"]
    by_app = Counter(p["metadata"]["labels"]["app"] for p in pods)
    by_node = Counter(p["spec"]["nodeName"] for p in pods if "nodeName" in p["spec"])
    by_ns = Counter(p["metadata"]["namespace"] for p in pods)
    by_phase = Counter(p["status"]["phase"] for p in pods)
    assert set(by_app) == {f"app-{i}" for i in range(4)}
    assert set(by_node) == {f"node-{i}" for i in range(5)}
    assert set(by_ns) == {f"ns-{i}" for i in range(3)}
    assert 0 < by_app["app-1"] < len(pods)
    assert 0 < by_node["node-2"] < len(pods)
    assert by_phase["Running"] > len(pods) / 2
    assert len(by_phase) > 1
    combos = {(p["metadata"]["namespace"], p["metadata"]["labels"]["app"]) for p in pods}
    assert len(combos) == 3 * 4


def test_demo_controllers_own_the_demo_pods() -> None:
    objects = demo_objects(DemoSpec())
    pods = [o for name, o in objects if name == "pods"]
    replicasets = {
        (o["metadata"]["namespace"], o["metadata"]["name"]): o
        for name, o in objects
        if name == "apps/v1/replicasets"
    }
    deployments = {
        (o["metadata"]["namespace"], o["metadata"]["name"]): o
        for name, o in objects
        if name == "apps/v1/deployments"
    }
    configmaps = {
        (o["metadata"]["namespace"], o["metadata"]["name"])
        for name, o in objects
        if name == "configmaps"
    }
    jobs = {
        (o["metadata"]["namespace"], o["metadata"]["name"])
        for name, o in objects
        if name == "batch/v1/jobs"
    }
    of_jobs = [p for p in pods if p["metadata"]["ownerReferences"][0]["kind"] == "Job"]
    assert {
        (p["metadata"]["namespace"], p["metadata"]["ownerReferences"][0]["name"]) for p in of_jobs
    } == jobs
    pods = [p for p in pods if p not in of_jobs]
    for p in pods:
        ns = p["metadata"]["namespace"]
        rs = replicasets[(ns, p["metadata"]["ownerReferences"][0]["name"])]
        assert rs["spec"]["selector"]["matchLabels"].items() <= p["metadata"]["labels"].items()
        assert (ns, rs["metadata"]["ownerReferences"][0]["name"]) in deployments
        for v in p["spec"]["volumes"]:
            if "configMap" in v:
                assert (ns, v["configMap"]["name"]) in configmaps
    assert sum(rs["spec"]["replicas"] for rs in replicasets.values()) == len(pods)
    assert sum(d["spec"]["replicas"] for d in deployments.values()) == len(pods)


def test_an_empty_demo_is_just_namespaces_and_nodes() -> None:
    objects = demo_objects(DemoSpec(namespaces=2, nodes=1, apps=0, pods=0))
    assert [name for name, _ in objects] == ["namespaces", "namespaces", "nodes"]


@pytest.mark.parametrize(
    "kwargs", [{"pods": -1}, {"nodes": 0}, {"namespaces": 0}, {"apps": 0}, {"nodes": -2, "pods": 0}]
)
def test_a_demo_spec_that_cannot_place_its_pods_is_refused(kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError, match=r"DemoSpec|pods"):
        DemoSpec(**kwargs)


# ---------------------------------------------------------------------------- updates


def stored(p: dict[str, Any]) -> dict[str, Any]:
    """``p`` as a store returns it."""
    out = copy.deepcopy(p)
    out["metadata"] |= {
        "uid": "00000000-0000-4000-8000-000000000001",
        "resourceVersion": "17",
        "creationTimestamp": "2026-11-29T14:00:00Z",
    }
    return out


def test_mutate_pod_returns_a_changed_copy_and_leaves_its_input_alone() -> None:
    rng = random.Random(1)
    for seed in range(30):
        original = stored(pod(seed, phase=PHASES[seed % len(PHASES)]))
        before = copy.deepcopy(original)
        changed = mutate_pod(rng, original)
        assert original == before
        assert changed != original
        assert changed is not original


def test_mutate_pod_keeps_identity_and_resource_version() -> None:
    original = stored(pod())
    changed = mutate_pod(random.Random(1), original)
    for key in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp"):
        assert changed["metadata"][key] == original["metadata"][key]
    assert changed["spec"] == original["spec"]


def test_mutate_pod_bumps_a_revision_annotation_owned_by_its_manager() -> None:
    rng = random.Random(1)
    p = stored(pod())
    for expected in ("1", "2", "3"):
        p = mutate_pod(rng, p)
        assert p["metadata"]["annotations"]["sim.cacheproxy.dev/revision"] == expected
    managers = [e["manager"] for e in p["metadata"]["managedFields"]]
    assert managers.count("cacheproxy-churn") == 1
    times = [e["time"] for e in p["metadata"]["managedFields"]]
    assert times == sorted(times)


def test_mutate_pod_flips_readiness_restarts_containers_and_moves_phases() -> None:
    rng = random.Random(3)
    flips = restarts = started = 0
    for seed in range(40):
        p = stored(pod(seed, phase="Pending" if seed % 4 == 0 else "Running"))
        for _ in range(10):
            q = mutate_pod(rng, p)
            old, new = p["status"], q["status"]
            if (old["phase"], new["phase"]) == ("Pending", "Running"):
                started += 1
            old_ready = [s["ready"] for s in old["containerStatuses"]]
            if new["phase"] == "Running" and old_ready != [
                s["ready"] for s in new["containerStatuses"]
            ]:
                flips += 1
            if sum(s["restartCount"] for s in new["containerStatuses"]) > sum(
                s["restartCount"] for s in old["containerStatuses"]
            ):
                restarts += 1
            p = q
    assert flips > 5
    assert restarts > 5
    assert started > 2


def test_mutated_readiness_agrees_with_the_ready_condition() -> None:
    rng = random.Random(4)
    p = stored(pod())
    for _ in range(100):
        p = mutate_pod(rng, p)
        status = p["status"]
        ready = next(c for c in status["conditions"] if c["type"] == "Ready")
        all_ready = all(s["ready"] for s in status["containerStatuses"])
        assert (ready["status"] == "True") == all_ready
        assert size(p) < 11_000


def test_mutate_pod_copes_with_a_bare_pod() -> None:
    bare = {"metadata": {"name": "x", "namespace": "default"}}
    assert mutate_pod(random.Random(1), bare)["metadata"]["annotations"] == {
        "sim.cacheproxy.dev/revision": "1"
    }
    assert bare == {"metadata": {"name": "x", "namespace": "default"}}
