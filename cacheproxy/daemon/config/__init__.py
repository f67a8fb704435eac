"""The daemon's configuration: one YAML file, environment variables and flags, validated at once.

Each setting is declared once, as a field of the model's dataclasses (:mod:`.model`: type,
default, bounds, doc); validation, the environment and ``--set`` names, the summary and the
reference tables of ``docs/configuration.md`` are derived from that declaration
(:mod:`.settings`). The modules, by concept:

- :mod:`.model`: the dataclasses the daemon is built from, and their declarations;
- :mod:`.settings`: reading declarations back (paths, kinds, bounds, docs) and validating a value;
- :mod:`.sources`: the file, variables and flags as YAML nodes that remember where they were
  written, and the problems found, reported together;
- :mod:`.entry`: one item of ``resources``: what it may say, and the one string grammar of a
  resource;
- :mod:`.resourcelist`: the ``resources`` list read, every problem located;
- :mod:`.load`: merging the sources, the rules between settings, assembling the model;
- :mod:`.describe`: the summary ``check-config`` prints;
- :mod:`.reference`: the generated tables of ``docs/configuration.md``.
"""

from cacheproxy.daemon.config.describe import describe
from cacheproxy.daemon.config.entry import RESOURCE_GRAMMAR, parse_custom_resource
from cacheproxy.daemon.config.load import SETTING_PATHS, load_config, load_logging
from cacheproxy.daemon.config.model import (
    SETTINGS,
    AuthMode,
    AuthSettings,
    DaemonConfig,
    LogFormat,
    LoggingSettings,
    LogLevel,
    ResourceConfig,
    ServerLimits,
    ServerSettings,
    TLSSettings,
    UpstreamSettings,
    resolve_upstream,
)
from cacheproxy.daemon.config.settings import env_var_name

__all__ = [
    "RESOURCE_GRAMMAR",
    "SETTINGS",
    "SETTING_PATHS",
    "AuthMode",
    "AuthSettings",
    "DaemonConfig",
    "LogFormat",
    "LogLevel",
    "LoggingSettings",
    "ResourceConfig",
    "ServerLimits",
    "ServerSettings",
    "TLSSettings",
    "UpstreamSettings",
    "describe",
    "env_var_name",
    "load_config",
    "load_logging",
    "parse_custom_resource",
    "resolve_upstream",
]
