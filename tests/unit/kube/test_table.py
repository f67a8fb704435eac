"""Server-side Tables equal the API server's (``k8s-samples/tables/table_*.json``).

Each sample Table was rendered from the objects in the matching ``list_*.json``; ages are relative
to the capture time. The newest timestamp in the samples is 14:37:57 and pods created then show
``4s`` while the ``tables`` namespace (14:37:34) shows ``27s``: the capture was at 14:38:01.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest

from cacheproxy.errors import ApiError
from cacheproxy.kube import table as T
from cacheproxy.kube.printers import PRINTERS, admin, cells, core, network, pods, workloads
from cacheproxy.kube.resources import BUILTIN_RESOURCES
from cacheproxy.kube.versions import KUBE_1_36, NEWEST, OLDEST, KubeVersion

NOW = datetime(2026, 11, 29, 14, 38, 1, tzinfo=UTC)

KINDS = {
    ("", "pods"): "api_v1_namespaces_tables_pods",
    ("", "namespaces"): "api_v1_namespaces",
    ("", "configmaps"): "api_v1_namespaces_tables_configmaps",
    ("", "nodes"): "api_v1_nodes",
    ("", "secrets"): "api_v1_namespaces_tables_secrets",
    ("", "serviceaccounts"): "api_v1_namespaces_tables_serviceaccounts",
    ("apps", "deployments"): "apis_apps_v1_namespaces_tables_deployments",
    ("apps", "statefulsets"): "apis_apps_v1_namespaces_tables_statefulsets",
    ("apps", "daemonsets"): "apis_apps_v1_namespaces_tables_daemonsets",
    ("", "services"): "api_v1_namespaces_tables_services",
    ("", "persistentvolumeclaims"): "api_v1_namespaces_tables_persistentvolumeclaims",
    ("", "events"): "api_v1_namespaces_tables_events",
    ("batch", "jobs"): "apis_batch_v1_namespaces_tables_jobs",
    ("batch", "cronjobs"): "apis_batch_v1_namespaces_tables_cronjobs",
    # No printer: the default Table (Name, Created At).
    ("apiextensions.k8s.io", "customresourcedefinitions"): (
        "apis_apiextensions.k8s.io_v1_customresourcedefinitions"
    ),
}


def load(samples_dir: Path, name: str) -> Any:
    return orjson.loads((samples_dir / "tables" / name).read_bytes())


@pytest.mark.parametrize(("group", "resource"), list(KINDS), ids=[r for _, r in KINDS])
def test_table_equals_sample(samples_dir: Path, group: str, resource: str) -> None:
    # The samples are kube-apiserver 1.28's.
    stem = KINDS[(group, resource)]
    listed = load(samples_dir, f"list_{stem}.json")
    expected = load(samples_dir, f"table_{stem}.json")
    got = T.table(
        T.printer_for(group, resource, OLDEST),
        listed["items"],
        now=NOW,
        resource_version=listed["metadata"]["resourceVersion"],
    )
    assert got["kind"] == "Table"
    assert got["apiVersion"] == "meta.k8s.io/v1"
    assert got["metadata"] == expected["metadata"]
    assert got["columnDefinitions"] == expected["columnDefinitions"]
    assert list(got) == list(expected)  # key order too
    assert len(got["rows"]) == len(expected["rows"])
    for mine, theirs in zip(got["rows"], expected["rows"], strict=True):
        assert mine["cells"] == theirs["cells"]
        assert len(mine["cells"]) == len(got["columnDefinitions"])
        assert set(mine) == set(theirs)
        obj, exp_obj = mine["object"], theirs["object"]
        assert obj["kind"] == exp_obj["kind"] == "PartialObjectMetadata"
        assert obj["apiVersion"] == exp_obj["apiVersion"]
        meta, exp_meta = dict(obj["metadata"]), dict(exp_obj["metadata"])
        if resource == "daemonsets":
            # The controller added an annotation between the two captures.
            meta.pop("annotations")
            exp_meta.pop("annotations")
        assert meta == exp_meta


def test_kubectl_output_matches_cells(samples_dir: Path) -> None:
    """The wide kubectl output is the cells, column by column (a sanity check of the pairing)."""
    listed = load(samples_dir, "list_api_v1_namespaces_tables_pods.json")
    got = T.table(T.printer_for("", "pods", OLDEST), listed["items"], now=NOW)
    lines = (samples_dir / "tables" / "kubectl_wide_pods.txt").read_text().splitlines()[1:]
    for row, line in zip(got["rows"], lines, strict=True):
        assert [str(c) for c in row["cells"]] == re.split(r"\s{2,}", line.strip())


def test_include_object(samples_dir: Path) -> None:
    listed = load(samples_dir, "list_api_v1_namespaces_tables_configmaps.json")
    item = listed["items"][0]
    none = T.table(T.printer_for("", "configmaps"), [item], now=NOW, include="None")
    assert "object" not in none["rows"][0]
    full = T.table(T.printer_for("", "configmaps"), [item], now=NOW, include="Object")
    assert full["rows"][0]["object"] == item
    beta = T.table(T.printer_for("", "configmaps"), [item], now=NOW, version="v1beta1")
    assert beta["apiVersion"] == "meta.k8s.io/v1beta1"
    assert beta["rows"][0]["object"]["apiVersion"] == "meta.k8s.io/v1beta1"
    assert T.include_object({}) == "Metadata"
    assert T.include_object({"includeObject": ["Object"]}) == "Object"
    with pytest.raises(ApiError) as err:
        T.include_object({"includeObject": ["All"]})
    assert err.value.status["code"] == 400


def test_paged_metadata(samples_dir: Path) -> None:
    """Like ``protocol/table_limit2_kubectl_accept.http``: continue + remainingItemCount."""
    got = T.table(
        T.printer_for("", "pods", OLDEST),
        [],
        now=NOW,
        resource_version="7",
        continue_token="abc",
        remaining=3,
    )
    assert got["metadata"] == {"resourceVersion": "7", "continue": "abc", "remainingItemCount": 3}
    body = (samples_dir / "protocol" / "table_limit2_kubectl_accept.http").read_bytes()
    sample = orjson.loads(body.partition(b"\r\n\r\n")[2] or body.partition(b"\n\n")[2])
    assert list(sample["metadata"]) == list(got["metadata"])
    assert sample["columnDefinitions"] == got["columnDefinitions"]


KUBECTL_ACCEPT = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,"
    "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
)


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        (KUBECTL_ACCEPT, "v1"),
        ("application/json;as=Table;v=v1beta1;g=meta.k8s.io, application/json", "v1beta1"),
        ("application/json;as=Table;v=v2;g=meta.k8s.io,application/json", None),
        ("application/json, application/json;as=Table;v=v1;g=meta.k8s.io", None),
        ("", None),
        ("application/json", None),
        ("*/*", None),
        ("application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,application/json", None),
        ("application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,application/json", None),
    ],
)
def test_negotiate(accept: str, expected: str | None) -> None:
    assert T.negotiate_table(accept) == expected


@pytest.mark.parametrize(
    "accept",
    [
        "application/json;as=Table;v=v2;g=meta.k8s.io",
        "application/json;as=Table;v=v1;g=other.io",
        "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io",
        "application/yaml",
    ],
)
def test_negotiate_not_acceptable(accept: str) -> None:
    with pytest.raises(ApiError) as err:
        T.negotiate_table(accept)
    assert err.value.status["code"] == 406


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (-5, "<invalid>"),
        (-0.5, "0s"),
        (0, "0s"),
        (119, "119s"),
        (120, "2m"),
        (125, "2m5s"),
        (600, "10m"),
        (179 * 60, "179m"),
        (3 * 3600, "3h"),
        (3 * 3600 + 120, "3h2m"),
        (47 * 3600, "47h"),
        (50 * 3600, "2d2h"),
        (9 * 86400, "9d"),
        (800 * 86400, "2y70d"),
        (9 * 365 * 86400, "9y"),
    ],
)
def test_human_duration(seconds: float, text: str) -> None:
    assert T.human_duration(seconds) == text


def _pod(status: dict[str, Any], spec: dict[str, Any] | None = None, **meta: Any) -> Any:
    return {
        "metadata": {"name": "p", "creationTimestamp": "2026-11-29T14:00:00Z", **meta},
        "spec": spec or {"containers": [{"name": "c"}]},
        "status": status,
    }


@pytest.mark.parametrize(
    ("pod", "ready", "reason", "restarts"),
    [
        (
            _pod(
                {
                    "phase": "Pending",
                    "initContainerStatuses": [
                        {"name": "i", "state": {"waiting": {"reason": "PodInitializing"}}}
                    ],
                },
                {"initContainers": [{"name": "i"}, {"name": "j"}], "containers": [{"name": "c"}]},
            ),
            "0/1",
            "Init:0/2",
            "0",
        ),
        (
            _pod(
                {
                    "phase": "Pending",
                    "initContainerStatuses": [
                        {"name": "i", "state": {"terminated": {"exitCode": 2}}, "restartCount": 1}
                    ],
                },
                {"initContainers": [{"name": "i"}], "containers": [{"name": "c"}]},
            ),
            "0/1",
            "Init:ExitCode:2",
            "1",
        ),
        (
            _pod(
                {
                    "phase": "Succeeded",
                    "containerStatuses": [
                        {
                            "name": "c",
                            "state": {"terminated": {"exitCode": 0, "reason": "Completed"}},
                        }
                    ],
                }
            ),
            "0/1",
            "Completed",
            "0",
        ),
        (
            _pod(
                {
                    "phase": "Running",
                    "containerStatuses": [
                        {
                            "name": "c",
                            "ready": True,
                            "state": {"running": {}},
                            "restartCount": 3,
                            "lastState": {"terminated": {"finishedAt": "2026-11-29T13:38:01Z"}},
                        }
                    ],
                },
                deletionTimestamp="2026-11-29T14:38:00Z",
            ),
            "1/1",
            "Terminating",
            "3 (60m ago)",
        ),
        (
            _pod(
                {
                    "phase": "Running",
                    "containerStatuses": [
                        {"name": "c", "ready": True, "state": {"running": {}}},
                    ],
                    "initContainerStatuses": [
                        {"name": "s", "ready": True, "started": True, "state": {"running": {}}}
                    ],
                },
                {
                    "initContainers": [{"name": "s", "restartPolicy": "Always"}],
                    "containers": [{"name": "c"}],
                },
            ),
            "2/2",
            "Running",
            "0",
        ),
    ],
)
def test_pod_status_cells(pod: Any, ready: str, reason: str, restarts: str) -> None:
    cells = pods.print_pod(pod, NOW)
    assert cells[1:4] == [ready, reason, restarts]
    assert cells[4] == "38m"


def test_pod_row_conditions() -> None:
    row = T.table_row(T.printer_for("", "pods"), _pod({"phase": "Failed"}), now=NOW)
    assert row["conditions"][0]["reason"] == "Failed"
    assert "conditions" not in T.table_row(
        T.printer_for("", "pods"), _pod({"phase": "Running"}), now=NOW
    )


def test_selector_string() -> None:
    sel = {
        "matchLabels": {"b": "2", "a": "1"},
        "matchExpressions": [
            {"key": "c", "operator": "In", "values": ["y", "x"]},
            {"key": "d", "operator": "DoesNotExist"},
        ],
    }
    assert cells.selector_string(sel) == "a=1,b=2,c in (x,y),!d"
    assert cells.selector_string(None) == ""


def test_watch_tables_columns_only_first() -> None:
    conv = T.WatchTables(T.printer_for("", "configmaps"), clock=lambda: NOW)
    cm = {"metadata": {"name": "a", "resourceVersion": "5"}, "data": {"k": "v"}}
    line = orjson.dumps({"type": "ADDED", "object": cm}) + b"\n"
    error = b'{"type":"ERROR","object":{"kind":"Status","code":410}}\n'
    out = conv.convert(line + error + line[:10])
    events = [orjson.loads(x) for x in out.splitlines()]
    assert events[0]["object"]["kind"] == "Table"
    assert events[0]["object"]["metadata"] == {"resourceVersion": "5"}
    assert len(events[0]["object"]["columnDefinitions"]) == 3
    assert events[0]["object"]["rows"][0]["cells"] == ["a", 1, "<unknown>"]
    assert events[1]["object"]["kind"] == "Status"
    second = orjson.loads(conv.convert(line[10:]))
    assert second["type"] == "ADDED"
    assert second["object"]["columnDefinitions"] == []
    assert len(second["object"]["rows"]) == 1


def _svc(spec: dict[str, Any], status: dict[str, Any] | None = None) -> Any:
    meta = {"name": "s", "creationTimestamp": "2026-11-29T14:00:00Z"}
    return {"metadata": meta, "spec": spec, "status": status or {}}


@pytest.mark.parametrize(
    ("svc", "external"),
    [
        (_svc({"type": "ClusterIP"}), "<none>"),
        (_svc({"type": "NodePort", "externalIPs": ["1.2.3.4", "5.6.7.8"]}), "1.2.3.4,5.6.7.8"),
        (_svc({"type": "LoadBalancer"}), "<pending>"),
        (
            _svc(
                {"type": "LoadBalancer"},
                {"loadBalancer": {"ingress": [{"ip": "9.9.9.9"}, {"hostname": "lb.example"}]}},
            ),
            "9.9.9.9,lb.example",
        ),
        (
            _svc(
                {"type": "LoadBalancer", "externalIPs": ["1.1.1.1"]},
                {"loadBalancer": {"ingress": [{"ip": "9.9.9.9"}, {"ip": "9.9.9.9"}]}},
            ),
            "9.9.9.9,1.1.1.1",
        ),
        (_svc({"type": "ExternalName", "externalName": "db.example"}), "db.example"),
        (_svc({}), "<unknown>"),
    ],
)
def test_service_external_ip(svc: Any, external: str) -> None:
    assert network.service_external_ip(svc) == external


def test_service_cells() -> None:
    svc = _svc(
        {
            "type": "LoadBalancer",
            "clusterIPs": ["10.0.0.1", "fd00::1"],
            "ports": [
                {"port": 80, "protocol": "TCP"},
                {"port": 443, "nodePort": 30443, "protocol": "TCP"},
            ],
            "selector": {"b": "2", "a": "1"},
        }
    )
    cells = network.print_service(svc, NOW)
    assert cells == [
        "s",
        "LoadBalancer",
        "10.0.0.1",
        "<pending>",
        "80/TCP,443:30443/TCP",
        "38m",
        "a=1,b=2",
    ]
    headless = network.print_service(_svc({"type": "ClusterIP"}), NOW)
    assert headless[2] == "<none>"
    assert headless[4] == "<none>"
    assert headless[6] == "<none>"


def test_pvc_bound_cells() -> None:
    pvc = {
        "metadata": {
            "name": "d",
            "creationTimestamp": "2026-11-29T14:00:00Z",
            "annotations": {"volume.beta.kubernetes.io/storage-class": "old"},
        },
        "spec": {"volumeName": "pv-1", "storageClassName": "fast"},
        "status": {
            "phase": "Bound",
            "accessModes": ["ReadWriteMany", "ReadWriteOnce", "ReadWriteOnce"],
            "capacity": {"storage": "5Gi"},
        },
    }
    assert core.print_pvc(pvc, NOW) == [
        "d",
        "Bound",
        "pv-1",
        "5Gi",
        "RWO,RWX",
        "old",
        "<unset>",
        "38m",
        "<unset>",
    ]
    pvc["metadata"] = {"name": "d", "deletionTimestamp": "2026-11-29T14:38:00Z"}
    pvc["spec"]["volumeAttributesClassName"] = "gold"
    assert core.print_pvc(pvc, NOW)[1] == "Terminating"
    assert core.print_pvc(pvc, NOW)[5:7] == ["fast", "gold"]


def test_event_series_and_source() -> None:
    event = {
        "metadata": {"name": "e"},
        "involvedObject": {"kind": "Node"},
        "eventTime": "2026-11-29T14:00:00.123456Z",
        "series": {"count": 4, "lastObservedTime": "2026-11-29T14:37:01.000000Z"},
        "reportingComponent": "kubelet",
        "reportingInstance": "node-1",
        "message": " hi \n",
    }
    cells = core.print_event(event, NOW)
    assert cells == ["60s", "", "", "node", "", "kubelet, node-1", "hi", "38m", 4, "e"]
    single = core.print_event({"metadata": {"name": "e"}, "lastTimestamp": None}, NOW)
    assert single[0] == single[7] == "<unknown>"
    assert single[8] == 1


def test_job_cells() -> None:
    job = {
        "metadata": {"name": "j", "creationTimestamp": "2026-11-29T14:00:00Z"},
        "spec": {"parallelism": 3, "template": {"spec": {"containers": []}}},
        "status": {"succeeded": 2, "startTime": "2026-11-29T14:00:00Z"},
    }
    assert workloads.print_job(job, NOW)[1:5] == ["Running", "2/1 of 3", "38m", "38m"]
    assert workloads.print_job(job, NOW)[7] == "<none>"
    job["status"]["completionTime"] = "2026-11-29T14:02:05Z"
    job["spec"]["completions"] = 2
    assert workloads.print_job(job, NOW)[2:4] == ["2/2", "2m5s"]


@pytest.mark.parametrize(
    ("conditions", "status"),
    [
        ([], "Running"),
        ([("SuccessCriteriaMet", "True")], "SuccessCriteriaMet"),
        ([("SuccessCriteriaMet", "True"), ("Complete", "True")], "Complete"),
        ([("FailureTarget", "True"), ("Failed", "True")], "Failed"),
        ([("FailureTarget", "True")], "FailureTarget"),
        ([("Suspended", "True"), ("FailureTarget", "True")], "Suspended"),
        ([("Complete", "False"), ("Suspended", "False")], "Running"),
    ],
)
def test_a_jobs_status_cell_is_its_first_true_condition_in_the_api_servers_order(
    conditions: list[tuple[str, str]], status: str
) -> None:
    job = {
        "metadata": {"name": "j"},
        "status": {"conditions": [{"type": t, "status": s} for t, s in conditions]},
    }
    assert workloads.print_job(job, NOW)[1] == status
    # 1.28 has no Status column: the cell is left out.
    assert T.printer_for("batch", "jobs", OLDEST).cells(job, NOW)[1] == "0/1"


def test_cronjob_cells() -> None:
    cj = {
        "metadata": {"name": "c", "creationTimestamp": "2026-11-29T14:00:00Z"},
        "spec": {"schedule": "*/5 * * * *"},
        "status": {
            "active": [{"name": "a"}, {"name": "b"}],
            "lastScheduleTime": "2026-11-29T14:35:00Z",
        },
    }
    cells = workloads.print_cronjob(cj, NOW)
    assert cells[:7] == ["c", "*/5 * * * *", "<none>", "<unset>", 2, "3m1s", "38m"]
    cj["spec"]["suspend"] = True
    cj["spec"]["timeZone"] = "Etc/UTC"
    assert workloads.print_cronjob(cj, NOW)[2:4] == ["Etc/UTC", "True"]
    assert T.printer_for("batch", "cronjobs", OLDEST).cells(cj, NOW)[:3] == [
        "c",
        "*/5 * * * *",
        "True",
    ]


@pytest.mark.parametrize(("group", "resource"), sorted(PRINTERS))
@pytest.mark.parametrize(
    "version",
    [OLDEST, NEWEST, KubeVersion(1, 30), KubeVersion(1, 35), KUBE_1_36, KubeVersion(1, 37)],
)
def test_every_printer_fills_every_column(group: str, resource: str, version: KubeVersion) -> None:
    """Even an object with nothing but a name yields one cell per column definition, in every
    release's columns."""
    bare = {"metadata": {"name": "x"}}
    printer = T.printer_for(group, resource, version)
    row = T.table_row(printer, bare, now=NOW)
    assert len(row["cells"]) == len(printer.column_definitions())
    assert row["cells"][[c["format"] for c in printer.column_definitions()].index("name")] == "x"


def test_endpoints_cells() -> None:
    def endpoints(*subsets: Any) -> Any:
        return {"metadata": {"name": "e"}, "subsets": list(subsets)}

    assert network.format_endpoints(None) == "<none>"
    web = {"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}], "ports": [{"port": 80}]}
    assert network.format_endpoints([web]) == "10.0.0.1:80,10.0.0.2:80"
    two_ports = {**web, "ports": [{"port": 80}, {"port": 443}]}
    assert (
        network.format_endpoints([two_ports]) == "10.0.0.1:80,10.0.0.2:80,10.0.0.1:443 + 1 more..."
    )
    headless = {"addresses": [{"ip": "fd00::1"}]}
    assert network.format_endpoints([headless]) == "fd00::1"
    v6 = {"addresses": [{"ip": "fd00::1"}], "ports": [{"port": 53}]}
    assert network.format_endpoints([v6]) == "[fd00::1]:53"
    not_ready = {"notReadyAddresses": [{"ip": "10.0.0.9"}], "ports": [{"port": 80}]}
    assert network.print_endpoints(endpoints(not_ready), NOW)[:2] == ["e", ""]


def test_ingress_cells() -> None:
    ing = {
        "metadata": {"name": "i", "creationTimestamp": "2026-11-29T14:37:01Z"},
        "spec": {"rules": [{"http": {}}]},
        "status": {"loadBalancer": {"ingress": [{"hostname": "lb.example"}, {"ip": "1.2.3.4"}]}},
    }
    assert network.print_ingress(ing, NOW) == [
        "i",
        "<none>",
        "*",
        "1.2.3.4,lb.example",
        "80",
        "60s",
    ]
    ing["spec"] = {
        "ingressClassName": "nginx",
        "rules": [{"host": f"h{i}.example"} for i in range(5)],
        "tls": [{"hosts": ["h0.example"]}],
    }
    cells = network.print_ingress(ing, NOW)
    assert cells[1:5] == [
        "nginx",
        "h0.example,h1.example,h2.example + 2 more...",
        "1.2.3.4,lb.example",
        "80, 443",
    ]


def test_persistentvolume_cells() -> None:
    pv = {
        "metadata": {"name": "pv1", "creationTimestamp": "2026-11-29T14:37:01Z"},
        "spec": {
            "capacity": {"storage": "5Gi"},
            "accessModes": ["ReadWriteMany", "ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "claimRef": {"namespace": "ns", "name": "data"},
            "storageClassName": "fast",
        },
        "status": {"phase": "Bound"},
    }
    assert core.print_pv(pv, NOW) == [
        "pv1", "5Gi", "RWO,RWX", "Retain", "Bound", "ns/data", "fast", "<unset>", "", "60s",
        "<unset>",
    ]  # fmt: skip
    pv["metadata"]["deletionTimestamp"] = "2026-11-29T14:38:00Z"
    pv["metadata"]["annotations"] = {"volume.beta.kubernetes.io/storage-class": "old"}
    pv["spec"]["volumeMode"] = "Block"
    cells = core.print_pv(pv, NOW)
    assert (cells[4], cells[6], cells[10]) == ("Terminating", "old", "Block")
    assert core.print_pv({"metadata": {"name": "p"}}, NOW)[1:6] == ["0", "", "", "", ""]


def test_replicaset_cells() -> None:
    rs = {
        "metadata": {"name": "web-5d", "creationTimestamp": "2026-11-29T14:37:01Z"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "web", "pod-template-hash": "5d"}},
            "template": {"spec": {"containers": [{"name": "c", "image": "nginx:1"}]}},
        },
        "status": {"replicas": 3, "readyReplicas": 2},
    }
    assert workloads.print_replicaset(rs, NOW) == [
        "web-5d", 3, 3, 2, "60s", "c", "nginx:1", "app=web,pod-template-hash=5d",
    ]  # fmt: skip
    assert workloads.print_replicaset({"metadata": {"name": "r"}}, NOW)[1:4] == [0, 0, 0]


# The cells below are those kube-apiserver 1.28 and 1.32 printed for the same objects.
def test_endpointslice_cells_show_three_ports_and_addresses_at_most() -> None:
    es = {
        "metadata": {"name": "es-1", "creationTimestamp": "2026-11-29T14:37:01Z"},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 80}, {"name": "https", "port": 443}, {"name": "x"}, {}],
        "endpoints": [
            {"addresses": ["10.0.0.1"]},
            {"addresses": ["10.0.0.2", "10.0.0.3"]},
            {"addresses": ["10.0.0.4"]},
        ],
    }
    assert network.print_endpointslice(es, NOW) == [
        "es-1", "IPv4", "80,443,x + 1 more...", "10.0.0.1,10.0.0.2,10.0.0.3 + 1 more...", "60s",
    ]  # fmt: skip
    empty = {"metadata": {"name": "es-2"}, "addressType": "IPv6", "endpoints": []}
    assert network.print_endpointslice(empty, NOW)[1:4] == ["IPv6", "<unset>", "<unset>"]


def test_resourcequota_cells_split_limits_from_requests_in_name_order() -> None:
    quota = {
        "metadata": {"name": "rq"},
        "status": {
            "hard": {"pods": "10", "requests.cpu": "2", "limits.memory": "4Gi", "limits.cpu": "3"},
            "used": {"pods": "1", "requests.cpu": "500m", "limits.memory": "0"},
        },
    }
    assert admin.print_resourcequota(quota, NOW)[2:] == [
        "pods: 1/10, requests.cpu: 500m/2",
        "limits.cpu: 0/3, limits.memory: 0/4Gi",
    ]
    # A quota no controller has counted yet shows nothing (its status is empty).
    spec_only = {"metadata": {"name": "rq"}, "spec": {"hard": {"pods": "10"}}, "status": {}}
    assert admin.print_resourcequota(spec_only, NOW)[2:] == ["", ""]


def test_cluster_kinds_cells_fill_the_api_servers_defaults() -> None:
    pdb = {"metadata": {"name": "p"}, "spec": {"maxUnavailable": "30%"}, "status": {}}
    assert admin.print_poddisruptionbudget(pdb, NOW)[1:4] == ["N/A", "30%", 0]
    pdb = {
        "metadata": {"name": "p"},
        "spec": {"minAvailable": 2},
        "status": {"disruptionsAllowed": 1},
    }
    assert admin.print_poddisruptionbudget(pdb, NOW)[1:4] == ["2", "N/A", 1]
    assert admin.print_lease({"metadata": {"name": "l"}, "spec": {}}, NOW)[1] == ""
    default = {"storageclass.kubernetes.io/is-default-class": "true"}
    sc = {"metadata": {"name": "sc", "annotations": default}, "provisioner": "p"}
    assert admin.print_storageclass(sc, NOW)[:5] == [
        "sc (default)", "p", "Delete", "Immediate", False,
    ]  # fmt: skip
    driver = {
        "metadata": {"name": "d"},
        "spec": {"tokenRequests": [{"audience": "a"}, {"audience": "b"}], "podInfoOnMount": True},
    }
    assert admin.print_csidriver(driver, NOW)[1:7] == [True, True, False, "a,b", False, "<none>"]
    assert admin.print_csidriver({"metadata": {"name": "d"}, "spec": {}}, NOW)[4] == "<unset>"
    csinode = {"metadata": {"name": "n"}, "spec": {"drivers": [{"name": "d", "nodeID": "n"}]}}
    assert admin.print_csinode(csinode, NOW)[1] == 1


def test_workload_kinds_cells() -> None:
    owner = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds-x", "controller": True}
    revision = {"metadata": {"name": "cr", "ownerReferences": [owner]}, "revision": 3}
    assert workloads.print_controllerrevision(revision, NOW)[1:3] == ["daemonset.apps/ds-x", 3]
    orphan = {"metadata": {"name": "cr"}, "revision": 1}
    assert workloads.print_controllerrevision(orphan, NOW)[1:3] == ["<none>", 1]
    template = {
        "metadata": {"labels": {"b": "c", "app": "pt"}},
        "spec": {"containers": [{"name": "a", "image": "nginx:1"}]},
    }
    assert workloads.print_podtemplate({"metadata": {"name": "pt"}, "template": template}, NOW) == [
        "pt", "a", "nginx:1", "app=pt,b=c",
    ]  # fmt: skip
    rc = {
        "metadata": {"name": "rc"},
        "spec": {"replicas": 3, "selector": {"tier": "x", "app": "rc"}, "template": template},
        "status": {"replicas": 3, "readyReplicas": 2},
    }
    assert workloads.print_replicationcontroller(rc, NOW)[1:4] == [3, 3, 2]
    assert workloads.print_replicationcontroller(rc, NOW)[5:] == ["a", "nginx:1", "app=rc,tier=x"]


def test_every_kind_of_the_built_in_table_is_printed_here() -> None:
    """So their Tables are served from the cache, never asked of upstream (server/resource.py
    ``prints_tables``)."""
    assert [
        r.config_name for r in BUILTIN_RESOURCES if not T.has_printer(r.group, r.resource)
    ] == []


def test_1_36_prints_a_nodes_kernel_with_its_architecture_and_no_service_account_secrets() -> None:
    node = {
        "metadata": {"name": "n", "creationTimestamp": "2024-01-01T00:00:00Z"},
        "status": {"nodeInfo": {"kernelVersion": "6.8.0-1019-aws", "architecture": "arm64"}},
    }
    kernel = [c[0] for c in T.printer_for("", "nodes", KUBE_1_36).columns].index("Kernel-Version")
    assert (
        T.printer_for("", "nodes", KUBE_1_36).cells(node, NOW)[kernel] == "6.8.0-1019-aws (arm64)"
    )
    assert T.printer_for("", "nodes", NEWEST).cells(node, NOW)[kernel] == "6.8.0-1019-aws"
    sa = {"metadata": {"name": "sa", "creationTimestamp": "2024-01-01T00:00:00Z"}, "secrets": [{}]}
    assert [c[0] for c in T.printer_for("", "serviceaccounts", KUBE_1_36).columns] == [
        "Name",
        "Age",
    ]
    assert len(T.printer_for("", "serviceaccounts", KUBE_1_36).cells(sa, NOW)) == 2
    assert T.printer_for("", "serviceaccounts", NEWEST).cells(sa, NOW)[1] == 1
