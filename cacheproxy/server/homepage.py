"""The page at ``/`` for a browser, a dashboard a person keeps open: the daemon (version, uptime,
readiness), its upstream (URL, version, reachable, the last error and its fix), and per cached
resource its state with the reason, objects, bytes, changes/s, watchers, requests/s, the
consistent reads' wait, when upstream was last heard from, and charts of the last 15 minutes
(objects, changes/s, requests/s, watchers); links to ``/status``, ``/metrics`` and the API's
``/cacheproxy/docs``.

Negotiated on ``Accept``: a client that accepts ``text/html`` (a browser) gets this page; any
other (``curl``, kubectl, client libraries) gets the JSON ``Status`` 404 naming what is served, as
every path outside the API. The page is rendered on the server from the status document
(:func:`~.statuspage.cache_status`) and the samples of :class:`~.history.History`, in
O(resources * samples), with no script and nothing fetched from elsewhere (the charts are inline
SVG): it works offline and behind any proxy. It fits a 1 280-pixel-wide window and reloads
itself every :data:`REFRESH_SECONDS`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from html import escape
from typing import Any

from cacheproxy.server.history import History, Sample

__all__ = ["REFRESH_SECONDS", "render", "wants_html"]

REFRESH_SECONDS = 10
HTML = b"text/html; charset=utf-8"

_STYLE = """
*{box-sizing:border-box}
body{font-family:system-ui,sans-serif;margin:1.2rem auto;padding:0 1rem;max-width:1280px;
color:#222;font-size:.9rem}
h1{font-size:1.4rem;margin:0 0 .2rem}
h2{font-size:1.05rem;margin:1.4rem 0 .4rem}
p.sub{margin:.2rem 0;color:#555}
table{border-collapse:collapse;margin:.6rem 0;width:100%}
th,td{border-bottom:1px solid #ddd;padding:.3rem .4rem;text-align:right;vertical-align:top}
th:first-child,td:first-child{text-align:left}
th{background:#f4f4f4;font-weight:600}
td{white-space:nowrap}
td.state{text-align:left}
tr.failure td{text-align:left;padding-top:0;white-space:normal}
td.indexes{text-align:left;max-width:13rem;overflow-wrap:break-word;white-space:normal}
.ok{color:#17702a;font-weight:600}.no{color:#a31515;font-weight:600}
.busy{color:#9a5b00;font-weight:600}
.error{color:#a31515;text-align:left;font-size:.8rem;white-space:normal;overflow-wrap:anywhere}
code{background:#f4f4f4;padding:0 .2rem}
nav a{margin-right:1rem}
#upstream{margin:.3rem 0}
#charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(290px,1fr));gap:.6rem}
.card{border:1px solid #ddd;border-radius:4px;padding:.4rem .6rem}
.card h3{font-size:.9rem;margin:0 0 .2rem;font-family:monospace}
.chart{display:grid;grid-template-columns:6.5rem 1fr;align-items:center;font-size:.75rem;
color:#555;margin:3px 0}
.chart svg{width:100%;height:30px;display:block;background:#f3f6fa}
.chart polyline{fill:none;stroke:#2563a8;stroke-width:1.5;vector-effect:non-scaling-stroke}
"""

CHART_WIDTH = 240
CHART_HEIGHT = 30


def wants_html(accept: str) -> bool:
    """Whether the client asked for HTML (browsers list ``text/html`` first; API clients ask for
    JSON or anything)."""
    return "text/html" in accept


def _yes_no(value: bool, yes: str = "yes", no: str = "no") -> str:
    return f'<span class="ok">{yes}</span>' if value else f'<span class="no">{no}</span>'


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    size = float(n)
    for unit in ("KiB", "MiB", "GiB"):
        size /= 1024
        if size < 1024 or unit == "GiB":
            break
    return f"{size:.1f} {unit}"


def _duration(seconds: float) -> str:
    """``4.2 s``, ``3 min``, ``2 h 5 min``, ``3 d 4 h``."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes = int(seconds // 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min"
    return f"{hours // 24} d {hours % 24} h"


def _ago(value: float | None) -> str:
    return "never" if value is None else f"{_duration(value)} ago"


def _rate(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.0f}" if value >= 100 else f"{value:.1f}" if value >= 1 else f"{value:.2f}"


def _count(value: float) -> str:
    return f"{value:.0f}"


def _wait(reads: Mapping[str, Any] | None) -> str:
    """The consistent reads' wait over the last 15 minutes: p50 / p99 bucket bounds."""
    if reads is None:
        return "—"
    if not reads["reads"]:
        return "no reads"

    def bound(value: float | None) -> str:
        return "&gt;5 s" if value is None else f"≤{value * 1000:g} ms"

    return f"{bound(reads['waitP50Seconds'])} / {bound(reads['waitP99Seconds'])}"


def _failing(error: Mapping[str, Any] | None) -> str:
    """Why upstream does not answer the resource's lists or watches, and what to do."""
    if not error:
        return ""
    code = f"{error['code']} " if error["code"] is not None else ""
    return (
        f'<div class="error">{escape(error["verb"])}: {code}{escape(error["message"])} '
        f"(for {_duration(error['sinceSeconds'])}, {error['failures']} times)"
        f"<br>{escape(error['fix'])}</div>"
    )


def _state(res: Mapping[str, Any]) -> str:
    """``synced``, ``syncing``/``restored``, or in red when upstream fails it (the reason and
    the fix follow on a row of their own: :func:`_error_row`)."""
    if res.get("lastError"):
        label = "synced, failing" if res["synced"] else f"not synced ({res['phase']})"
        return f'<span class="no">{escape(label)}</span>'
    if res["synced"]:
        phase = res["phase"]
        extra = f" ({escape(phase)})" if phase not in ("watching", "syncing") else ""
        return f'<span class="ok">synced</span>{extra}'
    return f'<span class="busy">{escape(res["state"])}</span>'


def _error_row(name: str, res: Mapping[str, Any]) -> str:
    """Why upstream fails the resource and what to do, across the table under its row."""
    error = res.get("lastError")
    if not error:
        return ""
    return (
        f'<tr class="failure" id="error-{escape(name)}"><td colspan="{len(HEAD_CELLS)}">'
        f"{_failing(error)}</td></tr>"
    )


def _breakable(path: str) -> str:
    """A field path that may wrap after each dot (``metadata.<wbr>ownerReferences…``)."""
    return ".<wbr>".join(escape(part) for part in path.split("."))


def _row(name: str, res: Mapping[str, Any]) -> str:
    indexes = ", ".join(
        f"<code>{_breakable(i['path'])}</code> ({i['cardinality']})" for i in res["indexes"]
    )
    cells = [
        ("", f"<code>{escape(name)}</code>"),
        ("state", _state(res)),
        ("", str(res["objects"])),
        ("", _size(res["bytes"])),
        ("", _rate(res.get("eventsPerSecond"))),
        ("", str(res["watchers"])),
        ("", _rate(res.get("requestsPerSecond"))),
        ("", _wait(res.get("consistentReads"))),
        ("", _ago(res["stalenessSeconds"])),
        ("", _ago(res["secondsSinceLastEvent"])),
        ("indexes", indexes or "—"),
    ]
    tds = "".join(f'<td class="{cls}">{c}</td>' if cls else f"<td>{c}</td>" for cls, c in cells)
    return f'<tr id="resource-{escape(name)}">{tds}</tr>{_error_row(name, res)}'


def _polyline(points: Sequence[tuple[float, float]], start: float, span: float) -> str:
    """``points`` (time, value) as an SVG polyline over ``span`` seconds from ``start``."""
    top = max((v for _, v in points), default=0.0) or 1.0
    height = CHART_HEIGHT - 2
    coords = " ".join(
        f"{(t - start) / span * CHART_WIDTH:.1f},{CHART_HEIGHT - 1 - v / top * height:.1f}"
        for t, v in points
    )
    return f'<polyline points="{coords}"/>'


def _chart(
    label: str,
    points: Sequence[tuple[float, float]],
    *,
    start: float,
    span: float,
    shown: Callable[[float], str],
) -> str:
    latest = shown(points[-1][1]) if points else "—"
    top = shown(max(v for _, v in points)) if points else "—"
    title = f"{label}: now {latest}, highest {top} in the last {_duration(span)}"
    return (
        f'<div class="chart"><span>{escape(label)}<br><b>{latest}</b></span>'
        f'<svg viewBox="0 0 {CHART_WIDTH} {CHART_HEIGHT}" preserveAspectRatio="none" '
        f'role="img" aria-label="{escape(title)}"><title>{escape(title)}</title>'
        f"{_polyline(points, start, span)}</svg></div>"
    )


def _per_second(
    series: Sequence[Sample], value: Callable[[Sample], int]
) -> list[tuple[float, float]]:
    """The rate of a total between consecutive samples, at the later one's time."""
    return [
        (b.at, max(0, value(b) - value(a)) / (b.at - a.at))
        for a, b in itertools.pairwise(series)
        if b.at > a.at
    ]


def _charts(names: Sequence[str], history: History) -> str:
    """A card per resource: objects, changes/s, requests/s and watchers over the window."""
    cards = []
    for name in names:
        series = history.series(name)
        if not series:
            continue
        # Rates between the samples taken every step (one between the last and this moment
        # would be over however short a time has passed since).
        kept = history.kept(name)
        # The window, or the time since the first sample while that is shorter.
        start = max(series[-1].at - history.window, series[0].at)
        span = max(series[-1].at - start, 1e-9)
        charts = "".join(
            _chart(label, points, start=start, span=span, shown=shown)
            for label, points, shown in (
                ("objects", [(s.at, s.objects) for s in series], _count),
                ("changes/s", _per_second(kept, lambda s: s.changes), _rate),
                ("requests/s", _per_second(kept, lambda s: s.requests), _rate),
                ("watchers", [(s.at, s.watchers) for s in series], _count),
            )
        )
        cards.append(
            f'<div class="card" id="chart-{escape(name)}"><h3>{escape(name)}</h3>{charts}</div>'
        )
    return "\n".join(cards)


def _upstream(doc: Mapping[str, Any]) -> str:
    """Where upstream is, its version, whether it answers, and its most recent failure."""
    up = doc["upstream"]
    server = escape(up.get("server") or "the upstream API server")
    version = escape(str(up.get("version") or "version not known yet"))
    reachable = _yes_no(bool(up.get("reachable")), "reachable", "not reachable")
    error = up.get("lastError")
    last = ""
    if error:
        code = f"{error['code']} " if error["code"] is not None else ""
        last = (
            f'<div class="error" id="upstream-error">Last error: {escape(error["resource"])} '
            f"{escape(error['verb'])}: {code}{escape(error['message'])} "
            f"(for {_duration(error['sinceSeconds'])}). {escape(error['fix'])}</div>"
        )
    return (
        f'<p id="upstream">Upstream: <code>{server}</code> · {version} · '
        f'<span id="reachable">{reachable}</span></p>{last}'
    )


def _read_upstream(doc: Mapping[str, Any]) -> str:
    """The resources read through pass-through, most read first (nothing with it off)."""
    reads = doc.get("readUpstream")
    if reads is None:
        return ""
    auto = doc.get("autoCached") or []
    if not reads:
        body = '<tr><td colspan="3">nothing yet</td></tr>'
    else:
        body = "\n".join(
            f"<tr><td>{escape(r['resource'])}</td><td>{r['reads']}</td><td>{r['lastMinute']}</td></tr>"
            for r in reads
        )
    cached = (
        f'<p class="sub">Cached because they were read: {escape(", ".join(auto))}.</p>'
        if auto
        else ""
    )
    return f"""<h2>Read upstream, not cached (top {len(reads) or 10})</h2>
<table id="read-upstream">
<thead><tr><th>Resource</th><th>Reads</th><th>Last minute</th></tr></thead>
<tbody>
{body}
</tbody>
</table>
<p class="sub">Reads that passed through to the API server because the resource is not cached:
configure the ones read often (or set <code>passthrough.autoCache</code>).</p>
{cached}"""


HEAD_CELLS = (
    "Resource",
    "State",
    "Objects",
    "Bytes",
    "Changes/s",
    "Watchers",
    "Requests/s",
    "Consistent wait p50 / p99",
    "Last heard from upstream",
    "Last change",
    "Indexes (values)",
)
HEAD = "".join(f"<th>{cell}</th>" for cell in HEAD_CELLS)
LINKS = (
    ("/status", "/status (JSON)"),
    ("/metrics", "/metrics (Prometheus)"),
    ("/cacheproxy/docs", "/cacheproxy/docs (API)"),
    ("/readyz?verbose", "/readyz"),
)


def render(
    doc: Mapping[str, Any],
    *,
    version: Mapping[str, Any],
    api_server: str,
    history: History | None = None,
) -> bytes:
    """The page for the status document ``doc``; ``version`` (upstream's ``/version``) and
    ``api_server`` name upstream when ``doc`` does not; ``history``: the charts' samples."""
    resources = doc["resources"]
    if "upstream" not in doc:
        doc = {
            **doc,
            "upstream": {"server": api_server, "version": version.get("gitVersion")},
        }
    daemon = doc.get("daemon") or {}
    rows = "\n".join(_row(name, res) for name, res in resources.items())
    forwarding = "readUpstream" in doc
    kind = "cache" if forwarding else "read-only cache"
    writes = (
        "what the cache does not answer (writes, other resources) passes through to the API "
        "server as its caller"
        if forwarding
        else "writes go to the API server"
    )
    links = "".join(f'<a href="{href}">{text}</a>' for href, text in LINKS)
    charts = ""
    if history is not None:
        charts = f"""<h2>Last {_duration(history.window)} (or since the start)</h2>
<div id="charts">
{_charts(list(resources), history)}
</div>
<p class="sub">One sample every {history.step:g} s; the value under each name is the newest.</p>"""
    uptime = _duration(float(daemon.get("uptimeSeconds", 0.0)))
    page = f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="refresh" content="{REFRESH_SECONDS}">
<title>cacheproxy</title>
<style>{_STYLE}</style>
</head>
<body>
<h1>cacheproxy <span id="version">{escape(str(daemon.get("version", "")))}</span></h1>
<p class="sub">A {kind} of the Kubernetes API.
Ready: <span id="ready">{_yes_no(doc["ready"])}</span> · up <span id="uptime">{uptime}</span>
· {len(resources)} resources cached · this page reloads every {REFRESH_SECONDS} s.</p>
{_upstream(doc)}
<nav>{links}</nav>
<table id="resources">
<thead><tr>{HEAD}</tr></thead>
<tbody>
{rows}
</tbody>
</table>
{charts}
{_read_upstream(doc)}
<p class="sub">Last heard from upstream: when upstream last moved the resource (an event, a
bookmark or a relist). A quiet resource is heard from at each bookmark, about once a minute:
that is not being behind. Last change: the last event that changed an object. Changes/s and
requests/s: over the last minute. Consistent wait: how long the reads with resourceVersion
unset waited to be proven fresh over the last 15 minutes (the upper bounds of the histogram
buckets holding the median and the 99th percentile). Read the objects on the Kubernetes paths
(<code>/api</code>, <code>/apis</code>) with kubectl or any client; {writes}.</p>
</body>
</html>
"""
    return page.encode()
