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


# ─── the whole library: every identifier a scenario holds ─────────────────────
#
# Wider than the names above: every word of every scenario file that is not plain
# English is an identifier the scenario chose (an object or image name, a host, an
# env var, a figure with its unit), and none may appear in a module or default of
# the product library (``shared/tarsy``; ``shared/tarsy_dev`` is dev tooling).

LIBRARY = ROOT / "shared" / "tarsy"
LIBRARY_SUFFIXES = {".py", ".yaml", ".yml", ".json", ".toml", ".js", ".html", ".css", ".svg", ".md"}
_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*[A-Za-z0-9]|[A-Za-z0-9]")
_SEPARATORS = re.compile(r"[/:@=]")
# Not identifiers: plain figures, one- or two-digit durations (5m, 30s: every rate window
# and timeout has one), the tail of a timestamp split at its colons, API versions, 5xx.
_NOT_IDENTIFIER = re.compile(r"^(\d+(\.\d+)?|\d{1,2}[smhd]|\d+Z|v\d+((alpha|beta)\d*)?|\dxx)$")
_ENV_NAME = re.compile(r"^[A-Z][A-Z0-9]*(_[A-Z0-9]+)+$")
# Words that look like identifiers and are the vocabulary of every cluster or of the
# tools: Kubernetes' own names, annotation and label keys, the MCP servers' tool
# names, cAdvisor's and kube-state-metrics' metric names, standards and English.
VOCABULARY = {
    # Kubernetes: namespaces, components, domains, annotation/label keys and values
    "kube-system", "kube-public", "kube-node-lease", "kube-dns", "k8s-app", "kube-state-metrics",
    "default-scheduler", "pod-template-hash", "kubernetes.io", "k8s.io", "networking.k8s.io",
    "deployment.kubernetes.io", "kubectl.kubernetes.io", "last-applied",
    "last-applied-configuration", "kubectl-client-side-apply", "kubectl-edit",
    "ephemeral-storage", "metadata.name", "tls.crt", "tls.key", "fieldsV1",
    # cert-manager, which the catalog knows by name
    "cert-manager", "cert-manager.io", "acme.cert-manager.io", "certificate-name",
    "certificate-revision",
    # the MCP servers' tools and arguments
    "pods_get", "pods_list", "pods_list_in_namespace", "pods_log", "pods_top", "nodes_top",
    "resources_get", "resources_list", "events_list", "execute_query", "execute_range_query",
    "all_namespaces",
    # Prometheus: functions, the generator URL's field, cAdvisor and kube-state-metrics
    "histogram_quantile", "g0.expr", "container_cpu_cfs_periods_total",
    "container_cpu_cfs_throttled_periods_total", "container_memory_working_set_bytes",
    "kube_pod_container_resource_limits", "kube_pod_container_status_restarts_total",
    # the request counter the Prometheus client libraries and documentation name
    "http_requests_total",
    # tarsy's own alert fields
    "alert_type", "runbook_url",
    # standards, example domains, conventional variable names, English
    "x509", "sha256", "IPv4", "example.com", "github.com", "cloud.google.com",
    "OTEL_EXPORTER_OTLP_ENDPOINT", "DB_PASSWORD", "e.g", "re-run", "well-known", "back-off",
    "image-pull", "any_of",
}  # fmt: skip


def _is_identifier(word: str) -> bool:
    """Whether a word is a chosen identifier rather than English or an API's own term.

    Kubernetes object names, hosts and images are lower-case, so a word with an
    upper-case letter and no digit is API vocabulary (a kind, a field, a reason);
    an env var name (``A_B``) and a figure with a unit (``512Mi``) are identifiers.
    """
    if _NOT_IDENTIFIER.match(word):
        return False
    if _ENV_NAME.match(word) or (re.search(r"\d", word) and re.search(r"[A-Za-z]", word)):
        return True
    if re.search(r"[A-Z]", word):
        return False
    return bool(re.search(r"[-._]", word))


def _tokens(text: str) -> set[str]:
    found: set[str] = set()
    for token in _TOKEN.findall(text):
        found |= {token, token.rstrip("."), *(p for p in _SEPARATORS.split(token) if p)}
    return found


def scenario_identifiers() -> set[str]:
    """Every identifier of every scenario file (names, hosts, images, figures), minus vocabulary."""
    found: set[str] = set()
    for path in SCENARIOS.glob("*.yaml"):
        found |= {path.stem} | {w for w in _tokens(path.read_text("utf-8")) if _is_identifier(w)}
    return found - VOCABULARY - KUBERNETES_WORDS


def test_the_scenarios_hold_identifiers_and_the_test_reads_them() -> None:
    identifiers = scenario_identifiers()
    assert len(identifiers) > 500
    assert {"512Mi", "kube-system", "Deployment", "restartCount"} & identifiers == {"512Mi"}


def test_no_module_or_default_of_the_library_holds_a_scenario_identifier() -> None:
    identifiers = scenario_identifiers()
    leaks = {
        (str(path.relative_to(ROOT)), word)
        for path in sorted(LIBRARY.rglob("*"))
        if path.is_file() and path.suffix in LIBRARY_SUFFIXES and "__pycache__" not in path.parts
        for word in identifiers & _tokens(path.read_text(encoding="utf-8"))
    }
    assert sorted(leaks) == []
