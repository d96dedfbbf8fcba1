"""What a function archive can import: the runtime dependencies and what they require.

Design constraint: the archives' ``requirements.txt`` is ``[project].dependencies``
(``scripts/package_functions.py``), while the venv the tests and benchmarks run in
also holds the development extras (pytest, rich, pydantic-settings, ...). Code that
imports one of those works here and fails deployed; a library that imports one when
it happens to be installed (httpx loads its command-line tool, with rich and
pygments) is slower here than deployed. :func:`undeployed_modules` names the
top-level modules only the extras provide, and :func:`without_undeployed` is a
prelude for a fresh interpreter that makes them unfindable, as they are in the
cloud: the layout test imports every library module under it, and ``make bench``
times cold starts under it.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable
from importlib.metadata import PackageNotFoundError, distribution, packages_distributions
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

PROJECT = "tarsy"
# The installer itself is where any function's environment was made.
INSTALLER = frozenset({"pip", "_distutils_hack"})


def runtime_distributions(pyproject: Path) -> set[str]:
    """The canonical names of the runtime dependencies and all they require, as installed.

    A requirement's extras are followed (``google-api-core[grpc]``); a requirement
    whose marker excludes this interpreter, or that is not installed, adds nothing.
    """
    declared = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["dependencies"]
    found: set[str] = {PROJECT}
    followed: set[tuple[str, str]] = set()
    pending = [Requirement(spec) for spec in declared]
    while pending:
        requirement = pending.pop()
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        name = canonicalize_name(requirement.name)
        try:
            dist = distribution(name)
        except PackageNotFoundError:
            continue
        found.add(name)
        for extra in ("", *sorted(requirement.extras)):
            if (name, extra) in followed:
                continue
            followed.add((name, extra))
            for spec in dist.requires or []:
                needed = Requirement(spec)
                if needed.marker is None or needed.marker.evaluate({"extra": extra}):
                    # The marker held for this extra: follow it without re-testing it.
                    needed.marker = None
                    pending.append(needed)
    return found


def undeployed_modules(pyproject: Path) -> set[str]:
    """Top-level modules installed here that no runtime distribution provides."""
    runtime = runtime_distributions(pyproject)
    return {
        module
        for module, dists in packages_distributions().items()
        if module not in INSTALLER and not any(canonicalize_name(d) in runtime for d in dists)
    }


def without_undeployed(modules: Iterable[str]) -> str:
    """Python source that, run first in an interpreter, makes ``modules`` unfindable.

    The import fails with ModuleNotFoundError, as it would where the module is not
    installed, so optional imports take their fallback.
    """
    return (
        "import importlib.abc as _abc, sys as _sys\n"
        "class _Undeployed(_abc.MetaPathFinder):\n"
        f"    names = frozenset({sorted(modules)!r})\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.partition('.')[0] in self.names:\n"
        "            raise ModuleNotFoundError(f'{name} is not deployed', name=name)\n"
        "        return None\n"
        "_sys.meta_path.insert(0, _Undeployed())\n"
    )
