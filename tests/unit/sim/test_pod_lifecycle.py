"""A pod's next steps as its kubelet takes them: a crash restarts a container at once, a second
one soon after backs off for 10 s, then 20 s, 40 s … 5 min; the restart comes when the back-off is
over and counts then; readiness conditions flip with the containers."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

from cacheproxy.kube.printers import print_pod
from cacheproxy.sim.workload import make_pod
from cacheproxy.sim.workload.lifecycle import (
    _crash,
    _flap_readiness,
    _refresh_readiness,
    _restart_backed_off,
    _unschedule,
)
from tests.unit.sim.workload_invariants import pod_problems

T0 = datetime(2026, 12, 1, 18, 0, 0, tzinfo=UTC)


def running_pod(seed: int = 1) -> dict[str, Any]:
    pod = make_pod(
        random.Random(seed), namespace="ns-0", app="app-1", node="node-1", containers=2, now=T0
    )
    for cs in pod["status"]["containerStatuses"]:  # a clean start
        cs["lastState"], cs["restartCount"] = {}, 0
    pod["metadata"] |= {"uid": "u-1", "creationTimestamp": "2026-12-01T18:00:00Z"}
    return pod


def main(pod: dict[str, Any]) -> dict[str, Any]:
    cs: dict[str, Any] = pod["status"]["containerStatuses"][0]
    assert cs["name"] == "main"
    return cs


def shown(pod: dict[str, Any], now: datetime) -> tuple[str, str, str]:
    """READY, STATUS and RESTARTS as ``kubectl get pods`` prints them."""
    cells = print_pod(pod, now)
    return cells[1], cells[2], cells[3]


def test_a_first_crash_restarts_the_container_at_once_and_counts() -> None:
    pod, rng = running_pod(), random.Random(1)
    at = T0 + timedelta(minutes=3)
    _crash(rng, pod, "main", at=at, reason="OOMKilled")
    cs = main(pod)
    assert cs["restartCount"] == 1
    assert cs["state"] == {"running": {"startedAt": "2026-12-01T18:03:00Z"}}
    last = cs["lastState"]["terminated"]
    assert (last["reason"], last["exitCode"]) == ("OOMKilled", 137)
    assert (last["startedAt"], last["finishedAt"]) == (
        "2026-12-01T18:00:00Z",
        "2026-12-01T18:03:00Z",
    )
    assert shown(pod, at + timedelta(seconds=20)) == ("2/2", "Running", "1 (20s ago)")
    assert pod_problems(pod, now=at) == []


def test_crashing_again_soon_backs_off_longer_each_time_up_to_five_minutes() -> None:
    pod, rng = running_pod(), random.Random(2)
    at = T0 + timedelta(seconds=5)
    _crash(rng, pod, "main", at=at)  # restarted at once
    back_offs = []
    for _ in range(7):
        _crash(rng, pod, "main", at=at)
        waiting = main(pod)["state"]["waiting"]
        assert waiting["reason"] == "CrashLoopBackOff"
        back_offs.append(int(waiting["message"].split()[1].removesuffix("s")))
        ref = f"{pod['metadata']['name']}_ns-0(u-1)"
        assert waiting["message"].endswith(f"restarting failed container=main pod={ref}")
        assert pod_problems(pod, now=at) == []
        assert shown(pod, at)[:2] == ("1/2", "CrashLoopBackOff")
        at += timedelta(seconds=back_offs[-1])
        assert _restart_backed_off(rng, pod, at=at)
        at += timedelta(seconds=3)
    assert back_offs == [10, 20, 40, 80, 160, 300, 300]
    assert main(pod)["restartCount"] == 8


def test_a_backed_off_container_starts_only_when_its_back_off_is_over() -> None:
    pod, rng = running_pod(), random.Random(3)
    _crash(rng, pod, "main", at=T0)
    _crash(rng, pod, "main", at=T0 + timedelta(seconds=4))  # back-off 10 s, until :14
    assert not _restart_backed_off(rng, pod, at=T0 + timedelta(seconds=13))
    assert main(pod)["restartCount"] == 1
    assert _restart_backed_off(rng, pod, at=T0 + timedelta(seconds=50))
    cs = main(pod)
    assert cs["restartCount"] == 2
    assert cs["state"] == {"running": {"startedAt": "2026-12-01T18:00:14Z"}}  # when it was due
    assert cs["ready"]
    assert shown(pod, T0 + timedelta(seconds=50)) == ("2/2", "Running", "2 (46s ago)")
    assert pod_problems(pod, now=T0 + timedelta(seconds=50)) == []


def test_a_crash_long_after_the_last_one_restarts_at_once() -> None:
    pod, rng = running_pod(), random.Random(4)
    _crash(rng, pod, "main", at=T0)
    _crash(rng, pod, "main", at=T0 + timedelta(minutes=11))
    assert main(pod)["restartCount"] == 2
    assert "running" in main(pod)["state"]


def test_the_ready_condition_moves_only_when_readiness_flips() -> None:
    pod, rng = running_pod(), random.Random(5)

    def ready() -> dict[str, Any]:
        return next(c for c in pod["status"]["conditions"] if c["type"] == "Ready")

    _flap_readiness(rng, pod, at=T0 + timedelta(seconds=30))  # one probe fails
    assert (ready()["status"], ready()["lastTransitionTime"]) == ("False", "2026-12-01T18:00:30Z")
    assert ready()["reason"] == "ContainersNotReady"
    _refresh_readiness(pod, T0 + timedelta(seconds=40))  # nothing changed
    assert (ready()["status"], ready()["lastTransitionTime"]) == ("False", "2026-12-01T18:00:30Z")
    _flap_readiness(rng, pod, at=T0 + timedelta(seconds=50))  # every probe passes again
    assert (ready()["status"], ready()["lastTransitionTime"]) == ("True", "2026-12-01T18:00:50Z")
    assert "reason" not in ready()
    assert pod_problems(pod, now=T0 + timedelta(seconds=50)) == []


def test_an_unschedulable_pod_is_pending_unbound_and_says_why() -> None:
    pod = make_pod(random.Random(6), namespace="ns-0", app="app-1", node="node-1", now=T0)
    _unschedule(pod, at=T0, nodes=5)
    assert "nodeName" not in pod["spec"]
    (scheduled,) = pod["status"]["conditions"]
    assert (scheduled["status"], scheduled["reason"]) == ("False", "Unschedulable")
    assert scheduled["message"].startswith("0/5 nodes are available: 5 Insufficient cpu.")
    assert shown(pod, T0) == ("0/2", "Pending", "0")
    assert [m["manager"] for m in pod["metadata"]["managedFields"]] == [
        "kube-controller-manager",
        "kube-scheduler",
    ]
    assert pod_problems(pod, now=T0, created=T0) == []
