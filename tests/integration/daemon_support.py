"""A daemon in front of a simulator, both on 127.0.0.1 with port 0."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from cacheproxy.daemon.config import DaemonConfig, ResourceConfig, ServerSettings
from cacheproxy.daemon.config.model import PassthroughSettings, UpstreamSettings
from cacheproxy.daemon.runtime import Daemon
from cacheproxy.kube.resources import builtin
from cacheproxy.sim import SimServer
from cacheproxy.upstream import UpstreamConfig


def default_resources() -> tuple[ResourceConfig, ...]:
    return (
        ResourceConfig(
            rtype=builtin("pods"), indexes=("spec.nodeName", "metadata.ownerReferences[*].uid")
        ),
        ResourceConfig(rtype=builtin("configmaps")),
        ResourceConfig(rtype=builtin("namespaces")),
        ResourceConfig(rtype=builtin("apps/v1/deployments")),
    )


@contextlib.asynccontextmanager
async def daemon_for(
    upstream_url: str,
    *,
    resources: tuple[ResourceConfig, ...] | None = None,
    upstream: UpstreamConfig | None = None,
    passthrough: bool | PassthroughSettings = True,
    watching: UpstreamSettings | None = None,
    **server: object,
) -> AsyncIterator[Daemon]:
    """A daemon in front of ``upstream_url`` (or the full ``upstream`` config), synced;
    ``passthrough=False``: the read-only cache (what it does not answer is refused);
    ``watching``: how it lists and watches (the ``upstream`` settings)."""
    settings = ServerSettings(port=0).model_copy(update=server)
    if isinstance(passthrough, bool):
        passthrough = PassthroughSettings(enabled=passthrough)
    config = DaemonConfig(
        resources=resources or default_resources(),
        server=settings,
        passthrough=passthrough,
        upstream=watching or UpstreamSettings(),
    )
    upstream = upstream or UpstreamConfig(server=upstream_url)
    daemon = Daemon(config, upstream, manage_gc=False)
    async with daemon:
        assert await daemon.wait_ready(10), "the daemon never synced"
        yield daemon


__all__ = ["SimServer", "daemon_for", "default_resources"]
