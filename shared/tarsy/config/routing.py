"""Routing a native alert to a chain from its labels: the ``alert_routes`` section.

A native sender names its alerts its own way (``KubePodCrashLooping``), not
by a chain, so the alert type alone would send every Prometheus alert to the
``default`` chain, which has no tools. The chain of an alert is therefore
decided in this order, and the session records which step decided it
(:class:`~tarsy.models.ChainRouting`), so that a person can tell why a chain ran:

1. a chain whose ``alert_types`` lists the alert type (an explicit claim);
2. the chain its source's configuration names (``alert_sources.<source>.chain``:
   a PagerDuty incident or a CloudWatch alarm carries no labels to route by,
   so the built-in configuration sends both sources to ``metrics``);
3. the first enabled rule of ``alert_routes`` whose conditions the alert
   meets: the user's rules first, in their order, then the built-in ones
   (``builtin.yaml``: the kube-prometheus ``Kube*`` alerts go to
   ``kubernetes``; an alert with a PromQL expression or a generator URL, or
   naming a ``service`` or a ``job``, to ``metrics``; any other alert naming a
   ``pod``, ``deployment`` or ``namespace`` to ``kubernetes``);
4. the ``default`` chain, which has no tools: the session says that nothing
   else claimed the alert.

A rule's conditions all hold at once: ``match_labels`` (each label present
and matching its shell-style pattern, case-sensitive: ``Kube*``,
``critical``), ``has_labels`` (each present), ``has_any_label`` (at least
one present), ``has_any_field`` (at least one top-level field of the alert's
data is non-empty text: ``generatorURL``, ``expr``). Labels are the alert's
``labels`` mapping (Alertmanager, Grafana, or a ``POST /alerts`` whose
``data`` carries one); a ``POST /alerts`` whose ``data`` has no ``labels``
is labelled by its own top-level text fields (``{"service": "orders-web",
...}`` names a service). A user rule with a built-in rule's name replaces it,
and ``enabled: false`` turns one off.
"""

from __future__ import annotations

from collections.abc import Mapping
from fnmatch import fnmatchcase
from typing import Any

from pydantic import ConfigDict, Field, model_validator

from tarsy._pydantic import DeferredModel
from tarsy.evidence.alert import first_alert

NAME_PATTERN = r"^[a-zA-Z][a-zA-Z0-9_\-]*$"


class AlertRoute(DeferredModel):
    """One rule: alerts whose labels meet every condition go to ``chain``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=NAME_PATTERN)
    chain: str | None = Field(default=None, min_length=1, description="the chain it chooses")
    enabled: bool = True
    match_labels: dict[str, str] = Field(
        default_factory=dict, description="label -> shell-style pattern (all must match)"
    )
    has_labels: list[str] = Field(default_factory=list, description="labels that must all be set")
    has_any_label: list[str] = Field(
        default_factory=list, description="labels of which at least one must be set"
    )
    has_any_field: list[str] = Field(
        default_factory=list,
        description="top-level fields of the alert's data of which at least one is non-empty text",
    )

    @model_validator(mode="after")
    def _something_to_match(self) -> AlertRoute:
        if not self.enabled:
            return self
        if self.chain is None:
            raise ValueError("an enabled rule needs 'chain'")
        if not (self.match_labels or self.has_labels or self.has_any_label or self.has_any_field):
            raise ValueError(
                "a rule needs at least one of 'match_labels', 'has_labels', 'has_any_label', "
                "'has_any_field'"
            )
        return self

    def explain(
        self, labels: Mapping[str, str], fields: Mapping[str, str] | None = None
    ) -> str | None:
        """Why an alert meets this rule, in words; None when it does not.

        Args:
            labels: The alert's labels.
            fields: The non-empty text fields at the top of the alert's data.

        Returns:
            E.g. ``alertname 'KubePodCrashLooping' matches 'Kube*'``, or None.
        """
        if not self.enabled:
            return None
        reasons: list[str] = []
        for label, pattern in self.match_labels.items():
            value = labels.get(label)
            if value is None or not fnmatchcase(value, pattern):
                return None
            reasons.append(f"{label} {value!r} matches {pattern!r}")
        for label in self.has_labels:
            if label not in labels:
                return None
            reasons.append(f"{label} is set")
        if self.has_any_label:
            present = [label for label in self.has_any_label if label in labels]
            if not present:
                return None
            reasons.append(f"{present[0]} is set")
        if self.has_any_field:
            given = fields or {}
            named = [field for field in self.has_any_field if field in given]
            if not named:
                return None
            reasons.append(f"the alert has a {named[0]}")
        return ", ".join(reasons)


def _texts(value: object) -> dict[str, str]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): v for k, v in value.items() if isinstance(v, str)}


def alert_labels(data: object) -> dict[str, str]:
    """The labels of an alert's data: its ``labels`` mapping's text values.

    A flat ``POST /alerts`` body (``{"service": "orders-web", "p99_seconds": 2.3}``)
    has no ``labels``: its own top-level text fields label it. A whole notification
    (``alerts: [...]``) is labelled by its first firing alert and its ``commonLabels``.

    Args:
        data: The normalized alert's data, or a ``POST /alerts`` payload.

    Returns:
        The labels whose values are strings (alert data is untrusted: anything else is dropped).
    """
    if not isinstance(data, Mapping):
        return {}
    alert = first_alert(data)
    if alert is not data:
        return {**_texts(data.get("commonLabels")), **_texts(alert.get("labels"))}
    if "labels" not in data:
        return alert_fields(data)
    return _texts(data.get("labels"))


def alert_fields(data: object) -> dict[str, str]:
    """The top-level fields of an alert's data that are non-empty text (``generatorURL``...).

    A whole notification's fields are those of its first firing alert.

    Args:
        data: The normalized alert's data, or a ``POST /alerts`` payload.

    Returns:
        Field name to value; empty for data that is not a mapping.
    """
    if not isinstance(data, Mapping):
        return {}
    alert = first_alert(data)
    return {str(k): v for k, v in alert.items() if isinstance(v, str) and v.strip()}


def merge_routes(builtin: Any, user: Any) -> Any:
    """The user's rules, then the built-in ones the user did not name (raw YAML values).

    Anything but two lists is returned as the user gave it, for validation to report.
    """
    if not (isinstance(builtin, list) and isinstance(user, list)):
        return user
    named = {rule.get("name") for rule in user if isinstance(rule, dict)}
    kept = [rule for rule in builtin if not (isinstance(rule, dict) and rule.get("name") in named)]
    return [*user, *kept]


def route_errors(routes: list[AlertRoute], chains: Mapping[str, object]) -> list[tuple[str, str]]:
    """``(location, message)`` for each rule naming an unknown chain, and each repeated name."""
    problems: list[tuple[str, str]] = []
    seen: set[str] = set()
    for index, route in enumerate(routes):
        if route.name in seen:
            problems.append((f"alert_routes.{index}.name", f"rule {route.name!r} is given twice"))
        seen.add(route.name)
        if route.chain is not None and route.chain not in chains:
            problems.append((f"alert_routes.{index}.chain", f"unknown chain {route.chain!r}"))
    return problems
