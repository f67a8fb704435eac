"""Upstream's current resourceVersion for one resource, asked as cheaply as the API allows.

A list with ``resourceVersion`` unset is a quorum read of etcd, and its ``metadata.
resourceVersion`` is etcd's current revision (the API server's own consistent reads from cache
ask etcd the same way: ``GetCurrentResourceVersion`` is a range read with ``limit=1``). So the
probe is ``GET <collection>?limit=1`` with RV unset:

- of the cached collection's path (its namespace, if any: the daemon may be allowed no more),
  and of the same resource, since ``--etcd-servers-overrides`` may keep a resource in an etcd of
  its own, with revisions of its own;
- without the collection's selectors: with a selector and a ``limit``, the API server reads etcd
  page after page until it has found a match (5 to 6 times the latency on 1 000 pods);
- as plain JSON: asked as a ``PartialObjectMetadataList`` the one item is smaller (4 KB rather
  than 7 KB for a pod with its managedFields), but on loopback the two took the same time
  (p50 1.5-1.9 ms each, four runs) and every upstream answers a plain list;
- measured against a real kube-apiserver 1.28 by ``python -m loadtest consistentbench``.

:class:`CollectionKeys` is the other question a consistent read may ask (a cache that a quiet
resource's events never bring to the probed RV): what the cached collection holds now. It lists
the collection as the informer does (its namespace and selectors) at RV unset, asked as a
``PartialObjectMetadataList`` (the metadata is all it needs: a pod's is 4 KB of its 7 KB), read
item by item as it arrives, and keeps a digest of the objects' keys (their count and the XOR of
their hashes: constant memory) and the newest resourceVersion. :class:`ObjectVersions` is a get's:
one object's resourceVersion now, from a get of its metadata.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from cacheproxy.errors import TransportError
from cacheproxy.kube.keys import KeyDigest
from cacheproxy.kube.liststream import ListSplitter, NotAList
from cacheproxy.kube.resources import ResourceType
from cacheproxy.upstream.apierrors import api_error_from_response, describe_request, transport_error
from cacheproxy.upstream.apilistwatch import send_for_json
from cacheproxy.upstream.client import LIST_TIMEOUT

__all__ = ["CollectionKeys", "KeysListed", "ObjectVersions", "ResourceVersionProbe"]

_METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
_METADATA = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"


class ResourceVersionProbe:
    """``await probe()``: upstream's current RV for ``rtype`` (in ``namespace``), an int.

    Raises the :mod:`cacheproxy.errors` tree: ApiError for an error answer, TransportError when
    upstream cannot be reached or answers something without an RV."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        rtype: ResourceType,
        *,
        namespace: str | None = None,
        seconds: float | None = None,
    ) -> None:
        self.client = client
        self.path = rtype.collection_path(namespace)
        self.timeout = LIST_TIMEOUT if seconds is None else httpx.Timeout(seconds)
        """A probe is no use after the reads waiting for it gave up: ``seconds`` bounds it (and
        the rounds after it, which start only once it ended)."""

    def __repr__(self) -> str:
        return f"ResourceVersionProbe({self.path})"

    async def __call__(self) -> int:
        request = self.client.build_request(
            "GET",
            self.path,
            params={"limit": "1"},
            timeout=self.timeout,
        )
        body = await send_for_json(self.client, request)
        metadata = body.get("metadata") if isinstance(body, dict) else None
        rv = metadata.get("resourceVersion") if isinstance(metadata, dict) else None
        if not isinstance(rv, str) or not rv.isdigit():
            raise TransportError(
                f"{describe_request(request)}: the list has no resourceVersion: {rv!r}"
            )
        return int(rv)


@dataclass(frozen=True, slots=True)
class KeysListed:
    """Upstream's collection at ``resource_version``: the digest of its objects' keys, and the
    newest of their resourceVersions (0 when there is none)."""

    resource_version: int
    digest: KeyDigest
    newest: int


class CollectionKeys:
    """``await keys()``: what upstream's ``rtype`` collection (in ``namespace``, with the
    selectors the cache lists with) holds now, as :class:`KeysListed`. Errors as the probe's."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        rtype: ResourceType,
        *,
        namespace: str | None = None,
        label_selector: str = "",
        field_selector: str = "",
        seconds: float | None = None,
    ) -> None:
        self.client = client
        self.path = rtype.collection_path(namespace)
        self.namespaced = rtype.namespaced
        self.params = {
            name: value
            for name, value in (
                ("labelSelector", label_selector),
                ("fieldSelector", field_selector),
            )
            if value
        }
        self.timeout = LIST_TIMEOUT if seconds is None else httpx.Timeout(seconds)

    def __repr__(self) -> str:
        return f"CollectionKeys({self.path})"

    async def __call__(self) -> KeysListed:
        request = self.client.build_request(
            "GET",
            self.path,
            params=self.params,
            # Any list decodes the same way: an upstream without the metadata form (some
            # aggregated APIs) answers its own list.
            headers={"Accept": f"{_METADATA_LIST}, application/json"},
            timeout=self.timeout,
        )
        where = describe_request(request)
        try:
            response = await self.client.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise transport_error(exc) from exc
        try:
            if not response.is_success:
                await response.aread()
                raise api_error_from_response(response)
            # Item by item as the bytes come, into a digest: the listing's memory is one
            # object's, whatever the collection's size.
            splitter = ListSplitter()
            count = xor = newest = 0
            try:
                async for chunk in response.aiter_bytes():
                    for item in splitter.feed(chunk):
                        newest = max(newest, self._note(item))
                        count, xor = count + 1, xor ^ hash(self._key(item))
                last, shell = splitter.close()
                for item in last:
                    newest = max(newest, self._note(item))
                    count, xor = count + 1, xor ^ hash(self._key(item))
                rv = int(shell["metadata"]["resourceVersion"])
            except httpx.HTTPError as exc:
                raise transport_error(exc, during="the listing") from exc
            except (NotAList, KeyError, TypeError, ValueError) as exc:
                raise TransportError(
                    f"{where}: not a list of objects with names and resourceVersions "
                    f"({type(exc).__name__}: {exc})"
                ) from exc
        finally:
            await response.aclose()
        return KeysListed(rv, KeyDigest(count, xor), newest)

    @staticmethod
    def _note(item: dict[str, Any]) -> int:
        return int(item["metadata"]["resourceVersion"])

    def _key(self, item: dict[str, Any]) -> str:
        meta = item["metadata"]
        name = meta["name"]
        return f"{meta['namespace']}/{name}" if self.namespaced else str(name)


class ObjectVersions:
    """``await versions(namespace, name)``: the resourceVersion of ``rtype``'s object now (a get
    of its metadata at RV unset: etcd's, as the API server answers a get). A missing object is
    the API server's 404 ApiError; other errors as the probe's."""

    def __init__(
        self, client: httpx.AsyncClient, rtype: ResourceType, *, seconds: float | None = None
    ) -> None:
        self.client = client
        self.rtype = rtype
        self.timeout = LIST_TIMEOUT if seconds is None else httpx.Timeout(seconds)

    def __repr__(self) -> str:
        return f"ObjectVersions({self.rtype.collection_path(None)})"

    async def __call__(self, namespace: str | None, name: str) -> int:
        path = self.rtype.object_path(name, namespace if self.rtype.namespaced else None)
        request = self.client.build_request(
            "GET", path, headers={"Accept": f"{_METADATA}, application/json"}, timeout=self.timeout
        )
        body = await send_for_json(self.client, request)
        metadata = body.get("metadata") if isinstance(body, dict) else None
        rv = metadata.get("resourceVersion") if isinstance(metadata, dict) else None
        if not isinstance(rv, str) or not rv.isdigit():
            raise TransportError(f"{describe_request(request)}: the object has no resourceVersion")
        return int(rv)
