"""The commands that read the daemon's configuration: ``serve``, ``check-config`` and ``rbac``.

They share the configuration's flags: ``--config FILE``, ``--set PATH=VALUE`` and shortcuts for
a few settings (``--port`` is ``--set server.port``), each named, typed and documented by the
setting's declaration. The CLI only maps flags to settings; :mod:`cacheproxy.daemon.config`
validates them with the file and the environment, flags first.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import os
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from cacheproxy.cli.running import HelpFormatter, resume_collector, stop_on_signals
from cacheproxy.errors import CacheProxyError, ConfigError, ListenError
from cacheproxy.tasks import cancel_and_wait

__all__ = ["LOG_LEVEL", "add_parsers", "check_config_main", "overrides", "rbac_main", "serve_main"]

log = logging.getLogger("cacheproxy")

LOG_LEVEL: Final = "logging.level"
SHORTCUTS: Final = {
    "kubeconfig": "upstream.kubeconfig",
    "context": "upstream.context",
    "port": "server.port",
    "address": "server.address",
    "log_level": LOG_LEVEL,
}
"""Flags that stand for ``--set PATH=VALUE`` (by argparse dest)."""


def add_parsers(sub: Any, parent: argparse.ArgumentParser) -> None:
    serve = sub.add_parser(
        "serve",
        parents=[parent],
        formatter_class=HelpFormatter,
        help="run the cache proxy",
        description="List and watch the configured resources upstream; serve list/get/watch "
        "from the cache. SIGHUP (or a changed config file) reloads the resources.",
    )
    _config_flags(serve)
    check = sub.add_parser(
        "check-config",
        parents=[parent],
        formatter_class=HelpFormatter,
        help="validate a configuration and say what it would do",
        description="Validate the configuration (the file, CACHEPROXY_* variables and flags, "
        "as serve reads them) without starting anything. Prints 'OK:' and a summary of what "
        "would be cached, from where and how it would be served (exit 0), or every problem "
        "with where it was written (exit 1). Certificate and token files are not read.",
    )
    _config_flags(check)
    check.add_argument(
        "--live",
        action="store_true",
        help="also ask upstream (the configured kubeconfig or in-cluster credentials): a sample "
        "of each indexed resource must have a value at every index path (a typo otherwise "
        "leaves the index empty)",
    )
    rbac = sub.add_parser(
        "rbac",
        parents=[parent],
        formatter_class=HelpFormatter,
        help="print the ClusterRole a configuration needs (read-only)",
        description="Print the least-privilege ClusterRole the configuration needs: get, list "
        "and watch on exactly the configured resources (and reviews for delegated auth).",
    )
    _config_flags(rbac)
    rbac.add_argument("--name", default="cacheproxy", help="the ClusterRole's name")


def _config_flags(parser: argparse.ArgumentParser) -> None:
    from cacheproxy.daemon.config import SETTINGS
    from cacheproxy.daemon.config.reference import default_text

    parser.add_argument(
        "--config",
        type=Path,
        default=Path(os.environ["CACHEPROXY_CONFIG"])
        if os.environ.get("CACHEPROXY_CONFIG")
        else None,
        metavar="FILE",
        help="the YAML configuration file (docs/configuration.md); default $CACHEPROXY_CONFIG, "
        "else none: the defaults, the environment and flags",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="PATH=VALUE",
        help="set one setting by its dotted path, e.g. --set server.port=9090 or --set "
        "resources=pods,apps/v1/deployments (repeatable; beats the environment and the file)",
    )
    for dest, path in SHORTCUTS.items():
        if dest == "log_level":
            continue  # every command has it (the parent parser)
        setting = SETTINGS[path]
        default = default_text(setting).strip("`")
        parser.add_argument(
            f"--{dest.replace('_', '-')}",
            dest=dest,
            metavar=setting.key.upper(),
            help=f"same as --set {path}=…" + (f" (default: {default})" if default != "—" else ""),
        )


def overrides(args: argparse.Namespace) -> dict[str, str]:
    """The flags as ``--set`` paths and values (a shortcut flag beats ``--set``)."""
    out: dict[str, str] = {}
    for item in getattr(args, "set", []):
        path, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--set {item!r}: expected PATH=VALUE, e.g. server.port=9090")
        out[path.strip()] = value
    for dest, path in SHORTCUTS.items():
        value = getattr(args, dest, None)
        if value is not None:
            out[path] = str(value)
    return out


def check_config_main(
    path: Path | None,
    *,
    env: Mapping[str, str] = os.environ,
    overrides: Mapping[str, str] | None = None,
    live: bool = False,
) -> int:
    """``cacheproxy check-config --config FILE [--live]``: print ``OK: `` and the summary (0), or
    every problem (1); ``live``: also what upstream shows (index paths no object has)."""
    from cacheproxy.daemon.config import describe, load_config

    try:
        config = load_config(path, env=env, overrides=overrides or {})
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 1
    if live:
        problems = asyncio.run(_live_problems(config))
        if problems:
            print("\n".join(problems), file=sys.stderr)
            return 1
    print(f"OK: {describe(config)}")
    return 0


async def _live_problems(config: Any) -> list[str]:
    """What upstream shows is wrong with the configuration: custom resources its discovery does
    not describe (a CRD not installed) or describes otherwise, and index paths no object of a
    sample (the first page of each indexed resource) has."""
    from cacheproxy.daemon.config import resolve_upstream
    from cacheproxy.daemon.customresources import describe
    from cacheproxy.daemon.indexcheck import SAMPLE, empty_indexes
    from cacheproxy.informer import ListRequest
    from cacheproxy.kube.resources import BUILTIN_RESOURCES
    from cacheproxy.upstream import ApiListerWatcher, build_client

    problems: list[str] = []
    try:
        upstream = resolve_upstream(config.upstream)
    except ConfigError as exc:
        return [f"--live: {exc}"]
    async with build_client(upstream) as client:
        custom = [spec.rtype for spec in config.resources if spec.rtype not in BUILTIN_RESOURCES]
        described = await describe(client, custom)
        for rtype in custom:
            gvr = (rtype.group, rtype.version, rtype.resource)
            found = described.found.get(gvr)
            if found is None:
                problems.append(f"{rtype.config_name}: {described.problems[gvr]}")
            elif rtype.kind and (rtype.kind, rtype.namespaced) != (found.kind, found.namespaced):
                scope = {True: "namespaced", False: "cluster-scoped"}
                problems.append(
                    f"{rtype.config_name}: upstream's discovery says kind {found.kind}, "
                    f"{scope[found.namespaced]}; the configuration says kind {rtype.kind}, "
                    f"{scope[rtype.namespaced]}"
                )
        for spec in config.resources:
            rtype = spec.rtype
            if spec.from_discovery:
                rtype = described.found.get((rtype.group, rtype.version, rtype.resource))
            if not spec.indexes or rtype is None:
                continue
            collection = dataclasses.replace(spec, rtype=rtype).collection
            lw = ApiListerWatcher(
                client,
                rtype,
                namespace=collection.namespace,
                label_selector=collection.label_selector,
                field_selector=collection.field_selector,
            )
            try:
                page = await lw.list(ListRequest(resource_version="0", limit=SAMPLE))
            except CacheProxyError as exc:
                problems.append(f"{spec.rtype.config_name}: cannot list upstream: {exc}")
                continue
            name = spec.rtype.config_name
            problems += [f.describe(name) for f in empty_indexes(page.items, spec.indexes)]
    return problems


def rbac_main(
    path: Path | None, *, overrides: Mapping[str, str] | None = None, name: str = "cacheproxy"
) -> int:
    """``cacheproxy rbac --config FILE``: print the ClusterRole the configuration needs. A
    configuration error raises ConfigError (the CLI prints it and exits 2)."""
    from cacheproxy.daemon.config import load_config
    from cacheproxy.daemon.rbac import render_cluster_role

    config = load_config(path, overrides=overrides or {})
    source = str(path) if path is not None else None
    sys.stdout.write(render_cluster_role(config, name, source))
    return 0


async def _run_daemon(daemon: Any, stop: asyncio.Event, reloader: Any = None) -> None:
    """Start, wait for a signal, shut down in order (not ready → stop accepting → close
    watches → stop informers). SIGHUP (and a changed config file) reload the resources."""
    stop_on_signals(stop)
    await daemon.start()
    resume_collector()  # paused by main() until now: the snapshots restored (cli.running)
    if reloader is not None:
        asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, reloader.request)
        reloader.start()
    ready = asyncio.create_task(daemon.wait_ready(), name="wait-ready")
    ready.add_done_callback(
        lambda t: (
            log.info("ready: every resource synced") if not t.cancelled() and t.result() else None
        )
    )
    await stop.wait()
    log.info("shutting down")
    if reloader is not None:
        await reloader.stop()
    await cancel_and_wait(ready)
    await daemon.stop()


async def serve_main(args: argparse.Namespace) -> int:
    daemon, reloader = _build_daemon(args)
    try:
        await _run_daemon(daemon, asyncio.Event(), reloader)
    except ListenError as err:
        raise err.with_hint(
            "choose another with --port, --set server.port=PORT, CACHEPROXY_SERVER_PORT or "
            "server.port in the config file"
        ) from None
    return 0


def _build_daemon(args: argparse.Namespace) -> tuple[Any, Any]:
    from cacheproxy.daemon.config import describe, load_config
    from cacheproxy.daemon.logs import configure_logging
    from cacheproxy.daemon.persistence import prefetch_snapshots
    from cacheproxy.daemon.reload import ConfigReloader
    from cacheproxy.daemon.runtime import Daemon
    from cacheproxy.daemon.wiring import wire

    flags = overrides(args)
    config = load_config(args.config, overrides=flags)
    wiring = wire(config)
    # Read while the upstream's credentials load (a warm restart's snapshots: docs/operations.md).
    prefetch_snapshots(wiring.persistence, (spec.rtype.config_name for spec in config.resources))
    configure_logging(wiring.log_level, wiring.log_format.value)
    for warning in wiring.warnings:
        log.warning("%s", warning)
    log.info("%s", describe(config))
    daemon = Daemon(config, wiring.load_upstream())
    reloader = ConfigReloader(
        args.config, lambda: load_config(args.config, overrides=flags), daemon.reload
    )
    return daemon, reloader
