"""Settings declared once, as fields of frozen pydantic models, and read back from them.

A setting is a field of a :class:`Section`::

    watch_buffer: Annotated[int, Field(ge=1, le=1_000_000)] = 1_000
    \"\"\"Events queued per watcher; a watcher that falls this far behind is closed.\"\"\"

Pydantic validates it (type, bounds, ``AfterValidator`` checks); its attribute docstring is its
description (``use_attribute_docstrings``); its key is the camelCase alias. :func:`settings_of`
gives each its dotted path (``server.limits.watchBuffer``), environment variable and ``--set``
name, for the sources, the reference tables, the summary and the command line.

Strict, because YAML is typed: ``port: "8080"`` is a mistake worth naming. A value from an
environment variable or flag is :class:`Text`; :meth:`Section._given` converts it by the field's
kind before pydantic sees it (``no`` is false, ``Token`` is ``token``), as it does a file's
strings for choices and paths. :func:`wording` words pydantic's errors as the configuration's
messages always were (``must be between 0 and 65535, got 70000``).
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import inspect
import math
import re
import types
import typing
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

import annotated_types
from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, field_validator
from pydantic.alias_generators import to_camel
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails, InitErrorDetails, PydanticCustomError

__all__ = [
    "TRISTATE",
    "Kind",
    "Section",
    "Setting",
    "Shown",
    "Text",
    "env_var_name",
    "kind_of",
    "library_default",
    "located",
    "settings_of",
    "suggest",
    "wording",
]


class Text(str):
    """A value from an environment variable or flag: text, converted by the setting's kind."""

    __slots__ = ()


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


_KINDS: Final = {
    bool: Kind.BOOL,
    int: Kind.INT,
    float: Kind.SECONDS,
    str: Kind.STR,
    Path: Kind.PATH,
}
_TRUE_TEXT: Final = frozenset({"true", "1", "yes", "on"})
_FALSE_TEXT: Final = frozenset({"false", "0", "no", "off"})


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


def kind_of(value: object) -> str:
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, int | float):
        return f"a number ({value})"
    if isinstance(value, str):
        return f"a string ({value!r})"
    return type(value).__name__


def suggest(word: str, choices: list[str]) -> str | None:
    """The choice ``word`` was probably meant to be: same letters ignoring case, ``_`` and
    ``-``, else the closest by difflib."""
    norm = {c.lower().replace("_", "").replace("-", ""): c for c in choices}
    key = word.lower().replace("_", "").replace("-", "")
    if key in norm:
        return norm[key]
    close = difflib.get_close_matches(key, list(norm), n=1, cutoff=0.6)
    return norm[close[0]] if close else None


def located(problems: Sequence[tuple[tuple[str | int, ...], str]]) -> ValidationError:
    """Problems a check found with several values at once, each at its own key, so that each
    is reported where it was written (pydantic nests them under the checked value's place)."""
    return ValidationError.from_exception_data(
        "configuration",
        [
            InitErrorDetails(
                type=PydanticCustomError("invalid", "{message}", {"message": message}),
                loc=loc,
                input=None,
            )
            for loc, message in problems
        ],
    )


def _num(x: float) -> str:
    return str(int(x)) if math.isfinite(x) and x == int(x) else str(x)


def _strip_optional(annotation: Any) -> tuple[Any, bool]:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return annotation, False


def _section_of(field: FieldInfo) -> type[Section] | None:
    base, _ = _strip_optional(field.annotation)
    return base if isinstance(base, type) and issubclass(base, Section) else None


@dataclass(frozen=True, slots=True)
class Setting:
    """One declared setting: where it is, what it accepts, what it means."""

    path: str
    """Dotted, as in the file and ``--set``: ``server.limits.watchBuffer``."""
    attrs: tuple[str, ...]
    """The attribute path in the model: ``("server", "limits", "watch_buffer")``."""
    field: FieldInfo = dataclasses.field(compare=False, repr=False)

    @property
    def doc(self) -> str:
        """What it means: the field's attribute docstring, on one line."""
        return " ".join((self.field.description or "").split())

    @property
    def key(self) -> str:
        return self.path.rsplit(".", 1)[-1]

    @property
    def env(self) -> str:
        return env_var_name(self.path)

    @property
    def base(self) -> Any:
        """The type without ``None`` (``int``, ``AuthMode``, ``Literal[…]``)."""
        return _strip_optional(self.field.annotation)[0]

    @property
    def optional(self) -> bool:
        """None is a value: an empty text clears it."""
        return _strip_optional(self.field.annotation)[1]

    @property
    def kind(self) -> Kind:
        base = self.base
        if TRISTATE in self.field.metadata:
            return Kind.TRISTATE
        if typing.get_origin(base) is Literal or (
            isinstance(base, type) and issubclass(base, enum.Enum)
        ):
            return Kind.CHOICE
        if typing.get_origin(base) is tuple:
            return Kind.LIST
        return _KINDS[base]

    @property
    def default(self) -> Any:
        """None when the setting is required (an entry's ``resource``)."""
        required = self.field.is_required()
        return None if required else self.field.get_default(call_default_factory=True)

    @property
    def shown(self) -> Shown:
        return next((m for m in self.field.metadata if isinstance(m, Shown)), Shown())

    @property
    def bounds(self) -> tuple[float | None, float | None]:
        lo = hi = None
        for m in self.field.metadata:
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

    def given(self, value: object) -> object:
        """``value`` as written (YAML-typed, :class:`Text`, or a Python value from code) made
        ready for pydantic's strict validation; raises ValueError saying what is wrong."""
        kind, text = self.kind, isinstance(value, Text)
        if kind in (Kind.STR, Kind.PATH) and not isinstance(value, Path):
            if not isinstance(value, str):
                raise ValueError(f"expected a string, got {kind_of(value)}; quote it")
            if value.strip():
                return Path(value.strip()).expanduser() if kind is Kind.PATH else value.strip()
            if text and self.optional:
                return None
            if not text and not self.field.is_required():
                return self.default  # an empty string in the file: the default applies
            raise ValueError("must not be empty")
        if kind in (Kind.CHOICE, Kind.TRISTATE):
            if isinstance(value, str) and value.strip().lower() in self.choices:
                chosen = value.strip().lower()
                if kind is Kind.TRISTATE:
                    return {"true": True, "false": False}.get(chosen)
                return self.base(chosen) if isinstance(self.base, type) else chosen
            if kind is Kind.TRISTATE and (value is None or isinstance(value, bool)):
                return value
            raise ValueError(f"expected one of {', '.join(self.choices)}; got {kind_of(value)}")
        if kind is Kind.LIST and not isinstance(value, tuple):
            if isinstance(value, list):
                return tuple(value)
            raise ValueError(f"expected {self.expected}")
        if not isinstance(value, Text):
            return value
        if kind is Kind.BOOL and value.strip().lower() in _TRUE_TEXT | _FALSE_TEXT:
            return value.strip().lower() in _TRUE_TEXT
        try:
            return {Kind.INT: int, Kind.SECONDS: float}[kind](value.strip())
        except (KeyError, ValueError):
            raise ValueError(f"expected {self.expected}, got {str(value)!r}") from None

    def wording(self, error: ErrorDetails) -> str:
        """Pydantic's ``error`` with this setting's value, as the configuration words it."""
        kind, value = error["type"], error["input"]
        if kind in ("greater_than_equal", "less_than_equal"):
            lo, hi = self.bounds
            unit = " seconds" if self.kind is Kind.SECONDS else ""
            number = typing.cast(float, value)
            if lo is not None and hi is not None:
                return f"must be between {_num(lo)} and {_num(hi)}{unit}, got {_num(number)}"
            limit = f"at least {_num(lo)}" if lo is not None else f"at most {_num(hi or 0)}"
            return f"must be {limit}{unit}, got {_num(number)}"
        if kind.endswith(("_type", "_parsing")) or kind == "int_from_float":
            return f"expected {self.expected}, got {kind_of(value)}"
        return wording(error)


def wording(error: ErrorDetails) -> str:
    """An error's own message: a check's (ValueError) or pydantic's."""
    if error["type"] == "value_error":
        return str(error.get("ctx", {})["error"])
    return str(error["msg"])


class Section(BaseModel):
    """A part of the configuration (``server``, ``server.limits``, one ``resources`` entry):
    frozen, strict, keys in camelCase, unknown keys refused, docs from attribute docstrings."""

    model_config = ConfigDict(
        frozen=True,
        strict=True,
        extra="forbid",
        alias_generator=to_camel,
        validate_by_name=True,  # code names fields in Python (``ServerLimits(watch_buffer=4)``)
        validate_by_alias=True,  # what is read, in camelCase alone (``by_name=False``)
        use_attribute_docstrings=True,
    )

    @field_validator("*", mode="before")
    @classmethod
    def _given(cls, value: Any, info: ValidationInfo) -> Any:
        assert info.field_name is not None
        field = cls.model_fields[info.field_name]
        if value is None or _section_of(field) is not None or field.annotation is Any:
            return value
        return Setting("", (), field).given(value)


def settings_of(cls: type[BaseModel], prefix: str = "") -> Iterator[Setting]:
    """Every setting declared in ``cls`` and in its sections (fields whose type is a section, or
    an optional one), depth first, in declaration order."""
    yield from _walk(cls, prefix, ())


def _walk(cls: type[BaseModel], prefix: str, attrs: tuple[str, ...]) -> Iterator[Setting]:
    for name, field in cls.model_fields.items():
        path = prefix + (field.alias or name)
        section = _section_of(field)
        if section is not None:
            yield from _walk(section, path + ".", (*attrs, name))
        else:
            yield Setting(path, (*attrs, name), field)
