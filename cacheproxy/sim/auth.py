"""The simulator's optional auth: who is asking, and may they.

:class:`Authenticator` says who is asking (a verified client certificate, a static bearer token,
or anonymous); :class:`Authorizer` says whether they may (``system:masters``, then the policy's
bindings) and raises the API server's 403 if not, so the HTTP layer only routes. Decisions and
error bodies mirror the API server: the bearer-token and x509 authenticators,
``AuthenticatedGroupAdder``, the privileged ``system:masters`` group, and the 401/403 bodies of
``k8s-samples/protocol/err_*``.

What they decide on is :mod:`~cacheproxy.kube.attributes`; what they decide by is the policy,
:mod:`~cacheproxy.sim.policy` (which also documents its file format); the review endpoints that
expose them are :mod:`~cacheproxy.sim.reviewanswers`.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass

from cacheproxy.kube import status
from cacheproxy.kube.attributes import (
    ANONYMOUS_USER,
    MASTERS,
    Attributes,
    UserInfo,
    bearer_token,
    forbidden,
    with_authenticated,
)
from cacheproxy.sim.policy import BOOTSTRAP_BINDINGS, Policy, StaticUser

__all__ = [
    "INVALID_TOKEN",
    "Authenticator",
    "Authorizer",
    "Decision",
]

INVALID_TOKEN = "invalid bearer token"
"""The bearer-token authenticator's error when no token authenticator knows the token."""


class Authenticator:
    """Who is asking. Order as in the API server: a verified client certificate, then a bearer
    token (unknown token → 401, never anonymous), then anonymous."""

    def __init__(self, policy: Policy) -> None:
        self._users = policy.users

    def authenticate(
        self,
        authorization_header: str | None,
        peer_user: tuple[str, tuple[str, ...]] | None = None,
    ) -> UserInfo:
        """The request's user; raises the 401 ``ApiError`` for a bearer token nobody issued."""
        if peer_user is not None and peer_user[0]:
            return with_authenticated(UserInfo(peer_user[0], tuple(peer_user[1])))
        token = bearer_token(authorization_header)
        if token is None:
            return ANONYMOUS_USER
        user = self.authenticate_token(token)
        if user is None:
            raise status.unauthorized()
        return user

    def authenticate_token(self, token: str) -> UserInfo | None:
        # Compare against every token in constant time, so timing does not reveal a prefix.
        found: StaticUser | None = None
        candidate = token.encode()
        for u in self._users:
            if hmac.compare_digest(u.token.encode(), candidate) and found is None:
                found = u
        if found is None:
            return None
        return with_authenticated(UserInfo(found.name, found.groups, found.uid))


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    reason: str = ""


class Authorizer:
    """May they. Members of ``system:masters`` may do anything (the privileged-group authorizer);
    otherwise the first binding with a matching subject and rule allows; nothing denies."""

    def __init__(self, policy: Policy, *, bootstrap: bool = True) -> None:
        self._bindings = (*BOOTSTRAP_BINDINGS, *policy.bindings) if bootstrap else policy.bindings

    def decide(self, user: UserInfo, attrs: Attributes) -> Decision:
        if MASTERS in user.groups:
            return Decision(True)
        for binding in self._bindings:
            subject = binding.subject_for(user)
            if subject is not None and binding.rule.matches(attrs):
                reason = (
                    f'RBAC: allowed by rule "{binding.name}" to {subject.kind} "{subject.name}"'
                )
                return Decision(True, reason)
        return Decision(False)

    def allows(self, user: UserInfo, attrs: Attributes) -> bool:
        return self.decide(user, attrs).allowed

    def check(self, user: UserInfo, attrs: Attributes) -> None:
        """Raise the API server's 403 ``ApiError`` unless allowed."""
        if not self.allows(user, attrs):
            raise forbidden(user, attrs)
