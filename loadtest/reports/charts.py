"""The serving benchmark's PNG charts (matplotlib, the optional ``bench`` extra).

- ``latency.png``: p50 latency at concurrency 1 against the number of pods, one panel per
  scenario, one line per server (the floor beside the full list).
- ``fanout.png``: p99 delivery lag against the offered deliveries/s (watchers x events/s), one
  line per server and watcher count; the 1 s budget drawn across. A point where deliveries were
  lost is drawn at the top of the axis with an ``x``.

Without matplotlib, :func:`write_charts` writes nothing and returns no names.
"""

from __future__ import annotations

import math
from pathlib import Path

from loadtest.clients.fanout import LAG_BUDGET
from loadtest.harness.serve_records import ServeResult

__all__ = ["write_charts"]

_SCENARIOS = (
    ("full", "full list"),
    ("namespace", "namespace list"),
    ("label", "label list (app=app-K)"),
    ("field", "index field list (node-K)"),
    ("get", "single GET"),
    ("pages", "limit=500 page walk"),
)
_STYLE = {"daemon": "C0", "simulator": "C1", "naive": "C3", "floor": "C2", "broadcaster": "C2"}


def write_charts(result: ServeResult, out: Path) -> list[str]:
    """The charts' file names (in ``out``); empty when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FormatStrFormatter
    except ImportError:
        return []
    names = []
    if result.sizes:
        fig, axes = plt.subplots(2, 3, figsize=(14, 8), constrained_layout=True)
        for ax, (key, title) in zip(axes.flat, _SCENARIOS, strict=True):
            servers = ("daemon", "simulator", "naive") + (("floor",) if key == "full" else ())
            for server in servers:
                xs, ys = [], []
                for size in result.sizes:
                    m = size.find(server, key, 1)
                    if m is not None and math.isfinite(m.p50):
                        xs.append(size.pods)
                        ys.append(m.p50 * 1000)
                if xs:
                    ax.plot(xs, ys, "o-", color=_STYLE[server], label=server)
            ax.set_title(title)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
            ax.set_xlabel("pods")
            ax.set_ylabel("p50 ms, 1 client")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize="small")
        fig.suptitle("List / get latency against the number of cached pods")
        fig.savefig(out / "latency.png", dpi=90)
        plt.close(fig)
        names.append("latency.png")
    if result.fanout:
        fig, ax = plt.subplots(figsize=(9, 6), constrained_layout=True)
        finite = [p.lag_p99 for p in result.fanout if math.isfinite(p.lag_p99)]
        top = max([LAG_BUDGET * 4.0, *finite])
        series = sorted({(p.target, p.watchers) for p in result.fanout})
        for i, (target, watchers) in enumerate(series):
            points = [p for p in result.fanout if (p.target, p.watchers) == (target, watchers)]
            offered = [p.offered_per_s for p in points]
            lags = [p.lag_p99 if math.isfinite(p.lag_p99) else top for p in points]
            style = "-" if watchers >= 1000 else "--"
            ax.plot(
                offered,
                lags,
                style,
                color=_STYLE.get(target, f"C{i}"),
                label=f"{target}, {watchers} watchers",
            )
            for p, x, y in zip(points, offered, lags, strict=True):
                ax.plot(
                    [x],
                    [y],
                    "x" if not math.isfinite(p.lag_p99) else "o",
                    color=_STYLE.get(target, f"C{i}"),
                )
        ax.axhline(LAG_BUDGET, color="grey", linestyle=":", label=f"{LAG_BUDGET:g} s budget")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.xaxis.set_major_formatter(FormatStrFormatter("%g"))
        ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
        ax.set_xlabel("offered deliveries/s (watchers x events/s)")
        ax.set_ylabel("p99 delivery lag, s")
        ax.set_title("Watch fan-out: p99 lag from creation to the client's read")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="small")
        fig.savefig(out / "fanout.png", dpi=90)
        plt.close(fig)
        names.append("fanout.png")
    return names
