"""build_client: TLS material, auth header, timeouts and identity, without a server."""

from __future__ import annotations

import ssl
from pathlib import Path

import httpx
import pytest

from cacheproxy import __version__
from cacheproxy.errors import ConfigError
from cacheproxy.sim.testpki import generate_pki
from cacheproxy.upstream import BearerTokenAuth, TokenSource, UpstreamConfig, build_client
from cacheproxy.upstream.client import LIST_TIMEOUT, WATCH_TIMEOUT, ssl_context


async def sent_headers(tokens: TokenSource) -> httpx.Headers:
    """The headers a request carries after BearerTokenAuth, as a fake server sees them."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={})

    async with httpx.AsyncClient(
        transport=httpx.MockTransport(handler), auth=BearerTokenAuth(tokens)
    ) as client:
        await client.get("http://upstream/version")
    return seen[0].headers


async def test_the_bearer_token_is_sent_when_there_is_one() -> None:
    assert (await sent_headers(TokenSource.static("t0k")))["authorization"] == "Bearer t0k"
    assert "authorization" not in await sent_headers(TokenSource.static(None))


async def test_the_client_identifies_itself_and_asks_for_json() -> None:
    async with build_client(UpstreamConfig(server="http://127.0.0.1:1")) as client:
        assert client.headers["user-agent"] == f"cacheproxy/{__version__}"
        assert client.headers["accept"] == "application/json"
        assert str(client.base_url) == "http://127.0.0.1:1"
        assert client.timeout == LIST_TIMEOUT


def test_watches_have_no_read_timeout_but_lists_do() -> None:
    assert WATCH_TIMEOUT.read is None
    assert LIST_TIMEOUT.read is not None and LIST_TIMEOUT.read > 0
    assert LIST_TIMEOUT.connect == WATCH_TIMEOUT.connect == 10


def test_the_tls_context_verifies_with_the_ca_and_carries_the_client_cert(tmp_path: Path) -> None:
    pki = generate_pki(tmp_path)
    cert, key = pki.client_cert("me")
    ctx = ssl_context(
        UpstreamConfig(server="https://x", ca_file=pki.ca_cert, client_cert=cert, client_key=key)
    )
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    assert [c["subject"] for c in ctx.get_ca_certs()] == [((("commonName", "cacheproxy-sim-ca"),),)]


def test_insecure_skip_tls_verify_turns_verification_off() -> None:
    ctx = ssl_context(UpstreamConfig(server="https://x", verify=False))
    assert ctx.verify_mode == ssl.CERT_NONE and not ctx.check_hostname


def test_an_unreadable_client_certificate_is_a_config_error(tmp_path: Path) -> None:
    config = UpstreamConfig(
        server="https://x",
        client_cert=tmp_path / "missing.crt",
        client_key=tmp_path / "missing.key",
        source="kubeconfig k",
    )
    with pytest.raises(ConfigError, match=r"kubeconfig k: cannot load the client certificate"):
        build_client(config)


def test_an_unreadable_ca_is_a_config_error(tmp_path: Path) -> None:
    config = UpstreamConfig(server="https://x", ca_file=tmp_path / "nope.crt", source="in-cluster")
    with pytest.raises(ConfigError, match="in-cluster: cannot load the CA"):
        build_client(config)


@pytest.mark.parametrize(
    ("config", "compression", "encoding"),
    [
        (UpstreamConfig(server="https://127.0.0.1:6443"), None, "identity"),
        (UpstreamConfig(server="https://localhost:6443"), None, "identity"),
        (UpstreamConfig(server="https://10.0.0.1:443", in_cluster=True), None, "identity"),
        (UpstreamConfig(server="https://api.example.com:6443"), None, "gzip"),
        (UpstreamConfig(server="https://127.0.0.1:6443"), True, "gzip"),
        (UpstreamConfig(server="https://api.example.com:6443"), False, "identity"),
    ],
)
async def test_gzip_is_asked_for_only_from_a_distant_server_unless_configured(
    config: UpstreamConfig, compression: bool | None, encoding: str
) -> None:
    async with build_client(config, compression=compression) as client:
        assert client.headers["accept-encoding"] == encoding
