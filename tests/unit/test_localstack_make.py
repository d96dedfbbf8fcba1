"""The Makefile's venv, up, demo and down recipes, and the README's own-config example."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tarsy_dev.localstack import __main__ as localstack
from tarsy_dev.localstack.__main__ import _banner
from tarsy_dev.localstack.kubernetes_mcp import server_config
from tarsy_dev.localstack.processes import ProcessInfo
from tarsy_dev.localstack.stack import (
    Stack,
    defines_kubernetes,
    defines_server,
    read_user_config,
    with_kubernetes,
)

ROOT = Path(__file__).resolve().parents[2]

needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")

# Stands in for python3: `-m venv DIR` makes DIR/bin/python (a copy of this
# script); anything else (pip) is only echoed, so nothing is installed.
FAKE_PYTHON = """#!/bin/sh
if [ "$1 $2" = "-m venv" ]; then mkdir -p "$3/bin" && cp "$0" "$3/bin/python"; exit 0; fi
echo "fake-python $*"
"""


def make(*args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        ["make", "--no-print-directory", "-C", str(ROOT), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env=env,
    )
    return done.stdout


@pytest.fixture
def fake_python(tmp_path: Path) -> Path:
    path = tmp_path / "python3"
    path.write_text(FAKE_PYTHON)
    path.chmod(0o755)
    return path


@needs_make
def test_first_install_says_it_takes_about_two_minutes(tmp_path: Path, fake_python: Path) -> None:
    venv = f"VENV={tmp_path / 'venv'}"
    first = make("venv", venv, f"PYTHON={fake_python}").splitlines()
    assert "first install takes about two minutes" in first[0]
    assert first[1:] == [
        "fake-python -m pip install --quiet --upgrade pip",
        "fake-python -m pip install --quiet -e .[dev]",
    ]
    assert "Nothing to be done" in make("venv", venv, f"PYTHON={fake_python}")
    for stamp in (tmp_path / "venv").glob(".installed-*"):
        stamp.unlink()
    again = make("venv", venv, f"PYTHON={fake_python}").splitlines()
    assert again[0] == f"pyproject.toml changed: updating {tmp_path / 'venv'}"


def recipe_line(output: str, command: str) -> str:
    return next(line for line in output.splitlines() if f"tarsy_dev.localstack {command}" in line)


@needs_make
@pytest.mark.parametrize("command", ["up", "demo"])
def test_config_reaches_up_and_demo(tmp_path: Path, command: str) -> None:
    dry = make("-n", command, "CONFIG=my.yaml", f"VENV={tmp_path / 'venv'}")
    assert re.search(r"--config my\.yaml\b", recipe_line(dry, command))
    plain = make("-n", command, f"VENV={tmp_path / 'venv'}")
    assert "--config" not in recipe_line(plain, command)


# ─── the README's own-config example ─────────────────────────────────────────


def readme_example() -> str:
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```yaml\n(# my-tarsy\.yaml\n.*?)```", readme, flags=re.DOTALL)
    assert len(blocks) == 1, "the README's own-config example (# my-tarsy.yaml) is gone"
    return str(blocks[0])


def test_readme_example_config_is_valid_and_adds_an_alert_type_and_a_server(
    tmp_path: Path,
) -> None:
    path = tmp_path / "my-tarsy.yaml"
    path.write_text(readme_example())
    localstack.check_config(path)  # raises InputProblem when the functions would refuse it
    config = yaml.safe_load(path.read_text())
    [chain] = config["agent_chains"].values()
    assert chain["alert_types"] == ["DiskFull"]
    [server] = config["mcp_servers"]
    assert server != "kubernetes"
    assert server in config["agents"]["disk-investigator"]["mcp_servers"]


def test_the_readmes_providers_of_three_vendors_load_with_their_types(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    [block] = re.findall(r"```yaml\n(# providers\.yaml\n.*?)```", readme, flags=re.DOTALL)
    path = tmp_path / "providers.yaml"
    path.write_text(block)
    localstack.check_config(path)  # raises InputProblem when the functions would refuse it
    providers = yaml.safe_load(block)["llm_providers"]
    assert {p["type"] for p in providers.values()} == {"openai", "google", "openai-compatible"}


def test_readme_documents_config_for_up_and_demo() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "make up CONFIG=" in readme
    assert "make demo CONFIG=" in readme
    assert "TARSY_CONFIG_PATH" in readme


# ─── the demo cluster and the user's kubernetes server ───────────────────────


def test_demo_cluster_joins_the_users_config(tmp_path: Path) -> None:
    path = tmp_path / "my-tarsy.yaml"
    path.write_text(readme_example())
    user = read_user_config(path)
    assert not defines_kubernetes(user)
    binary, kubeconfig = tmp_path / "kubernetes-mcp-server", tmp_path / "kubeconfig"
    merged = with_kubernetes(user, server_config(binary, kubeconfig, "demo cluster"))
    kubernetes = merged["mcp_servers"]["kubernetes"]
    assert kubernetes["transport"] == "stdio" and kubernetes["command"] == str(binary)
    assert kubernetes["args"] == [
        "--read-only", "--disable-destructive", "--toolsets", "core",
        "--kubeconfig", str(kubeconfig),
    ]  # fmt: skip
    assert merged["mcp_servers"]["my-tools"] == user["mcp_servers"]["my-tools"]
    assert merged["agent_chains"] == user["agent_chains"]
    assert "kubernetes" not in user["mcp_servers"], "the user's mapping is not changed"


def test_a_users_kubernetes_server_is_noticed(tmp_path: Path) -> None:
    path = tmp_path / "k8s.yaml"
    path.write_text("mcp_servers:\n  kubernetes: {transport: http, url: 'https://k8s/mcp'}\n")
    assert defines_kubernetes(read_user_config(path))
    assert read_user_config(None) == {}
    assert not defines_kubernetes({"mcp_servers": None})


def test_the_banner_prints_a_kubectl_line_to_paste(capsys: pytest.CaptureFixture[str]) -> None:
    demo = ProcessInfo(name="demo-cluster", pid=1, log_path="x", url="http://127.0.0.1:1")
    stack = Stack(
        project_id="p", api_key="k", firestore_host="f", pubsub_host="q",
        ingest_url="http://i", api_url="http://a", step_url="http://s", steps_topic="t",
        model="stand-in", processes=[demo], kubeconfig="/tmp/x/[demo]/kubeconfig",
    )  # fmt: skip
    _banner(stack)
    err = capsys.readouterr().err
    assert "kubectl --kubeconfig /tmp/x/[demo]/kubeconfig get pods -A" in err
    assert "[bold]" not in err
    assert "kubernetes-mcp-server (read-only, stdio)" in err


def test_the_banner_names_the_prometheus_the_metrics_tools_read(
    capsys: pytest.CaptureFixture[str],
) -> None:
    stack = Stack(
        project_id="p", api_key="k", firestore_host="f", pubsub_host="q",
        ingest_url="http://i", api_url="http://a", step_url="http://s", steps_topic="t",
        model="stand-in", processes=[], prometheus_url="http://127.0.0.1:9999",
    )  # fmt: skip
    _banner(stack)
    err = capsys.readouterr().err
    assert "prometheus-mcp-server (read-only, stdio)" in err
    assert "http://127.0.0.1:9999/api/v1/query" in err


def test_a_users_own_prometheus_server_is_noticed() -> None:
    assert defines_server({"mcp_servers": {"prometheus": {"url": "https://p/mcp"}}}, "prometheus")
    assert not defines_server({"mcp_servers": {"kubernetes": {}}}, "prometheus")
