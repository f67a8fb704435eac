"""kube-apiserver versions, and what the answers that differ between them depend on.

cacheproxy answers as its upstream would, so a client sees the same protocol through it as
without it: the daemon reads upstream's ``/version``, the simulator its own ``git_version``, and
each asks a :class:`KubeVersion` what to send where versions differ (Table columns, the
watch-list's end bookmark, defaulted watch-lists, wording). The answers were checked against
real 1.28, 1.32 and 1.36 API servers; a version not known (yet) is taken as :data:`NEWEST`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NamedTuple

__all__ = ["KUBE_1_32", "KUBE_1_36", "NEWEST", "OLDEST", "UNCACHED", "KubeVersion"]

_VERSION = re.compile(r"v?(\d+)\.(\d+)")
_DIGITS = re.compile(r"\d+")


class KubeVersion(NamedTuple):
    """``major.minor`` of a kube-apiserver; compares as a tuple (``version >= (1, 32)``)."""

    major: int
    minor: int

    @classmethod
    def parse(cls, text: str) -> KubeVersion | None:
        """``v1.32.0-beta.0+abc``, ``1.28.7`` or ``1.32`` → the version; None for anything else."""
        found = _VERSION.match(text.strip())
        return cls(int(found[1]), int(found[2])) if found else None

    @classmethod
    def of(cls, version: Mapping[str, Any]) -> KubeVersion:
        """The version a ``/version`` document names (``major``/``minor``, which managed
        clusters write as ``"32+"``, else ``gitVersion``); :data:`NEWEST` when it names none."""
        major = _DIGITS.match(str(version.get("major", "")))
        minor = _DIGITS.match(str(version.get("minor", "")))
        if major and minor:
            return cls(int(major[0]), int(minor[0]))
        return cls.parse(str(version.get("gitVersion", ""))) or NEWEST

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"

    # ---------------------------------------------------------------- what differs

    @property
    def watch_list_by_default(self) -> bool:
        """The ``WatchList`` gate is on by default (beta, 1.32): a watch from RV unset or "0"
        that sets neither ``sendInitialEvents`` nor ``resourceVersionMatch`` is defaulted to a
        watch-list, so with bookmarks its initial events end with the initial-events-end
        bookmark (``SetListOptionsDefaults``)."""
        return self >= (1, 32)

    @property
    def sends_list_blueprint(self) -> bool:
        """The initial-events-end bookmark also carries
        ``kubernetes.io/initial-events-list-blueprint``: the empty list of the watched kind,
        encoded as the watch is, in base64 (1.32 and 1.33; 1.34 stopped sending it)."""
        return (1, 32) <= self < (1, 34)

    @property
    def quotes_bytes_as_runes(self) -> bool:
        """A JSON syntax error quotes the byte it stopped at as a rune (``'\\u009e'``, 1.32),
        not as a byte (``'\\x9e'``, 1.28)."""
        return self >= (1, 32)

    @property
    def aggregated_discovery_versions(self) -> tuple[str, ...]:
        """The ``apidiscovery.k8s.io`` versions aggregated discovery is served in, preferred
        first: v2beta1 alone before 1.30 (1.28 answers a client asking only for v2 with the
        legacy document), v2 and v2beta1 up to 1.32; 1.33 removed v2beta1 (as 1.36 shows)."""
        if self < (1, 30):
            return ("v2beta1",)
        return ("v2",) if self >= (1, 33) else ("v2", "v2beta1")

    @property
    def reports_emulation_version(self) -> bool:
        """``/version`` also names the emulated and the minimum compatibility version
        (``emulationMajor``/``Minor``, ``minCompatibilityMajor``/``Minor``: 1.36, not 1.32)."""
        return self >= (1, 33)

    @property
    def prefixes_invalid_rv(self) -> bool:
        """A resourceVersion that is not a number is refused with "invalid resource version: "
        before the field error (1.36; 1.28 and 1.32 say the field error alone)."""
        return self >= (1, 36)

    @property
    def writes_zero_times(self) -> bool:
        """A bookmark's object (the watched kind's empty object) has ``creationTimestamp: null``
        (1.28, 1.32); 1.36 leaves the zero time out."""
        return self < KUBE_1_36

    @property
    def prints_kernel_architecture(self) -> bool:
        """A Node's Table row shows its kernel as ``KERNEL (ARCH)`` (``6.8.0-1019-aws (amd64)``,
        1.36; the kernel alone before)."""
        return self >= KUBE_1_36

    def roots_page_keys(self, resource: str, *, continued: bool) -> bool:
        """Whether the continue token of a page of ``resource`` (``pods``, ``deployments.apps``)
        has a start key beginning with ``/`` (``/ns-1/pod-0\x00``), for resources with a watch
        cache: 1.32 roots the first page's (the cacher hands paged lists to etcd with the key
        prefix lacking its trailing slash), not the pages after it (``continued``); 1.36 roots
        every page's, the pages after the first also being cut from the cache's snapshots
        (``ListFromCacheSnapshot``, on by default from 1.34). The tokens of resources without a
        cache (:data:`UNCACHED`) and 1.28's begin with the key itself (``ns-1/pod-0\x00``).
        Both forms are accepted everywhere."""
        if self < (1, 32) or resource in UNCACHED:
            return False
        return not continued or self >= (1, 34)

    @property
    def table_columns(self) -> KubeVersion:
        """The release whose built-in Table columns this version prints (the columns and their
        descriptions were taken from 1.28, 1.32 and 1.36): the newest of those not newer."""
        return next(r for r in (KUBE_1_36, KUBE_1_32, OLDEST) if self >= r or r == OLDEST)


UNCACHED = frozenset({"events"})
"""The resources kube-apiserver keeps no watch cache for, in every version: etcd serves them."""
NEWEST = KubeVersion(1, 32)
"""The version assumed while none is known (upstream's ``/version`` not read yet): 1.32, whose
Table columns the printers fill (:attr:`KubeVersion.table_columns` keeps the other releases')."""
OLDEST = KubeVersion(1, 28)
"""The oldest kube-apiserver cacheproxy's answers were compared with."""
KUBE_1_32 = KubeVersion(1, 32)
KUBE_1_36 = KubeVersion(1, 36)
"""The newest kube-apiserver cacheproxy's answers were compared with."""
