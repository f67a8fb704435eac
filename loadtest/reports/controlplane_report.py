"""The control-plane benchmark's report (``controlplane.md``) from its JSON record: medians per
mode of every figure :mod:`loadtest.scenarios.controlplane` measured, the noise direct-b shows,
and the restart phase."""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Callable, Sequence
from typing import Any

from loadtest.reports.figures import X

__all__ = ["render_report"]

Run = dict[str, Any]


def _median(values: Sequence[float | None]) -> float:
    present = [v for v in values if v is not None and math.isfinite(v)]
    return statistics.median(present) if present else math.nan


def _fmt(value: float, digits: int = 3) -> str:
    return f"{value:.{digits}f}" if math.isfinite(value) else "n/a"


def _ms(value: float | None) -> str:
    return f"{value * 1000:.1f}" if value is not None and math.isfinite(value) else "n/a"


def _by_mode(result: dict[str, Any]) -> dict[str, list[Run]]:
    out: dict[str, list[Run]] = {mode: [] for mode in result["modes"]}
    for run in result["runs"]:
        out.setdefault(run["mode"], []).append(run)
    return out


def _step_seconds(run: Run, *, name: str) -> float | None:
    found = [s for s in run["steps"] if s["name"] == name and s["converged"]]
    return found[0]["seconds"] if found else None


def _total(run: Run) -> float | None:
    steps = run["steps"]
    if not steps or not all(s["converged"] for s in steps):
        return None
    return float(sum(s["seconds"] for s in steps))


def _field(group: str, key: str, absent: float | None = None) -> Callable[[Run], float | None]:
    """What a run's record holds under ``group`` and ``key`` (``absent`` when nothing)."""

    def get(run: Run) -> float | None:
        value = run.get(group, {}).get(key)
        return absent if value is None else float(value)

    return get


def _latency(run: Run, key: str, q: str) -> float | None:
    value = run.get(key, {}).get(q)
    return None if value is None else float(value)


def _table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _figure(
    modes: dict[str, list[Run]], label: str, get: Callable[[Run], float | None], digits: int = 3
) -> list[str]:
    return [label, *(_fmt(_median([get(r) for r in runs]), digits) for runs in modes.values())]


def render_report(result: dict[str, Any]) -> str:
    modes = _by_mode(result)
    names = list(modes)
    step_names = [s["name"] for s in max(result["runs"], key=lambda r: len(r["steps"]))["steps"]]
    out = [
        "# The control plane direct and through cacheproxy",
        "",
        f"`{result['command']}` on {result['date']}: kube-apiserver, kube-controller-manager and "
        f"kube-scheduler {result['server']}; cacheproxy {result['cacheproxy']}. "
        f"Modes alternated, {len(result['runs']) // max(len(modes), 1)} run(s) each, every run on "
        "a fresh etcd + kube-apiserver (audit log on in every mode) with fresh controllers and "
        "the fake kubelet (2 nodes); the steps are judged on the API server. "
        "Figures are medians over the runs.",
        "",
        "**through** caches: " + ", ".join(f"`{r}`" for r in result["cached_resources"]) + ".",
        "",
    ]
    unconverged = [
        f"{r['mode']} run {r['run']}: {s['name']}: {s['detail']}"
        for r in result["runs"]
        for s in r["steps"]
        if not s["converged"]
    ]
    out += ["## Convergence", ""]
    if unconverged:
        out += ["Steps that did not converge:", "", *(f"- {u}" for u in unconverged), ""]
    else:
        out += [f"Every step converged in every run ({len(result['runs'])} runs).", ""]

    out += ["## Time per step (seconds, median)", ""]
    head = ["step", *names]
    if "direct" in modes and "through" in modes:
        head.append("through / direct")
    if "direct-b" in modes:
        head.append("noise: direct-b less direct, absolute")
    rows = []
    for name in [*step_names, "total"]:
        get = _total if name == "total" else functools.partial(_step_seconds, name=name)
        medians = {m: _median([get(r) for r in runs]) for m, runs in modes.items()}
        row = [f"**{name}**" if name == "total" else name, *(_fmt(medians[m]) for m in names)]
        if "direct" in modes and "through" in modes:
            ratio = medians["through"] / medians["direct"] if medians["direct"] > 0 else math.nan
            row.append(f"{ratio:.2f}{X}" if math.isfinite(ratio) else "n/a")
        if "direct-b" in modes:
            row.append(_fmt(abs(medians["direct-b"] - medians["direct"])))
        rows.append(row)
    out += [*_table(head, rows), ""]

    out += [
        "## Retries and conflicts (count per run, median)",
        "",
        "kube-controller-manager's `-v=2` log lines over the scenario, by what they say; and the "
        "writes the API server answered 409 Conflict (its audit log).",
        "",
    ]
    signs = list(result["runs"][0]["kcm"]) if result["runs"] else []
    rows = [_figure(modes, f"kcm log: {sign}", _field("kcm", sign), 0) for sign in signs]
    rows.append(
        _figure(
            modes,
            "kcm log: stale cache + conflicts (all above)",
            lambda r: sum(r["kcm"].values()),
            0,
        )
    )
    rows.append(
        _figure(modes, "409 to kcm + scheduler (audit)", lambda r: r["conflicts"]["controllers"], 0)
    )
    rows.append(
        _figure(modes, "409 to the kubelet (audit)", lambda r: r["conflicts"]["kubelet"], 0)
    )
    out += [*_table(["figure", *names], rows), ""]

    sources = sorted({f for r in result["runs"] for f in r.get("kcm_by_source", {})})
    if sources:
        out += [
            "The same kcm log lines by the source file that logged them (which controller "
            "retried; median per run):",
            "",
        ]
        rows = [_figure(modes, f"`{f}`", _field("kcm_by_source", f, 0), 0) for f in sources]
        out += [*_table(["source", *names], rows), ""]

    out += [
        "## Write latency (ms, median of each run's figure)",
        "",
        "Writes (create, update, patch, delete) of the controllers and the kubelet. *At the API "
        "server*: received → answered, from its audit log (loopback to it not included). *At "
        "cacheproxy*: the daemon's `cacheproxy_passthrough_request_duration_seconds`, arrival → "
        "end of answer (upstream included), interpolated in its buckets (1, 2.5, 5, 10, 25 ms …): "
        "coarse. *cached*: writes on a resource the daemon caches (its subresources included: "
        "`pods/status`, `pods/binding`); *uncached*: on the others (Events' new API, "
        "PodTemplates, the write probe's …).",
        "",
    ]
    rows = []
    for kind, what in (("", "all"), ("_cached", "cached"), ("_uncached", "uncached")):
        for where, key in (
            ("API server", "writes_at_apiserver"),
            ("cacheproxy", "writes_at_daemon"),
        ):
            for q in ("p50", "p90"):
                rows.append(
                    [
                        f"{what}: at {where} {q}",
                        *(
                            _ms(_median([_latency(r, key + kind, q) for r in runs]))
                            for runs in modes.values()
                        ),
                    ]
                )
        rows.append(
            _figure(
                modes, f"{what}: writes (count)", _field(f"writes_at_apiserver{kind}", "count"), 0
            )
        )
    out += [*_table(["figure", *names], rows), ""]

    probed = [r["probe"] for r in result["runs"] if "probe" in r]
    if probed:
        out += [
            "## Writes of an uncached resource, as a client sees them (ms, median of the runs)",
            "",
            "During each run through cacheproxy, a probe client patches a PodTemplate (a kind the "
            "daemon does not cache) about five times a second, straight to the API server and "
            "through the daemon by turns, with the same client settings (HTTP/1.1 over TLS): "
            "what pass-through adds to a write under the running control plane's load. (Direct "
            "runs probe the API server alone, so it carries the same load in every mode; the "
            "daemon's CPU includes the probe's writes through it.)",
            "",
        ]
        rows = []
        for q in ("p50", "p90"):
            direct = _median([p["direct"][q] for p in probed])
            through = _median([p["through"][q] for p in probed])
            rows.append([q, _ms(direct), _ms(through), f"{(through - direct) * 1000:+.2f}"])
        counts = [sum(p[side]["count"] for p in probed) for side in ("direct", "through")]
        rows.append(["writes (all runs)", *map(str, counts), ""])
        out += [*_table(["figure", "direct", "through cacheproxy", "added"], rows), ""]

    out += [
        "## TCP connections (established, at the end of the scenario, median)",
        "",
    ]
    processes = sorted({p for r in result["runs"] for p in r["connections"]})
    rows = [_figure(modes, p, _field("connections", p), 0) for p in processes]
    out += [*_table(["process", *names], rows), ""]

    out += ["## CPU seconds over the scenario (median)", ""]
    processes = sorted({p for r in result["runs"] for p in r["cpu"]})
    rows = [_figure(modes, p, _field("cpu", p), 2) for p in processes]
    rows.append(
        _figure(
            modes,
            "kube-controller-manager + kube-scheduler",
            lambda r: (
                r["cpu"].get("kube-controller-manager", 0) + r["cpu"].get("kube-scheduler", 0)
            ),
            2,
        )
    )
    out += [*_table(["process", *names], rows), ""]

    restarts = [r["restart"] for r in result["runs"] if "restart" in r]
    if restarts:
        out += [
            "## Restart under running controllers",
            "",
            "After the scenario: a Deployment of 1 available, SIGTERM to cacheproxy, a new one on "
            "the same port, then a scale to 10, timed until its 10 pods are scheduled.",
            "",
        ]
        rows = [
            [
                str(i + 1),
                _fmt(r["shutdown_seconds"], 2),
                _fmt(r["new_daemon_ready_seconds"], 2),
                _fmt(r["scale_to_10_scheduled_seconds"], 2),
                str(r["scheduled"]),
                str(r.get("kcm_relists", "n/a")),
                str(r["error_lines"]),
            ]
            for i, r in enumerate(restarts)
        ]
        out += _table(
            [
                "run",
                "shutdown s",
                "new daemon ready s",
                "scale to 10 scheduled s",
                "pods scheduled",
                "kcm informers relisted",
                "ERROR lines",
            ],
            rows,
        )
        firsts = [line for r in restarts for line in r["first_errors"]][:3]
        if firsts:
            out += ["", "First ERROR lines:", "", "```", *(line[:300] for line in firsts), "```"]
        out.append("")
    return "\n".join(out)
