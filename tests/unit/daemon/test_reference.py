"""``docs/configuration.md``'s tables are the declarations' (``make docs`` writes them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cacheproxy.daemon.config import SETTINGS
from cacheproxy.daemon.config.entry import ENTRY
from cacheproxy.daemon.config.reference import DOCUMENT, main, regenerate, tables


def test_the_reference_tables_are_generated_from_the_declarations() -> None:
    text = DOCUMENT.read_text(encoding="utf-8")
    assert regenerate(text) == text, "docs/configuration.md is stale: run make docs"


def test_every_setting_has_a_row_with_its_variable_default_and_doc() -> None:
    made = tables()
    for setting in SETTINGS.values():
        section, _, key = setting.path.partition(".")
        [row] = [line for line in made[section].splitlines() if line.startswith(f"| `{key}` |")]
        assert f"| `{setting.env}` |" in row
        assert setting.doc and row.endswith(f"| {setting.doc} |")
    for key in ENTRY:
        assert f"| `{key}` |" in made["resources"]


def test_the_tables_show_bounds_defaults_and_choices_as_declared() -> None:
    server = tables()["server"]
    assert "| `port` | integer, 0\N{EN DASH}65535 | `8080` | `CACHEPROXY_SERVER_PORT` |" in server
    assert "| `limits.rvWaitSeconds` | seconds, 0.1\N{EN DASH}60 | `3` |" in server
    assert "| `auth.mode` | `none`, `token`, `delegated` | `none` |" in server
    assert "| `tls.certFile` | path | — |" in server
    assert "| `inCluster` | `auto`, `true`, `false` | `auto` |" in tables()["upstream"]
    assert (
        '| `transform.dropFields` | list of field paths | `["metadata.managedFields"]` |'
        in tables()["resources"]
    )


def test_check_mode_fails_on_a_stale_document_and_the_default_mode_fixes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stale = tmp_path / "configuration.md"
    stale.write_text(
        DOCUMENT.read_text(encoding="utf-8").replace("`CACHEPROXY_SERVER_PORT`", "`PORT`")
    )
    assert main([str(stale), "--check"]) == 1
    assert "run make docs" in capsys.readouterr().out
    assert main([str(stale)]) == 0
    assert main([str(stale), "--check"]) == 0
    assert stale.read_text() == DOCUMENT.read_text(encoding="utf-8")


def test_a_document_without_a_tables_marker_is_an_error() -> None:
    text = DOCUMENT.read_text(encoding="utf-8")
    broken = text.replace("<!-- BEGIN GENERATED logging", "<!-- BEGIN logging", 1)
    with pytest.raises(ValueError, match="no marker for the generated table"):
        regenerate(broken)
