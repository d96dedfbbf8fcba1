"""What the documentation states about the product agrees with the code.

Design constraint: a number or a prerequisite written in prose drifts from
the code unless a test reads both; these tests parse the documents as a reader
would and compare them with the settings model and the Makefile.
"""

from __future__ import annotations

import re
from pathlib import Path

from tarsy.settings import Settings, env_names, functions_reading

ROOT = Path(__file__).resolve().parents[2]


def _settings_rows() -> list[list[str]]:
    """The cells of each row of docs/configuration.md's settings table."""
    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    return [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in text.splitlines()
        if line.startswith("| `") and re.match(r"\| `[A-Z][A-Z0-9_]+`", line)
    ]


def _field_of(variable: str) -> str | None:
    return next((f for f in Settings.model_fields if variable in env_names(f)), None)


def _as_written(default: object) -> str:
    if isinstance(default, bool):
        return str(default).lower()
    if isinstance(default, tuple | list | frozenset):
        return ",".join(str(item) for item in default)
    return str(default)


def test_every_literal_default_in_the_settings_table_is_the_codes_default() -> None:
    compared = 0
    for variable_cell, functions, default, _meaning in (row[:4] for row in _settings_rows()):
        field = _field_of(re.findall(r"`([A-Z0-9_]+)`", variable_cell)[0])
        assert field is not None, variable_cell
        assert functions == ", ".join(functions_reading(field)), variable_cell
        literal = re.fullmatch(r"`([^`]*)`", default)
        if literal is None:
            continue  # "unset", "empty", "Google's": prose, checked by reading
        written = literal.group(1)
        actual = Settings.model_fields[field].default
        if isinstance(actual, int | float) and not isinstance(actual, bool):
            assert float(written) == float(actual), variable_cell
        else:
            assert written == _as_written(actual), variable_cell
        compared += 1
    assert compared >= 15


def test_the_due_time_the_configuration_docs_give_is_45_seconds() -> None:
    row = next(r for r in _settings_rows() if "`TARSY_STEP_DUE_SECONDS`" in r[0])
    assert row[2] == "`45`" == f"`{Settings().step_due_seconds}`"


def test_the_readmes_prerequisites_name_every_tool_the_make_targets_run() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    prerequisites = readme[readme.index("You need Python") : readme.index("### One investigation")]
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "npm ci" in makefile  # make tools, a step of make demo, up, eval and test
    for tool in ("Python 3.11", "Java", "Node.js", "npm", "gcloud", "terraform"):
        assert tool in prerequisites, tool
