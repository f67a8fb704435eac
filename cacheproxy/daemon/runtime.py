"""The daemon's lifecycle: the composition root that wires upstream, informers and the server.

startup: upstream client → ``/version`` → one informer per configured resource → the HTTP server
(listening at once; lists and watches answer 429 until their resource has synced, ``/readyz``
503 until all have) → serve. Shutdown (SIGTERM): not ready → stop accepting → close watches →
stop the server → stop the informers → close the upstream client, each step bounded. Every
component is built from :func:`~.wiring.wire`'s options, never from the settings directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import ssl
from collections.abc import Sequence
from typing import Any

import uvicorn

from cacheproxy.daemon.autocache import AutoCache
from cacheproxy.daemon.config import DaemonConfig, ResourceConfig
from cacheproxy.daemon.config.model import Sections
from cacheproxy.daemon.consistency import consistent_reads
from cacheproxy.daemon.customresources import CustomResources, unserved_builtins, with_kinds
from cacheproxy.daemon.indexcheck import warn_of_empty_indexes
from cacheproxy.daemon.memory import MemoryTrimmer
from cacheproxy.daemon.neighbours import (
    neighbours_url,
    self_signed_files,
    write_client_kubeconfig,
)
from cacheproxy.daemon.openapisource import UpstreamOpenApi
from cacheproxy.daemon.upstreammetrics import MeteredListerWatcher
from cacheproxy.daemon.warmrestart import CachePersister
from cacheproxy.daemon.wiring import (
    ResourceWiring,
    Wiring,
    effective_config,
    wire,
    wire_resource,
)
from cacheproxy.errors import CacheProxyError, ConfigError
from cacheproxy.informer.events import InformerEvent, Relisted
from cacheproxy.informer.factory import Collection, SharedInformerFactory
from cacheproxy.kube.partial import DROP_MANAGED_FIELDS
from cacheproxy.kube.resources import ResourceType, builtin
from cacheproxy.server.access import AccessControl, TokenAuthenticator
from cacheproxy.server.app import CacheServer
from cacheproxy.server.crdtables import CrdTablePrinter, crd_name
from cacheproxy.server.metrics import ServerMetrics
from cacheproxy.server.passthrough import PassThrough
from cacheproxy.server.resource import ServedResource
from cacheproxy.server.snapshots import SnapshotCache
from cacheproxy.server.tokenfile import StaticTokens
from cacheproxy.serving import CertificateReloader, UvicornRunner, serving_protocol
from cacheproxy.tasks import cancel_and_wait
from cacheproxy.upstream import (
    ApiListerWatcher,
    ForwardingTarget,
    ImpersonatingTarget,
    UpstreamConfig,
    UpstreamReviews,
    build_client,
    build_forwarding_target,
    get_version,
)

__all__ = ["Daemon"]

log = logging.getLogger("cacheproxy.daemon")

CRDS = builtin("apiextensions.k8s.io/v1/customresourcedefinitions")


class Daemon:
    """One cacheproxy process: ``await start()``, ``url``, ``await wait_ready()``, ``await stop()``."""

    def __init__(
        self,
        config: DaemonConfig,
        upstream: UpstreamConfig,
        *,
        manage_gc: bool = True,
    ) -> None:
        self.config = config
        self.wiring: Wiring = wire(config)
        self.upstream = upstream
        self.manage_gc = manage_gc
        """The daemon owns the process's garbage collector: paused while syncs decode their
        lists, frozen after the first sync. Off for daemons sharing a process (tests)."""
        self._client: Any = None
        self._forwarding: ForwardingTarget | None = None
        """Pass-through's transport: the upstream without the daemon's credentials."""
        self.factory: SharedInformerFactory | None = None
        self.crd_factory: SharedInformerFactory | None = None
        self.server: CacheServer | None = None
        self.metrics: ServerMetrics | None = None
        self._runner: UvicornRunner | None = None
        self._cert_reloader: CertificateReloader | None = None
        self._files = contextlib.ExitStack()
        """What lives as long as the daemon runs (a temporary self-signed certificate)."""
        self._https = self.wiring.listener.cert_file is not None or self.wiring.listener.self_signed
        self._stopped = False
        self.autocache: AutoCache | None = None
        """Caches what is read through pass-through often (``passthrough.autoCache``)."""
        self.trimmer = MemoryTrimmer()
        """Returns the memory a relist freed to the OS (when ``manage_gc``)."""
        self._version_task: asyncio.Task[None] | None = None
        self._describer: CustomResources | None = None
        """Asks upstream's discovery about the custom resources (customresources.py)."""
        self._describe_task: asyncio.Task[None] | None = None
        self.persister: CachePersister | None = None
        """Snapshots of the resources on disk (``persistence.dir``): restored at start."""
        self.port = self.wiring.listener.port

    @property
    def url(self) -> str:
        listener = self.wiring.listener
        host = f"[{listener.address}]" if ":" in listener.address else listener.address
        return f"{'https' if self._https else 'http'}://{host}:{self.port}"

    async def start(self) -> None:
        config, wiring = self.config, self.wiring
        if wiring.http2:
            log.warning(
                "upstream.http2 is on: over one HTTP/2 connection, httpx (httpcore 1.0) delays "
                "the events of quiet watches until more bytes arrive, up to minutes, and "
                "queues a request past 100 streams with no timeout (docs/configuration.md, "
                "'The upstream transport')"
            )
        self._client = client = build_client(
            self.upstream, http2=wiring.http2, compression=wiring.compression
        )
        version: dict[str, Any] = {}
        try:
            version.update(await get_version(client))
        except CacheProxyError as err:
            log.warning(
                "could not read the upstream /version (%s); asking again until it answers", err
            )
            self._version_task = asyncio.create_task(
                self._fetch_version(client, version), name="upstream-version"
            )
        try:
            await unserved_builtins(client, config.resources)
        except ConfigError:
            await cancel_and_wait(self._version_task)
            await client.aclose()
            raise
        # One registry per daemon: the informers report into it, the server serves it.
        self.metrics = metrics = ServerMetrics()

        def lister_watcher(c: Collection, *, counted_as: str | None = None) -> MeteredListerWatcher:
            return MeteredListerWatcher(
                ApiListerWatcher(
                    client,
                    c.rtype,
                    namespace=c.namespace,
                    label_selector=c.label_selector,
                    field_selector=c.field_selector,
                ),
                informer=counted_as or c.name,
                metrics=metrics,
            )

        def crd_lister_watcher(c: Collection) -> MeteredListerWatcher:
            # Upstream requests for CRDs, counted as such (not one label per CRD watched).
            return lister_watcher(c, counted_as=c.rtype.config_name)

        reflector_options = dataclasses.replace(
            wiring.reflector, pause_gc_during_sync=self.manage_gc
        )
        self.factory = factory = SharedInformerFactory(
            lister_watcher, reflector_options=reflector_options, metrics=metrics
        )
        # Custom resources' Table columns come from their CRDs, kept by informers of their own
        # (one object each) that readiness does not wait for: a CRD the proxy may not read
        # leaves the default columns, not an unready daemon. They are the daemon's internals:
        # not resources of its informer metrics, /status or /readyz.
        self.crd_factory = crd_factory = SharedInformerFactory(
            crd_lister_watcher, reflector_options=reflector_options
        )
        if wiring.persistence.directory is not None:
            self.persister = CachePersister(wiring.persistence, server=self.upstream.server)
        # A custom resource named without its kind or scope is served once upstream's
        # discovery said them (customresources.py); every other one at once.
        served = [
            self._serve_resource(factory, crd_factory, spec, options)
            for spec, options in zip(config.resources, wiring.resources, strict=True)
            if not spec.from_discovery
        ]
        passthrough = None
        if wiring.passthrough is not None:
            # HTTP/1.1 whatever upstream.http2 says: an upgrade (exec, attach, port-forward) can
            # only be offered on an HTTP/1.1 connection.
            self._forwarding = build_forwarding_target(
                self.upstream, idle_connection=wiring.passthrough.idle_connection
            )
            passthrough = PassThrough(
                self._forwarding,
                options=wiring.passthrough,
                impersonating=ImpersonatingTarget(client),
                registry=metrics.registry,
                api_server=self.upstream.server,
            )
        self.server = CacheServer(
            served,
            version=version,
            options=wiring.server,
            metrics=metrics,
            access=self._access_control(client, metrics),
            api_server=self.upstream.server,
            configuration=lambda: effective_config(self.config, self.upstream),
            openapi=UpstreamOpenApi(client),
            passthrough=passthrough,
            local_tokens=wiring.token_file is not None,
        )
        listener = wiring.listener
        cert_file, key_file, serving_ca = listener.cert_file, listener.key_file, None
        if listener.self_signed:
            files = self._files.enter_context(
                self_signed_files(listener.self_signed_dir, listener.address)
            )
            cert_file, key_file, serving_ca = files.cert, files.key, files.ca
        kwargs: dict[str, Any] = {}
        if cert_file is not None and key_file is not None:
            kwargs.update(ssl_certfile=str(cert_file), ssl_keyfile=str(key_file))
            if listener.client_ca_file is not None:
                required = listener.client_certificate_required
                kwargs.update(
                    ssl_ca_certs=str(listener.client_ca_file),
                    ssl_cert_reqs=ssl.CERT_REQUIRED if required else ssl.CERT_OPTIONAL,
                )
        uv_config = uvicorn.Config(
            self.server,
            http=serving_protocol(
                header_timeout=listener.header_timeout,
                on_header_timeout=lambda: metrics.rejected("header_timeout"),
            ),
            lifespan="off",
            # No websocket protocol: an upgrade request reaches the app as plain HTTP, which
            # tunnels it upstream or answers it with a Status like any other request.
            ws="none",
            # uvicorn's own messages in the daemon's log format (its loggers propagate to the
            # root handler configure_logging set), not in a format of its own.
            log_config=None,
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=listener.graceful_shutdown,
            timeout_keep_alive=listener.idle_connection,
            **kwargs,
        )
        if cert_file is not None and key_file is not None:
            uv_config.load()
            assert uv_config.ssl is not None
            uv_config.ssl.minimum_version = ssl.TLSVersion.TLSv1_2
            self._cert_reloader = CertificateReloader(uv_config.ssl, cert_file, key_file)
            self._cert_reloader.start()
        factory.start()
        crd_factory.start()
        self._describer = CustomResources(
            client,
            config.resources,
            server=self.server,
            serve=self._serve_described,
        )
        self._describe_task = self._describer.start()
        if wiring.autocache is not None and passthrough is not None:
            self.autocache = AutoCache(
                self, self.server, passthrough.reads, client, wiring.autocache
            )
            self.autocache.start()
        if self.persister is not None:
            self.persister.start()
        self.server.history.start()
        self._runner = UvicornRunner(
            uv_config, host=listener.address, port=listener.port, name="cacheproxy"
        )
        await self._runner.start()
        self.port = self._runner.port
        self.server.server_address = f"{listener.address}:{self.port}"
        log.info(
            "serving %s on %s", ", ".join(r.rtype.config_name for r in config.resources), self.url
        )
        if listener.client_kubeconfig is not None:
            url = neighbours_url(listener.address, self.port, https=self._https)
            write_client_kubeconfig(listener.client_kubeconfig, url, serving_ca)

    def _serve_described(self, spec: ResourceConfig) -> None:
        """Serve a custom resource upstream's discovery described (its kind and scope were not
        configured): as a configuration that wrote them would have it served."""
        assert self.server is not None
        assert self.factory is not None
        assert self.crd_factory is not None
        name = spec.rtype.config_name
        self.config = self.config.model_copy(
            update={
                "resources": tuple(
                    spec if r.rtype.config_name == name else r for r in self.config.resources
                )
            }
        )
        options = wire_resource(spec, self.config.server.limits)
        self.server.add_resource(
            self._serve_resource(self.factory, self.crd_factory, spec, options)
        )

    def _trim_after_relists(self, event: InformerEvent) -> None:
        """A list replaced a store: give the memory the old one held back to the OS."""
        if isinstance(event, Relisted):
            self.trimmer.request(event.rv)

    async def _fetch_version(self, client: Any, version: dict[str, Any]) -> None:
        """Fill the served ``/version`` once upstream answers (it was down at start)."""
        delay = 1.0
        while True:
            await asyncio.sleep(delay)
            try:
                version.update(await get_version(client))
            except CacheProxyError:
                delay = min(delay * 2, 30.0)
                continue
            log.info("read the upstream /version: %s", version.get("gitVersion", "?"))
            return

    def _access_control(self, client: Any, metrics: ServerMetrics) -> AccessControl | None:
        settings = self.wiring.access
        if settings is None:
            return None
        reviews = UpstreamReviews(client)
        token_file = self.wiring.token_file
        tokens: TokenAuthenticator = reviews if token_file is None else StaticTokens(token_file)
        return AccessControl(tokens=tokens, reviewer=reviews, settings=settings, metrics=metrics)

    def _serve_resource(
        self,
        factory: SharedInformerFactory,
        crd_factory: SharedInformerFactory,
        spec: ResourceConfig,
        options: ResourceWiring,
    ) -> ServedResource:
        printer_source = None
        if not spec.rtype.builtin:  # no CRD defines a kind of a built-in group (resources.py)
            crds = crd_factory.informer(_crd_collection(spec.rtype))
            printer_source = CrdTablePrinter(spec.rtype, crds)
        informer = factory.informer(
            options.collection,
            field_indexes=options.field_indexes,
            transform=options.transform,
            storage=options.storage,
            history=options.history,
        )
        informer.freeze_gc_after_sync = self.manage_gc
        if self.persister is not None:
            self.persister.track(
                spec.rtype.config_name,
                informer,
                collection=options.collection,
                transform=options.transform,
            )
        if self.manage_gc:
            informer.subscribe(self._trim_after_relists)
        if spec.indexes:  # those the configuration names (not the watch cache's own)
            warn_of_empty_indexes(spec.rtype.config_name, informer, spec.indexes)
        consistency = None
        if options.consistent_reads:
            assert self._client is not None
            consistency = consistent_reads(
                self._client, options.collection, options.consistency, self.metrics
            )
        return ServedResource(
            spec.rtype,
            informer,
            index_paths=set(options.field_indexes),
            rv_wait=options.rv_wait,
            write_settle=options.write_settle,
            namespace=options.collection.namespace,
            printer_source=printer_source,
            snapshots=SnapshotCache(ttl=options.snapshot_ttl, max_entries=options.snapshot_entries),
            consistency=consistency,
            keeps_managed_fields=DROP_MANAGED_FIELDS not in options.transform.drop_fields,
        )

    async def reload(self, config: DaemonConfig) -> list[str]:
        """Apply a new configuration's resources at run time: resources added start an informer
        (served once synced), resources removed stop theirs (their watches end), a resource whose
        settings changed is both. Unaffected resources and their watches carry on. Other changed
        settings need a restart: they are logged and not applied. Returns what changed."""
        assert self.server is not None
        assert self.factory is not None
        assert self.crd_factory is not None
        wire(config)  # one entry per resource, as at start
        config = await with_kinds(
            config, client=self._client, served=self.server.resources, pending=self.server.pending
        )
        old = {spec.rtype: spec for spec in self.config.resources}
        new = {spec.rtype: spec for spec in config.resources}
        gone = [r for r in old if old[r] != new.get(r)]
        came = [r for r in new if new[r] != old.get(r)]
        changes: list[str] = []
        for rtype in gone:
            await self.stop_serving(old[rtype], keep_crd=rtype in new)
            changes.append(f"-{rtype.config_name}")
        limits = self.config.server.limits
        for rtype in came:
            if self.autocache is not None and self.autocache.release(rtype):
                await self.stop_serving(ResourceConfig(rtype=rtype))  # configured now
            self.start_serving(new[rtype])
            changes.append(f"+{rtype.config_name}")
        restart = [
            name
            for name in Sections.model_fields
            if getattr(config, name) != getattr(self.config, name)
        ]
        if restart:
            log.warning(
                "config reload: changes to %s need a restart (not applied)", ", ".join(restart)
            )
        self.config = self.config.model_copy(update={"resources": config.resources})
        self.wiring = dataclasses.replace(
            self.wiring,
            resources=tuple(wire_resource(spec, limits) for spec in config.resources),
        )
        if changes:
            log.info("config reload: resources %s", " ".join(changes))
        else:
            log.info("config reload: no resource changed")
        return changes

    def start_serving(self, spec: ResourceConfig) -> ServedResource:
        """Serve ``spec``'s resource from now on (served once synced)."""
        assert self.server is not None
        assert self.factory is not None
        assert self.crd_factory is not None
        options = wire_resource(spec, self.config.server.limits)
        served = self._serve_resource(self.factory, self.crd_factory, spec, options)
        self.server.add_resource(served)
        return served

    async def stop_serving(self, spec: ResourceConfig, *, keep_crd: bool = False) -> None:
        """Stop serving ``spec``'s resource: its watches end, its informer stops."""
        assert self.server is not None
        assert self.factory is not None
        assert self.crd_factory is not None
        removed = self.server.remove_resource(spec.rtype)
        if removed is not None and removed.consistency is not None:
            await removed.consistency.close()
        await self.factory.remove(spec.collection)
        if self.persister is not None:
            self.persister.forget(spec.rtype.config_name)
        if not spec.rtype.builtin and not keep_crd:
            await self.crd_factory.remove(_crd_collection(spec.rtype))

    async def wait_ready(self, within: float | None = None) -> bool:
        """True once every configured resource is served and synced; False if ``within``
        seconds passed first."""
        assert self.factory is not None
        try:
            async with asyncio.timeout(within):
                if self._describer is not None:
                    await self._describer.all_served.wait()
                return await self.factory.wait_for_cache_sync()
        except TimeoutError:
            return False

    async def stop(self) -> None:
        """Shut down in order, each step bounded: not ready (``/readyz`` 503) → keep serving for
        ``shutdownDelaySeconds`` → stop accepting → end every watch cleanly (clients resume
        elsewhere) → let open lists finish (``shutdownGraceSeconds``) → stop the informers."""
        if self._stopped:
            return
        self._stopped = True
        await cancel_and_wait(self._version_task, self._describe_task)
        if self.autocache is not None:
            await self.autocache.stop()
        if self.server is not None:
            await self.server.history.stop()
        if self._cert_reloader is not None:
            await self._cert_reloader.stop()
        if self.server is not None:
            self.server.draining = True
            delay = self.wiring.listener.shutdown_delay
            if delay and self._runner is not None:
                log.info("not ready; serving %g s more before closing", delay)
                await asyncio.sleep(delay)
        if self._runner is not None:
            self._runner.stop_listening()
        if self.server is not None:
            self.server.close_watches()
        if self._runner is not None:
            await self._runner.stop()
        if self.server is not None:
            for res in self.server.resources.values():
                if res.consistency is not None:
                    await res.consistency.close()
        if self.factory is not None:
            await self.factory.stop()
        if self.crd_factory is not None:
            await self.crd_factory.stop()
        if self.persister is not None:
            await self.persister.stop()  # the informers' last state
        self.trimmer.stop()
        if self._forwarding is not None:
            await self._forwarding.aclose()
        if self._client is not None:
            await self._client.aclose()
        self._files.close()

    async def __aenter__(self) -> Daemon:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


def resources_from_names(names: Sequence[str]) -> tuple[ResourceConfig, ...]:
    """Plain resource specs (``pods``, ``apps/v1/deployments``) with their default options."""
    return tuple(ResourceConfig(rtype=builtin(n)) for n in names)


def _crd_collection(rtype: ResourceType) -> Collection:
    """The one CRD that defines custom resource ``rtype``, watched by name."""
    return Collection(CRDS, field_selector=f"metadata.name={crd_name(rtype)}")
