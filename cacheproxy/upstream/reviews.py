"""TokenReview and SubjectAccessReview against the upstream API server (delegated auth).

The daemon asks the API server who a bearer token belongs to and whether a user may do
something, as ``k8s.io/apiserver``'s delegating authenticator and authorizer do (and with the
same request bodies, ``authentication.k8s.io/v1`` and ``authorization.k8s.io/v1``). The daemon's
own credentials need ``create`` on ``tokenreviews`` and ``subjectaccessreviews``
(``cacheproxy rbac`` grants them when an auth mode is configured). No caching here: the caller
(:class:`cacheproxy.server.access.AccessControl`) caches.
"""

from __future__ import annotations

from typing import Any

import httpx
import orjson

from cacheproxy.errors import TransportError
from cacheproxy.kube.attributes import Attributes, ResourceAttributes, UserInfo
from cacheproxy.upstream.apierrors import describe_request
from cacheproxy.upstream.apilistwatch import send_for_json

__all__ = ["UpstreamReviews"]

REVIEW_TIMEOUT = httpx.Timeout(10.0)
TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


class UpstreamReviews:
    """:class:`~cacheproxy.server.access.TokenAuthenticator` and ``AccessReviewer`` upstream."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client

    async def review_token(self, token: str) -> UserInfo | None:
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token},
        }
        answer = await self._post(TOKEN_REVIEWS, body)
        st = answer.get("status") or {}
        if not st.get("authenticated"):
            return None
        user = st.get("user") or {}
        name = user.get("username")
        if not isinstance(name, str) or not name:
            return None
        groups = user.get("groups") or []
        return UserInfo(name, tuple(str(g) for g in groups), str(user.get("uid") or ""))

    async def review_access(self, user: UserInfo, attrs: Attributes) -> bool:
        spec: dict[str, Any] = {"user": user.name, "groups": list(user.groups)}
        if user.uid:
            spec["uid"] = user.uid
        if isinstance(attrs, ResourceAttributes):
            spec["resourceAttributes"] = attrs.to_review()
        else:
            spec["nonResourceAttributes"] = attrs.to_review()
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": spec,
        }
        answer = await self._post(ACCESS_REVIEWS, body)
        st = answer.get("status") or {}
        return bool(st.get("allowed")) and not st.get("denied")

    async def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        request = self.client.build_request(
            "POST",
            path,
            content=orjson.dumps(body),
            headers={"Content-Type": "application/json", "Accept": "application/json"},
            timeout=REVIEW_TIMEOUT,
        )
        answer = await send_for_json(self.client, request)
        if not isinstance(answer, dict):
            raise TransportError(f"{describe_request(request)}: expected a review object")
        return answer
