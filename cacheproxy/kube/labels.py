"""Label selectors: the ``labelSelector`` query parameter, its canonical form and matching.

This module owns what the API server does with a ``labelSelector``, so that the proxy answers a
selector exactly as the upstream would: the same accepted syntax, the same 400 message for a
rejected one, the same canonical ``String()`` form and the same matching rules. It mirrors
``k8s.io/apimachinery/pkg/labels/selector.go`` (``internalSelector``, ``Parse``,
``SelectorFromSet``) of Kubernetes v1.28, the version our protocol samples come from, in three
modules: this one (the selector, a conjunction of requirements, and the entry points),
:mod:`cacheproxy.kube.requirement` (one term, how it matches and prints) and
:mod:`cacheproxy.kube.labelparser` (the lexer and parser), which checks keys and values with
:mod:`cacheproxy.kube.validation` (apimachinery's rules and their messages).

Pure code, no I/O. Errors are raised as ``status.bad_request`` (the API server answers an invalid
selector with 400 BadRequest and the parser's message, unwrapped).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from cacheproxy.kube import status
from cacheproxy.kube.labelparser import SelectorSyntaxError, parse_requirements
from cacheproxy.kube.requirement import Operator, Requirement

__all__ = [
    "LabelSelector",
    "Operator",
    "Requirement",
    "parse_label_selector",
    "selector_from_match_labels",
]


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A conjunction of requirements; the empty selector matches everything.

    Requirements are kept in apimachinery's canonical order (stably sorted by key, as ``parse``
    and ``Selector.Add`` sort them), so ``str()`` gives the API server's canonical form and two
    selectors that differ only in the order they were written compare equal.
    """

    requirements: tuple[Requirement, ...] = ()

    EVERYTHING: ClassVar[LabelSelector]

    def __post_init__(self) -> None:
        ordered = tuple(sorted(self.requirements, key=lambda r: r.key))
        object.__setattr__(self, "requirements", ordered)

    @property
    def empty(self) -> bool:
        """True when the selector does not restrict anything (``Selector.Empty``)."""
        return not self.requirements

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels) for r in self.requirements)

    def requires_exact_match(self, key: str) -> str | None:
        """``RequiresExactMatch``: the one value ``key`` must have, if the selector pins it."""
        for r in self.requirements:
            if r.key == key:
                exact = (Operator.EQUALS, Operator.DOUBLE_EQUALS, Operator.IN)
                if r.operator in exact and len(r.values) == 1:
                    return r.values[0]
                return None
        return None

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


LabelSelector.EVERYTHING = LabelSelector()


def selector_from_match_labels(labels: Mapping[str, str]) -> LabelSelector:
    """``SelectorFromSet``: ``key=value`` for every entry, without validation."""
    return LabelSelector(tuple(Requirement(k, Operator.EQUALS, (v,)) for k, v in labels.items()))


def parse_label_selector(text: str, *, validate: bool = True) -> LabelSelector:
    """Parse a ``labelSelector`` as ``labels.Parse`` does; the empty string selects everything.

    Raises the API server's 400 (``status.bad_request``) for a syntax error and, when
    ``validate`` is true, for a key that is not a qualified name or a value that is not a valid
    label value. ``validate=False`` accepts any key and value, for selectors over index paths
    such as ``metadata.ownerReferences[*].uid``.
    """
    if not text:
        return LabelSelector.EVERYTHING
    try:
        return _parse_cached(text, validate)
    except SelectorSyntaxError as exc:
        raise status.bad_request(str(exc)) from None


@functools.lru_cache(maxsize=1024)
def _parse_cached(text: str, validate: bool) -> LabelSelector:
    """Selectors repeat (the same few in every request of a controller): each distinct one is
    parsed once. Only successes are kept; a selector that fails fails each time."""
    requirements = parse_requirements(text, validate=validate)
    return LabelSelector(tuple(requirements)) if requirements else LabelSelector.EVERYTHING
