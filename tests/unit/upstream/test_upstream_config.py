"""UpstreamConfig loading details that need no server: proxies, credentials, server URLs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from cacheproxy.errors import ConfigError
from cacheproxy.upstream import TokenSource, load_kubeconfig
from cacheproxy.upstream.config import environment_proxy

PROXY_VARS = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy")


@pytest.fixture(autouse=True)
def _no_proxy_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARS:
        monkeypatch.delenv(name, raising=False)


def kubeconfig(tmp_path: Path, cluster: dict[str, Any], user: dict[str, Any] | None = None) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "clusters": [{"name": "c", "cluster": cluster}],
                "users": [{"name": "u", "user": user or {}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return path


def test_https_proxy_applies_to_an_https_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.corp:3128")
    monkeypatch.setenv("HTTP_PROXY", "http://other:3128")
    assert environment_proxy("https://api.example.com:6443") == "http://proxy.corp:3128"
    assert environment_proxy("http://api.example.com:8080") == "http://other:3128"


def test_no_proxy_and_loopback_hosts_bypass_the_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.corp:3128")
    monkeypatch.setenv("NO_PROXY", ".cluster.local,10.0.0.1")
    assert environment_proxy("https://kubernetes.default.svc.cluster.local") is None
    assert environment_proxy("https://10.0.0.1:443") is None
    assert environment_proxy("https://127.0.0.1:6443") is None
    assert environment_proxy("https://localhost:6443") is None
    assert environment_proxy("https://[::1]:6443") is None
    assert environment_proxy("https://api.example.com") == "http://proxy.corp:3128"


def test_the_kubeconfig_proxy_url_wins_over_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://env-proxy:3128")
    path = kubeconfig(tmp_path, {"server": "https://api:6443", "proxy-url": "http://kc:8080"})
    assert load_kubeconfig(path).proxy == "http://kc:8080"
    plain = kubeconfig(tmp_path, {"server": "https://api:6443"})
    assert load_kubeconfig(plain).proxy == "http://env-proxy:3128"


def test_without_proxies_the_config_has_none(tmp_path: Path) -> None:
    assert load_kubeconfig(kubeconfig(tmp_path, {"server": "https://api:6443"})).proxy is None


def test_basic_auth_credentials_are_refused_at_load(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path, {"server": "https://api:6443"}, {"username": "a", "password": "b"})
    with pytest.raises(ConfigError, match="basic auth"):
        load_kubeconfig(path)


def test_a_cluster_without_a_server_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no usable server URL"):
        load_kubeconfig(kubeconfig(tmp_path, {"insecure-skip-tls-verify": True}))


def test_a_document_that_is_not_a_kubeconfig_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text("- just\n- a list\n")
    with pytest.raises(ConfigError, match=f"kubeconfig {path}: not a valid kubeconfig"):
        load_kubeconfig(path)


def test_a_missing_ca_file_is_a_config_error(tmp_path: Path) -> None:
    path = kubeconfig(
        tmp_path, {"server": "https://api:6443", "certificate-authority": "/nonexistent/ca.crt"}
    )
    with pytest.raises(ConfigError, match=r"File does not exist: /nonexistent/ca\.crt"):
        load_kubeconfig(path)


def test_the_server_url_loses_its_trailing_slash_and_keeps_its_source(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path, {"server": "https://api:6443/"}, {"token": "t"})
    config = load_kubeconfig(path, "x")
    assert config.server == "https://api:6443"
    assert config.source == f"kubeconfig {path} (context 'x')"


async def test_a_static_token_source_returns_its_token() -> None:
    assert await TokenSource.static("abc").token() == "abc"
    assert await TokenSource.static(None).token() is None
    assert not TokenSource.static("abc").refreshes


async def test_a_kubeconfig_token_is_returned_without_its_scheme(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path, {"server": "https://api:6443"}, {"token": "s3cret"})
    source = load_kubeconfig(path).token_source
    assert await source.token() == "s3cret"
    assert "s3cret" not in repr(load_kubeconfig(path))
