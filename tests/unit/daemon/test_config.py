"""The daemon's configuration: loading, defaults, precedence, and line-precise validation."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Mapping
from pathlib import Path

import pytest
import yaml

from cacheproxy.cli.configured import check_config_main
from cacheproxy.daemon.config import (
    SETTING_PATHS,
    AuthMode,
    AuthSettings,
    DaemonConfig,
    LogFormat,
    LoggingSettings,
    ServerLimits,
    ServerSettings,
    UpstreamSettings,
    describe,
    env_var_name,
    load_config,
    resolve_upstream,
)
from cacheproxy.errors import ConfigError
from cacheproxy.informer import Collection, Transform
from cacheproxy.kube.resources import ResourceType, builtin

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "deploy" / "config.example.yaml"
REFERENCE = REPO / "docs" / "configuration.md"


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Files are written to and named relative to a fresh directory, so locations read
    ``config.yaml:3:5``."""
    monkeypatch.chdir(tmp_path)


def write(text: str, name: str = "config.yaml") -> Path:
    path = Path(name)
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def load(
    path: Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, str] | None = None,
) -> DaemonConfig:
    return load_config(path, env=env or {}, overrides=overrides or {})


def problems(
    path: Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, str] | None = None,
) -> list[str]:
    """The problems one ConfigError lists, one per line."""
    with pytest.raises(ConfigError) as info:
        load(path, env, overrides)
    lines = str(info.value).splitlines()
    if len(lines) == 1:
        return lines
    assert lines[0] == f"{len(lines) - 1} problems in the configuration:"
    return [line.strip() for line in lines[1:]]


# ------------------------------------------------------------------------------ loading, defaults


def test_the_example_config_loads_as_documented() -> None:
    config = load(EXAMPLE)
    pods, deployments, configmaps = config.resources
    assert pods.rtype == builtin("pods")
    assert pods.indexes == ("spec.nodeName", "metadata.ownerReferences[*].uid")
    assert pods.history == 200_000
    assert deployments.rtype == builtin("apps/v1/deployments")
    assert configmaps.namespace == "shop"
    assert configmaps.label_selector == "app.kubernetes.io/part-of=shop"
    assert configmaps.transform == Transform(metadata_only=True)
    assert config.server.address == "0.0.0.0"
    assert config.server.auth.mode is AuthMode.DELEGATED
    assert config.server.tls is not None
    assert config.server.tls.cert_file == Path("/etc/cacheproxy/tls/tls.crt")
    assert config.logging.format is LogFormat.JSON
    assert config.warnings == ()


def test_resources_from_the_environment_are_enough_and_everything_else_is_default() -> None:
    config = load(env={"CACHEPROXY_RESOURCES": "pods,apps/v1/deployments"})
    assert [r.rtype for r in config.resources] == [builtin("pods"), builtin("deployments")]
    assert config.upstream == UpstreamSettings()
    assert config.server == ServerSettings()
    assert config.logging == LoggingSettings()
    assert config.source == "defaults"
    assert config.overridden_by == ("$CACHEPROXY_RESOURCES",)


def test_the_defaults_are_the_documented_values() -> None:
    config = load(write("resources: [pods]"))
    pods = config.resources[0]
    assert (pods.namespace, pods.label_selector, pods.field_selector, pods.indexes) == (
        None,
        "",
        "",
        (),
    )
    assert pods.transform == Transform(drop_fields=("metadata.managedFields",))
    assert pods.history == 100_000
    assert config.upstream == UpstreamSettings(
        kubeconfig=None,
        context=None,
        in_cluster=None,
        watch_list=True,
        page_size=500,
        min_watch_timeout_seconds=300.0,
    )
    assert config.server == ServerSettings(
        address="127.0.0.1",
        port=8080,
        tls=None,
        auth=AuthSettings(mode=AuthMode.NONE, token_file=None),
        allow_unauthenticated_non_loopback=False,
        limits=ServerLimits(
            max_watchers=10_000,
            watch_buffer=1_000,
            rv_wait_seconds=3.0,
            bookmark_interval_seconds=60.0,
            continue_token_ttl_seconds=300.0,
            max_page_size=10_000,
        ),
    )
    assert config.logging == LoggingSettings(level="info", format=LogFormat.TEXT)
    assert config.source == "config.yaml"


def test_a_null_value_in_the_file_means_the_default() -> None:
    config = load(write("resources: [pods]\nserver:\n  port:\n  tls:\n"))
    assert config.server.port == 8080
    assert config.server.tls is None


def test_nothing_to_cache_is_an_error_that_says_how_to_list_resources() -> None:
    assert problems() == [
        "configuration: resources: nothing to cache: list at least one resource (in the file, "
        "$CACHEPROXY_RESOURCES or --set resources=pods,apps/v1/deployments)"
    ]
    assert problems(write("resources: []\n"))[0].startswith("config.yaml:1:12: resources: ")


def test_the_settings_map_onto_the_informer_and_reflector_types() -> None:
    config = load(
        write(
            """
            resources:
              - resource: pods
                namespace: shop
                labelSelector: app=web
                fieldSelector: status.phase=Running
            upstream: {watchList: false, pageSize: 100, minWatchTimeoutSeconds: 60}
            """
        )
    )
    assert config.resources[0].collection == Collection(
        builtin("pods"), "shop", "app=web", "status.phase=Running"
    )
    options = config.upstream.reflector_options()
    assert (options.watch_list, options.page_size, options.min_watch_timeout) == (
        False,
        100,
        60.0,
    )


# ------------------------------------------------------------------------------ located problems


def test_an_invalid_index_path_is_reported_at_its_line_and_column() -> None:
    path = write(
        """
        resources:
          - resource: pods
            indexes:
              - spec.nodeName
              - spec..x
        """
    )
    assert problems(path) == [
        "config.yaml:5:9: resources[0].indexes[1]: invalid field path 'spec..x': "
        "expected dotted names like spec.nodeName"
    ]


def test_a_value_of_the_wrong_type_says_what_was_expected() -> None:
    path = write('resources: [pods]\nserver:\n  port: "8080"\n')
    assert problems(path) == [
        "config.yaml:3:9: server.port: expected an integer, got a string ('8080')"
    ]


def test_a_value_out_of_range_gives_the_range() -> None:
    path = write("resources: [{resource: pods, history: 10}]\nserver: {port: 70000}\n")
    assert problems(path) == [
        "config.yaml:1:39: resources[0].history: must be between 1000 and 10000000, got 10",
        "config.yaml:2:16: server.port: must be between 0 and 65535, got 70000",
    ]


def test_every_problem_is_reported_at_once_in_file_order() -> None:
    path = write(
        """
        resources:
          - resource: pods
            labelSelector: "app in (a,"
          - resource: nodes
            namespace: default
        server:
          address: 0.0.0.0
          prot: 9090
        logging:
          level: loud
        """
    )
    assert problems(path) == [
        "config.yaml:3:20: resources[0].labelSelector: invalid selector 'app in (a,': "
        "unable to parse requirement: found '', expected: ',', or identifier",
        "config.yaml:5:16: resources[1].namespace: nodes is cluster-scoped: it has no namespace",
        "config.yaml:7:12: server.address: 0.0.0.0 is not a loopback address: anyone who can "
        "reach it could read the cache; set server.auth.mode (token or delegated), or require "
        "client certificates (server.tls.clientCAFile), or set "
        "server.allowUnauthenticatedNonLoopback: true",
        'config.yaml:8:3: server.prot: unknown key; did you mean "port"?',
        "config.yaml:10:10: logging.level: expected one of debug, info, warning, error; "
        "got a string ('loud')",
    ]


def test_an_unknown_key_suggests_the_closest_known_key() -> None:
    path = write(
        """
        resources:
          - resource: pods
            label_selector: app=web
            indexs: [spec.nodeName]
        sever: {}
        """
    )
    assert problems(path) == [
        'config.yaml:3:5: resources[0].label_selector: unknown key; did you mean "labelSelector"?',
        'config.yaml:4:5: resources[0].indexs: unknown key; did you mean "indexes"?',
        'config.yaml:5:1: sever: unknown key; did you mean "server"?',
    ]


def test_an_unknown_key_with_nothing_close_lists_the_known_keys() -> None:
    path = write("resources: [pods]\nlogging: {colour: red}\n")
    assert problems(path) == [
        "config.yaml:2:11: logging.colour: unknown key; expected one of: level, format"
    ]


def test_a_key_given_twice_is_an_error() -> None:
    path = write("resources: [pods]\nserver:\n  port: 1\n  port: 2\n")
    assert problems(path) == ["config.yaml:4:3: server.port: duplicate key (first at line 3)"]


def test_invalid_yaml_is_reported_where_it_breaks_and_nothing_else_is() -> None:
    path = write("resources:\n  - pods\n server: x\n")
    [problem] = problems(path)
    assert problem.startswith("config.yaml:3:2: not valid YAML: ")


def test_a_missing_file_is_an_error_naming_it() -> None:
    assert problems(Path("absent.yaml")) == [
        "absent.yaml: cannot read the configuration: No such file or directory"
    ]


def test_a_document_that_is_not_a_mapping_is_refused() -> None:
    assert problems(write("- pods\n")) == ["config.yaml:1:1: configuration: expected a mapping"]


# --------------------------------------------------------------------- environment and flags


def test_environment_variable_names_are_the_dotted_path_in_upper_snake_case() -> None:
    assert env_var_name("server.port") == "CACHEPROXY_SERVER_PORT"
    assert env_var_name("upstream.kubeconfig") == "CACHEPROXY_UPSTREAM_KUBECONFIG"
    assert env_var_name("logging.format") == "CACHEPROXY_LOGGING_FORMAT"
    assert env_var_name("upstream.inCluster") == "CACHEPROXY_UPSTREAM_IN_CLUSTER"
    assert env_var_name("server.tls.clientCAFile") == "CACHEPROXY_SERVER_TLS_CLIENT_CA_FILE"
    assert (
        env_var_name("server.limits.continueTokenTTLSeconds")
        == "CACHEPROXY_SERVER_LIMITS_CONTINUE_TOKEN_TTL_SECONDS"
    )


def test_a_flag_beats_the_environment_which_beats_the_file() -> None:
    path = write(
        "resources: [pods]\nserver: {port: 8081, address: '::1'}\nlogging: {level: debug}\n"
    )
    env = {"CACHEPROXY_SERVER_PORT": "9090", "CACHEPROXY_LOGGING_FORMAT": "json"}
    assert load(path).server.port == 8081
    assert load(path, env).server.port == 9090
    config = load(path, env, {"server.port": "9191"})
    assert config.server.port == 9191
    assert config.server.address == "::1"  # from the file
    assert config.logging == LoggingSettings(level="debug", format=LogFormat.JSON)
    assert config.overridden_by == ("--set server.port", "$CACHEPROXY_LOGGING_FORMAT")


def test_environment_values_are_converted_to_each_settings_type() -> None:
    config = load(
        env={
            "CACHEPROXY_RESOURCES": "pods",
            "CACHEPROXY_UPSTREAM_WATCH_LIST": "no",
            "CACHEPROXY_UPSTREAM_IN_CLUSTER": "false",
            "CACHEPROXY_UPSTREAM_KUBECONFIG": "kube/config",
            "CACHEPROXY_SERVER_LIMITS_RV_WAIT_SECONDS": "0.5",
            "CACHEPROXY_SERVER_AUTH_MODE": "Token",
            "CACHEPROXY_SERVER_AUTH_TOKEN_FILE": "/etc/tokens.csv",
        }
    )
    assert config.upstream.watch_list is False
    assert config.upstream.in_cluster is False
    assert config.upstream.kubeconfig == Path("kube/config")  # relative to the working directory
    assert config.server.limits.rv_wait_seconds == 0.5
    assert config.server.auth == AuthSettings(
        mode=AuthMode.TOKEN, token_file=Path("/etc/tokens.csv")
    )


def test_a_bad_environment_value_names_the_variable() -> None:
    env = {"CACHEPROXY_RESOURCES": "pods", "CACHEPROXY_SERVER_PORT": "http"}
    assert problems(env=env) == [
        "$CACHEPROXY_SERVER_PORT: server.port: expected an integer, got 'http'"
    ]


def test_an_empty_environment_value_is_refused_for_a_setting_that_needs_one() -> None:
    env = {"CACHEPROXY_RESOURCES": "pods", "CACHEPROXY_SERVER_ADDRESS": " "}
    assert problems(env=env) == ["$CACHEPROXY_SERVER_ADDRESS: server.address: must not be empty"]


def test_an_empty_environment_value_clears_an_optional_setting() -> None:
    path = write("resources: [pods]\nupstream: {context: prod}\n")
    assert load(path, {"CACHEPROXY_UPSTREAM_CONTEXT": ""}).upstream.context is None


def test_a_bad_flag_value_names_the_flag() -> None:
    assert problems(overrides={"resources": "pods", "logging.format": "xml"}) == [
        "--set logging.format: logging.format: expected one of text, json; got a string ('xml')"
    ]


def test_an_unknown_flag_suggests_the_closest_setting() -> None:
    assert problems(overrides={"resources": "pods", "server.limits.maxWatcher": "1"}) == [
        '--set server.limits.maxWatcher: unknown setting; did you mean "server.limits.maxWatchers"?'
    ]


def test_a_flag_into_one_resource_entry_says_to_set_resources_as_a_whole() -> None:
    for key in ("resources[0].indexes", "resources.0.indexes"):
        (problem,) = problems(overrides={"resources": "pods", key: "spec.nodeName"})
        assert problem.startswith(f"--set {key}: one resource entry cannot be set alone: ")
        assert "--set 'resources=[{resource: pods, indexes: [spec.nodeName]}" in problem


def test_an_unknown_variable_in_a_settings_section_is_an_error_with_a_suggestion() -> None:
    env = {"CACHEPROXY_RESOURCES": "pods", "CACHEPROXY_SERVER_PROT": "9090"}
    assert problems(env=env) == [
        "$CACHEPROXY_SERVER_PROT: unknown setting; did you mean $CACHEPROXY_SERVER_PORT?"
    ]


def test_other_commands_variables_and_service_links_are_left_alone() -> None:
    env = {
        "CACHEPROXY_RESOURCES": "pods",
        "CACHEPROXY_SIM_PORT": "8001",
        "CACHEPROXY_LOG_LEVEL": "debug",
        "CACHEPROXY_SERVER_SERVICE_HOST": "10.96.0.5",
        "CACHEPROXY_SERVER_SERVICE_PORT_HTTPS": "8443",
        "CACHEPROXY_SERVER_PORT_8443_TCP_ADDR": "10.96.0.5",
    }
    assert load(env=env).server.port == 8080


def test_a_service_link_value_in_a_setting_is_explained() -> None:
    env = {"CACHEPROXY_RESOURCES": "pods", "CACHEPROXY_SERVER_PORT": "tcp://10.96.0.5:8443"}
    [problem] = problems(env=env)
    assert problem.startswith(
        "$CACHEPROXY_SERVER_PORT: server.port: 'tcp://10.96.0.5:8443' is a Kubernetes service "
        "link variable"
    )
    assert "enableServiceLinks: false" in problem


def test_resources_from_the_environment_replace_the_files_list() -> None:
    path = write("resources: [pods, configmaps]\n")
    config = load(path, {"CACHEPROXY_RESOURCES": "nodes"})
    assert [r.rtype.resource for r in config.resources] == ["nodes"]


def test_resources_as_yaml_in_a_variable_are_located_inside_it() -> None:
    env = {"CACHEPROXY_RESOURCES": '[{resource: pods, indexes: ["spec..x"]}]'}
    assert problems(env=env) == [
        "$CACHEPROXY_RESOURCES:1:29: resources[0].indexes[0]: invalid field path 'spec..x': "
        "expected dotted names like spec.nodeName"
    ]
    env = {"CACHEPROXY_RESOURCES": '[{resource: pods, indexes: ["spec.nodeName"]}]'}
    assert load(env=env).resources[0].indexes == ("spec.nodeName",)


def test_a_bad_name_in_a_comma_list_is_located_by_its_column() -> None:
    assert problems(overrides={"resources": "pods, podz"}) == [
        "--set resources:1:7: resources[1].resource: unknown resource 'podz'; "
        'did you mean "pods"? (any other resource is GROUP/VERSION/PLURAL)'
    ]


# ------------------------------------------------------------------------------ resource rules


@pytest.mark.parametrize("name", ["*", "all", "*/v1/*", "apps/v1/*"])
def test_wildcards_are_refused_so_secrets_are_only_cached_by_name(name: str) -> None:
    path = write(f'resources:\n  - resource: "{name}"\n')
    assert problems(path) == [
        f"config.yaml:2:15: resources[0].resource: {name!r}: wildcards are refused; list each "
        "resource by name (Secrets are cached only when named explicitly)"
    ]


def test_secrets_listed_by_name_are_cached_with_a_warning() -> None:
    config = load(write("resources: [pods, secrets]\n"))
    assert not config.resources[0].is_secret
    assert config.resources[1].is_secret
    assert config.caches_secrets
    assert config.warnings == ("Secrets are cached: every client of this proxy can read them",)
    assert not load(write("resources: [pods]\n")).caches_secrets
    delegated = load(write("resources: [secrets]\nserver: {auth: {mode: delegated}}\n"))
    assert delegated.warnings == (
        "Secrets are cached in memory (clients read those their RBAC allows)",
    )


def test_built_in_resources_resolve_by_any_of_their_names() -> None:
    config = load(write("resources: [po, deployments.apps, apps/v1/replicasets, Nodes]\n"))
    assert [r.rtype.config_name for r in config.resources] == [
        "pods",
        "apps/v1/deployments",
        "apps/v1/replicasets",
        "nodes",
    ]


def test_a_custom_resource_without_its_kind_or_scope_is_left_to_upstreams_discovery() -> None:
    path = write(
        """
        resources:
          - example.com/v1/widgets
          - resource: example.com/v1/gadgets
            kind: Gadget
          - resource: example.com/v1/gizmos
            namespace: team-a
        """
    )
    config = load(path)
    assert [(r.rtype.config_name, r.rtype.kind, r.from_discovery) for r in config.resources] == [
        ("example.com/v1/widgets", "", True),
        ("example.com/v1/gadgets", "", True),  # the written kind is checked against it
        ("example.com/v1/gizmos", "", True),
    ]
    # The namespace of a resource whose scope is not known yet is checked once it is.
    assert config.resources[2].namespace == "team-a"


def test_a_kind_of_a_built_in_group_outside_the_table_is_left_to_upstreams_discovery() -> None:
    path = write(
        """
        resources:
          - flowcontrol.apiserver.k8s.io/v1/flowschemas
          - resource: rbac.authorization.k8s.io/v1/roles
            kind: Role
            namespaced: true
        """
    )
    config = load(path)
    assert [
        (r.rtype.config_name, r.rtype.kind, r.from_discovery, r.written_kind, r.written_namespaced)
        for r in config.resources
    ] == [
        ("flowcontrol.apiserver.k8s.io/v1/flowschemas", "", True, None, None),
        # Written, and checked against upstream's discovery before it is served.
        ("rbac.authorization.k8s.io/v1/roles", "", True, "Role", True),
    ]


def test_a_custom_resource_is_built_from_its_kind_and_scope_in_either_form() -> None:
    path = write(
        """
        resources:
          - resource: example.com/v1/widgets
            kind: Widget
            namespaced: true
          - example.com/v1beta1/gizmos:Gizmo:cluster
        """
    )
    widgets, gizmos = (r.rtype for r in load(path).resources)
    assert widgets == ResourceType("example.com", "v1", "widgets", "Widget", namespaced=True)
    assert gizmos == ResourceType("example.com", "v1beta1", "gizmos", "Gizmo", namespaced=False)


def test_a_malformed_custom_resource_name_says_which_part_is_wrong() -> None:
    path = write("resources:\n  - {resource: Example.com/1/widgets, kind: W, namespaced: true}\n")
    assert problems(path) == [
        "config.yaml:2:16: resources[0].resource: invalid resource 'Example.com/1/widgets': "
        "group 'Example.com' is not a DNS subdomain; version '1' is not like v1 or v1beta1"
    ]


def test_a_built_in_resource_cannot_be_given_another_kind() -> None:
    path = write("resources:\n  - {resource: pods, kind: Widget}\n")
    assert problems(path) == [
        "config.yaml:2:28: resources[0].kind: pods is built in: its kind is Pod"
    ]


def test_label_selector_syntax_is_checked() -> None:
    path = write('resources:\n  - {resource: pods, labelSelector: "app in (a,b"}\n')
    [problem] = problems(path)
    assert problem.startswith(
        "config.yaml:2:37: resources[0].labelSelector: invalid selector 'app in (a,b': "
    )


def test_a_field_selector_on_a_field_the_api_server_does_not_support_is_refused() -> None:
    path = write("resources:\n  - {resource: pods, fieldSelector: spec.image=nginx}\n")
    assert problems(path) == [
        "config.yaml:2:37: resources[0].fieldSelector: invalid selector 'spec.image=nginx': "
        "field label not supported: spec.image"
    ]


def test_a_custom_resources_field_selector_is_only_checked_for_syntax() -> None:
    path = write(
        "resources:\n"
        "  - {resource: example.com/v1/widgets, kind: Widget, namespaced: true,"
        " fieldSelector: spec.color=red}\n"
    )
    assert load(path).resources[0].field_selector == "spec.color=red"


def test_the_same_collection_twice_is_an_error_even_with_selectors_reordered() -> None:
    path = write(
        """
        resources:
          - {resource: pods, labelSelector: "a=1,b=2"}
          - {resource: po, labelSelector: "b=2,a=1"}
        """
    )
    assert problems(path) == [
        "config.yaml:3:16: resources[1]: caches the same collection as resources[0] "
        "(config.yaml:2:16): same resource, namespace and selectors"
    ]


def test_one_resource_in_two_namespaces_is_refused_naming_both_entries() -> None:
    path = write(
        "resources:\n  - {resource: pods, namespace: a}\n  - {resource: pods, namespace: b}\n"
    )
    assert problems(path) == [
        "config.yaml:3:16: resources[1]: caches pods again: resources[0] (config.yaml:2:16) "
        "caches it with another namespace or selectors, and the server serves one collection "
        "per resource; keep one entry whose namespace and selectors cover both"
    ]


def test_one_resource_with_two_selectors_is_refused_wherever_the_entries_come_from() -> None:
    env = {"CACHEPROXY_RESOURCES": "[pods, {resource: po, labelSelector: app=x}]"}
    [problem] = problems(env=env)
    assert problem.startswith(
        "$CACHEPROXY_RESOURCES:1:19: resources[1]: caches pods again: resources[0] "
        "($CACHEPROXY_RESOURCES:1:2) caches it with another namespace or selectors"
    )


def test_drop_fields_can_be_emptied_but_cannot_fan_out() -> None:
    path = write("resources:\n  - {resource: pods, transform: {dropFields: []}}\n")
    assert load(path).resources[0].transform == Transform(drop_fields=())
    path = write('resources:\n  - {resource: pods, transform: {dropFields: ["a[*].b"]}}\n')
    assert problems(path) == [
        "config.yaml:2:47: resources[0].transform.dropFields[0]: 'a[*].b': a dropped field "
        "cannot fan out over a list ([*])"
    ]


def test_an_index_listed_twice_is_an_error() -> None:
    path = write("resources:\n  - {resource: pods, indexes: [spec.nodeName, spec.nodeName]}\n")
    assert problems(path) == [
        "config.yaml:2:47: resources[0].indexes[1]: 'spec.nodeName' is listed twice"
    ]


# ------------------------------------------------------------------------------ server rules


@pytest.mark.parametrize("address", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
def test_loopback_addresses_need_no_authentication(address: str) -> None:
    config = load(write(f"resources: [pods]\nserver: {{address: '{address}'}}\n"))
    assert config.server.loopback
    assert config.warnings == ()


@pytest.mark.parametrize("address", ["0.0.0.0", "::", "10.1.2.3", "cache.example.com"])
def test_a_non_loopback_address_without_authentication_is_refused(address: str) -> None:
    [problem] = problems(write(f"resources: [pods]\nserver: {{address: '{address}'}}\n"))
    assert problem.startswith(
        f"config.yaml:2:19: server.address: {address} is not a loopback address"
    )


def test_a_non_loopback_address_without_authentication_can_be_allowed_explicitly() -> None:
    path = write("resources: [pods]\nserver: {address: 0.0.0.0}\n")
    config = load(path, {"CACHEPROXY_SERVER_ALLOW_UNAUTHENTICATED_NON_LOOPBACK": "true"})
    assert config.warnings == (
        "serving 0.0.0.0 without authentication (server.allowUnauthenticatedNonLoopback is true)",
    )


def test_token_auth_or_required_client_certificates_count_as_authentication() -> None:
    base = "resources: [pods]\nserver:\n  address: 0.0.0.0\n"
    tokens = load(write(base + "  auth: {mode: token, tokenFile: tokens.csv}\n"))
    assert tokens.server.authenticated
    assert tokens.warnings == (
        "bearer tokens travel in clear text: token auth off loopback without TLS (set server.tls)",
    )
    delegated = load(write(base + "  auth: {mode: delegated}\n"))
    assert delegated.server.authenticated
    assert delegated.warnings == (
        "bearer tokens travel in clear text: delegated auth off loopback without TLS "
        "(set server.tls)",
    )
    certs = load(
        write(base + "  tls: {certFile: tls.crt, keyFile: tls.key, clientCAFile: ca.crt}\n")
    )
    assert certs.server.authenticated
    assert certs.server.url == "https://0.0.0.0:8080"
    assert certs.warnings == ()


def test_relative_paths_in_the_file_are_relative_to_the_file() -> None:
    Path("etc").mkdir()
    path = write(
        "resources: [pods]\n"
        "server: {tls: {certFile: tls.crt, keyFile: /abs/tls.key}}\n"
        "upstream: {kubeconfig: ~/kc}\n",
        name="etc/config.yaml",
    )
    config = load(path)
    assert config.server.tls is not None
    assert config.server.tls.cert_file == Path("etc/tls.crt")
    assert config.server.tls.key_file == Path("/abs/tls.key")
    assert config.upstream.kubeconfig == Path("~/kc").expanduser()


def test_tls_needs_both_a_certificate_and_a_key() -> None:
    path = write("resources: [pods]\nserver:\n  tls: {keyFile: tls.key, clientCAFile: ca.crt}\n")
    assert problems(path) == [
        "config.yaml:3:18: server.tls.keyFile: needs server.tls.certFile too",
        "config.yaml:3:41: server.tls.clientCAFile: client certificates need TLS: set "
        "server.tls.certFile and keyFile, or server.tls.selfSigned: true",
    ]


def test_a_self_signed_certificate_is_the_daemons_own_or_yours_not_both() -> None:
    path = write("resources: [pods]\nserver:\n  tls: {selfSigned: true, certFile: a, keyFile: b}\n")
    assert problems(path) == [
        "config.yaml:3:21: server.tls.selfSigned: conflicts with server.tls.certFile / keyFile: "
        "the daemon makes its own certificate, or serves yours; choose one",
    ]
    config = load(write("resources: [pods]\nserver: {tls: {selfSigned: true}}\n"))
    assert config.server.tls is not None and config.server.tls.self_signed
    assert config.server.url.startswith("https://")
    assert load(write("resources: [pods]\nserver: {tls: {selfSigned: false}}\n")).server.tls is None
    assert load(write("resources: [pods]\n")).server.tls is None


def test_token_auth_needs_a_token_file_and_only_token_auth_reads_one() -> None:
    assert problems(write("resources: [pods]\nserver: {auth: {mode: token}}\n")) == [
        "config.yaml:2:23: server.auth.mode: token needs server.auth.tokenFile"
    ]
    path = write("resources: [pods]\nserver: {auth: {mode: delegated, tokenFile: t}}\n")
    assert problems(path) == [
        "config.yaml:2:45: server.auth.tokenFile: is only read with server.auth.mode: token "
        "(the mode is delegated)"
    ]


# ------------------------------------------------------------------------------ upstream


@pytest.mark.parametrize(
    ("written", "expected"),
    [("auto", None), ("true", True), ("false", False), ("'true'", True), ("no", False)],
)
def test_in_cluster_is_auto_true_or_false(written: str, expected: bool | None) -> None:
    config = load(write(f"resources: [pods]\nupstream: {{inCluster: {written}}}\n"))
    assert config.upstream.in_cluster is expected


def test_in_cluster_true_conflicts_with_a_kubeconfig() -> None:
    path = write("resources: [pods]\nupstream: {inCluster: true, kubeconfig: kc}\n")
    assert problems(path) == [
        "config.yaml:2:23: upstream.inCluster: true conflicts with upstream.kubeconfig / "
        "upstream.context: choose one"
    ]


def test_resolve_upstream_loads_the_configured_kubeconfig() -> None:
    Path("kc").write_text(
        yaml.safe_dump(
            {
                "clusters": [{"name": "c", "cluster": {"server": "https://k8s.example:6443"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    config = load(write("resources: [pods]\nupstream: {kubeconfig: kc, inCluster: false}\n"))
    upstream = resolve_upstream(config.upstream)
    assert upstream.server == "https://k8s.example:6443"
    assert upstream.source == "kubeconfig kc"


# ------------------------------------------------------------------------------ describe, check


def test_describe_says_what_is_cached_where_it_listens_and_how_clients_authenticate() -> None:
    summary = describe(load(EXAMPLE, {"CACHEPROXY_SERVER_PORT": "9443"}))
    lines = summary.splitlines()
    assert lines[0] == f"{EXAMPLE} (overridden by $CACHEPROXY_SERVER_PORT): 3 resources"
    assert lines[1:4] == [
        "  pods: all namespaces; indexes spec.nodeName, metadata.ownerReferences[*].uid; "
        "drops metadata.managedFields; history 200000 events",
        "  apps/v1/deployments: all namespaces; drops metadata.managedFields; "
        "history 100000 events",
        "  configmaps: namespace shop; labels app.kubernetes.io/part-of=shop; metadata only; "
        "drops metadata.managedFields; history 100000 events",
    ]
    assert lines[4] == (
        "upstream: in-cluster service account when running in a pod, else $KUBECONFIG or "
        "~/.kube/config; first sync by watch-list, else pages of 500; watches of at least 300 s; "
        "HTTP/1.1, a connection per watch, gzip only from a distant server"
    )
    assert lines[5] == (
        "server: https://0.0.0.0:9443, TokenReview upstream (cached 120 s); "
        "SubjectAccessReview upstream (allowed cached 300 s, denied 30 s)"
    )
    assert lines[-1] == "logging: info, json"


def test_describe_flags_cached_secrets_and_unauthenticated_loopback() -> None:
    summary = describe(load(env={"CACHEPROXY_RESOURCES": "secrets,nodes"}))
    assert "  nodes: cluster-scoped; drops metadata.managedFields; history 100000 events" in summary
    assert "server: http://127.0.0.1:8080, no authentication (loopback only)" in summary
    assert summary.splitlines()[-1] == (
        "WARNING: Secrets are cached: every client of this proxy can read them"
    )


def test_check_config_prints_ok_and_the_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert check_config_main(write("resources: [pods]\n"), env={}) == 0
    out = capsys.readouterr().out
    assert out.startswith("OK: config.yaml: 1 resource\n  pods: all namespaces;")


def test_check_config_prints_every_problem_and_fails(capsys: pytest.CaptureFixture[str]) -> None:
    path = write("resources: [podz]\nserver: {port: x}\n")
    assert check_config_main(path, env={}) == 1
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "2 problems in the configuration:",
        "  config.yaml:1:13: resources[0].resource: unknown resource 'podz'; did you mean "
        '"pods"? (any other resource is GROUP/VERSION/PLURAL)',
        "  config.yaml:2:16: server.port: expected an integer, got a string ('x')",
    ]


def test_the_reference_documents_every_setting_with_its_variable() -> None:
    text = REFERENCE.read_text()
    for path in SETTING_PATHS:
        key = path.split(".", 1)[1] if "." in path else path
        if path.startswith("server.") and path.count(".") == 2:
            key = path.split(".", 1)[1]  # tls.certFile, auth.mode, limits.maxWatchers
        assert re.search(rf"\| `{re.escape(key)}` \|", text), path
        assert env_var_name(path) in text, path
