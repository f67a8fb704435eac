"""Table printers of custom resources, read from their CRDs as an informer keeps them.

The API server renders a custom resource's Table from its CRD's ``additionalPrinterColumns``
for the served version (:mod:`cacheproxy.kube.crdcolumns`). The daemon keeps each configured
custom resource's CRD in a small informer (``metadata.name=<plural>.<group>``) so that columns
follow CRD updates; the printer is rebuilt only when the CRD's resourceVersion changes. Until the
CRD is known (not synced yet, not readable, deleted) the printer is the API server's default for
a CRD without printer columns: Name and Age.
"""

from __future__ import annotations

from cacheproxy.informer.informer import SharedInformer
from cacheproxy.informer.store import Entry
from cacheproxy.kube.crdcolumns import CustomColumns, custom_columns, default_columns
from cacheproxy.kube.resources import ResourceType
from cacheproxy.kube.table import TablePrinter

__all__ = ["CrdTablePrinter", "crd_name"]


def crd_name(rtype: ResourceType) -> str:
    """The name of the CRD that defines ``rtype`` (``widgets.example.com``)."""
    return f"{rtype.resource}.{rtype.group}"


_NO_COLUMNS = default_columns()


class CrdTablePrinter:
    """A callable giving the current Table printer of one custom resource version."""

    def __init__(self, rtype: ResourceType, crds: SharedInformer | None) -> None:
        self.rtype = rtype
        self.crds = crds
        self._built: tuple[Entry, CustomColumns] | None = None

    def __call__(self) -> TablePrinter:
        entry = self.crds.store.get(crd_name(self.rtype)) if self.crds is not None else None
        if entry is None:
            return _NO_COLUMNS
        built = self._built
        if built is None or built[0] is not entry:  # a new version of the CRD is a new entry
            columns = custom_columns(entry.object(), self.rtype.version) or _NO_COLUMNS
            self._built = built = (entry, columns)
        return built[1]
