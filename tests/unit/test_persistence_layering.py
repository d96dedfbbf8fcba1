"""Persistence sits below the engine and the api: it never imports them.

Design constraint: the engine decides (transitions, progression, sub-agent
plans) and the api serves; persistence stores what they hand it, in its own
vocabulary (:mod:`tarsy.persistence.updates`, :mod:`tarsy.persistence.turns`,
:mod:`tarsy.persistence.session_list`). Two proofs: no module of
``tarsy.persistence`` names ``tarsy.engine`` or ``tarsy.api`` in any import
(module level, inside a function, under ``TYPE_CHECKING``), and importing every
module of the package in a fresh interpreter loads neither, so no indirect
path leads there either. And the engine and the api reach the store through
its ports: ``Deps.store`` is the :class:`~tarsy.persistence.ports.Persistence`
protocol, which the concrete store satisfies.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import typing
from pathlib import Path

from tarsy.app import Deps
from tarsy.persistence.ports import Persistence

ROOT = Path(__file__).resolve().parents[2]
PERSISTENCE = ROOT / "shared" / "tarsy" / "persistence"
ABOVE = ("tarsy.engine", "tarsy.api")


def _is_above(module: str) -> bool:
    return any(module == name or module.startswith(name + ".") for name in ABOVE)


def imports_from_above(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` of every import in ``path`` that names the engine or the api."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, a.name) for a in node.names if _is_above(a.name))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            if any(_is_above(name) for name in names):
                found.append((node.lineno, node.module))
    return found


def test_no_persistence_module_imports_the_engine_or_the_api() -> None:
    offenders = {
        str(path.relative_to(PERSISTENCE)): found
        for path in sorted(PERSISTENCE.rglob("*.py"))
        if (found := imports_from_above(path))
    }
    assert offenders == {}


def test_an_import_of_the_engine_inside_a_function_is_caught(tmp_path: Path) -> None:
    offender = tmp_path / "offender.py"
    offender.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from tarsy.api.handlers import cancel\n"
        "def later() -> None:\n    import tarsy.engine.steps\n",
        encoding="utf-8",
    )
    assert imports_from_above(offender) == [(3, "tarsy.api.handlers"), (5, "tarsy.engine.steps")]


_PROBE = """
import importlib, pkgutil, sys
import tarsy.persistence as package
for info in pkgutil.walk_packages(package.__path__, "tarsy.persistence."):
    importlib.import_module(info.name)
print("\\n".join(sorted(m for m in sys.modules if m.startswith(("tarsy.engine", "tarsy.api")))))
"""


def test_importing_all_of_persistence_loads_neither_the_engine_nor_the_api() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == []


def test_deps_hold_the_persistence_port_not_the_concrete_store() -> None:
    hints = typing.get_type_hints(Deps)
    assert hints["store"] is Persistence
