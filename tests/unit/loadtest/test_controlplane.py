"""The control-plane benchmark's measurements (kube-controller-manager's log, the audit log, the
daemon's histograms, a process's connections) and its report, on inputs whose answers are known."""

from __future__ import annotations

import math
import os
import socket
from pathlib import Path
from typing import Any

import pytest

from loadtest.harness.controlplane import (
    config_label,
    conflicts,
    error_lines,
    established,
    histogram_buckets,
    histogram_quantile,
    kcm_signs,
    percentile,
    write_latencies,
)
from loadtest.reports.controlplane_report import render_report
from loadtest.reports.figures import X

KCM_LOG = """\
I1207 20:54:30.951717    5421 shared_informer.go:409] "Caches are synced"
E1207 20:54:35.516151    5421 replica_set.go:640] "Unhandled Error" err="sync \\"scn/front-76d8c95c79\\" failed with read version: 544 is not as new as written version: 547 for group resource replicasets.apps" logger="UnhandledError"
I1207 20:54:36.000000    5421 endpointslice_controller.go:311] "Error syncing endpoint slices for service, retrying" key="scn/web" err="EndpointSlice informer cache is out of date"
E1207 20:54:36.100000    5421 deployment_controller.go:500] "Unhandled Error" err="Operation cannot be fulfilled on replicasets.apps \\"web-1\\": the object has been modified; please apply your changes to the latest version and try again"
I1207 20:54:37.000000    5421 namespace_controller.go:187] "Namespace has been deleted" namespace="scn"
"""


def test_the_kcm_log_lines_are_counted_by_what_they_say_from_an_offset(tmp_path: Path) -> None:
    log = tmp_path / "kcm.log"
    log.write_text(KCM_LOG)
    signs, sources = kcm_signs(log)
    assert signs == {
        "informer cache is out of date": 1,
        "read version is not as new as written": 1,
        "409: object has been modified": 1,
        "namespace: unexpected items still remain": 0,
    }
    assert sources == {
        "replica_set.go": 1,
        "endpointslice_controller.go": 1,
        "deployment_controller.go": 1,
    }
    from_third = len("".join(KCM_LOG.splitlines(keepends=True)[:2]))
    assert sum(kcm_signs(log, since=from_third)[0].values()) == 2


def test_only_a_daemon_log_line_at_level_error_counts_as_an_error(tmp_path: Path) -> None:
    log = tmp_path / "daemon.log"
    log.write_text(
        "2026-12-07 21:01:14,699 ERROR uvicorn.error: Cancel 50 running task(s)\n"
        "2026-12-07 21:01:14,700 INFO cacheproxy: an ERROR in a message\n"
        "Traceback (most recent call last):\n"
    )
    assert error_lines(log) == [
        "2026-12-07 21:01:14,699 ERROR uvicorn.error: Cancel 50 running task(s)"
    ]
    assert error_lines(tmp_path / "missing.log") == []


def _event(
    agent: str,
    verb: str,
    ms: int,
    code: int = 200,
    stage: str = "ResponseComplete",
    ref: tuple[str, str] = ("pods", ""),
) -> Any:
    return {
        "objectRef": {"resource": ref[0], "apiGroup": ref[1]},
        "stage": stage,
        "verb": verb,
        "userAgent": f"{agent}/v1.36.2 (linux/amd64)",
        "requestReceivedTimestamp": "2026-12-07T20:54:35.000000Z",
        "stageTimestamp": f"2026-12-07T20:54:35.{ms * 1000:06d}Z",
        "responseStatus": {"code": code},
    }


def test_writes_are_timed_and_their_conflicts_counted_per_client_from_the_audit_log() -> None:
    events = [
        _event("kube-controller-manager", "create", 4),
        _event("kube-controller-manager", "update", 12, code=409),
        _event("kube-scheduler", "create", 2, ref=("leases", "coordination.k8s.io")),
        _event("kube-controller-manager", "list", 50),  # a read: not a write
        _event("kube-controller-manager", "watch", 900, stage="ResponseStarted"),
        _event("controlplane-scenario", "patch", 30, code=409),  # not a client measured
    ]
    latencies = write_latencies(events, ("kube-controller-manager", "kube-scheduler"))
    assert sorted(round(s * 1000) for s in latencies) == [2, 4, 12]
    assert conflicts(events, ("kube-controller-manager", "kube-scheduler")) == 1
    cached = {config_label(name) for name in ("pods", "apps/v1/deployments")}
    assert cached == {"pods", "deployments.apps"}
    uncached = write_latencies(
        events, ("kube-controller-manager", "kube-scheduler"), resources=lambda r: r not in cached
    )
    assert [round(s * 1000) for s in uncached] == [2]  # the Lease
    assert conflicts(events, ("kube-scheduler",)) == 0
    assert percentile([0.004, 0.002, 0.012], 0.5) == 0.004
    assert math.isnan(percentile([], 0.5))


EXPOSITION = """\
# TYPE cacheproxy_passthrough_request_duration_seconds histogram
cacheproxy_passthrough_request_duration_seconds_bucket{le="0.001",resource="pods",verb="create"} 0.0
cacheproxy_passthrough_request_duration_seconds_bucket{le="0.01",resource="pods",verb="create"} 6.0
cacheproxy_passthrough_request_duration_seconds_bucket{le="0.1",resource="pods",verb="create"} 10.0
cacheproxy_passthrough_request_duration_seconds_bucket{le="+Inf",resource="pods",verb="create"} 10.0
cacheproxy_passthrough_request_duration_seconds_count{resource="pods",verb="create"} 10.0
cacheproxy_passthrough_request_duration_seconds_sum{resource="pods",verb="create"} 0.2
cacheproxy_passthrough_request_duration_seconds_bucket{le="0.001",resource="pods",verb="get"} 100.0
cacheproxy_passthrough_request_duration_seconds_bucket{le="0.01",resource="pods",verb="get"} 100.0
cacheproxy_passthrough_request_duration_seconds_bucket{le="0.1",resource="pods",verb="get"} 100.0
cacheproxy_passthrough_request_duration_seconds_bucket{le="+Inf",resource="pods",verb="get"} 100.0
cacheproxy_passthrough_request_duration_seconds_count{resource="pods",verb="get"} 100.0
cacheproxy_passthrough_request_duration_seconds_sum{resource="pods",verb="get"} 0.05
"""


def test_a_histogram_quantile_is_interpolated_in_its_bucket_between_two_readings() -> None:
    name = "cacheproxy_passthrough_request_duration_seconds"
    after = histogram_buckets(EXPOSITION, name, keep=lambda labels: labels["verb"] != "get")
    assert after == {0.001: 0.0, 0.01: 6.0, 0.1: 10.0, math.inf: 10.0}
    p50, count = histogram_quantile(after, 0.5)
    assert count == 10
    # rank 5 of the 6 in (1 ms, 10 ms]: 1 + 9 * 5/6 ms
    assert p50 == pytest.approx(0.001 + 0.009 * 5 / 6)
    before = {0.001: 0.0, 0.01: 6.0, 0.1: 6.0, math.inf: 6.0}
    p50, count = histogram_quantile(after, 0.5, before=before)
    assert count == 4  # only the observations made since, all in (10 ms, 100 ms]
    assert p50 == pytest.approx(0.01 + 0.09 * 2 / 4)
    assert math.isnan(histogram_quantile(before, 0.5, before=before)[0])


def test_established_counts_a_process_s_open_tcp_connections() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        before = established(os.getpid(), remote_port=port)
        with socket.create_connection(("127.0.0.1", port)) as client:
            accepted, _ = server.accept()
            with accepted:
                assert established(os.getpid(), remote_port=port) == before + 1
                assert established(os.getpid()) >= 2  # both ends are ours
        assert client.fileno() == -1


def _run(mode: str, run: int, seconds: float, *, converged: bool = True) -> dict[str, Any]:
    return {
        "mode": mode,
        "run": run,
        "steps": [
            {"name": "scale 5 to 10", "converged": True, "seconds": seconds, "detail": ""},
            {
                "name": "namespace deleted",
                "converged": converged,
                "seconds": 1.0,
                "detail": "" if converged else "namespace: Terminating",
            },
        ],
        "kcm": {"informer cache is out of date": 2 if mode == "through" else 1},
        **({"kcm_by_source": {"endpoints_controller.go": 2}} if mode == "through" else {}),
        "conflicts": {"controllers": 3, "kubelet": 0},
        "writes_at_apiserver": {"count": 10, "p50": 0.004, "p90": 0.01},
        "writes_at_apiserver_uncached": {"count": 4, "p50": 0.002, "p90": 0.003},
        "connections": {"kube-controller-manager": 1},
        "cpu": {"kube-controller-manager": 0.5, "kube-scheduler": 0.1},
        **(
            {
                "writes_at_daemon": {"count": 10, "p50": 0.008, "p90": None},
                "writes_at_daemon_uncached": {"count": 4, "p50": 0.0025, "p90": 0.004},
            }
            if mode == "through"
            else {}
        ),
    }


def test_the_report_gives_medians_per_mode_the_ratio_and_what_did_not_converge() -> None:
    result = {
        "command": "python -m loadtest controlplane --runs 3",
        "date": "2026-12-07T21:00:00+00:00",
        "server": "v1.36.2",
        "cacheproxy": "commit abc",
        "modes": ["direct", "through"],
        "cached_resources": ["pods"],
        "runs": [
            _run("direct", 1, 0.1),
            _run("through", 1, 0.3),
            _run("direct", 2, 0.2),
            _run("through", 2, 0.4, converged=False),
            _run("direct", 3, 0.9),
            _run("through", 3, 0.5),
        ],
    }
    report = render_report(result)
    assert f"| scale 5 to 10 | 0.200 | 0.400 | 2.00{X} |" in report
    # The total of a run is counted only when every step converged.
    assert f"| **total** | 1.200 | 1.400 | 1.17{X} |" in report
    assert "through run 2: namespace deleted: namespace: Terminating" in report
    assert "| kcm log: informer cache is out of date | 1 | 2 |" in report
    assert "| `endpoints_controller.go` | 0 | 2 |" in report  # none logged is 0
    assert "| all: at cacheproxy p50 | n/a | 8.0 |" in report
    assert "| all: at cacheproxy p90 | n/a | n/a |" in report
    assert "| uncached: at API server p50 | 2.0 | 2.0 |" in report
    assert "| uncached: at cacheproxy p50 | n/a | 2.5 |" in report
    assert "| uncached: writes (count) | 4 | 4 |" in report
    assert "| cached: writes (count) | n/a | n/a |" in report
    assert "Restart" not in report
