"""AccessControl: who is asking, may they, and how answers are cached."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from cacheproxy.errors import ApiError, ConfigError, TransportError
from cacheproxy.kube.attributes import (
    AUTHENTICATED,
    Attributes,
    NonResourceAttributes,
    ResourceAttributes,
    UserInfo,
)
from cacheproxy.kube.request import parse_api_path, split_path
from cacheproxy.server.access import AccessControl, AccessSettings, request_attributes
from cacheproxy.server.tokenfile import StaticTokens, parse_token_file

LIST_PODS = ResourceAttributes(verb="list", group="", resource="pods", version="v1")


class FakeUpstream:
    """Tokens and allowed (user, verb) pairs; counts the reviews it is asked for."""

    def __init__(self) -> None:
        self.tokens = {"good": UserInfo("alice", ("dev",))}
        self.allowed = {("alice", "list")}
        self.token_reviews = self.access_reviews = 0
        self.fail = False
        self.gate: asyncio.Event | None = None

    async def review_token(self, token: str) -> UserInfo | None:
        self.token_reviews += 1
        if self.gate is not None:
            await self.gate.wait()
        if self.fail:
            raise TransportError("connection refused")
        return self.tokens.get(token)

    async def review_access(self, user: UserInfo, attrs: Attributes) -> bool:
        self.access_reviews += 1
        if self.fail:
            raise TransportError("connection refused")
        return (user.name, getattr(attrs, "verb", "")) in self.allowed


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def control(upstream: FakeUpstream, clock: Clock, **settings: object) -> AccessControl:
    return AccessControl(
        tokens=upstream,
        reviewer=upstream,
        settings=AccessSettings(**settings),  # type: ignore[arg-type]
        clock=clock,
    )


async def test_a_token_is_reviewed_once_and_the_user_is_authenticated() -> None:
    upstream, clock = FakeUpstream(), Clock()
    access = control(upstream, clock)
    for _ in range(3):
        user = await access.authenticate("Bearer good", None)
        assert user == UserInfo("alice", ("dev", AUTHENTICATED))
    assert upstream.token_reviews == 1
    clock.now = 121  # the token TTL (120 s) passed
    await access.authenticate("Bearer good", None)
    assert upstream.token_reviews == 2


async def test_unknown_tokens_and_missing_credentials_are_401() -> None:
    upstream, clock = FakeUpstream(), Clock()
    access = control(upstream, clock)
    for header in ("Bearer nope", None, "Basic abc"):
        with pytest.raises(ApiError) as err:
            await access.authenticate(header, None)
        assert err.value.status == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "Unauthorized",
            "reason": "Unauthorized",
            "code": 401,
        }
    # A negative answer is kept 10 s at most.
    assert upstream.token_reviews == 1
    upstream.tokens["nope"] = UserInfo("late")
    clock.now = 11
    assert (await access.authenticate("Bearer nope", None)).name == "late"
    anonymous = control(upstream, clock, allow_anonymous=True)
    assert (await anonymous.authenticate(None, None)).name == "system:anonymous"


async def test_a_client_certificate_needs_no_review() -> None:
    upstream, clock = FakeUpstream(), Clock()
    user = await control(upstream, clock).authenticate(None, ("carol", ("ops", "dev")))
    assert user == UserInfo("carol", ("ops", "dev", AUTHENTICATED))
    assert upstream.token_reviews == 0


async def test_decisions_are_cached_by_outcome_with_their_own_ttls() -> None:
    upstream, clock = FakeUpstream(), Clock()
    access = control(upstream, clock, allowed_ttl=300, denied_ttl=30)
    alice = UserInfo("alice", ("dev",))
    watch = ResourceAttributes(verb="watch", group="", resource="pods")
    await access.authorize(alice, LIST_PODS)
    with pytest.raises(ApiError) as err:
        await access.authorize(alice, watch)
    assert err.value.code == 403
    assert err.value.message == (
        'pods is forbidden: User "alice" cannot watch resource "pods" in API group "" at the '
        "cluster scope"
    )
    assert upstream.access_reviews == 2
    upstream.allowed.add(("alice", "watch"))
    clock.now = 31  # the denial expired, the permission did not
    await access.authorize(alice, watch)
    await access.authorize(alice, LIST_PODS)
    assert upstream.access_reviews == 3
    # Another group set is another subject.
    await access.allows(UserInfo("alice", ("other",)), LIST_PODS)
    assert upstream.access_reviews == 4
    assert access.decision_cache.hits == 1


async def test_concurrent_misses_share_one_review() -> None:
    upstream, clock = FakeUpstream(), Clock()
    upstream.gate = asyncio.Event()
    access = control(upstream, clock)
    waiting = [asyncio.create_task(access.authenticate("Bearer good", None)) for _ in range(5)]
    await asyncio.sleep(0)
    upstream.gate.set()
    users = await asyncio.gather(*waiting)
    assert {u.name for u in users} == {"alice"}
    assert upstream.token_reviews == 1


async def test_the_cache_is_bounded() -> None:
    upstream, clock = FakeUpstream(), Clock()
    access = control(upstream, clock, cache_size=2)
    for name in ("a", "b", "c"):
        await access.allows(UserInfo(name), LIST_PODS)
    await access.allows(UserInfo("a"), LIST_PODS)  # evicted: asked again
    assert upstream.access_reviews == 4


async def test_an_upstream_that_cannot_answer_is_503_and_nothing_is_cached() -> None:
    upstream, clock = FakeUpstream(), Clock()
    access = control(upstream, clock)
    await access.authorize(UserInfo("alice"), LIST_PODS)
    upstream.fail = True
    await access.authorize(UserInfo("alice"), LIST_PODS)  # cached
    with pytest.raises(ApiError) as err:
        await access.authenticate("Bearer good", None)
    assert err.value.code == 503
    assert err.value.status["details"]["retryAfterSeconds"] == 1
    upstream.fail = False
    assert (await access.authenticate("Bearer good", None)).name == "alice"


@pytest.mark.parametrize(
    ("method", "path", "query", "expected"),
    [
        ("GET", "/api/v1/pods", "", ResourceAttributes("list", "", "pods", version="v1")),
        (
            "GET",
            "/api/v1/namespaces/ns/pods",
            "watch=1",
            ResourceAttributes("watch", "", "pods", namespace="ns", version="v1"),
        ),
        (
            "GET",
            "/apis/apps/v1/namespaces/ns/deployments/web",
            "",
            ResourceAttributes("get", "apps", "deployments", "ns", "web", version="v1"),
        ),
        (
            "GET",
            "/api/v1/namespaces/ns-1",
            "",
            ResourceAttributes("get", "", "namespaces", "ns-1", "ns-1", version="v1"),
        ),
        ("GET", "/api/v1/watch/pods", "", ResourceAttributes("watch", "", "pods", version="v1")),
        ("GET", "/apis/apps/v1", "", NonResourceAttributes("get", "/apis/apps/v1")),
        ("GET", "/version", "", NonResourceAttributes("get", "/version")),
        ("POST", "/metrics", "", NonResourceAttributes("post", "/metrics")),
    ],
)
def test_request_attributes_are_the_api_servers(
    method: str, path: str, query: str, expected: Attributes
) -> None:
    from urllib.parse import parse_qs

    from cacheproxy.kube.request import verb_of

    api_path = parse_api_path(split_path(path))
    verb = verb_of(method, api_path, parse_qs(query)) if api_path and api_path.resource else None
    assert request_attributes(method, path, api_path, verb) == expected


def test_token_file_format() -> None:
    users = parse_token_file(
        '# comment\n\ntok-1,alice,1,"dev,ops"\ntok-2, bob ,2\n', source="tokens.csv"
    )
    assert sorted(users.values(), key=lambda u: u.name) == [
        UserInfo("alice", ("dev", "ops"), "1"),
        UserInfo("bob", (), "2"),
    ]
    assert all(len(k) == 32 for k in users)  # digests, never the tokens
    for bad, why in (
        ("tok,alice\n", "tokens.csv:1: expected token,user,uid[,groups]"),
        (",alice,1\n", "tokens.csv:1: the token and the user name must not be empty"),
        ("t,a,1\nt,b,2\n", "tokens.csv:2: this token is already given to another user"),
    ):
        with pytest.raises(ConfigError) as err:
            parse_token_file(bad, source="tokens.csv")
        assert str(err.value) == why


async def test_a_token_file_is_reloaded_when_it_changes_and_a_bad_rewrite_is_ignored(
    tmp_path: Path,
) -> None:
    path = tmp_path / "tokens.csv"
    path.write_text("t1,alice,1\n")
    clock = Clock()
    tokens = StaticTokens(path, clock=clock)
    assert (await tokens.review_token("t1")) == UserInfo("alice", (), "1")
    path.write_text("t2,bob,2\n")
    import os

    os.utime(path, (1_000_000, 1_000_000))
    assert (await tokens.review_token("t2")) is None  # checked at most once a second
    clock.now = 2
    assert (await tokens.review_token("t2")) == UserInfo("bob", (), "2")
    assert (await tokens.review_token("t1")) is None
    path.write_text("broken\n")
    os.utime(path, (2_000_000, 2_000_000))
    clock.now = 4
    assert (await tokens.review_token("t2")) == UserInfo("bob", (), "2")
    with pytest.raises(ConfigError):
        StaticTokens(tmp_path / "missing.csv")
