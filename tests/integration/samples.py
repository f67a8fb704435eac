"""The real API server's samples (``shared/k8s-samples/protocol``), read for conformance tests.

Formats understood:

- ``.http``: status line, headers, blank line, body (CRLF as captured). Bodies cut at N bytes
  (``*_firstNbytes.http``) and watch bodies (one JSON event a line) parse with
  :func:`parse_prefix`, which keeps every complete value of a prefix;
- watch captures (``.txt``/``.jsonl``): optionally a header block, lines optionally prefixed with
  ``HH:MM:SS.mmm`` arrival times, ``... (…elided…) ...`` markers and a final ``stream closed``;
- kubectl ``-v=8``/``-v=9`` traces: the requests kubectl sent (method, URL, headers) and what the
  server answered (status, headers, logged body).

Also the comparison helpers: :func:`comparable` (run-specific values replaced),
:func:`assert_same_keys` (the same keys in the same order, recursively) and :func:`assert_covers`
(a parsed prefix is the beginning of a whole document).
"""

from __future__ import annotations

import base64
import copy
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "HttpSample",
    "KubectlExchange",
    "WatchCapture",
    "WatchLine",
    "assert_covers",
    "assert_same_keys",
    "comparable",
    "decode_token",
    "kubectl_exchanges",
    "load_http",
    "load_watch",
    "parse_prefix",
]

_TIMESTAMP = re.compile(r"^(\d\d):(\d\d):(\d\d)\.(\d{3}) ?")
_KLOG = re.compile(r"^[IWE]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ (?P<src>[\w.]+:\d+)\] (?P<msg>.*)$")
_CUT_MARKER = re.compile(r"\[\.\.\. truncated|\s?\[truncated \d+ chars\]")
RUN_SPECIFIC = ("uid", "resourceVersion", "creationTimestamp")
"""Metadata values every server picks anew: compared by presence and position only."""


# ---------------------------------------------------------------------------- parsing


def parse_prefix(text: str) -> Any:
    """The longest prefix of ``text`` that is a JSON document once its open containers are
    closed: complete members and elements only, the value being cut dropped. A capture's cut
    marker (``[... truncated; …]``, kubectl's `` [truncated N chars]``) ends the text."""
    text = _CUT_MARKER.split(text, maxsplit=1)[0]
    stack: list[str] = []
    in_string = escaped = False
    best: tuple[int, str] | None = None
    for i, c in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_string = False
            continue
        if c == '"':
            in_string = True
        elif c in "{[":
            stack.append("}" if c == "{" else "]")
            best = (i + 1, "".join(reversed(stack)))
        elif c in "}]":
            stack.pop()
            best = (i + 1, "".join(reversed(stack)))
            if not stack:
                break
        elif c == "," and stack:
            best = (i, "".join(reversed(stack)))
    if best is None:
        raise ValueError(f"no JSON value at the start of {text[:40]!r}")
    end, closers = best
    return json.loads(text[:end] + closers)


def decode_token(token: str) -> dict[str, Any]:
    """A continue token's JSON (URL-safe base64 without padding), keys in their order."""
    payload = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    decoded: dict[str, Any] = json.loads(payload)
    return decoded


def _seconds(match: re.Match[str]) -> float:
    h, m, s, ms = (int(g) for g in match.groups())
    return h * 3600 + m * 60 + s + ms / 1000


@dataclass(frozen=True)
class HttpSample:
    """One captured HTTP response."""

    status: int
    headers: dict[str, str]
    """Lower-case names."""
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    def prefix(self) -> Any:
        """The body's parsable prefix (the whole body when it is complete)."""
        return parse_prefix(self.body.decode())

    def events(self) -> list[Any]:
        """A watch body's events, one a line; a line cut short gives its parsable prefix."""
        return [parse_prefix(line) for line in self.body.decode().splitlines() if line.strip()]


def _split_head(lines: list[str]) -> tuple[int, dict[str, str]]:
    status = int(lines[0].split()[1])
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers


def load_http(path: Path) -> HttpSample:
    raw = path.read_bytes()
    sep = b"\r\n\r\n" if b"\r\n\r\n" in raw else b"\n\n"
    head, _, body = raw.partition(sep)
    status, headers = _split_head(head.decode().splitlines())
    return HttpSample(status=status, headers=headers, body=body)


@dataclass(frozen=True)
class WatchLine:
    at: float | None
    """Arrival time (seconds since midnight) when the capture is timestamped."""
    text: str

    def event(self) -> Any:
        return parse_prefix(self.text)


@dataclass(frozen=True)
class WatchCapture:
    status: int | None
    headers: dict[str, str]
    lines: list[WatchLine]
    """Event lines only (no header, elision marker or close marker)."""
    started_at: float | None = None
    """Time of the first line of the capture (headers included)."""
    closed_at: float | None = None
    """Time of the ``stream closed`` marker, when the capture has one."""
    elided: bool = False

    def events(self) -> list[Any]:
        return [line.event() for line in self.lines]

    def of_type(self, event_type: str) -> list[Any]:
        return [e for e in self.events() if e["type"] == event_type]


def load_watch(path: Path) -> WatchCapture:
    head: list[str] = []
    lines: list[WatchLine] = []
    started_at = closed_at = None
    elided = False
    in_head = False
    for number, raw in enumerate(path.read_text().splitlines()):
        at = None
        if m := _TIMESTAMP.match(raw):
            at = _seconds(m)
            raw = raw[m.end() :]
        if number == 0:
            started_at = at
            in_head = raw.startswith("HTTP/")
        if in_head:
            if raw.strip():
                head.append(raw)
            else:
                in_head = False
            continue
        if raw.startswith("..."):
            elided = True
        elif raw.strip() == "stream closed":
            closed_at = at
        elif raw.strip():
            lines.append(WatchLine(at=at, text=raw))
    status, headers = _split_head(head) if head else (None, {})
    return WatchCapture(status, headers, lines, started_at, closed_at, elided)


@dataclass
class KubectlExchange:
    """One request kubectl made and what the server answered, from a ``-v=8``/``-v=9`` trace."""

    method: str
    url: str
    request_headers: dict[str, str] = field(default_factory=dict)
    status: int | None = None
    response_headers: dict[str, str] = field(default_factory=dict)
    response_body: str = ""

    @property
    def path_and_query(self) -> str:
        parts = urlsplit(self.url)
        return parts.path + (f"?{parts.query}" if parts.query else "")


def kubectl_exchanges(path: Path) -> list[KubectlExchange]:
    out: list[KubectlExchange] = []
    section = ""
    for raw in path.read_text().splitlines():
        m = _KLOG.match(raw)
        if m is None:
            continue
        src, msg = m.group("src"), m.group("msg")
        if src.startswith("round_trippers.go:466") and msg.startswith("curl "):  # -v=9
            headers = dict(h.split(": ", 1) for h in re.findall(r'-H "([^"]*)"', msg))
            method = re.search(r"-X(\w+)", msg)
            url = re.search(r"'([^']*)'\s*$", msg)
            assert method and url, msg
            out.append(KubectlExchange(method.group(1), url.group(1), headers))
        elif src.startswith("round_trippers.go:553"):  # -v=9: "GET <url> 200 OK in …"
            out[-1].status = int(msg.split()[2])
        elif src.startswith("round_trippers.go:463"):  # -v=8: "GET <url>"
            method_name, url_text = msg.split(" ", 1)
            out.append(KubectlExchange(method_name, url_text))
        elif msg.startswith("Request Headers:"):
            section = "request"
        elif msg.startswith("Response Headers:"):
            section = "response"
        elif msg.startswith("Response Status:"):
            out[-1].status = int(msg.split()[2])
            section = ""
        elif msg.startswith("Response Body:"):
            out[-1].response_body = msg.removeprefix("Response Body:").strip()
            section = ""
        elif section and ": " in msg:
            name, value = msg.strip().split(": ", 1)
            target = out[-1].request_headers if section == "request" else out[-1].response_headers
            target[name if section == "request" else name.lower()] = value
    return out


# ---------------------------------------------------------------------------- comparing


def comparable(obj: Any) -> Any:
    """``obj`` with the values a server picks per run (uid, resourceVersion, creationTimestamp
    of ``metadata``) replaced by placeholders, so two servers' objects compare equal."""
    out = copy.deepcopy(obj)
    meta = out.get("metadata") if isinstance(out, dict) else None
    if isinstance(meta, dict):
        for key in RUN_SPECIFIC:
            if key in meta and meta[key] is not None:
                meta[key] = f"<{key}>"
    return out


def assert_same_keys(actual: Any, expected: Any, path: str = "$") -> None:
    """The same keys in the same order at every level; lists compared element by element (as
    far as both go); scalars must have the same JSON type."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict), f"{path}: expected an object, got {actual!r}"
        assert list(actual) == list(expected), f"{path}: keys {list(actual)} != {list(expected)}"
        for key, value in expected.items():
            assert_same_keys(actual[key], value, f"{path}.{key}")
    elif isinstance(expected, list):
        assert isinstance(actual, list), f"{path}: expected an array, got {actual!r}"
        for i, (a, e) in enumerate(zip(actual, expected, strict=False)):
            assert_same_keys(a, e, f"{path}[{i}]")
    else:
        assert _json_type(actual) == _json_type(expected), (
            f"{path}: {actual!r} is not of the type of {expected!r}"
        )


def assert_covers(actual: Any, prefix: Any, path: str = "$", *, values: bool = True) -> None:
    """``prefix`` (a document cut short, see :func:`parse_prefix`) is the beginning of
    ``actual``: its keys are the first keys of ``actual`` in the same order, recursively; with
    ``values``, its scalars are equal too."""
    if isinstance(prefix, dict):
        assert isinstance(actual, dict), f"{path}: expected an object, got {actual!r}"
        keys = list(actual)[: len(prefix)]
        assert keys == list(prefix), f"{path}: keys {keys} do not begin as {list(prefix)}"
        for key, value in prefix.items():
            assert_covers(actual[key], value, f"{path}.{key}", values=values)
    elif isinstance(prefix, list):
        assert isinstance(actual, list), f"{path}: expected an array, got {actual!r}"
        assert len(actual) >= len(prefix), f"{path}: {len(actual)} < {len(prefix)} elements"
        for i, (a, p) in enumerate(zip(actual, prefix, strict=False)):
            assert_covers(a, p, f"{path}[{i}]", values=values)
    elif values:
        assert actual == prefix, f"{path}: {actual!r} != {prefix!r}"
    else:
        assert _json_type(actual) == _json_type(prefix), f"{path}: {actual!r} vs {prefix!r}"


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return type(value).__name__
