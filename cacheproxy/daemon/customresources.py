"""Resources as upstream describes them.

A configuration names a resource the built-in table does not describe (a built-in kind outside
it, a custom resource) by ``GROUP/VERSION/PLURAL``; its kind and scope may be written too, and
everything else clients find it by — singular name, short names (``kubectl get wd``),
categories (``kubectl get all``), ``storageVersionHash`` — is upstream's, which its discovery
says (:func:`cacheproxy.upstream.served_resources`). :func:`describe` asks it, once, and says
what it found and what it did not, in words a person can act on (the closest names upstream
serves; a CRD not installed is named). The daemon (``runtime.py``) serves what is found as
discovery describes it, a custom resource written with its kind and scope at once (described
once discovery answers), and any other only once discovery has told them (and agreed with what
was written). A kind of a built-in group upstream does not serve is a configuration error at
start (:func:`unserved_builtins`); a custom resource not served yet is waited for (its CRD may
be installed later).
"""

from __future__ import annotations

import asyncio
import dataclasses
import difflib
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import httpx

from cacheproxy.daemon.config import DaemonConfig, ResourceConfig
from cacheproxy.errors import CacheProxyError, ConfigError
from cacheproxy.kube.resources import BUILTIN_RESOURCES, GroupVersion, ResourceType
from cacheproxy.server.app import CacheServer
from cacheproxy.server.crdtables import crd_name
from cacheproxy.upstream import resource_types, served_resources

__all__ = [
    "CustomResources",
    "Described",
    "closest_served",
    "describe",
    "described_as",
    "disagreement",
    "unserved_builtins",
    "with_kinds",
]

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
    """Upstream's description of each of ``rtypes``: from its discovery of every group at once
    (``served_resources``), and for a custom resource also from its group version's own list,
    the one that says its ``storageVersionHash``. One not served is described with the closest
    names upstream does serve with list and watch."""
    wanted = list(rtypes)
    out = Described()
    try:
        served = await served_resources(client, verbs=("list", "watch"))
    except CacheProxyError as exc:
        for rtype in wanted:
            out.unanswered[_gvr(rtype)] = f"could not read upstream's discovery: {exc}"
        return out
    listable = [t for ts in served.resources.values() for t in ts]
    custom_gvs = {r.group_version for r in wanted if not r.builtin}
    hashes = await _storage_version_hashes(client, custom_gvs & set(served.resources))
    for rtype in wanted:
        gv = rtype.group_version
        in_gv = {t.resource: t for t in served.resources.get(gv, ())}
        found = in_gv.get(rtype.resource)
        if found is not None:
            hash_ = hashes.get(_gvr(found), found.storage_version_hash)
            out.found[_gvr(rtype)] = dataclasses.replace(found, storage_version_hash=hash_)
        elif gv in served.unanswered:
            out.unanswered[_gvr(rtype)] = (
                f"could not read upstream's discovery of {gv.api_version}: {served.unanswered[gv]}"
            )
        else:
            out.missing[_gvr(rtype)] = _not_served(
                rtype, gv_served=gv in served.resources, listable=listable
            )
    return out


def _not_served(rtype: ResourceType, *, gv_served: bool, listable: list[ResourceType]) -> str:
    """Why upstream does not serve ``rtype``, with the closest names it does serve."""
    gv = rtype.group_version
    close = closest_served(rtype, listable)
    hint = f"; the closest it serves: {', '.join(close)}" if close else ""
    where = (
        f"upstream's {gv.api_version} has no resource {rtype.resource} that may be listed "
        "and watched"
        if gv_served
        else f"upstream serves no API group version {gv.api_version}"
    )
    if rtype.builtin:
        return f"{where}{hint}"
    return f"{where}{hint} (is the CustomResourceDefinition {crd_name(rtype)} installed?)"


def closest_served(rtype: ResourceType, served: Iterable[ResourceType]) -> list[str]:
    """Up to three configuration names of ``served`` closest to ``rtype``'s: the same plural in
    another group version first, then plurals alike (those of its own group first)."""
    by_plural: dict[str, list[ResourceType]] = {}
    for t in served:
        by_plural.setdefault(t.resource, []).append(t)
    plurals = difflib.get_close_matches(rtype.resource, list(by_plural), n=3, cutoff=0.6)
    if rtype.resource in by_plural and rtype.resource not in plurals:
        plurals.insert(0, rtype.resource)
    names = [
        t.config_name
        for plural in plurals
        for t in sorted(by_plural[plural], key=lambda t: t.group != rtype.group)
    ]
    return list(dict.fromkeys(names))[:3]


async def _storage_version_hashes(
    client: httpx.AsyncClient, gvs: Iterable[GroupVersion]
) -> dict[GVR, str]:
    """The ``storageVersionHash`` of each resource of ``gvs`` (aggregated discovery leaves it
    out; a group version's own list says it). A group version not answered leaves its out."""
    gvs = list(gvs)
    answers = await asyncio.gather(
        *(resource_types(client, gv) for gv in gvs), return_exceptions=True
    )
    hashes: dict[GVR, str] = {}
    for answer in answers:
        if isinstance(answer, BaseException):
            if not isinstance(answer, CacheProxyError):
                raise answer
            continue
        hashes.update((_gvr(t), t.storage_version_hash) for t in answer)
    return hashes


async def unserved_builtins(client: httpx.AsyncClient, specs: Iterable[ResourceConfig]) -> None:
    """Raise ConfigError naming each resource of a built-in group among ``specs`` that upstream
    says it does not serve (none will appear later, unlike a CRD), with the closest names it
    serves. Nothing when upstream cannot be asked: the daemon asks again as it runs."""
    wanted = [spec.rtype for spec in specs if spec.from_discovery and spec.rtype.builtin]
    if not wanted:
        return
    missing = (await describe(client, wanted)).missing
    if missing:
        lines = [f"{'/'.join(p for p in gvr if p)}: {why}" for gvr, why in missing.items()]
        raise ConfigError(
            "resources upstream does not serve with list and watch:\n  " + "\n  ".join(lines)
        )


def described_as(configured: ResourceType, discovered: ResourceType) -> ResourceType:
    """A custom resource written with its kind and scope, with the names discovery gives it.
    A kind or scope discovery disagrees with is logged: it is served as written, and the
    configuration should say what upstream says."""
    if (configured.kind, configured.namespaced) != (discovered.kind, discovered.namespaced):
        scope = {True: "namespaced", False: "cluster-scoped"}
        log.error(
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
    """The configured resources, as upstream's discovery describes them: the daemon's task
    (:meth:`start`) asks until each is described, 1 s to 30 s apart (a CRD installed later is
    served then; a kind of the built-in table upstream does not serve is asked about once). One written with its kind and scope is served at once and gets its
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
                    if spec.rtype in BUILTIN_RESOURCES and gvr in described.missing:
                        self.todo.remove(spec)  # served with the table's names; asked once
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
            elif spec.rtype in BUILTIN_RESOURCES:  # the table's names are the API server's
                log.debug("%s: served with the built-in table's names: %s", name, problem)
            else:
                log.warning("%s: served without its discovery names: %s", name, problem)
        if spec.from_discovery:
            self.server.pending[name] = problem

    def _described(self, spec: ResourceConfig, found: ResourceType) -> None:
        name = spec.rtype.config_name
        if not spec.from_discovery:
            self.server.describe(described_as(spec.rtype, found))
            return
        if (problem := disagreement(spec, found)) is not None:
            log.error("%s: not served: %s", name, problem)
            self.server.pending[name] = problem
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


def disagreement(spec: ResourceConfig, found: ResourceType) -> str | None:
    """What the configuration wrote of a resource's kind or scope that discovery contradicts."""
    scope = {True: "namespaced", False: "cluster-scoped"}
    if spec.written_kind is not None and spec.written_kind != found.kind:
        return (
            f"the configuration says kind {spec.written_kind}; upstream's discovery says "
            f"kind {found.kind} (leave kind out to take upstream's)"
        )
    if spec.written_namespaced is not None and spec.written_namespaced != found.namespaced:
        return (
            f"the configuration says {scope[spec.written_namespaced]}; upstream's discovery "
            f"says {scope[found.namespaced]} (leave namespaced out to take upstream's)"
        )
    return None


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
        if (disagreed := disagreement(spec, rtype)) is not None:
            log.error("config reload: %s: not served: %s", name, disagreed)
            pending[name] = disagreed
            continue
        resources.append(dataclasses.replace(spec, rtype=rtype, from_discovery=False))
    return config.model_copy(update={"resources": tuple(resources)})
