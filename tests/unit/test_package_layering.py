"""Every package of tarsy imports only packages of a lower layer: the doors above the commands.

Design constraint: a loop between packages (the api reaching into intake while
intake reached up into the api, the web importing the api) cannot be seen by
a module-level cycle check, and once in, grows. So the allowed directions are
stated here, for every package and top-level module under ``shared/tarsy``,
as layers, lowest first; a unit may import only units of a lower layer, so
two units of one layer (the three doors: the api, ingest's intake and the web
pages) never import each other. Every import counts: module level, inside a
function, under ``TYPE_CHECKING``. The back-arrows that exist today are named,
each with why, in :data:`KNOWN_BACK_ARROWS`; a new one fails. (An entry whose
import is gone is not an error: the packages' owners remove theirs at their
pace, and the entry then goes.)
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TARSY = ROOT / "shared" / "tarsy"

# Lowest first. A unit is a subpackage or a top-level module of tarsy.
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"_pydantic", "money", "runtime", "settings"}),
    frozenset({"log", "models"}),
    frozenset({"errors"}),
    frozenset({"access", "config"}),
    frozenset({"http", "secrets"}),
    frozenset({"llm"}),
    frozenset({"telemetry"}),
    frozenset({"bus", "tools"}),
    frozenset({"evidence", "persistence"}),
    frozenset({"app", "feedback", "memory"}),
    frozenset({"agent", "notify"}),
    frozenset({"engine"}),
    # The session commands, which every door calls.
    frozenset({"commands"}),
    # The doors: none imports another.
    frozenset({"api", "intake", "web"}),
)
DOORS = LAYERS[-1]

# Imports that point up today, each with why; remove an entry with its import.
KNOWN_BACK_ARROWS: dict[tuple[str, str], str] = {
    ("config", "agent"): "the schema checks a strategy's capabilities against its registry",
    ("config", "evidence"): "the schema checks the evidence settings against the checks",
    ("config", "intake"): "the alert sources' settings are intake's types",
    ("config", "llm"): "the schema checks providers against the backends and prices",
    ("config", "tools"): "the masking settings are the masker's type",
    ("tools", "agent"): "a tool result is delimited as the prompts delimit it",
    ("tools", "persistence"): "the MCP client caches tool lists through the store's port",
    ("persistence", "notify"): "the ledger's Claim (issue 43 point 3 moves the ledger down)",
    ("notify", "web"): "a notification links to the session's page (tarsy.web.links)",
}


def _layer_of() -> dict[str, int]:
    return {unit: rank for rank, units in enumerate(LAYERS) for unit in units}


def unit_of(module: str) -> str | None:
    """The unit of tarsy ``module`` names (``tarsy.api.handlers`` -> ``api``), else None."""
    parts = module.split(".")
    if parts[0] != "tarsy" or len(parts) < 2:
        return None
    return parts[1]


def imported_modules(path: Path) -> Iterator[tuple[int, str]]:
    """``(line, module)`` of every absolute import in ``path``, wherever it stands."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "tarsy":  # ``from tarsy import telemetry``
                yield from ((node.lineno, f"tarsy.{a.name}") for a in node.names)
            else:
                yield node.lineno, node.module


def arrows(root: Path) -> dict[tuple[str, str], list[str]]:
    """Every import from one unit of the package at ``root`` into another: where each is."""
    found: dict[tuple[str, str], list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        source = relative.parts[0].removesuffix(".py")
        if source == "__init__":
            continue
        for line, module in imported_modules(path):
            target = unit_of(module)
            if target is not None and target != source:
                found.setdefault((source, target), []).append(f"{relative}:{line}")
    return found


def back_arrows(found: dict[tuple[str, str], list[str]]) -> dict[tuple[str, str], list[str]]:
    """The arrows that do not point to a lower layer (an unknown unit counts as one)."""
    layer = _layer_of()
    return {
        (source, target): where
        for (source, target), where in found.items()
        if layer.get(source, -1) <= layer.get(target, len(LAYERS))
    }


def _units(root: Path) -> set[str]:
    return {
        p.stem if p.is_file() else p.name
        for p in root.iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").exists()
    }


def test_every_unit_of_tarsy_has_its_layer() -> None:
    assert _units(TARSY) == set(_layer_of())


def test_no_import_points_up_but_the_known_ones() -> None:
    new = {
        arrow: where
        for arrow, where in back_arrows(arrows(TARSY)).items()
        if arrow not in KNOWN_BACK_ARROWS
    }
    assert new == {}


def test_no_door_imports_another_and_every_door_reaches_the_commands() -> None:
    found = arrows(TARSY)
    assert {arrow: where for arrow, where in found.items() if set(arrow) <= DOORS} == {}
    assert {door for door in DOORS if (door, "commands") in found} == DOORS


def test_a_new_back_arrow_is_caught_wherever_the_import_stands(tmp_path: Path) -> None:
    root = tmp_path / "tarsy"
    (root / "models").mkdir(parents=True)
    (root / "models" / "__init__.py").write_text("", encoding="utf-8")
    (root / "models" / "low.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from tarsy.api.handlers import handle\n"
        "def later() -> None:\n    import tarsy.commands.sessions\n"
        "from tarsy import money\n",
        encoding="utf-8",
    )
    assert back_arrows(arrows(root)) == {
        ("models", "api"): ["models/low.py:3"],
        ("models", "commands"): ["models/low.py:5"],
    }
