"""Custom resources as upstream describes them.

A configuration names a custom resource by ``GROUP/VERSION/PLURAL``; its kind and scope may be
written too, and everything else clients find it by — singular name, short names (``kubectl get
wd``), categories (``kubectl get all``), ``storageVersionHash`` — is the CRD's, which upstream's
discovery says (:func:`cacheproxy.upstream.resourcediscovery.resource_types`). :func:`describe` asks it
for every group version configured, once, and says what it found and what it did not, in words
a person can act on (a CRD not installed is named). The daemon (``runtime.py``) serves what is
found as discovery describes it, a resource written with its kind and scope at once (described
once discovery answers), and one written without them only once discovery has told them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import httpx

from cacheproxy.daemon.config import DaemonConfig, ResourceConfig
from cacheproxy.errors import ApiError, CacheProxyError
from cacheproxy.kube.resources import GroupVersion, ResourceType
from cacheproxy.server.app import CacheServer
from cacheproxy.upstream import resource_types

__all__ = ["CustomResources", "Described", "describe", "described_as", "with_kinds"]

log = logging.getLogger("cacheproxy.daemon")

GVR = tuple[str, str, str]


@dataclass
class Described:
    """What upstream's discovery said of some custom resources."""

    found: dict[GVR, ResourceType] = field(default_factory=dict)
    """Each one upstream serves, as its discovery describes it."""
    missing: dict[GVR, str] = field(default_factory=dict)
    """Each one it does not serve (its group version or its plural is not there), and why."""
    unanswered: dict[GVR, str] = field(default_factory=dict)
    """Each one whose group version upstream could not be asked about (ask again later)."""

    @property
    def problems(self) -> dict[GVR, str]:
        return {**self.missing, **self.unanswered}


def _gvr(rtype: ResourceType) -> GVR:
    return (rtype.group, rtype.version, rtype.resource)


async def describe(client: httpx.AsyncClient, rtypes: Iterable[ResourceType]) -> Described:
    """Upstream's description of each of ``rtypes`` (one discovery request per group version,
    all at once)."""
    wanted: dict[GroupVersion, list[ResourceType]] = {}
    for rtype in rtypes:
        wanted.setdefault(rtype.group_version, []).append(rtype)
    answers = await asyncio.gather(
        *(resource_types(client, gv) for gv in wanted), return_exceptions=True
    )
    out = Described()
    for (gv, asked), answer in zip(wanted.items(), answers, strict=True):
        if isinstance(answer, BaseException) and not isinstance(answer, CacheProxyError):
            raise answer
        for rtype in asked:
            crd = f"{rtype.resource}.{rtype.group}"
            if isinstance(answer, ApiError) and answer.code == 404:
                out.missing[_gvr(rtype)] = (
                    f"upstream serves no API group version {gv.api_version}: is the "
                    f"CustomResourceDefinition {crd} installed (and served at {gv.version})?"
                )
            elif isinstance(answer, CacheProxyError):
                out.unanswered[_gvr(rtype)] = (
                    f"could not read upstream's discovery of {gv.api_version}: {answer}"
                )
            else:
                served = {t.resource: t for t in answer}
                if rtype.resource in served:
                    out.found[_gvr(rtype)] = served[rtype.resource]
                else:
                    names = ", ".join(sorted(served)) or "none"
                    out.missing[_gvr(rtype)] = (
                        f"upstream's {gv.api_version} has no resource {rtype.resource} "
                        f"(it serves: {names}): is the CustomResourceDefinition {crd} installed?"
                    )
    return out


def described_as(configured: ResourceType, discovered: ResourceType) -> ResourceType:
    """A custom resource written with its kind and scope, with the names discovery gives it.
    A kind or scope discovery disagrees with is logged: it is served as written, and the
    configuration should say what upstream says."""
    if (configured.kind, configured.namespaced) != (discovered.kind, discovered.namespaced):
        scope = {True: "namespaced", False: "cluster-scoped"}
        log.warning(
            "%s: the configuration says kind %s, %s; upstream's discovery says kind %s, %s "
            "(serving it as configured; leave kind and namespaced out to take upstream's)",
            configured.config_name,
            configured.kind,
            scope[configured.namespaced],
            discovered.kind,
            scope[discovered.namespaced],
        )
    return dataclasses.replace(
        configured,
        singular=discovered.singular,
        short_names=discovered.short_names,
        categories=discovered.categories,
        storage_version_hash=discovered.storage_version_hash,
    )


class CustomResources:
    """The configured custom resources, as upstream's discovery describes them: the daemon's
    task (:meth:`start`) asks until each is described, 1 s to 30 s apart (a CRD installed
    later is served then). One written with its kind and scope is served at once and gets its
    discovery names when they come; one written without them waits, listed in the server's
    ``pending`` with why (and so not ready), and ``serve`` is called with its spec once
    discovery said them. What discovery does not describe is logged once per reason: an error
    for a resource not served, a warning for one served without its names."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        specs: Sequence[ResourceConfig],
        *,
        server: CacheServer,
        serve: Callable[[ResourceConfig], None],
    ) -> None:
        self.client = client
        self.todo = list(specs)
        self.server = server
        self.serve = serve
        self.all_served = asyncio.Event()
        """Set once no configured resource waits for discovery any more."""
        self._told: dict[str, str] = {}
        for spec in specs:
            if spec.from_discovery:
                server.pending[spec.rtype.config_name] = "waiting for upstream's discovery"

    def start(self) -> asyncio.Task[None] | None:
        """The task asking discovery (None when there is nothing to ask)."""
        self._check_all_served()
        if not self.todo:
            return None
        return asyncio.create_task(self.run(), name="describe-custom-resources")

    async def run(self) -> None:
        delay = 1.0
        while self.todo:
            described = await describe(self.client, (spec.rtype for spec in self.todo))
            for spec in list(self.todo):
                gvr = _gvr(spec.rtype)
                found = described.found.get(gvr)
                if found is not None:
                    self.todo.remove(spec)
                    self._described(spec, found)
                else:
                    self._not_described(spec, described.problems[gvr])
            self._check_all_served()
            if self.todo:
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)

    def _check_all_served(self) -> None:
        if not self.server.pending:
            self.all_served.set()

    def _not_described(self, spec: ResourceConfig, problem: str) -> None:
        name = spec.rtype.config_name
        if self._told.get(name) != problem:
            self._told[name] = problem
            if spec.from_discovery:
                log.error("%s: not served: %s", name, problem)
            else:
                log.warning("%s: served without its discovery names: %s", name, problem)
        if spec.from_discovery:
            self.server.pending[name] = problem

    def _described(self, spec: ResourceConfig, found: ResourceType) -> None:
        name = spec.rtype.config_name
        if not spec.from_discovery:
            self.server.describe(described_as(spec.rtype, found))
            return
        if spec.namespace is not None and not found.namespaced:
            problem = (
                f"upstream's discovery says it is cluster-scoped: it has no namespace "
                f"(the configuration names {spec.namespace!r})"
            )
            log.error("%s: not served: %s", name, problem)
            self.server.pending[name] = problem
            return
        self.serve(dataclasses.replace(spec, rtype=found, from_discovery=False))
        del self.server.pending[name]
        log.info(
            "serving %s as upstream's discovery describes it: kind %s, %s",
            name,
            found.kind,
            "namespaced" if found.namespaced else "cluster-scoped",
        )


async def with_kinds(
    config: DaemonConfig,
    *,
    client: httpx.AsyncClient,
    served: Iterable[ResourceType],
    pending: dict[str, str],
) -> DaemonConfig:
    """``config`` (a reloaded configuration) with its custom resources named without their
    kind and scope described: as ``served`` now, else as upstream's discovery says now. One it
    does not describe is left out (not served; listed in ``pending`` with why)."""
    known = {rtype.config_name: rtype for rtype in served}
    unknown = [
        spec.rtype
        for spec in config.resources
        if spec.from_discovery and spec.rtype.config_name not in known
    ]
    described = await describe(client, unknown) if unknown else Described()
    resources = []
    for spec in config.resources:
        name = spec.rtype.config_name
        if not spec.from_discovery:
            resources.append(spec)
            continue
        gvr = _gvr(spec.rtype)
        rtype = known.get(name) or described.found.get(gvr)
        if rtype is None:
            problem = described.problems.get(gvr, "not described by upstream's discovery")
            log.error("config reload: %s: not served: %s", name, problem)
            pending[name] = problem
            continue
        resources.append(dataclasses.replace(spec, rtype=rtype, from_discovery=False))
    return config.model_copy(update={"resources": tuple(resources)})
