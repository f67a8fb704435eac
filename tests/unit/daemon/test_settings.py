"""Settings read back from their declarations: path, key, kind, bounds, doc, and the wording of
each problem with a value."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from pydantic import AfterValidator, Field, ValidationError

from cacheproxy.daemon.config import SETTINGS, LoggingSettings, ServerLimits, load_logging
from cacheproxy.daemon.config.settings import (
    TRISTATE,
    Kind,
    Section,
    Setting,
    Shown,
    Text,
    library_default,
    settings_of,
)
from cacheproxy.errors import ConfigError
from cacheproxy.server.app import ServerOptions


def _even(n: int) -> int:
    if n % 2:
        raise ValueError(f"{n} is odd")
    return n


class Inner(Section):
    path: Path
    """Required when the section is given."""
    extra: Path | None = None


class Toy(Section):
    max_url_bytes: Annotated[
        int, Field(ge=2, le=10, alias="maxURLBytes"), AfterValidator(_even)
    ] = 4
    """How many, at most.
    Wrapped."""
    wait_seconds: Annotated[float, Field(ge=0.5, le=60)] = 3.0
    mode: Literal["a", "b"] = "a"
    auto: Annotated[bool | None, TRISTATE] = None
    label: Annotated[str | None, Shown(type="a label")] = None
    inner: Inner | None = None


def toy() -> dict[str, Setting]:
    return {s.path: s for s in settings_of(Toy)}


def read(path: str, value: object) -> Any:
    """``value`` written at ``path`` (dotted), as the loader validates it: its value in a Toy."""
    *sections, key = path.split(".")
    data: dict[str, Any] = {key: value}
    for section in reversed(sections):
        data = {section: data}
    toy_value: Any = Toy.model_validate(data, by_name=False)
    for attr in toy()[path].attrs:
        toy_value = getattr(toy_value, attr)
    return toy_value


def test_paths_keys_kinds_and_docs_come_from_the_fields() -> None:
    found = toy()
    assert list(found) == [
        "maxURLBytes",
        "waitSeconds",
        "mode",
        "auto",
        "label",
        "inner.path",
        "inner.extra",
    ]
    urls = found["maxURLBytes"]
    assert (urls.kind, urls.default, urls.bounds, urls.doc) == (
        Kind.INT,
        4,
        (2, 10),
        "How many, at most. Wrapped.",
    )
    assert urls.env == "CACHEPROXY_MAX_URL_BYTES"
    assert found["waitSeconds"].kind is Kind.SECONDS
    assert found["mode"].choices == ("a", "b")
    assert found["auto"].kind is Kind.TRISTATE
    assert found["label"].shown.type == "a label"
    assert found["label"].optional
    assert found["inner.path"].attrs == ("inner", "path")
    assert found["inner.path"].field.is_required()


@pytest.mark.parametrize(
    ("path", "value", "text", "message"),
    [
        ("maxURLBytes", 12, False, "must be between 2 and 10, got 12"),
        ("maxURLBytes", "12", True, "must be between 2 and 10, got 12"),
        ("maxURLBytes", "8k", True, "expected an integer, got '8k'"),
        ("maxURLBytes", "8", False, "expected an integer, got a string ('8')"),
        ("maxURLBytes", True, False, "expected an integer, got a boolean (true)"),
        ("maxURLBytes", 3, False, "3 is odd"),
        ("waitSeconds", 0.1, False, "must be between 0.5 and 60 seconds, got 0.1"),
        ("waitSeconds", "nan", True, "must be between 0.5 and 60 seconds, got nan"),
        ("waitSeconds", "inf", True, "must be between 0.5 and 60 seconds, got inf"),
        ("mode", "c", False, "expected one of a, b; got a string ('c')"),
        ("auto", "maybe", True, "expected one of auto, true, false; got a string ('maybe')"),
        ("label", 5, False, "expected a string, got a number (5); quote it"),
    ],
)
def test_each_problem_is_worded_from_the_declaration(
    path: str, value: object, text: bool, message: str
) -> None:
    with pytest.raises(ValidationError) as info:
        read(path, Text(value) if text else value)
    [error] = info.value.errors()
    assert toy()[path].wording(error) == message


def test_values_are_converted_to_the_declared_type() -> None:
    assert read("waitSeconds", 2) == 2.0
    assert read("waitSeconds", Text(" 0.5 ")) == 0.5
    assert read("mode", " B ") == "b"
    assert read("auto", Text("auto")) is None
    assert read("auto", False) is False
    assert read("label", "") is None  # an empty string in the file: the default
    assert read("label", Text(" ")) is None  # an empty variable clears it
    assert read("inner.path", Text("a/b")) == Path("a/b")


def test_keys_are_read_in_camel_case_alone_while_code_names_fields_in_python() -> None:
    assert Toy(max_url_bytes=6).max_url_bytes == 6
    with pytest.raises(ValidationError) as info:
        Toy.model_validate({"max_url_bytes": 6}, by_name=False)
    assert [e["type"] for e in info.value.errors()] == ["extra_forbidden"]


def test_a_library_default_is_read_from_the_component() -> None:
    assert library_default(ServerOptions, "watch_buffer") == ServerOptions().watch_buffer
    assert ServerLimits().watch_buffer == ServerOptions().watch_buffer
    assert ServerLimits().max_in_flight == ServerOptions().max_in_flight


def test_every_daemon_setting_has_a_doc_and_numbers_have_both_bounds() -> None:
    for setting in SETTINGS.values():
        assert setting.doc, setting.path
        if setting.kind in (Kind.INT, Kind.SECONDS):
            assert None not in setting.bounds, setting.path
            lo, hi = setting.bounds
            assert lo is not None and hi is not None
            assert lo <= setting.default <= hi, setting.path


def test_commands_without_a_file_read_logging_from_flags_then_the_environment() -> None:
    env = {"CACHEPROXY_LOGGING_LEVEL": "warning", "CACHEPROXY_SIM_PORT": "1"}
    assert load_logging(env=env).level == "warning"
    assert load_logging(env=env, overrides={"logging.level": "debug"}).level == "debug"
    assert load_logging(env={}) == LoggingSettings()
    with pytest.raises(ConfigError) as info:
        load_logging(env={"CACHEPROXY_LOGGING_LEVEL": "loud"})
    assert str(info.value) == (
        "$CACHEPROXY_LOGGING_LEVEL: logging.level: expected one of debug, info, warning, error; "
        "got a string ('loud')"
    )
