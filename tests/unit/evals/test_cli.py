"""``tarsy eval``: scenario selection, usage errors, the listing, and its dev-only packaging."""

from __future__ import annotations

from pathlib import Path

import pytest

from tarsy_dev.cli import _parser, main
from tarsy_dev.demo_cluster import scenario_names
from tarsy_dev.evals.harness import DemoCluster, EvalProblem, eval_config, select_scenarios
from tarsy_dev.localstack.processes import ProcessInfo

ROOT = Path(__file__).resolve().parents[3]


def test_select_scenarios_by_substring_or_glob() -> None:
    assert select_scenarios([]) == scenario_names()
    assert select_scenarios(["quota"]) == ["catalog-quota-events"]
    assert select_scenarios(["cart-*", "oom-*"]) == ["cart-victim-networkpolicy", "oom-killed"]
    with pytest.raises(EvalProblem, match="-k 'zzz' matches no scenario"):
        select_scenarios(["zzz"])


def test_eval_arguments() -> None:
    args = _parser().parse_args(
        ["eval", "-k", "cart", "-k", "oom", "--model", "standin", "--repeat", "3", "--no-judge"]
    )
    assert (args.command, args.patterns, args.models, args.repeat) == (
        "eval",
        ["cart", "oom"],
        ["standin"],
        3,
    )
    assert args.no_judge and args.out == ".local/eval" and args.fail_under is None


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["eval", "--model", "gemini-2.5-pro"], "needs GEMINI_API_KEY or TARSY_VERTEX_PROJECT"),
        (["eval", "-k", "zzz"], "matches no scenario"),
        (["eval", "--repeat", "0"], "--repeat must be at least 1"),
        (["eval", "--config", "/nonexistent/tarsy.yaml"], "no such file"),
    ],
)
def test_usage_errors_exit_2_before_anything_starts(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_list_prints_every_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "--list"]) == 0
    out = capsys.readouterr().out
    assert "marketplace-noisy" in out and "two-causes" in out


def test_the_eval_config_points_kubernetes_at_the_demo_cluster(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    cluster = DemoCluster(ProcessInfo(name="demo-cluster", pid=1, log_path="x"), kubeconfig)
    user = {"mcp_servers": {"kubernetes": {"transport": "stdio", "command": "x"}}, "agents": {}}
    config = eval_config(user, tmp_path / "kubernetes-mcp-server", cluster)
    kubernetes = config["mcp_servers"]["kubernetes"]
    assert kubernetes["transport"] == "stdio"
    assert kubernetes["command"] == str(tmp_path / "kubernetes-mcp-server")
    assert kubernetes["args"][-2:] == ["--kubeconfig", str(kubeconfig)]
    assert "--read-only" in kubernetes["args"]
    assert kubernetes["call_timeout"] == 3.0
    assert config["agents"] == {}
