"""Every declared setting reaches what it configures: changing it changes the options
:func:`wire` gives the components (or, for a gate, whether the configuration is accepted), and
what ``check-config`` prints. A setting that is validated and documented but wired to nothing
fails here, whoever adds it."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from cacheproxy.daemon.config import SETTINGS, DaemonConfig, describe, load_config
from cacheproxy.daemon.config.describe import SHOWN
from cacheproxy.daemon.config.entry import ENTRY
from cacheproxy.daemon.config.settings import Kind, Setting
from cacheproxy.daemon.wiring import Wiring, wire
from cacheproxy.errors import ConfigError
from cacheproxy.kube.resources import builtin

BASES: Mapping[str, Mapping[str, str]] = {
    "defaults": {},
    "secured": {
        "server.address": "0.0.0.0",
        "server.tls.certFile": "/tls/tls.crt",
        "server.tls.keyFile": "/tls/tls.key",
        "server.tls.clientCAFile": "/tls/ca.crt",
        "server.auth.mode": "token",
        "server.auth.tokenFile": "/tokens.csv",
    },
    "delegated": {"server.auth.mode": "delegated"},
    "open": {"server.address": "0.0.0.0", "server.allowUnauthenticatedNonLoopback": "true"},
    "auto-cache": {"passthrough.autoCache": "true"},
}
"""Configurations in which each setting can show its effect (the auth caches only matter with
an auth mode, the client CA only with TLS, autoCache's bounds only with it on, …)."""

GATES = frozenset({"server.allowUnauthenticatedNonLoopback"})
"""Settings that only decide whether a configuration is accepted."""

ENTRY_BASES: tuple[Mapping[str, str], ...] = (
    {"resource": "pods"},
    {"resource": "example.com/v1/widgets", "kind": "Widget", "namespaced": "true"},
)


def candidates(setting: Setting) -> Iterator[str]:
    """Values worth trying, as text, derived from the declaration."""
    if setting.kind is Kind.BOOL:
        yield from ("true", "false")
    elif setting.kind in (Kind.INT, Kind.SECONDS):
        yield from (str(b) for b in setting.bounds if b is not None)
    elif setting.kind in (Kind.CHOICE, Kind.TRISTATE):
        yield from setting.choices
    elif setting.kind is Kind.PATH:
        yield "/variant"
    elif setting.kind is Kind.LIST:
        yield from ("[metadata.name]", "[]")
    else:
        yield from ("variant", "example.com/v1/gadgets", "Gadget", "metadata.name=variant")


def flow(entry: Mapping[str, str]) -> str:
    """A one-entry ``resources`` list in YAML flow style."""
    return "[{" + ", ".join(f"{k}: {v}" for k, v in entry.items()) + "}]"


def outcome(overrides: Mapping[str, str]) -> tuple[DaemonConfig, Wiring] | None:
    try:
        config = load_config(None, env={}, overrides={"resources": "pods", **overrides})
    except ConfigError:
        return None
    return config, wire(config)


@pytest.mark.parametrize("setting", SETTINGS.values(), ids=lambda s: s.path)
def test_every_setting_changes_what_the_daemon_is_built_with(setting: Setting) -> None:
    for base in BASES.values():
        before = outcome(base)
        for value in candidates(setting):
            after = outcome({**base, setting.path: value})
            if setting.path in GATES:
                if (before is None) != (after is None):
                    return
            elif before is not None and after is not None and before[1] != after[1]:
                return
    pytest.fail(f"{setting.path}: no value changes the components' options: is it wired?")


@pytest.mark.parametrize("setting", ENTRY.values(), ids=lambda s: s.path)
def test_every_key_of_a_resource_entry_changes_its_informer(setting: Setting) -> None:
    for base in ENTRY_BASES:
        before = outcome({"resources": flow(base)})
        assert before is not None
        for value in candidates(setting):
            key, _, sub = setting.path.partition(".")
            after = outcome(
                {"resources": flow({**base, key: f"{{{sub}: {value}}}" if sub else value})}
            )
            if after is not None and before[1] != after[1]:
                return
    pytest.fail(f"resources[].{setting.path}: no value changes the informer: is it wired?")


@pytest.mark.parametrize("setting", SETTINGS.values(), ids=lambda s: s.path)
def test_every_setting_can_be_seen_in_the_summary(setting: Setting) -> None:
    for base in BASES.values():
        before = outcome(base)
        for value in candidates(setting):
            after = outcome({**base, setting.path: value})
            if before and after and describe(before[0]) != describe(after[0]):
                return
    pytest.fail(f"{setting.path}: check-config's summary never shows it")


def test_the_components_get_every_value_explicitly_not_their_own_defaults() -> None:
    # Every number set to its lower bound: nothing the daemon builds may still hold the
    # component's default where a setting exists for it.
    low = {
        s.path: str(s.bounds[0])
        for s in SETTINGS.values()
        if s.kind in (Kind.INT, Kind.SECONDS) and s.bounds[0] not in (None, s.default)
    }
    config, wiring = outcome({**BASES["delegated"], **low}) or pytest.fail("refused")
    limits = config.server.limits
    assert wiring.server.watch_buffer == limits.watch_buffer == 1
    assert wiring.server.watch_buffer_bytes == limits.watch_buffer_bytes == 1 << 20
    assert wiring.server.watch_buffers_total_bytes == limits.watch_buffers_total_bytes == 1 << 20
    assert wiring.server.max_url_bytes == 256
    assert wiring.reflector.page_size == 1
    assert wiring.resources[0].snapshot_ttl == limits.continue_token_ttl_seconds == 1
    assert wiring.access is not None
    assert wiring.access.cache_size == 1


def test_one_resource_configured_twice_in_code_is_refused_too() -> None:
    pods = builtin("pods")
    config = load_config(None, env={}, overrides={"resources": "pods"})
    twice = config.model_copy(
        update={
            "resources": (
                *config.resources,
                dataclasses.replace(config.resources[0], namespace="a"),
            )
        }
    )
    assert twice.resources[1].rtype == pods
    with pytest.raises(ConfigError, match="pods is configured twice: one entry per resource"):
        wire(twice)


def test_the_upstream_loader_follows_in_cluster_kubeconfig_and_context(tmp_path: Path) -> None:
    chosen = {
        value: outcome({"upstream.inCluster": value, "upstream.context": "c"})
        for value in ("auto", "false")
    }
    auto, kubeconfig = (chosen[v] for v in ("auto", "false"))
    assert auto is not None and kubeconfig is not None
    assert auto[1].upstream[0].__name__ == "load_upstream"
    assert kubeconfig[1].upstream == (kubeconfig[1].upstream[0], (None, "c"))
    assert kubeconfig[1].upstream[0].__name__ == "load_kubeconfig"


def test_the_summarys_sentences_name_only_declared_settings() -> None:
    assert set(SHOWN) <= set(SETTINGS)


def test_consistent_reads_are_wired_per_resource_with_the_server_limits() -> None:
    config, wiring = outcome(
        {
            "resources": "[{resource: pods}, {resource: configmaps, consistentReads: cache},"
            " {resource: secrets, consistentReads: strict},"
            " {resource: services, consistentReads: consistent}]",
            "server.limits.consistentProbesPerSecond": "25",
            "server.limits.consistentReadTimeoutSeconds": "1.5",
            "server.limits.consistentReadConfirmAfterSeconds": "0.25",
            "server.limits.consistentReadFallback": "error",
        }
    ) or pytest.fail("refused")
    pods, configmaps, secrets, services = wiring.resources
    assert (pods.consistent_reads, configmaps.consistent_reads) == (True, False)
    modes = [r.consistency.mode for r in (pods, secrets, services)]
    assert modes == ["live", "strict", "strict"]  # `consistent` is strict's former name
    assert (pods.consistency.probes_per_second, pods.consistency.timeout) == (25, 1.5)
    assert pods.consistency.confirm_after == 0.25
    assert pods.consistency.on_timeout == "error"
    assert [r.consistent_reads for r in config.resources] == [
        "live",
        "cache",
        "strict",
        "consistent",
    ]
