"""Loading scenarios from the package's ``scenarios/`` directory.

Every scenario extends ``scenarios/_base.yaml`` (the healthy part of the cluster): its
``cluster`` lists are merged into the base's, an entry with the same identity (name, or
kind, namespace and name) replacing the base's fields one by one. Top-level keys starting
with ``x-`` are free for YAML anchors.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

import yaml

from tarsy_dev.demo_cluster.models import Scenario

DEFAULT_SCENARIO = "crashloop-bad-configmap"
_BASE = "_base"
_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _directory() -> Traversable:
    return resources.files("tarsy_dev.demo_cluster") / "scenarios"


def scenario_names() -> list[str]:
    """Names of the bundled scenarios, the default first."""
    names = [
        entry.name.removesuffix(".yaml")
        for entry in _directory().iterdir()
        if entry.name.endswith(".yaml") and not entry.name.startswith("_")
    ]
    return sorted(names, key=lambda name: (name != DEFAULT_SCENARIO, name))


def _read(name: str) -> dict[str, Any]:
    data = yaml.load((_directory() / f"{name}.yaml").read_text(encoding="utf-8"), Loader=_LOADER)
    if not isinstance(data, dict):
        raise ValueError(f"scenario file {name}.yaml is not a mapping")
    return {k: v for k, v in data.items() if not str(k).startswith("x-")}


def _identity(field: str) -> Callable[[Any], Any]:
    def key(entry: Any) -> Any:
        if not isinstance(entry, dict):
            return id(entry)
        if field == "objects":
            metadata = entry.get("metadata") or {}
            return (entry.get("kind"), metadata.get("namespace"), metadata.get("name"))
        if field == "pods":
            return (entry.get("namespace"), entry.get("name"))
        return entry.get("name")

    return key


def _merge_cluster(base: dict[str, Any], overlay: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for field, value in overlay.items():
        if field in ("namespaces", "nodes", "pods", "objects") and isinstance(value, list):
            identity = _identity(field)
            entries = list(base.get(field) or [])
            positions = {identity(entry): i for i, entry in enumerate(entries)}
            for entry in value:
                position = positions.get(identity(entry))
                if position is None:
                    positions[identity(entry)] = len(entries)
                    entries.append(entry)
                else:
                    entries[position] = {**entries[position], **entry}
            merged[field] = entries
        elif field == "events" and isinstance(value, list):
            merged[field] = [*(base.get(field) or []), *value]
        else:
            merged[field] = value
    return merged


def load_scenario(name: str = DEFAULT_SCENARIO) -> Scenario:
    """Load and validate a bundled scenario (raises ``ValueError`` for an unknown one)."""
    names = scenario_names()
    if name not in names:
        raise ValueError(f"unknown scenario {name!r}; scenarios: {', '.join(names)}")
    data = _read(name)
    if data.get("name", name) != name:
        raise ValueError(f"{name}.yaml names itself {data['name']!r}")
    base_cluster = _read(_BASE).get("cluster") or {}
    data["cluster"] = _merge_cluster(base_cluster, data.get("cluster") or {})
    return Scenario.model_validate({**data, "name": name})
