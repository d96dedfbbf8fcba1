"""The deployed library never reaches into the development tools or their dependencies.

``shared/tarsy`` is what the function archives hold, whole; ``shared/tarsy_dev``
(CLI, client, replay, evals, local stack, fakes, demo cluster) runs from the
venv only. Two proofs: no module of the library names ``tarsy_dev`` anywhere in
its source (imports, lazy imports, ``importlib`` strings), and every module of
the library imports in a fresh interpreter where ``tarsy_dev`` cannot be found,
nor any module that only the development extras install (the archives'
``requirements.txt`` is the runtime dependencies alone).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tarsy_dev.deployed import runtime_distributions, undeployed_modules, without_undeployed

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = ROOT / "pyproject.toml"
LIBRARY = ROOT / "shared" / "tarsy"
DEV = "tarsy_dev"


def _mentions_of_dev(path: Path) -> list[int]:
    lines: list[int] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == DEV for a in node.names):
            lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == DEV:
            lines.append(node.lineno)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value == DEV or node.value.startswith(DEV + "."):
                lines.append(node.lineno)
    return lines


def test_no_library_module_names_the_development_package() -> None:
    offenders = {
        str(path.relative_to(LIBRARY)): lines
        for path in sorted(LIBRARY.rglob("*.py"))
        if (lines := _mentions_of_dev(path))
    }
    assert offenders == {}


def test_a_module_that_imports_the_development_package_is_caught(tmp_path: Path) -> None:
    offender = tmp_path / "offender.py"
    offender.write_text(
        "def later() -> None:\n    from tarsy_dev.fakes import standin\n", encoding="utf-8"
    )
    assert _mentions_of_dev(offender) == [2]


# Imports every module of the library with tarsy_dev made unfindable.
_PROBE = """
import importlib, importlib.abc, pkgutil, sys

class NoDev(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "tarsy_dev" or name.startswith("tarsy_dev."):
            raise ImportError("the deployed library imported " + name)
        return None

sys.meta_path.insert(0, NoDev())
import tarsy
names = [m.name for m in pkgutil.walk_packages(tarsy.__path__, "tarsy.")]
for name in names:
    importlib.import_module(name)
print(len(names))
"""


def test_every_library_module_imports_without_the_development_package() -> None:
    done = subprocess.run(
        [sys.executable, "-c", without_undeployed(undeployed_modules(PYPROJECT)) + _PROBE],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT / "shared"), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    imported = int(done.stdout.strip())
    assert imported == len([p for p in LIBRARY.rglob("*.py") if p.name != "__main__.py"]) - len(
        [p for p in LIBRARY.rglob("__init__.py") if p.parent == LIBRARY]
    )


def test_the_development_extras_are_not_deployed() -> None:
    undeployed = undeployed_modules(PYPROJECT)
    assert {"rich", "pydantic_settings", "pytest", "hypothesis"} <= undeployed
    assert {"pydantic", "yaml", "httpx", "google", "mcp"}.isdisjoint(undeployed)


def test_a_runtime_dependency_brings_what_its_requested_extras_require(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\ndependencies = ["google-api-core[grpc]"]\n')
    assert {"google-api-core", "grpcio", "grpcio-status", "protobuf"} <= runtime_distributions(
        pyproject
    )


def test_an_undeployed_module_is_unfindable_under_the_prelude() -> None:
    probe = without_undeployed(["rich"]) + (
        "import sys, httpx\n"  # httpx's command-line tool needs rich: httpx takes its fallback
        "try:\n    import rich\nexcept ModuleNotFoundError as missing:\n    print(missing.name)\n"
        "print('rich' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert done.stdout.split() == ["rich", "False"]
