"""Settings declared once, on the configuration's dataclasses, and read back from them.

A setting is a field of a frozen dataclass, declared the Pydantic way::

    watch_buffer: Annotated[int, Field(ge=1, le=1_000_000)] = 1_000
    \"\"\"Events queued per watcher; a watcher that falls this far behind is closed.\"\"\"

Its type, default, bounds (``Field(ge=, le=)``), checks (``AfterValidator``) and doc (the
attribute docstring) are the one declaration; :func:`settings_of` walks the dataclasses and
derives everything else: the dotted path (``server.limits.watchBuffer``: the camelCase field
name, or ``Field(alias=)``), the environment variable, the ``--set`` name, the reference tables
and the summary. :meth:`Setting.convert` validates a value with Pydantic (strict types, bounds,
choices, checks) and words the problem as the configuration's messages always were.

Why the model stays plain dataclasses rather than Pydantic models: code builds them directly
(tests, benchmarks, the demo) with values outside what an operator may configure (a bookmark
every 0.2 s), and ``dataclasses.replace`` works on them; the bounds guard the configuration's
input, which is where Pydantic validates.
"""

from __future__ import annotations

import ast
import dataclasses
import enum
import functools
import inspect
import itertools
import math
import re
import textwrap
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Final, Literal

import annotated_types
from pydantic import TypeAdapter, ValidationError
from pydantic.fields import FieldInfo

__all__ = [
    "NOT_A_SETTING",
    "TRISTATE",
    "UNSET",
    "Invalid",
    "Kind",
    "Setting",
    "Shown",
    "assemble",
    "env_var_name",
    "library_default",
    "settings_of",
]

UNSET: Final = typing.cast(Any, type("Unset", (), {"__repr__": lambda _: "UNSET"})())
"""A value that was not given (a YAML null, an empty string in the file): the default applies."""

NOT_A_SETTING: Final = {"setting": False}
"""``dataclasses.field(metadata=NOT_A_SETTING)``: a field the walk skips (set by the loader)."""


class Invalid(Exception):
    """A value that cannot be used; the message says why."""


@dataclass(frozen=True, slots=True)
class Shown:
    """How the reference shows a setting when its type or default says too little
    (``Annotated[str, Shown(type="IP address or host name")]``)."""

    type: str | None = None
    default: str | None = None


@dataclass(frozen=True, slots=True)
class _Tristate:
    """Marks ``bool | None`` as ``auto | true | false`` (None: auto)."""


TRISTATE: Final = _Tristate()


class Kind(enum.Enum):
    BOOL = "boolean"
    INT = "integer"
    SECONDS = "seconds"
    STR = "string"
    PATH = "path"
    CHOICE = "choice"
    TRISTATE = "auto, true or false"
    LIST = "list of field paths"


def library_default(owner: Callable[..., object], name: str) -> Any:
    """The default a component of the library gives ``name`` (a dataclass field, a parameter or
    a class attribute). A setting whose default is the component's says so with this: the value
    is written once, in the component, and the daemon still passes it explicitly."""
    if dataclasses.is_dataclass(owner):
        for f in dataclasses.fields(owner):
            if f.name == name and f.default is not dataclasses.MISSING:
                return f.default
            if f.name == name and f.default_factory is not dataclasses.MISSING:
                return f.default_factory()
    parameter = inspect.signature(owner).parameters.get(name)
    if parameter is not None and parameter.default is not inspect.Parameter.empty:
        return parameter.default
    return getattr(owner, name)


def env_var_name(path: str) -> str:
    """``server.limits.maxWatchers`` → ``CACHEPROXY_SERVER_LIMITS_MAX_WATCHERS``."""
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", path)
    return "CACHEPROXY_" + snake.replace(".", "_").upper()


def _camel(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(part.title() for part in rest)


def _kind_of(value: object) -> str:
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, int | float):
        return f"a number ({value})"
    if isinstance(value, str):
        return f"a string ({value!r})"
    return type(value).__name__


def _num(x: float) -> str:
    return str(int(x)) if math.isfinite(x) and x == int(x) else str(x)


_TRUE_TEXT: Final = frozenset({"true", "1", "yes", "on"})
_FALSE_TEXT: Final = frozenset({"false", "0", "no", "off"})


@dataclass(frozen=True, slots=True)
class Setting:
    """One declared setting: where it is, what it accepts, what it means."""

    path: str
    """Dotted, as in the file and ``--set``: ``server.limits.watchBuffer``."""
    attrs: tuple[str, ...]
    """The attribute path in the model: ``("server", "limits", "watch_buffer")``."""
    kind: Kind
    base: Any
    """The type without ``None`` and metadata (``int``, ``AuthMode``, ``Literal[…]``)."""
    metadata: tuple[Any, ...]
    """Pydantic constraints and validators (``Ge``, ``Le``, ``AfterValidator``)."""
    default: Any
    """``dataclasses.MISSING`` when the field is required (a section's mandatory key)."""
    optional: bool
    """None is a value: an empty text clears it."""
    owner: type = dataclasses.field(compare=False, repr=False)
    """The dataclass that declares it (its docstring is read from there when asked)."""
    shown: Shown = dataclasses.field(default_factory=lambda: Shown())

    @property
    def doc(self) -> str:
        """What it means: the attribute docstring after its field. Read from the source only
        when asked (the reference, ``check-config``), not by every start."""
        return _docstrings(self.owner).get(self.attrs[-1], "")

    @property
    def key(self) -> str:
        return self.path.rsplit(".", 1)[-1]

    @property
    def env(self) -> str:
        return env_var_name(self.path)

    @property
    def bounds(self) -> tuple[float | None, float | None]:
        lo = hi = None
        for m in self.metadata:
            if isinstance(m, annotated_types.Ge):
                lo = typing.cast(float, m.ge)
            elif isinstance(m, annotated_types.Le):
                hi = typing.cast(float, m.le)
        return lo, hi

    @property
    def choices(self) -> tuple[str, ...]:
        if self.kind is Kind.TRISTATE:
            return ("auto", "true", "false")
        if isinstance(self.base, type) and issubclass(self.base, enum.Enum):
            return tuple(str(m.value) for m in self.base)
        if typing.get_origin(self.base) is Literal:
            return tuple(str(a) for a in typing.get_args(self.base))
        return ()

    @property
    def expected(self) -> str:
        return {
            Kind.INT: "an integer",
            Kind.SECONDS: "a number of seconds",
            Kind.BOOL: "true or false",
            Kind.STR: "a string",
            Kind.PATH: "a string",
            Kind.LIST: "a list of field paths",
        }.get(self.kind) or " or ".join(self.choices)

    def convert(self, value: object, *, text: bool) -> Any:
        """The setting's value of ``value``: YAML-typed (from the file), or ``text`` from a
        variable or flag, converted to the setting's type. An empty string is ``UNSET`` in the
        file and None from text (clearing an optional setting). Raises :class:`Invalid`."""
        kind = self.kind
        if kind in (Kind.STR, Kind.PATH):
            if not isinstance(value, str):
                raise Invalid(f"expected a string, got {_kind_of(value)}; quote it")
            value = value.strip()
            if not value:
                return None if text else UNSET
        elif kind in (Kind.CHOICE, Kind.TRISTATE):
            if isinstance(value, str) and value.strip().lower() in self.choices:
                value = value.strip().lower()
                if kind is Kind.TRISTATE:
                    return {"true": True, "false": False}.get(value)
            elif kind is Kind.TRISTATE and isinstance(value, bool):
                return value
            else:
                raise Invalid(f"expected one of {', '.join(self.choices)}; got {_kind_of(value)}")
        elif text and isinstance(value, str):
            value = self._parse_text(value)
        if kind is Kind.PATH:
            return Path(typing.cast(str, value))
        try:
            return _adapter(self.base, self.metadata).validate_python(
                value, strict=kind is not Kind.CHOICE
            )
        except ValidationError as exc:
            raise Invalid(self._message(exc.errors()[0], value)) from None

    def _parse_text(self, text: str) -> object:
        if self.kind is Kind.BOOL:
            lowered = text.strip().lower()
            if lowered in _TRUE_TEXT | _FALSE_TEXT:
                return lowered in _TRUE_TEXT
            raise Invalid(f"expected true or false, got {text!r}")
        parse = {Kind.INT: int, Kind.SECONDS: float}.get(self.kind)
        if parse is None:
            return text
        try:
            return parse(text.strip())
        except ValueError:
            raise Invalid(f"expected {self.expected}, got {text!r}") from None

    def _message(self, error: Any, value: object) -> str:
        kind = error["type"]
        if kind in ("greater_than_equal", "less_than_equal", "greater_than", "less_than"):
            lo, hi = self.bounds
            unit = " seconds" if self.kind is Kind.SECONDS else ""
            number = typing.cast(float, value)
            if lo is not None and hi is not None:
                return f"must be between {_num(lo)} and {_num(hi)}{unit}, got {_num(number)}"
            limit = f"at least {_num(lo)}" if lo is not None else f"at most {_num(hi or 0)}"
            return f"must be {limit}{unit}, got {_num(number)}"
        if kind == "value_error":
            return str(error["ctx"]["error"])
        if kind in ("literal_error", "enum"):
            return f"expected one of {', '.join(self.choices)}; got {_kind_of(value)}"
        if kind.endswith(("_type", "_parsing")) or kind == "int_from_float":
            return f"expected {self.expected}, got {_kind_of(value)}"
        return str(error["msg"])


@cache
def _adapter(base: Any, metadata: tuple[Any, ...]) -> TypeAdapter[Any]:
    return TypeAdapter(Annotated[(base, *metadata)] if metadata else base)


def _strip_optional(annotation: Any) -> tuple[Any, bool]:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return annotation, False


def _dataclass_of(annotation: Any) -> type | None:
    inner, _ = _strip_optional(annotation)
    return inner if isinstance(inner, type) and dataclasses.is_dataclass(inner) else None


def _kind(base: Any, tristate: bool) -> Kind:
    if tristate:
        return Kind.TRISTATE
    if typing.get_origin(base) is Literal or (
        isinstance(base, type) and issubclass(base, enum.Enum)
    ):
        return Kind.CHOICE
    if typing.get_origin(base) is tuple:
        return Kind.LIST
    kinds = {bool: Kind.BOOL, int: Kind.INT, float: Kind.SECONDS, str: Kind.STR, Path: Kind.PATH}
    if base in kinds:
        return kinds[base]
    raise TypeError(f"no setting kind for {base!r}")


def _leaf(
    path: str, attrs: tuple[str, ...], field: dataclasses.Field[Any], hint: Any, owner: type
) -> Setting:
    annotation, optional = _strip_optional(hint)
    extras: list[Any] = []
    if typing.get_origin(annotation) is Annotated:
        annotation, *extras = typing.get_args(annotation)
        annotation, inner_optional = _strip_optional(annotation)
        optional = optional or inner_optional
    info = FieldInfo.from_annotated_attribute(
        typing.cast(Any, Annotated[(annotation, *extras)] if extras else annotation), None
    )
    metadata = tuple(m for m in info.metadata if not isinstance(m, Shown | _Tristate))
    shown = next((m for m in extras if isinstance(m, Shown)), Shown())
    tristate = any(isinstance(m, _Tristate) for m in extras)
    default: Any = field.default
    factory: Any = field.default_factory
    if default is dataclasses.MISSING and factory is not dataclasses.MISSING:
        default = factory()
    return Setting(
        path=path,
        attrs=attrs,
        kind=_kind(annotation, tristate),
        base=bool if tristate else annotation,
        metadata=metadata,
        default=default,
        optional=optional or default is dataclasses.MISSING,
        owner=owner,
        shown=shown,
    )


def _key(field: dataclasses.Field[Any], hint: Any) -> str:
    if typing.get_origin(hint) is Annotated:
        for extra in typing.get_args(hint)[1:]:
            if isinstance(extra, FieldInfo) and extra.alias:
                return extra.alias
    return _camel(field.name)


@functools.cache
def _docstrings(cls: type) -> dict[str, str]:
    """The attribute docstrings of ``cls``'s fields (a string right after the field)."""
    source = textwrap.dedent(inspect.getsource(cls))
    body = typing.cast(ast.ClassDef, ast.parse(source).body[0]).body
    out: dict[str, str] = {}
    for node, after in itertools.pairwise(body):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            out[node.target.id] = " ".join(inspect.cleandoc(after.value.value).split())
    return out


def settings_of(cls: type, prefix: str = "") -> Iterator[Setting]:
    """Every setting declared in dataclass ``cls`` and in its sections (fields whose type is a
    dataclass, or an optional one), depth first, in declaration order."""
    yield from _walk(cls, prefix, ())


def _walk(cls: type, prefix: str, attrs: tuple[str, ...]) -> Iterator[Setting]:
    hints = typing.get_type_hints(cls, include_extras=True)
    for field in dataclasses.fields(typing.cast(Any, cls)):
        if field.metadata.get("setting", True) is False:
            continue
        hint = hints[field.name]
        path = prefix + _key(field, hint)
        section = _dataclass_of(hint)
        if section is not None:
            yield from _walk(section, path + ".", (*attrs, field.name))
        else:
            yield _leaf(path, (*attrs, field.name), field, hint, cls)


def assemble(
    cls: type,
    values: Mapping[tuple[str, ...], Any],
    *,
    attrs: tuple[str, ...] = (),
    optional: bool = False,
    **given: Any,
) -> Any:
    """An instance of dataclass ``cls`` from its settings' ``values`` (by attribute path, as in
    :attr:`Setting.attrs`) and the fields that are not settings (``given``). An ``optional``
    section (``TLSSettings | None``) is None unless each of its required settings has a value
    and, when it has none required, one of them differs from its default."""
    hints = typing.get_type_hints(cls, include_extras=True)
    kwargs: dict[str, Any] = dict(given)
    fields = dataclasses.fields(typing.cast(Any, cls))
    for field in fields:
        here = (*attrs, field.name)
        if field.metadata.get("setting", True) is False or field.name in given:
            continue
        section = _dataclass_of(hints[field.name])
        if section is None:
            kwargs[field.name] = values[here]
            continue
        _, may_be_none = _strip_optional(hints[field.name])
        built = assemble(section, values, attrs=here, optional=may_be_none)
        if built is not None:
            kwargs[field.name] = built
    required = [
        f.name
        for f in fields
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    if attrs and any(kwargs.get(name) is None for name in required):
        return None
    if optional and not required and all(kwargs.get(f.name) == f.default for f in fields):
        return None
    return cls(**kwargs)
