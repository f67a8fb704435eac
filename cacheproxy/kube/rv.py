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
import binascii
from dataclasses import dataclass

import orjson

from cacheproxy.kube import status

__all__ = [
    "ContinueToken",
    "decode_continue",
    "encode_continue",
    "format_resource_version",
    "parse_resource_version",
]

_MAX_UINT64 = 2**64 - 1
_TOKEN_VERSION = "meta.k8s.io/v1"


def parse_resource_version(value: str, *, field: str = "resourceVersion") -> int:
    """Parse an RV as uint64; "" is 0. Anything else that does not parse → 400 BadRequest."""
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
    raise status.bad_request(f'{field}: Invalid value: "{value}": {detail}')


def format_resource_version(rv: int) -> str:
    return str(rv)


@dataclass(frozen=True, slots=True)
class ContinueToken:
    resource_version: int
    """The snapshot the pages are cut from; -1 continues at the latest state."""
    start_key: str
    """The first key of the next page (the token carries it with a trailing NUL)."""


def encode_continue(resource_version: int, start_key: str) -> str:
    """Token for the page that starts at ``start_key`` (inclusive) at snapshot
    ``resource_version``. After a page ending with key K, the next start is ``K + "\\x00"``."""
    payload = orjson.dumps({"v": _TOKEN_VERSION, "rv": resource_version, "start": start_key})
    return base64.urlsafe_b64encode(payload).rstrip(b"=").decode("ascii")


def _invalid(detail: str) -> Exception:
    return status.bad_request(f"invalid continue token: continue key is not valid: {detail}")


def decode_continue(token: str) -> ContinueToken:
    """Parse a continue token; a forged or damaged one → 400 as the API server words it."""
    padded = token + "=" * (-len(token) % 4)
    try:
        raw = base64.b64decode(padded.encode("ascii"), altchars=b"-_", validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise _invalid("illegal base64 data") from None
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        first = raw[:1]
        shown = f"\\x{first[0]:02x}" if first and first[0] >= 0x80 else first.decode("latin-1")
        raise _invalid(f"invalid character '{shown}' looking for beginning of value") from None
    if not isinstance(data, dict) or data.get("v") != _TOKEN_VERSION:
        version = data.get("v") if isinstance(data, dict) else None
        raise _invalid(f"server does not recognize this encoded key (version {version})")
    rv = data.get("rv")
    start = data.get("start")
    if not isinstance(rv, int) or isinstance(rv, bool) or rv == 0 or rv < -1:
        raise _invalid(f"incorrect encoded start resourceVersion (version {_TOKEN_VERSION})")
    if not isinstance(start, str) or not start:
        raise _invalid("encoded start key empty")
    # The API server rejects keys that escape the collection (path traversal).
    cleaned = start.rstrip("\x00")
    if cleaned.startswith("/") or ".." in cleaned.split("/"):
        raise _invalid(f"continue key may not contain relative paths (version {_TOKEN_VERSION})")
    return ContinueToken(resource_version=rv, start_key=start)
