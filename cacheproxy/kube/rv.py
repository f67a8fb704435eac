"""Resource versions and continue tokens.

Resource versions are opaque strings to clients; servers (the API server, client-go, and we) parse
them as unsigned 64-bit integers and compare them. An RV that does not parse is a 400.

Continue tokens are the API server's format exactly (``storage.EncodeContinue``): URL-safe base64
without padding of ``{"v":"meta.k8s.io/v1","rv":N,"start":"<key>\\u0000"}`` — the key after which the
next page starts, bound to the snapshot at RV N. ``rv`` -1 marks an "inconsistent" token that
continues at the latest state (what a 410 on an expired token hands back).
"""

from __future__ import annotations

import base64
import posixpath
from dataclasses import dataclass

import orjson

from cacheproxy.errors import ApiError
from cacheproxy.kube import status
from cacheproxy.kube.versions import NEWEST, KubeVersion

__all__ = [
    "ContinueToken",
    "decode_continue",
    "encode_continue",
    "format_resource_version",
    "parse_resource_version",
]

_MAX_UINT64 = 2**64 - 1
_TOKEN_VERSION = "meta.k8s.io/v1"


def parse_resource_version(
    value: str, *, field: str = "resourceVersion", kube: KubeVersion = NEWEST
) -> int:
    """Parse an RV as uint64; "" is 0. Anything else that does not parse → 400 BadRequest (in
    ``kube``'s words: :attr:`KubeVersion.prefixes_invalid_rv`)."""
    if value == "":
        return 0
    if value.isascii() and value.isdigit():
        parsed = int(value)
        if parsed <= _MAX_UINT64:
            return parsed
        detail = f'strconv.ParseUint: parsing "{value}": value out of range'
    else:
        detail = f'strconv.ParseUint: parsing "{value}": invalid syntax'
    # The API server's wording (field.Invalid); 1.28 answered 500, current servers 400.
    prefix = "invalid resource version: " if kube.prefixes_invalid_rv else ""
    raise status.bad_request(f'{prefix}{field}: Invalid value: "{value}": {detail}')


def format_resource_version(rv: int) -> str:
    return str(rv)


@dataclass(frozen=True, slots=True)
class ContinueToken:
    resource_version: int
    """The snapshot the pages are cut from; -1 continues at the latest state."""
    start_key: str
    """As encoded: the first key of the next page (after a page ending at K: ``K + "\\x00"``)."""

    @property
    def key(self) -> str:
        """The start key in our key space (the API server allows a leading ``/``)."""
        return self.start_key[1:] if self.start_key.startswith("/") else self.start_key


def encode_continue(resource_version: int, start_key: str) -> str:
    """Token for the page that starts at ``start_key`` (inclusive) at snapshot
    ``resource_version``. After a page ending with key K, the next start is ``K + "\\x00"``."""
    payload = orjson.dumps({"v": _TOKEN_VERSION, "rv": resource_version, "start": start_key})
    return base64.urlsafe_b64encode(payload).rstrip(b"=").decode("ascii")


_RAW_URL_ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def _invalid(detail: str) -> ApiError:
    return status.bad_request(f"invalid continue token: continue key is not valid: {detail}")


def _raw_url_b64decode(token: str) -> bytes:
    """Go's ``base64.RawURLEncoding``: no padding, URL alphabet; errors name the offset."""
    for i, ch in enumerate(token):
        if ch not in _RAW_URL_ALPHABET:
            raise _invalid(f"illegal base64 data at input byte {i}")
    if len(token) % 4 == 1:
        raise _invalid(f"illegal base64 data at input byte {len(token) - 1}")
    return base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))


def _json_error(raw: bytes, kube: KubeVersion) -> str:
    """``encoding/json``'s wording for the common failures (a byte it cannot show, as the API
    server's version quotes it)."""
    stripped = raw.lstrip(b" \t\r\n")
    if not stripped:
        return "unexpected end of JSON input"
    first = stripped[:1]
    if first not in b'{["-0123456789tfn' or first == b"":
        byte = first[0]
        if byte >= 0x80 or byte < 0x20:
            shown = f"\\u{byte:04x}" if kube.quotes_bytes_as_runes else f"\\x{byte:02x}"
        else:
            shown = first.decode()
        return f"invalid character '{shown}' looking for beginning of value"
    return "unexpected end of JSON input"


def _go_path_clean(path: str) -> str:
    cleaned = posixpath.normpath(path)
    # POSIX keeps a leading "//"; Go's path.Clean does not.
    return cleaned[1:] if cleaned.startswith("//") and not cleaned.startswith("///") else cleaned


def decode_continue(token: str, *, kube: KubeVersion = NEWEST) -> ContinueToken:
    """Parse a continue token as ``storage.DecodeContinue``; a forged or damaged one → 400, in
    the words of ``kube``'s API server."""
    raw = _raw_url_b64decode(token)
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise _invalid(_json_error(raw, kube)) from None
    if not isinstance(data, dict):
        raise _invalid("json: cannot unmarshal value into Go value of type storage.continueToken")
    version = data.get("v", "")
    if version != _TOKEN_VERSION:
        raise _invalid(f"server does not recognize this encoded version {version}")
    rv = data.get("rv", 0)
    if not isinstance(rv, int) or isinstance(rv, bool) or rv == 0:
        raise _invalid(f"incorrect encoded start resourceVersion (version {_TOKEN_VERSION})")
    start = data.get("start", "")
    if not isinstance(start, str) or not start:
        raise _invalid(f"encoded start key empty (version {_TOKEN_VERSION})")
    # Defend against path traversal: the cleaned key must be the key itself.
    rooted = start if start.startswith("/") else "/" + start
    if _go_path_clean(rooted) != rooted:
        raise _invalid(start)
    return ContinueToken(resource_version=rv, start_key=start)
