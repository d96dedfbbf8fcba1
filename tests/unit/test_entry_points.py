"""The functions' entry points stay thin: parse the trigger, call the library, answer."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tarsy.web.links import span_route

ROOT = Path(__file__).resolve().parents[2]
ENTRY_POINTS = sorted((ROOT / "functions").glob("*/main.py"))


def test_there_is_an_entry_point_per_function() -> None:
    assert [p.parent.name for p in ENTRY_POINTS] == ["api", "ingest", "step"]


@pytest.mark.parametrize("entry_point", ENTRY_POINTS, ids=lambda p: p.parent.name)
def test_every_entry_point_is_under_fifty_lines(entry_point: Path) -> None:
    assert len(entry_point.read_text(encoding="utf-8").splitlines()) < 50


@pytest.mark.parametrize(
    ("path", "route"),
    [
        ("/sessions/abc-123", "/sessions/{session_id}"),
        ("/sessions/abc-123/cancel", "/sessions/{session_id}/cancel"),
        ("/ui/sessions/abc-123", "/ui/sessions/{session_id}"),
        ("/ui/data/sessions/abc-123/events", "/ui/data/sessions/{session_id}/events"),
        ("/sessions", "/sessions"),
    ],
)
def test_a_spans_route_never_carries_the_session_id(path: str, route: str) -> None:
    assert span_route(path) == route


# Imports one entry point as the functions framework does, then names the modules loaded.
_LOADED = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("main", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print(json.dumps(sorted(sys.modules)))
"""

# What each function's import must not load (its path never uses it): the step engine,
# the model providers and their SDKs, the session list; in the api, what only some routes
# use (the chains of a chat or a judge, the sweep, the notifiers, the gather step's
# detections) and httpx, whose import brings its CLI (rich, pygments). No function loads
# pydantic-settings: the settings read the environment without it.
_NOT_LOADED = {
    "ingest": [
        "pydantic_settings",
        "tarsy.engine",
        "tarsy.llm.registry",
        "tarsy.llm.backends",
        "tarsy.persistence.session_list",
        "tarsy.api",
        "google.genai",
        "jsonschema",
        # A native sender's parser is imported when its route is first posted to.
        "tarsy.intake.sources.alertmanager",
        "tarsy.intake.sources.alertmanager_api",
        "tarsy.intake.sources.grafana",
        "tarsy.intake.sources.pagerduty",
        "tarsy.intake.sources.sns",
        "httpx",
        "rich",
        # Routing reads the alert's labels; the facts and their PromQL are the gather step's.
        "tarsy.evidence.snapshot",
        "tarsy.evidence.promql",
    ],
    "api": [
        "pydantic_settings",
        "tarsy.engine.steps",
        "tarsy.engine.chains",
        "tarsy.engine.sweeper",
        "tarsy.llm.registry",
        "tarsy.llm.backends",
        "tarsy.notify.session_end",
        "tarsy.notify.slack",
        "tarsy.notify.pagerduty",
        "tarsy.evidence.detections",
        "tarsy.evidence.snapshot",
        "tarsy.evidence.promql",
        "tarsy.memory",
        "google.genai",
        "jsonschema",
        "httpx",
        "rich",
        "pygments",
        "zstandard",
    ],
    "step": [
        "pydantic_settings",
        "tarsy.api",
        "tarsy.persistence.session_list",
        "langchain_core",
        "openai",
        # Only an agent of the schema-actions strategy validates against a schema.
        "jsonschema",
        # A notifier is imported when a session ends with it configured.
        "tarsy.notify.slack",
        "tarsy.notify.pagerduty",
        # Only a gather step runs the detections.
        "tarsy.evidence.detections",
        "rich",
    ],
}


def _loaded_by(function: str) -> set[str]:
    entry_point = ROOT / "functions" / function / "main.py"
    result = subprocess.run(
        [sys.executable, "-c", _LOADED, str(entry_point)],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    loaded: list[str] = json.loads(result.stdout.splitlines()[-1])
    return set(loaded)


@pytest.mark.parametrize("function", sorted(_NOT_LOADED))
def test_a_function_imports_only_what_its_path_uses(function: str) -> None:
    loaded = _loaded_by(function)
    assert [m for m in _NOT_LOADED[function] if m in loaded] == []


def test_the_import_check_sees_what_an_entry_point_loads() -> None:
    assert {"tarsy.engine.steps", "tarsy.engine.delivery"} <= _loaded_by("step")
