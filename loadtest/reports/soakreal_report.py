"""The real-server soak's figures, verdict and Markdown report.

:class:`RealSoakReport` holds what a run gathered (episodes, the daemon's samples and log lines,
the writer's and the clients' figures); :func:`judge` turns what the clients did not check
themselves into violations (recovery time, ERROR lines, log storms, HTTP 500s, RSS, the
harness's own consistency); :meth:`RealSoakReport.render` writes the report: per fault kind the
daemon's recovery (p50 / max), its relists and the relists the clients saw, its log lines, what
``/readyz``, ``/status`` and the staleness metric said meanwhile; the clients; the invariants;
RSS over time; every episode.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from loadtest.clients.soakreal_writes import WriterStats
from loadtest.harness.soak_model import ClientStats, UpstreamModel, Violations
from loadtest.harness.soak_views import ViewChecker
from loadtest.harness.soakreal_daemon import LogLine, Sample
from loadtest.harness.soakreal_faults import Episode

__all__ = ["KNOWN_ERRORS", "KNOWN_ISSUES", "RealSoakReport", "judge"]

KNOWN_ERRORS: dict[str, tuple[str, ...]] = {}
"""ERROR log lines a fault explains: a substring of the message → the fault kinds that do."""
KNOWN_ISSUES: dict[str, str] = {
    "slow-recovery-backoff": "recovery waited out the reflector's escalated backoff",
}
"""Violation kinds of known, reported daemon behaviour → the name they are reported under:
tolerated and counted apart unless strict. The reflector's backoff (0.8 s doubling to 30 s, plus
up to 100 % jitter) doubles with each consecutive failure and is reset by a success (a synced
list, or a watch that delivered an event or bookmark); an outage of a few seconds still drives it
to a few seconds, so the first retry after the fault's end may come later than the bound. A slow
recovery counts here when the daemon spent at least half of it backing off (``/status`` phase
``backing-off``); any other slow recovery is a violation. (Before a success reset it, faults half
a minute apart drove it to its cap: recoveries of 12 s and more.)"""
_BACKING_OFF = "backing-off"
INVARIANTS = (
    ("rv-backwards", "no event out of RV order (per stream)"),
    ("duplicate-event", "no duplicate event"),
    ("rv-repeated", "no two events at one RV"),
    ("view-mismatch", "no lost event: every view equals upstream at its RV"),
    ("event-type", "event types agree with the view"),
    ("reappeared", "no deleted object reappearing"),
    ("daemon-vs-apiserver", "the daemon's lists equal the API server's at the same RV"),
    ("slow-recovery", "caught up within the bound after each fault (backoff apart)"),
    ("no-recovery", "caught up at all after each fault"),
    ("final-mismatch", "equal to upstream once the churn stopped"),
    ("clients-not-converged", "every client equal to upstream once the churn stopped"),
    ("http-500", "no HTTP 500"),
    ("unexpected-status", "no status a correct client cannot cause"),
    ("error-log", "no ERROR log line a fault does not explain"),
    ("log-storm", "no log storm"),
    ("rss", "RSS within its budget"),
)
_LOG_SAMPLE_WINDOW = 30.0
_SHORT = {"configmaps": "cm"}


@dataclass
class RealSoakReport:
    config: Any
    began: float
    ended: float = 0.0
    faults_began: float = 0.0
    faults_ended: float = 0.0
    first_sync_s: float = 0.0
    rss_after_sync: int = 0
    shutdown_s: float = 0.0
    kubectl: str = ""
    daemon_starts: int = 0
    episodes: list[Episode] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    log_lines: list[LogLine] = field(default_factory=list)
    unparsed_log: list[str] = field(default_factory=list)
    http_500: list[str] = field(default_factory=list)
    writer: WriterStats = field(default_factory=WriterStats)
    clients: Sequence[ViewChecker] = ()
    relay: dict[str, Any] = field(default_factory=dict)
    monotonic_offset: float = 0.0
    """``time.time() - time.monotonic()``: the clients log relists in monotonic time."""
    final_equal_s: float | None = None
    final_compare: str = ""
    clients_converged_s: float | None = None
    violations: Violations = field(default_factory=Violations)
    known: Counter[str] = field(default_factory=Counter)
    known_details: dict[str, list[str]] = field(default_factory=dict)
    setup: list[str] = field(default_factory=list)
    """How the run was set up (versions, machine, settings), one line each."""
    lag: Callable[[str, int, float], float] = field(default=lambda resource, rv, at: 0.0)
    """How far behind upstream a reader of ``resource`` at ``rv`` is at ``at`` (the age of the
    oldest write it has not seen): what staleness is compared with."""

    # ------------------------------------------------------------------ per episode

    def lines_in(self, start: float, end: float) -> list[LogLine]:
        return [line for line in self.log_lines if start <= line.at < end]

    def samples_in(self, start: float, end: float) -> list[Sample]:
        return [s for s in self.samples if start <= s.at < end]

    def client_relists_in(self, start: float, end: float) -> Counter[str]:
        counts: Counter[str] = Counter()
        for client in self.clients:
            for at, reason in client.relist_log:
                if start <= at + self.monotonic_offset < end:
                    counts[reason] += 1
        return counts

    def daemon_relists_in(self, start: float, end: float) -> Counter[str]:
        """The daemon's upstream relists (its reflectors' ``relisting (reason)`` lines)."""
        counts: Counter[str] = Counter()
        for line in self.lines_in(start, end):
            if ": relisting (" in line.message:
                counts[line.message.rsplit("(", 1)[1].rstrip(")")] += 1
        return counts

    # ------------------------------------------------------------------ rendering

    def render(self) -> str:
        cfg = self.config
        out = [f"- {line}" for line in self.setup]
        out += [
            "",
            f"{self.ended - self.began:.0f} s in all; faults for "
            f"{self.faults_ended - self.faults_began:.0f} s (seed {cfg.seed}); "
            f"{len(self.clients)} clients (kubectl: {self.kubectl}); "
            f"{cfg.rate:g} upstream writes/s; daemon started {self.daemon_starts} times, "
            f"first sync {self.first_sync_s:.2f} s, stopped in {self.shutdown_s:.2f} s.",
            "",
            "## Faults",
            "",
            "| fault | episodes | recovery p50 / max (s) | daemon relists | client relists "
            "(410 / other) | log lines (max per episode) | /readyz while out | max staleness "
            "pods / configmaps (s) | max lag pods / configmaps (s) | phases seen |",
            "|---|---:|---:|---:|---:|---:|---|---:|---:|---|",
        ]
        out += [self._fault_row(kind, eps) for kind, eps in self._by_kind().items()]
        out += [
            "",
            "Recovery: from the fault's end (the API server ready again, etcd resumed, the link "
            "restored, the new daemon listening, etcd compacted and the link cut) until "
            "the daemon's pods and configmaps lists equal upstream at an RV above every write "
            "recorded at that end; it includes waiting for the next write of each resource "
            "(a few tenths of a second at this churn). Daemon relists: its reflectors' "
            "`relisting (…)` log lines; client relists: on a 410 / for any other reason, in "
            "the fault's window (until the next fault). `/readyz` and staleness: samples every "
            "0.5 s from the fault's start until the daemon caught up. Lag: how long before the "
            "sample the oldest write the daemon had not seen yet was answered to the harness "
            "(what staleness would be if it measured how far behind upstream the cache is).",
        ]
        out += ["", "## Clients", "", *self._client_rows()]
        out += ["", "## Invariants", "", *self._invariant_rows()]
        out += ["", "## RSS of the daemon", "", *self._rss_rows()]
        out += ["", "## Log lines per fault", "", *self._log_rows()]
        out += ["", "## Upstream (the harness's writes)", "", *self._writer_rows()]
        findings = self.findings()
        if findings:
            out += ["", "## Findings", ""] + [f"- {f}" for f in findings]
        out += ["", "## Every episode", "", *self._episode_rows()]
        for kind, details in self.violations.details.items():
            out += ["", f"Violations `{kind}` ({self.violations.counts[kind]}), first ones:"]
            out += [f"- {d}" for d in details]
        return "\n".join(out)

    def findings(self) -> list[str]:
        """What the figures say about the daemon's behaviour, beyond pass or fail."""
        found = []
        slow = self.known_details.get(KNOWN_ISSUES["slow-recovery-backoff"], [])
        if slow:
            found.append(
                f"{self.known[KNOWN_ISSUES['slow-recovery-backoff']]} recoveries over "
                f"{self.config.recovery_bound:g} s, each mostly spent backing off with upstream "
                "healthy again: the reflector's backoff doubles with each consecutive failure "
                "during the fault (up to 30 s, plus up to 100 % jitter) and only a success "
                "resets it, so the first retry after the fault may come late. "
                + " ".join(f"[{d}]" for d in slow[:3])
            )
        for e in self.episodes:
            if e.kind != "etcd-pause":
                continue
            out = self.samples_in(e.began, e.restored)
            peak = max((max(s.staleness.values(), default=0.0) for s in out), default=0.0)
            not_ready = sum(1 for s in out if s.readyz == 503)
            found.append(
                f"etcd paused ({e.detail}): staleness peaked at {peak:.1f} s; /readyz 503 in "
                f"{not_ready} of {len(out)} samples. The API server keeps serving its watch "
                "cache and sends each watch a bookmark just before its timeout, which the "
                "daemon counts as hearing from upstream, though no newer state exists then "
                "(writes wait for etcd)."
            )
        worst: dict[str, tuple[float, float, str, float]] = {}
        for e in self.episodes:
            for s in self.samples_in(e.began, e.caught_up or e.ended):
                for r, rv in s.rvs.items():
                    behind = self.lag(r, rv, s.at)
                    said = s.staleness.get(r, 0.0)
                    if behind - said > worst.get(e.kind, (0.0, 0.0, "", 0.0))[0]:
                        worst[e.kind] = (behind - said, behind, r, said)
        for kind, (gap, behind, r, said) in sorted(worst.items()):
            if gap > 1.0:
                found.append(
                    f"{kind}: the daemon's {r} were {behind:.1f} s behind upstream (the oldest "
                    f"write it had not seen) while its staleness said {said:.1f} s: staleness "
                    "counts the time since upstream last sent anything, so a link that delivers "
                    "late but steadily keeps it low."
                )
        upstream = sum(
            sum(self.daemon_relists_in(e.began, e.ended).values()) for e in self.episodes
        )
        downstream = sum(
            n
            for e in self.episodes
            if e.kind != "daemon-kill"
            for r, n in self.client_relists_in(e.began, e.ended).items()
            if r.endswith("410")
        )
        found.append(
            f"{upstream} upstream relists of the daemon reached the clients as {downstream} "
            "relists (410s): the daemon delivers a relist as events."
        )
        return found

    def _by_kind(self) -> dict[str, list[Episode]]:
        kinds: dict[str, list[Episode]] = {}
        for episode in self.episodes:
            kinds.setdefault(episode.kind, []).append(episode)
        return kinds

    def _fault_row(self, kind: str, episodes: list[Episode]) -> str:
        recoveries = [e.recovery for e in episodes if e.recovery is not None]
        recovery = (
            f"{statistics.median(recoveries):.2f} / {max(recoveries):.2f}"
            if recoveries
            else "never"
        )
        relists: Counter[str] = Counter()
        clients: Counter[str] = Counter()
        lines = []
        readyz: Counter[str] = Counter()
        stale: dict[str, float] = {}
        lag: dict[str, float] = {}
        phases: set[str] = set()
        for e in episodes:
            relists.update(self.daemon_relists_in(e.began, e.ended))
            clients.update(self.client_relists_in(e.began, e.ended))
            lines.append(len(self.lines_in(e.began, e.ended)))
            out_until = e.caught_up if e.caught_up is not None else e.ended
            for s in self.samples_in(e.began, out_until):
                readyz[str(s.readyz) if s.readyz is not None else "no answer"] += 1
                for r, v in s.staleness.items():
                    stale[r] = max(stale.get(r, 0.0), v)
                for r, rv in s.rvs.items():
                    lag[r] = max(lag.get(r, 0.0), self.lag(r, rv, s.at))
                phases.update(f"{_SHORT.get(r, r)} {p}" for r, p in s.phases.items())
        gone = sum(n for r, n in clients.items() if r.endswith("410"))
        return (
            f"| {kind} | {len(episodes)} | {recovery} | {sum(relists.values())} | "
            f"{gone} / {sum(clients.values()) - gone} | {sum(lines)} ({max(lines, default=0)}) | "
            f"{_counts(readyz)} | {stale.get('pods', 0):.1f} / {stale.get('configmaps', 0):.1f} | "
            f"{lag.get('pods', 0):.1f} / {lag.get('configmaps', 0):.1f} | "
            f"{', '.join(sorted(phases)) or '-'} |"
        )

    def _client_rows(self) -> list[str]:
        rows = [
            "| client | selection | events | checked | checkpoints (waited) | lists / "
            "watch-lists / watches | relists by reason | retries |",
            "|---|---|---:|---:|---:|---|---|---|",
        ]
        total = ClientStats()
        for c in self.clients:
            s = c.stats
            total.add(s)
            rows.append(
                f"| {c.name} | {c.selection.name} | {s.events} | {s.events_checked} | "
                f"{s.checkpoints} ({s.deferred}) | {s.lists} / {s.watch_lists} / {s.watches} | "
                f"{_counts(s.relists)} | {_counts(s.retries)} |"
            )
        rows.append(
            f"| **all** | | {total.events} | {total.events_checked} | {total.checkpoints} "
            f"({total.deferred}, {total.deferred_dropped} dropped) | {total.lists} / "
            f"{total.watch_lists} / {total.watches} | {_counts(total.relists)} | "
            f"{_counts(total.retries)} |"
        )
        upstream = sum(
            sum(self.daemon_relists_in(e.began, e.ended).values()) for e in self.episodes
        )
        downstream = sum(
            n
            for e in self.episodes
            if e.kind != "daemon-kill"
            for r, n in self.client_relists_in(e.began, e.ended).items()
            if r.endswith("410")
        )
        rows += [
            "",
            f"Daemon relists upstream: {upstream}; client relists on 410 after them (daemon "
            f"kills excluded: a new daemon has no history to resume from): {downstream}.",
        ]
        if self.final_equal_s is not None:
            rows.append(
                f"Once the churn stopped: the daemon equal to the API server after "
                f"{self.final_equal_s:.2f} s ({self.final_compare}); every client equal to "
                f"upstream after {_seconds(self.clients_converged_s)} s."
            )
        return rows

    def _invariant_rows(self) -> list[str]:
        rows = ["| invariant | violations |", "|---|---:|"]
        for kind, text in INVARIANTS:
            rows.append(f"| {text} | {self.violations.counts.get(kind, 0)} |")
        others = {k: n for k, n in self.violations.counts.items() if k not in dict(INVARIANTS)}
        if others:
            rows.append(f"| other | {_counts(others)} |")
        rows.append(f"| **total** | **{self.violations.total}** |")
        if self.known:
            rows += [
                "",
                f"Known issues, tolerated (`--strict` counts them): {_counts(self.known)}.",
            ]
            for name, details in self.known_details.items():
                rows += ["", f"`{name}`, first ones:"] + [f"- {d}" for d in details]
        return rows

    def _rss_rows(self) -> list[str]:
        by_generation: dict[int, int] = {}
        points: list[str] = []
        next_at = self.began
        for s in self.samples:
            if not s.rss:
                continue
            by_generation[s.generation] = max(by_generation.get(s.generation, 0), s.rss)
            if s.at >= next_at:
                points.append(f"{s.at - self.began:.0f}: {s.rss / 2**20:.0f}")
                next_at = s.at + _LOG_SAMPLE_WINDOW
        peaks = ", ".join(f"#{g} {v / 2**20:.0f}" for g, v in sorted(by_generation.items()))
        return [
            f"After the first sync {self.rss_after_sync / 2**20:.0f} MiB; peak per start "
            f"(MiB): {peaks or '-'}; budget {self.config.rss_budget_mib:g} MiB.",
            "",
            f"Over time (s: MiB): {', '.join(points) or '-'}.",
        ]

    def _log_rows(self) -> list[str]:
        rows = []
        for kind, episodes in self._by_kind().items():
            messages: Counter[str] = Counter()
            for e in episodes:
                for line in self.lines_in(e.began, e.ended):
                    messages[f"{line.level} {_shape(line.message)}"] += 1
            shown = "; ".join(f"{n} x {m}" for m, n in messages.most_common(6)) or "none"
            rows.append(f"- **{kind}** ({len(episodes)} episodes): {shown}")
        levels = Counter(line.level for line in self.log_lines)
        rows.append(f"- all lines by level: {_counts(levels)}")
        return rows

    def _writer_rows(self) -> list[str]:
        w = self.writer
        lat = sorted(w.latencies)
        p50 = lat[len(lat) // 2] * 1000 if lat else 0.0
        p99 = lat[int(len(lat) * 0.99)] * 1000 if lat else 0.0
        return [
            f"Writes: {_counts(w.writes)}.",
            f"Latency p50 / p99 / max: {p50:.1f} / {p99:.1f} / "
            f"{(lat[-1] if lat else 0) * 1000:.0f} ms.",
            f"Not applied: {_counts(w.refused)}. Outcome unknown, then resolved: "
            f"{_counts(w.ambiguous)} (longest {w.longest_resolution:.1f} s).",
            f"Relay: {self.relay}.",
        ]

    def _episode_rows(self) -> list[str]:
        rows = [
            "| at (s) | fault | detail | recovery (s) | daemon vs API server |",
            "|---:|---|---|---:|---|",
        ]
        for e in self.episodes:
            rows.append(
                f"| {e.began - self.began:.0f} | {e.kind} | {e.detail} | "
                f"{_seconds(e.recovery)} | {e.compare} |"
            )
        return rows

    def to_json(self) -> dict[str, Any]:
        return {
            "episodes": [
                {
                    "kind": e.kind,
                    "at": e.began - self.began,
                    "detail": e.detail,
                    "recovery_s": e.recovery,
                    "compare": e.compare,
                    "daemon_relists": dict(self.daemon_relists_in(e.began, e.ended)),
                    "client_relists": dict(self.client_relists_in(e.began, e.ended)),
                    "log_lines": len(self.lines_in(e.began, e.ended)),
                }
                for e in self.episodes
            ],
            "violations": dict(self.violations.counts),
            "known": dict(self.known),
            "rss": [(s.at - self.began, s.generation, s.rss) for s in self.samples if s.rss],
            "writes": dict(self.writer.writes),
            "clients": {c.name: {"events": c.stats.events} for c in self.clients},
        }


def judge(
    report: RealSoakReport,
    violations: Violations,
    models: Mapping[str, UpstreamModel],
    *,
    strict: bool,
) -> None:
    """What the clients did not check themselves, as violations (see the module docstring)."""
    cfg, record = report.config, violations.record
    report.violations = violations
    for e in report.episodes:
        if e.recovery is not None and e.recovery > cfg.recovery_bound:
            assert e.caught_up is not None
            out = report.samples_in(e.restored, e.caught_up)
            backing = sum(1 for s in out if _BACKING_OFF in s.phases.values())
            share = backing / len(out) if out else 0.0
            record(
                "slow-recovery-backoff" if share >= 0.5 else "slow-recovery",
                f"{e.kind} ({e.detail}) at {e.began - report.began:.0f} s: caught up "
                f"{e.recovery:.2f} s after it ended (bound {cfg.recovery_bound:g} s), backing "
                f"off {share:.0%} of that time; daemon relists "
                f"{_counts(report.daemon_relists_in(e.began, e.ended))}",
            )
        lines = report.lines_in(e.began, e.ended)
        if len(lines) > cfg.storm_lines:
            record("log-storm", f"{e.kind}: {len(lines)} lines: {_shape(lines[-1].message)}")
    for line in report.log_lines:
        if line.level not in ("error", "critical"):
            continue
        episode = _episode_at(report.episodes, line.at)
        kinds = next((k for sub, k in KNOWN_ERRORS.items() if sub in line.message), ())
        if episode is None or episode.kind not in kinds:
            where = f"during {episode.kind}" if episode else "outside any fault"
            record("error-log", f"{where}: {line.logger}: {line.message[:300]}")
    for text in report.http_500:
        record("http-500", f"probe: {text[:300]}")
    peak = max((s.rss for s in report.samples), default=0)
    if peak > cfg.rss_budget_mib * 2**20:
        record("rss", f"peak {peak / 2**20:.0f} MiB > {cfg.rss_budget_mib:g} MiB")
    for text in report.unparsed_log:
        record("daemon-output", text)
    for name, model in models.items():
        for text in model.errors:
            record("model", f"{name}: {text}")
    for text in report.writer.harness_errors:
        record("harness", text)
    for kind, name in KNOWN_ISSUES.items():
        if not strict and kind in violations.counts:
            report.known[name] += violations.counts.pop(kind)
            report.known_details[name] = violations.details.pop(kind, [])


def _episode_at(episodes: Iterable[Episode], at: float) -> Episode | None:
    return next((e for e in episodes if e.began <= at < (e.ended or at + 1)), None)


def _shape(message: str) -> str:
    """A message without its numbers and URLs (so the same event counts as one line kind)."""
    words = []
    for word in message.split()[:14]:
        if any(ch.isdigit() for ch in word) or "://" in word:
            word = "…"
        words.append(word)
    return " ".join(words)


def _counts(counter: Mapping[Any, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counter.items(), key=str)) or "none"


def _seconds(value: float | None) -> str:
    return "never" if value is None else f"{value:.2f}"
