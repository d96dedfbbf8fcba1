"""No collector, detection or evidence prompt names anything only an eval scenario contains.

The eval scenarios are scored, never taught: a collector that looked for one
scenario's ConfigMap, or a detection that knew one scenario's host, would
pass that scenario and nothing else. This test reads every name the
scenarios give their objects (names, namespaces, label values, containers,
images, hosts) and looks for each, as a whole word, in the built-in catalog
and in the evidence code.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from tarsy.config.loader import builtin_config_text

ROOT = Path(__file__).resolve().parents[3]
SCENARIOS = ROOT / "shared" / "tarsy_dev" / "demo_cluster" / "scenarios"
EVIDENCE_CODE = [
    *(ROOT / "shared" / "tarsy" / "evidence").rglob("*.py"),
    ROOT / "shared" / "tarsy" / "engine" / "gathering.py",
    ROOT / "shared" / "tarsy" / "agent" / "prompts.py",
]
NAMING_KEYS = {"name", "namespace", "pod", "deployment", "service", "node", "container", "image",
               "host", "instance", "job", "claimName", "secretName", "nodeName"}  # fmt: skip
# Names every cluster has: seeing them in both places says nothing about a scenario.
KUBERNETES_WORDS = {
    "default",
    "kube-system",
    "kube-public",
    "kube-root-ca.crt",
    "kubernetes",
    "kube-dns",
}
# Software every cluster may run, which the issue asks collectors to know by name.
KUBERNETES_WORDS |= {"cert-manager"}
_WORD = re.compile(r"^[a-z0-9][a-z0-9\-.]*$")


def _names(value: Any, key: str = "") -> Iterator[str]:
    if isinstance(value, dict):
        for k, v in value.items():
            if str(k) == "labels" and isinstance(v, dict):
                yield from (str(x) for x in v.values() if isinstance(x, str))
            yield from _names(v, str(k))
    elif isinstance(value, list):
        for item in value:
            yield from _names(item, key)
    elif isinstance(value, str) and key in NAMING_KEYS:
        yield value


def scenario_names() -> set[str]:
    """Every distinctive object name the scenarios use."""
    found: set[str] = set()
    for path in SCENARIOS.glob("*.yaml"):
        found.add(path.stem)
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
        for name in _names(document):
            for part in re.split(r"[\s/:@]+", name):
                if _WORD.match(part) and ("-" in part or "." in part) and len(part) >= 5:
                    found.add(part)
    return found - KUBERNETES_WORDS


def _words(text: str) -> set[str]:
    """Every name-like word of ``text``, and its forms without a trailing dot."""
    words = set(re.findall(r"[a-z0-9][a-z0-9\-.]*", text))
    return words | {w.rstrip(".") for w in words}


def test_the_scenarios_give_names_to_look_for() -> None:
    assert len(scenario_names()) > 50


def test_no_collector_in_the_built_in_catalog_names_a_scenario_object() -> None:
    catalog = yaml.safe_load(builtin_config_text())
    text = yaml.safe_dump({"collectors": catalog["collectors"], "evidence": catalog["evidence"]})
    assert sorted(scenario_names() & _words(text)) == []


def test_no_detection_or_evidence_prompt_names_a_scenario_object() -> None:
    names = scenario_names()
    leaks = {
        f"{path.relative_to(ROOT)}: {word}"
        for path in EVIDENCE_CODE
        for word in names & _words(path.read_text(encoding="utf-8"))
    }
    assert sorted(leaks) == []
