"""Static bearer tokens from a file in the API server's ``--token-auth-file`` CSV format.

Each line is ``token,user,uid[,"group1,group2"]``; blank lines and lines starting with ``#`` are
skipped. The file is read at start (a bad file is a :class:`~cacheproxy.errors.ConfigError`
naming the line) and again whenever its modification time changes — checked at most once a
second, on use — so tokens rotate without a restart; a bad rewrite is logged and the previous
tokens stay in force. Tokens are kept by their SHA-256 digest only and never logged.
"""

from __future__ import annotations

import csv
import hashlib
import logging
import time
from collections.abc import Callable
from pathlib import Path

from cacheproxy.errors import ConfigError
from cacheproxy.kube.attributes import UserInfo
from cacheproxy.serving import file_stamp

__all__ = ["StaticTokens", "parse_token_file"]

log = logging.getLogger("cacheproxy.server.auth")


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def parse_token_file(text: str, *, source: str) -> dict[bytes, UserInfo]:
    users: dict[bytes, UserInfo] = {}
    for number, record in enumerate(csv.reader(text.splitlines()), 1):
        if not record or not "".join(record).strip() or record[0].lstrip().startswith("#"):
            continue
        if len(record) < 3:
            raise ConfigError(f"{source}:{number}: expected token,user,uid[,groups]")
        token, name, uid = (field.strip() for field in record[:3])
        if not token or not name:
            raise ConfigError(f"{source}:{number}: the token and the user name must not be empty")
        groups = (
            tuple(g.strip() for g in record[3].split(",") if g.strip()) if len(record) > 3 else ()
        )
        digest = _digest(token)
        if digest in users:
            raise ConfigError(f"{source}:{number}: this token is already given to another user")
        users[digest] = UserInfo(name, groups, uid)
    return users


class StaticTokens:
    """A :class:`~cacheproxy.server.access.TokenAuthenticator` over a token file."""

    def __init__(self, path: Path, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self._clock = clock
        self._stamp = file_stamp(path)
        self._users = self._read()
        self._checked = clock()

    def _read(self) -> dict[bytes, UserInfo]:
        try:
            text = self.path.read_text()
        except OSError as err:
            raise ConfigError(f"cannot read the token file {self.path}: {err.strerror}") from err
        return parse_token_file(text, source=str(self.path))

    def _reload_if_changed(self) -> None:
        now = self._clock()
        if now - self._checked < 1.0:
            return
        self._checked = now
        stamp = file_stamp(self.path)
        if stamp == self._stamp:
            return
        try:
            users = self._read()
        except ConfigError as err:
            log.warning("keeping the previous tokens: %s", err)
            return
        self._stamp, self._users = stamp, users
        log.info("reloaded %d tokens from %s", len(users), self.path)

    async def review_token(self, token: str) -> UserInfo | None:
        self._reload_if_changed()
        return self._users.get(_digest(token))

    def __len__(self) -> int:
        return len(self._users)
