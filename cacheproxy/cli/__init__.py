"""The ``cacheproxy`` command line. It only maps flags to configuration and starts things.

Subcommands:
  serve         run the cache proxy in front of the API server a configuration names
  demo          the simulator with demo data and churn, and the proxy in front of it
  check-config  validate a configuration and say what it would do
  rbac          print the least-privilege ClusterRole a configuration needs
  sim           run the built-in Kubernetes API server simulator (demo data, churn, faults, TLS, auth)
  completion    print a shell completion script (bash, zsh and others)

The log level is one setting, ``logging.level``, for every command: ``--log-level`` (before or
after the command) beats ``CACHEPROXY_LOGGING_LEVEL``, which beats the configuration file (for
the commands that read one), which beats the declared default.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

from cacheproxy import __version__
from cacheproxy.cli import configured, demo, sim
from cacheproxy.cli.running import HelpFormatter, pause_collector, resume_collector, run
from cacheproxy.errors import ConfigError

__all__ = ["build_parser", "main"]

log = logging.getLogger("cacheproxy")


def _log_level_flag() -> argparse.ArgumentParser:
    """``--log-level``, accepted before the command and after it (argparse.SUPPRESS: a command
    that is not given it does not overwrite what was given before it)."""
    from cacheproxy.daemon.config import SETTINGS

    setting = SETTINGS[configured.LOG_LEVEL]
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(
        "--log-level",
        choices=setting.choices,
        default=argparse.SUPPRESS,
        help=f"the setting {setting.path}; beats ${setting.env} and the configuration file "
        f"(default: {setting.default})",
    )
    return parent


def build_parser() -> argparse.ArgumentParser:
    log_level = _log_level_flag()
    parser = argparse.ArgumentParser(
        prog="cacheproxy",
        description="A fast, indexed cache in front of the Kubernetes API server: reads "
        "answered from memory, everything else passed through as its caller.",
        formatter_class=HelpFormatter,
        parents=[log_level],
    )
    parser.add_argument("--version", action="version", version=f"cacheproxy {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    configured.add_parsers(sub, log_level)
    demo.add_parser(sub, log_level)
    sim.add_parser(sub, log_level)
    _add_completion(sub)
    return parser


def _add_completion(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    import shtab

    parser = sub.add_parser(
        "completion",
        help=f"print a shell completion script ({', '.join(shtab.SUPPORTED_SHELLS)})",
        description="Print the completion script of cacheproxy's commands and flags for a "
        "shell, made from the command line's own declaration (shtab).",
        epilog="examples:\n"
        "  source <(cacheproxy completion bash)                 # this bash session\n"
        "  cacheproxy completion bash > ~/.local/share/bash-completion/completions/cacheproxy\n"
        '  cacheproxy completion zsh > "${fpath[1]}/_cacheproxy"  # zsh, then restart it',
        formatter_class=HelpFormatter,
    )
    parser.add_argument("shell", choices=shtab.SUPPORTED_SHELLS)


def _configure_logging(args: argparse.Namespace) -> None:
    """Logging before a configuration is read: ``logging.level`` from the flag and the
    environment (``serve`` configures it again once its file is read)."""
    from cacheproxy.daemon.config import LoggingSettings, load_logging
    from cacheproxy.daemon.logs import configure_logging

    flags = {configured.LOG_LEVEL: args.log_level} if "log_level" in args else {}
    try:
        settings = load_logging(overrides=flags)
    except ConfigError:
        if args.command != "serve":
            raise
        settings = LoggingSettings()  # serve reports it, with every other problem
    configure_logging(settings.level, settings.format.value)
    if "CACHEPROXY_LOG_LEVEL" in os.environ:
        log.warning("CACHEPROXY_LOG_LEVEL is not read: use CACHEPROXY_LOGGING_LEVEL")


def main(argv: Sequence[str] | None = None) -> int:
    pause_collector()  # until the command has started (cli.running); the modules import now
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if args.command == "completion":
            import shtab

            print(shtab.complete(parser, shell=args.shell), end="")
            return 0
        if args.command == "check-config":
            return configured.check_config_main(
                args.config, overrides=configured.overrides(args), live=args.live
            )
        if args.command == "rbac":
            return configured.rbac_main(
                args.config, overrides=configured.overrides(args), name=args.name
            )
        _configure_logging(args)
        if args.command == "serve":
            return run(configured.serve_main(args))  # resumes it once the daemon started
        if args.command == "demo":
            resume_collector()
            return run(demo.demo_main(args))
        return run(sim.sim_main(args))  # resumes it once the demo objects are loaded
    except ConfigError as err:
        print(f"cacheproxy: {err}", file=sys.stderr)
        return 2
    finally:
        resume_collector()
