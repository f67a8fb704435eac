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
from cacheproxy.errors import ApiError, CacheProxyError, ConfigError, ListenError
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
        "from the cache, and pass the rest through as its caller. SIGHUP (or a changed config "
        "file) reloads the resources.",
        epilog="examples:\n"
        "  cacheproxy serve --config my-config.yaml\n"
        "  cacheproxy serve --set resources=pods,configmaps --kubeconfig ~/.kube/config\n"
        "  cacheproxy serve --config my-config.yaml --port 9090 --log-level debug",
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
        epilog="examples:\n"
        "  cacheproxy check-config --config my-config.yaml\n"
        "  cacheproxy check-config --config my-config.yaml --live\n"
        "  CACHEPROXY_RESOURCES=pods cacheproxy check-config --set server.port=9090",
    )
    _config_flags(check)
    check.add_argument(
        "--live",
        action="store_true",
        help="also ask upstream (the configured kubeconfig or in-cluster credentials), one line "
        "per resource: served (kind and scope as configured), a list and a watch allowed, "
        "every index path present in a sample; exit 1 on any failure",
    )
    rbac = sub.add_parser(
        "rbac",
        parents=[parent],
        formatter_class=HelpFormatter,
        help="print the ClusterRole a configuration needs (read-only)",
        description="Print the least-privilege ClusterRole the configuration needs: get, list "
        "and watch on exactly the configured resources (and reviews for delegated auth).",
        epilog="examples:\n"
        "  cacheproxy rbac --config my-config.yaml | kubectl apply -f -\n"
        "  cacheproxy rbac --set resources=pods,apps/v1/deployments --name pod-cache",
    )
    _config_flags(rbac, shortcuts=False)
    rbac.add_argument("--name", default="cacheproxy", help="the ClusterRole's name")


def _config_flags(parser: argparse.ArgumentParser, *, shortcuts: bool = True) -> None:
    """``--config`` and ``--set``; with ``shortcuts``, the flags of single settings
    (``--kubeconfig``, ``--port``…), for the commands whose answer they change."""
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
        if dest == "log_level" or not shortcuts:
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
        checked = asyncio.run(_live_checks(config))
        for ok, line in checked:
            print(f"{'ok  ' if ok else 'FAIL'} {line}", file=sys.stdout if ok else sys.stderr)
        failed = sum(1 for ok, _ in checked if not ok)
        if failed:
            print(f"{failed} of {len(checked)} checks against upstream failed", file=sys.stderr)
            return 1
    print(f"OK: {describe(config)}")
    return 0


async def _live_checks(config: Any) -> list[tuple[bool, str]]:
    """What upstream says of each configured resource, one line each, failed or not: its
    discovery (served, its kind and scope, list and watch allowed), a list with the daemon's
    credentials (a page: a sample of the objects), a watch, and each index path in the
    sample's objects."""
    from cacheproxy.daemon.config import resolve_upstream

    try:
        upstream = resolve_upstream(config.upstream)
    except ConfigError as exc:
        return [(False, f"upstream: {exc}")]
    from cacheproxy.upstream import build_client

    async with build_client(upstream) as client:
        return [await _check_resource(client, spec) for spec in config.resources]


async def _check_resource(client: Any, spec: Any) -> tuple[bool, str]:
    from cacheproxy.daemon.customresources import disagreement
    from cacheproxy.daemon.indexcheck import SAMPLE, empty_indexes
    from cacheproxy.informer import ListRequest, WatchRequest
    from cacheproxy.kube.resources import GroupVersion
    from cacheproxy.server.failures import fix_for
    from cacheproxy.upstream import ApiListerWatcher, resource_types

    rtype, name = spec.rtype, spec.rtype.config_name
    gv = GroupVersion(rtype.group, rtype.version)
    try:
        served = {t.resource: t for t in await resource_types(client, gv)}
        listable = {t.resource for t in await resource_types(client, gv, verbs=("list", "watch"))}
    except ApiError as exc:
        if exc.code == 404:
            return False, await _not_served(client, spec)
        return (
            False,
            f"{name}: discovery: {exc.code} {exc.message}. {fix_for(exc.code, 'get', name)}",
        )
    except CacheProxyError as exc:
        return False, f"{name}: discovery: {exc}. {fix_for(None, 'get', name)}"
    found = served.get(rtype.resource)
    if found is None or rtype.resource not in listable:
        return False, await _not_served(client, spec)
    if spec.from_discovery and (problem := disagreement(spec, found)) is not None:
        return False, f"{name}: {problem}"
    if rtype.kind and (rtype.kind, rtype.namespaced) != (found.kind, found.namespaced):
        scope = {True: "namespaced", False: "cluster-scoped"}
        return False, (
            f"{name}: upstream's discovery says kind {found.kind}, {scope[found.namespaced]}; "
            f"the configuration says kind {rtype.kind}, {scope[rtype.namespaced]}"
        )
    collection = dataclasses.replace(spec, rtype=found, from_discovery=False).collection
    lw = ApiListerWatcher(
        client,
        found,
        namespace=collection.namespace,
        label_selector=collection.label_selector,
        field_selector=collection.field_selector,
    )
    said = [f"{found.kind}, {'namespaced' if found.namespaced else 'cluster-scoped'}"]
    try:
        page = await lw.list(ListRequest(resource_version="0", limit=SAMPLE))
        said.append(f"listed ({len(page.items)} objects sampled)")
        async with lw.watch(
            WatchRequest(resource_version=page.resource_version, timeout_seconds=1)
        ):
            said.append("watched")
    except ApiError as exc:
        verb = "watch" if len(said) > 1 else "list"
        return False, f"{name}: {verb}: {exc.code} {exc.message}. {fix_for(exc.code, verb, name)}"
    except CacheProxyError as exc:
        return False, f"{name}: {exc}. {fix_for(None, 'list', name)}"
    empty = list(empty_indexes(page.items, spec.indexes)) if page.items else []
    if empty:
        return False, "; ".join(f.describe(name) for f in empty)
    if spec.indexes:
        said.append(f"index paths {', '.join(spec.indexes)} present")
    return True, f"{name}: " + ", ".join(said)


async def _not_served(client: Any, spec: Any) -> str:
    """Why upstream does not serve ``spec``'s resource, with the closest names it serves."""
    from cacheproxy.daemon.customresources import describe

    described = await describe(client, [spec.rtype])
    why = next(iter(described.problems.values()), "upstream's discovery does not describe it")
    return f"{spec.rtype.config_name}: {why}"


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
    from cacheproxy.daemon.reload import ConfigReloader
    from cacheproxy.daemon.runtime import Daemon
    from cacheproxy.daemon.warmrestart import prefetch_snapshots
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
