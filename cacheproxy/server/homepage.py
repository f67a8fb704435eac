"""The page at ``/`` for a browser: what is cached, whether it is synced, how many objects, how
stale, how many watchers, and links to ``/status``, ``/metrics`` and the API's ``/cacheproxy/docs``.

Negotiated on ``Accept``: a client that accepts ``text/html`` (a browser) gets this page; any
other (``curl``, kubectl, client libraries) gets the JSON ``Status`` 404 naming what is served, as
every path outside the API. The page is rendered on the server from the status document
(:func:`~.statuspage.cache_status`), in O(resources), with no script and nothing fetched from
elsewhere: it works offline and behind any proxy. It reloads itself every
:data:`REFRESH_SECONDS`.
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any

__all__ = ["REFRESH_SECONDS", "render", "wants_html"]

REFRESH_SECONDS = 10
HTML = b"text/html; charset=utf-8"

_STYLE = """
body{font-family:system-ui,sans-serif;margin:2rem;color:#222}
h1{font-size:1.4rem;margin-bottom:.2rem}
p.sub{margin-top:0;color:#555}
table{border-collapse:collapse;margin:1rem 0}
th,td{border-bottom:1px solid #ddd;padding:.35rem .7rem;text-align:right}
th:first-child,td:first-child{text-align:left}
th{background:#f4f4f4}
.ok{color:#17702a;font-weight:600}.no{color:#a31515;font-weight:600}
.error{color:#a31515;text-align:left;font-size:.85rem;max-width:32rem;white-space:normal}
code{background:#f4f4f4;padding:0 .2rem}
nav a{margin-right:1rem}
"""


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


def _seconds(value: float | None) -> str:
    return "never" if value is None else f"{value:.1f} s"


def _failing(error: Mapping[str, Any] | None) -> str:
    """Why upstream does not answer the resource's lists or watches, and what to do."""
    if not error:
        return ""
    code = f"{error['code']} " if error["code"] is not None else ""
    return (
        f'<div class="error">{escape(error["verb"])}: {code}{escape(error["message"])} '
        f"(for {error['sinceSeconds']:.0f} s, {error['failures']} times)"
        f"<br>{escape(error['fix'])}</div>"
    )


def _row(name: str, res: Mapping[str, Any]) -> str:
    indexes = ", ".join(
        f"<code>{escape(i['path'])}</code> ({i['cardinality']})" for i in res["indexes"]
    )
    cells = [
        f"<code>{escape(name)}</code>",
        _yes_no(res["synced"]) + _failing(res.get("lastError")),
        str(res["objects"]),
        _size(res["bytes"]),
        escape(res["resourceVersion"]),
        _seconds(res["stalenessSeconds"]),
        _seconds(res["secondsSinceLastEvent"]),
        str(res["watchers"]),
        str(res["relists"]),
        indexes or "—",
    ]
    return "<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"


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


def render(doc: Mapping[str, Any], *, version: Mapping[str, Any], api_server: str) -> bytes:
    """The page for the status document ``doc``; ``version`` is upstream's ``/version``."""
    resources = doc["resources"]
    upstream = escape(api_server) if api_server else "the upstream API server"
    git_version = escape(str(version.get("gitVersion", "?")))
    head = (
        "<th>Resource</th><th>Synced</th><th>Objects</th><th>Bytes</th>"
        "<th>resourceVersion</th><th>Staleness</th><th>Last change</th><th>Watchers</th>"
        "<th>Relists</th><th>Indexes (values)</th>"
    )
    rows = "\n".join(_row(name, res) for name, res in resources.items())
    forwarding = "readUpstream" in doc
    kind = "cache" if forwarding else "read-only cache"
    writes = (
        "what the cache does not answer (writes, other resources) passes through to the API "
        "server as its caller"
        if forwarding
        else "writes go to the API server"
    )
    links = "".join(
        f'<a href="{href}">{text}</a>'
        for href, text in (
            ("/status", "/status (JSON)"),
            ("/metrics", "/metrics (Prometheus)"),
            ("/cacheproxy/docs", "/cacheproxy/docs (API)"),
            ("/readyz", "/readyz"),
        )
    )
    page = f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="refresh" content="{REFRESH_SECONDS}">
<title>cacheproxy</title>
<style>{_STYLE}</style>
</head>
<body>
<h1>cacheproxy</h1>
<p class="sub">A {kind} of the Kubernetes API of {upstream} ({git_version}).
Ready: <span id="ready">{_yes_no(doc["ready"])}</span>.
{len(resources)} resources cached; this page reloads every {REFRESH_SECONDS} s.</p>
<nav>{links}</nav>
<table id="resources">
<thead><tr>{head}</tr></thead>
<tbody>
{rows}
</tbody>
</table>
{_read_upstream(doc)}
<p class="sub">Staleness: seconds since upstream last moved the resource (an event, a bookmark
or a relist). Last change: since the last event that changed an object. Read the objects on
the Kubernetes paths (<code>/api</code>, <code>/apis</code>) with kubectl or any client; {writes}.</p>
</body>
</html>
"""
    return page.encode()
