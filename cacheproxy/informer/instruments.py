"""Metrics the informer library reports, behind a protocol: the library never imports Prometheus.

The daemon supplies an implementation that feeds ``prometheus-client``; library users may supply
their own or keep the no-op default.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["InformerMetrics", "NoMetrics"]


class InformerMetrics(Protocol):
    """What an informer reports, by informer name; a metrics backend implements it."""

    def request(self, informer: str, verb: str) -> None:
        """One upstream request (``list`` page or ``watch``)."""

    def relist(self, informer: str, reason: str) -> None:
        """A full resynchronisation started (``initial``, ``expired``, ``error``…)."""

    def watch_error(self, informer: str, reason: str) -> None:
        """A watch ended with an error (``expired``, ``throttled``, ``transport``, ``stalled``…)."""

    def events(self, informer: str, count: int) -> None:
        """Watch events received."""


class NoMetrics:
    def request(self, informer: str, verb: str) -> None:
        pass

    def relist(self, informer: str, reason: str) -> None:
        pass

    def watch_error(self, informer: str, reason: str) -> None:
        pass

    def events(self, informer: str, count: int) -> None:
        pass
