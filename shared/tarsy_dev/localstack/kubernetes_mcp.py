"""The real kubernetes-mcp-server as the local stack's ``kubernetes`` MCP server.

The project pins it in ``package.json``/``package-lock.json`` at the repository
root; ``npm ci`` (run by ``make``, or here when the binary is missing) puts it
under ``node_modules/``. What is pinned is the platform package
(``kubernetes-mcp-server-linux-amd64``), which holds the static Go binary: the
npm wrapper ``kubernetes-mcp-server`` only spawns it, and the registry here
serves no other platform's package, so a lock file naming the wrapper cannot
pass ``npm ci``. The binary is run directly: no Node at run time, and no
registry call at start (``npx`` would make one).

It runs over stdio, read-only (``--read-only`` keeps only the tools annotated
read-only, ``--disable-destructive`` is said too for clarity), with the ``core``
toolset only: the default also has ``configuration_view``, which prints the
kubeconfig, credentials included, to the model.
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tarsy.errors import ConfigError

PACKAGE = "kubernetes-mcp-server"
SERVER_FLAGS = ("--read-only", "--disable-destructive", "--toolsets", "core")
NPM_CI_TIMEOUT_S = 600.0

_GOARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


class KubernetesMcpUnavailable(ConfigError):
    """kubernetes-mcp-server is missing and could not be installed: the stack cannot start."""


def pinned_version(root: Path) -> str:
    """The version ``package.json`` pins (exactly) for this machine's platform package.

    Raises:
        KubernetesMcpUnavailable: No package is pinned for this platform.
    """
    manifest = json.loads((root / "package.json").read_text())
    name = platform_package()
    version = manifest.get("optionalDependencies", {}).get(name)
    if not isinstance(version, str):
        raise KubernetesMcpUnavailable(
            f"package.json pins no {name}: install {PACKAGE} yourself and name it as the "
            "kubernetes MCP server in your config (see docs/kubernetes.md)"
        )
    if not version[:1].isdigit():
        raise KubernetesMcpUnavailable(f"package.json must pin {name} exactly, not {version!r}")
    return version


def platform_package() -> str:
    """The npm package holding this machine's binary (``kubernetes-mcp-server-linux-amd64``)."""
    system = {"linux": "linux", "darwin": "darwin", "win32": "windows"}.get(sys.platform)
    arch = _GOARCH.get(platform.machine().lower())
    if system is None or arch is None:
        raise KubernetesMcpUnavailable(
            f"{PACKAGE} ships no binary for {sys.platform}/{platform.machine()}"
        )
    return f"{PACKAGE}-{system}-{arch}"


def binary_path(root: Path) -> Path:
    """Where ``npm ci`` puts the binary under ``root``."""
    name = platform_package()
    suffix = ".exe" if name.startswith(f"{PACKAGE}-windows") else ""
    return root / "node_modules" / name / "bin" / f"{name}{suffix}"


def installed_version(root: Path) -> str | None:
    """The version of the installed platform package, or None when it is not installed."""
    manifest = root / "node_modules" / platform_package() / "package.json"
    if not manifest.is_file() or not binary_path(root).is_file():
        return None
    return str(json.loads(manifest.read_text()).get("version"))


def ensure_installed(root: Path, progress: Callable[[str], None] = lambda _: None) -> Path:
    """The binary of the pinned version, installed with ``npm ci`` first when it is missing.

    Args:
        root: The repository root (holds ``package.json`` and ``package-lock.json``).
        progress: Told when ``npm ci`` runs.

    Returns:
        The binary's path.

    Raises:
        KubernetesMcpUnavailable: npm is missing or ``npm ci`` failed.
    """
    wanted = pinned_version(root)
    if installed_version(root) == wanted:
        return binary_path(root)
    progress(f"installing {PACKAGE} {wanted} (npm ci, pinned by package-lock.json)")
    try:
        completed = subprocess.run(
            ["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=NPM_CI_TIMEOUT_S,
            check=False,
        )
    except FileNotFoundError as e:
        raise KubernetesMcpUnavailable(
            f"npm is not installed: it installs {PACKAGE} (apt-get install npm)"
        ) from e
    except subprocess.TimeoutExpired as e:
        raise KubernetesMcpUnavailable(f"npm ci took over {NPM_CI_TIMEOUT_S:g}s") from e
    if completed.returncode != 0 or installed_version(root) != wanted:
        detail = (completed.stderr or completed.stdout).strip()[-2000:]
        raise KubernetesMcpUnavailable(f"npm ci did not install {PACKAGE} {wanted}: {detail}")
    return binary_path(root)


def server_config(binary: Path, kubeconfig: Path, description: str) -> dict[str, Any]:
    """The ``kubernetes`` MCP server entry: the binary over stdio, read-only, on ``kubeconfig``."""
    return {
        "transport": "stdio",
        "command": str(binary),
        "args": [*SERVER_FLAGS, "--kubeconfig", str(kubeconfig)],
        "description": description,
    }
