"""Who is asking the simulator, and may they: its auth policy applied to every request, as the API
server's authentication and RBAC authorization would (``--policy``; without one, everyone may do
everything), and the review APIs answered from the same policy.

- authentication: a client certificate (CommonName, Organizations) or a bearer token; 401 as the
  API server words it;
- authorization: resource requests by verb, group, resource, namespace, name and subresource;
  discovery and ``/version`` by path (RBAC's ``nonResourceURLs``); 403 as the API server words it;
- ``TokenReview``, ``SubjectAccessReview`` and ``SelfSubjectAccessReview``: create-only.
"""

from __future__ import annotations

import orjson

from cacheproxy.kube import status
from cacheproxy.kube.attributes import (
    ANONYMOUS_USER,
    NonResourceAttributes,
    ResourceAttributes,
    UserInfo,
)
from cacheproxy.kube.resources import ResourceType
from cacheproxy.serving import JsonAnswers, Request, Send
from cacheproxy.sim.auth import Authenticator, Authorizer
from cacheproxy.sim.faults import Faults
from cacheproxy.sim.policy import Policy
from cacheproxy.sim.reviewanswers import (
    self_subject_access_review,
    subject_access_review,
    token_review,
)

__all__ = ["REVIEW_TYPES", "SimAccess"]

REVIEW_TYPES = (
    ResourceType("authentication.k8s.io", "v1", "tokenreviews", "TokenReview", namespaced=False),
    ResourceType(
        "authorization.k8s.io",
        "v1",
        "selfsubjectaccessreviews",
        "SelfSubjectAccessReview",
        namespaced=False,
    ),
    ResourceType(
        "authorization.k8s.io",
        "v1",
        "subjectaccessreviews",
        "SubjectAccessReview",
        namespaced=False,
    ),
)
"""The review APIs: create-only, answered from the auth policy."""


class SimAccess:
    """The policy's authenticator and authorizer (both None without a policy: all open)."""

    def __init__(self, policy: Policy | None) -> None:
        self.policy = policy
        self.authn = Authenticator(policy) if policy else None
        self.authz = Authorizer(policy) if policy else None

    def authenticate(self, req: Request) -> UserInfo | None:
        """Who sent ``req`` (None when there is no policy); 401 for bad credentials."""
        if self.authn is None:
            return None
        return self.authn.authenticate(req.header("authorization") or None, req.peer_user)

    def authorize_path(self, user: UserInfo | None, path: str) -> None:
        """Discovery and ``/version`` are non-resource URLs, authorized by path (RBAC's
        ``nonResourceURLs``; the bootstrap roles open them to authenticated users)."""
        if self.authz is None or user is None:
            return
        self.authz.check(user, NonResourceAttributes(verb="get", path=path))

    def authorize(
        self,
        user: UserInfo | None,
        verb: str,
        rtype: ResourceType,
        namespace: str,
        name: str,
        subresource: str = "",
    ) -> None:
        """403 unless ``user`` may ``verb`` the resource."""
        if self.authz is None or user is None:
            return
        if (rtype.group, rtype.resource) == ("", "namespaces") and name:
            # RequestInfo: /api/v1/namespaces/{name} is in the namespace {name}, so a binding in
            # a namespace may let its subjects read that namespace object.
            namespace = name
        attrs = ResourceAttributes(
            verb=verb,
            group=rtype.group,
            resource=rtype.resource,
            namespace=namespace,
            name=name,
            subresource=subresource,
        )
        self.authz.check(user, attrs)

    async def review(
        self,
        req: Request,
        send: Send,
        rtype: ResourceType,
        user: UserInfo | None,
        *,
        faults: Faults,
        answers: JsonAnswers,
    ) -> None:
        """Answer a ``POST`` of one of :data:`REVIEW_TYPES` from the policy (an empty one when
        the simulator has none)."""
        body = await req.json()
        if not isinstance(body, dict):
            raise status.bad_request("the request body must be a JSON object")
        policy = self.policy or Policy.from_mapping({})
        authn = self.authn or Authenticator(policy)
        authz = self.authz or Authorizer(policy)
        failure = faults.take_failure("create")
        if failure is not None:
            raise failure
        if rtype.resource == "tokenreviews":
            self.authorize(user, "create", rtype, "", "")
            answer = token_review(authn, body)
        elif rtype.resource == "subjectaccessreviews":
            self.authorize(user, "create", rtype, "", "")
            answer = subject_access_review(authz, body)
        else:
            # The field manager defaults to the User-Agent up to its first "/" (as the API server).
            manager = req.header("user-agent").split("/", 1)[0] or None
            answer = self_subject_access_review(
                authz, user or ANONYMOUS_USER, body, manager=manager
            )
        await answers.send(send, req, orjson.dumps(answer), code=201)
