"""Finding the pinned kubernetes-mcp-server, and the stack's entry for it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tarsy_dev.localstack.kubernetes_mcp import (
    KubernetesMcpUnavailable,
    binary_path,
    ensure_installed,
    installed_version,
    pinned_version,
    platform_package,
)

ROOT = Path(__file__).resolve().parents[2]


def write_manifest(root: Path, pins: dict[str, str]) -> None:
    (root / "package.json").write_text(json.dumps({"optionalDependencies": pins}))


def install(root: Path, version: str) -> None:
    package = root / "node_modules" / platform_package()
    binary_path(root).parent.mkdir(parents=True)
    binary_path(root).write_text("#!/bin/sh\n")
    (package / "package.json").write_text(json.dumps({"version": version}))


def test_the_project_pins_this_platforms_binary_exactly() -> None:
    assert platform_package() == "kubernetes-mcp-server-linux-amd64"
    assert pinned_version(ROOT) == "0.0.66"
    lock = json.loads((ROOT / "package-lock.json").read_text())
    assert lock["packages"][f"node_modules/{platform_package()}"]["version"] == "0.0.66"


def test_a_range_or_a_missing_pin_is_refused(tmp_path: Path) -> None:
    write_manifest(tmp_path, {platform_package(): "^0.0.67"})
    with pytest.raises(KubernetesMcpUnavailable, match="exactly"):
        pinned_version(tmp_path)
    write_manifest(tmp_path, {})
    with pytest.raises(KubernetesMcpUnavailable, match="pins no"):
        pinned_version(tmp_path)


def test_an_installed_pinned_binary_is_used_without_npm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_manifest(tmp_path, {platform_package(): "0.0.67"})
    install(tmp_path, "0.0.67")

    def no_npm(*args: object, **kwargs: object) -> None:
        raise AssertionError("npm must not run when the pinned binary is there")

    monkeypatch.setattr("subprocess.run", no_npm)
    assert ensure_installed(tmp_path) == binary_path(tmp_path)
    assert installed_version(tmp_path) == "0.0.67"


def test_without_npm_the_error_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_manifest(tmp_path, {platform_package(): "0.0.67"})
    install(tmp_path, "0.0.66")  # another version: npm ci must run
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    said: list[str] = []
    with pytest.raises(KubernetesMcpUnavailable, match="npm is not installed"):
        ensure_installed(tmp_path, said.append)
    assert said == ["installing kubernetes-mcp-server 0.0.67 (npm ci, pinned by package-lock.json)"]
