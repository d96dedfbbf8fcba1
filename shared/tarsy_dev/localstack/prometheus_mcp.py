"""The real prometheus-mcp-server as the local stack's ``prometheus`` MCP server.

Design constraint: the server is a program of its own with its own dependencies
(fastmcp, structlog, requests), so it never shares tarsy's venv: it lives in
``.venv-prometheus-mcp``, installed with ``pip install --require-hashes`` from the
lock ``tools/prometheus-mcp/requirements.txt`` (every package pinned with its
hash, as ``package-lock.json`` pins kubernetes-mcp-server). A stamp named after the
lock's digest makes the install run again only when the lock changes.

It runs over stdio with ``PROMETHEUS_URL`` pointing at the local Prometheus. Every
tool it lists is a read-only GET of Prometheus' HTTP API (why this server:
docs/metrics.md). Its links to the Prometheus UI are turned off
(``PROMETHEUS_DISABLE_LINKS``): they name a loopback URL the model cannot open.
FastMCP's start-up banner and its check of PyPI for a newer FastMCP are turned off
too (a network call at every start). Being Python, it starts in about 3 s on an idle
machine and took 20-40 s on this 2-core machine under a load of 8, so its connect
timeout is a minute: a server that is slow to start must not read as unavailable.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tarsy.errors import ConfigError

PACKAGE = "prometheus-mcp-server"
LOCK = Path("tools") / "prometheus-mcp" / "requirements.txt"
VENV = ".venv-prometheus-mcp"
INSTALL_TIMEOUT_S = 600.0
CONNECT_TIMEOUT_S = 60.0


class PrometheusMcpUnavailable(ConfigError):
    """prometheus-mcp-server is missing and could not be installed: the stack cannot start."""


def pinned_version(root: Path) -> str:
    """The version of prometheus-mcp-server the lock pins."""
    for line in (root / LOCK).read_text().splitlines():
        if line.startswith(f"{PACKAGE}=="):
            return line.split("==", 1)[1].split()[0]
    raise PrometheusMcpUnavailable(f"{LOCK} pins no {PACKAGE}")


def binary_path(root: Path) -> Path:
    """The server's console script inside its venv."""
    return root / VENV / "bin" / PACKAGE


def _stamp(root: Path) -> Path:
    digest = hashlib.sha256((root / LOCK).read_bytes()).hexdigest()[:12]
    return root / VENV / f".installed-{digest}"


def ensure_installed(root: Path, progress: Callable[[str], None] = lambda _: None) -> Path:
    """The server's program, its venv created from the lock first when it is not current.

    Args:
        root: The repository root (holds the lock).
        progress: Told when the install runs.

    Returns:
        The program's path.

    Raises:
        PrometheusMcpUnavailable: The venv or the install failed.
    """
    binary = binary_path(root)
    if _stamp(root).is_file() and binary.is_file():
        return binary
    progress(f"installing {PACKAGE} {pinned_version(root)} into {VENV} (pinned with hashes)")
    venv = root / VENV
    python = venv / "bin" / "python"
    steps = [
        [sys.executable, "-m", "venv", "--clear", str(venv)],
        [str(python), "-m", "pip", "install", "--quiet", "--require-hashes", "--no-deps",
         "-r", str(root / LOCK)],
    ]  # fmt: skip
    for argv in steps:
        try:
            completed = subprocess.run(
                argv, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, check=False
            )
        except subprocess.TimeoutExpired as e:
            raise PrometheusMcpUnavailable(f"installing {PACKAGE} took too long") from e
        if completed.returncode != 0:
            detail = (completed.stderr or completed.stdout).strip()[-2000:]
            raise PrometheusMcpUnavailable(f"installing {PACKAGE} failed: {detail}")
    if not binary.is_file():
        raise PrometheusMcpUnavailable(f"installed {PACKAGE}, yet {binary} is missing")
    _stamp(root).touch()
    return binary


def server_config(binary: Path, prometheus_url: str, description: str) -> dict[str, Any]:
    """The ``prometheus`` MCP server entry: the program over stdio on ``prometheus_url``."""
    return {
        "transport": "stdio",
        "command": str(binary),
        "args": [],
        "env": {
            "PROMETHEUS_URL": prometheus_url,
            "PROMETHEUS_MCP_SERVER_TRANSPORT": "stdio",
            "PROMETHEUS_DISABLE_LINKS": "true",
            "FASTMCP_CHECK_FOR_UPDATES": "off",
            "FASTMCP_SHOW_SERVER_BANNER": "false",
        },
        "connect_timeout": CONNECT_TIMEOUT_S,
        "description": description,
    }
