"""Routing checks: Ingresses, Gateway API routes and admission webhooks whose references fail.

Design constraint: pure functions of the snapshot. What an object names
(a backend Service, a TLS Secret, an IngressClass, a webhook's Service) is
called missing only when the gather phase looked it up and the API server
said NotFound (:attr:`Snapshot.absent`); a Service that exists but has no
ready endpoint is read from its gathered Endpoints. Conditions the
controllers write (Accepted, ResolvedRefs, Programmed) are quoted as
written.
"""

from __future__ import annotations

from collections.abc import Iterator

from tarsy.evidence.detections.check import check
from tarsy.evidence.detections.kube import (
    annotations_of,
    as_dict,
    condition_text,
    detection,
    dicts,
    scalar,
    sources,
)
from tarsy.evidence.snapshot import Detection, KubeObject, ObjectRef, Snapshot
from tarsy.models import Severity


def _absent(snapshot: Snapshot, kind: str, name: str, namespace: str = "") -> bool:
    return ObjectRef(kind=kind, name=name, namespace=namespace) in snapshot.absent


def _ready_endpoints(snapshot: Snapshot, name: str, namespace: str) -> int | None:
    """Ready addresses of a Service's gathered Endpoints; None when not gathered."""
    endpoints = snapshot.get("Endpoints", name, namespace)
    if endpoints is None:
        return None
    return sum(
        len(dicts(subset.get("addresses"))) for subset in dicts(endpoints.body.get("subsets"))
    )


def _service_problem(snapshot: Snapshot, name: str, namespace: str, port: object = None) -> str:
    """What is wrong with a referenced Service ("" when nothing the evidence shows)."""
    if _absent(snapshot, "Service", name, namespace):
        return f"Service {namespace}/{name} does not exist"
    service = snapshot.get("Service", name, namespace)
    if service is not None and port not in (None, ""):
        ports = dicts(service.spec.get("ports"))
        if ports and not any(port in (p.get("port"), p.get("name")) for p in ports):
            shown = ", ".join(str(p.get("port")) for p in ports)
            return f"Service {namespace}/{name} has no port {port} (it serves {shown})"
    if _ready_endpoints(snapshot, name, namespace) == 0:
        return f"Service {namespace}/{name} has no ready endpoints"
    return ""


# ─── Ingress ──────────────────────────────────────────────────────────────────


def ingress_backends(ingress: KubeObject) -> Iterator[tuple[str, object]]:
    """The (Service name, port number or name) pairs an Ingress routes to."""
    default = as_dict(as_dict(ingress.spec.get("defaultBackend")).get("service"))
    if default.get("name"):
        port = as_dict(default.get("port"))
        yield str(default["name"]), port.get("number") or port.get("name")
    for rule in dicts(ingress.spec.get("rules")):
        for path in dicts(as_dict(rule.get("http")).get("paths")):
            service = as_dict(as_dict(path.get("backend")).get("service"))
            if service.get("name"):
                port = as_dict(service.get("port"))
                yield str(service["name"]), port.get("number") or port.get("name")


def ingress_class(ingress: KubeObject) -> str:
    """The IngressClass an Ingress asks for: ``ingressClassName``, else the older annotation."""
    return scalar(ingress.spec.get("ingressClassName")) or annotations_of(ingress).get(
        "kubernetes.io/ingress.class", ""
    )


def _ingress_problems(snapshot: Snapshot, ingress: KubeObject) -> list[str]:
    problems: list[str] = []
    klass = ingress_class(ingress)
    if klass and _absent(snapshot, "IngressClass", klass):
        problems.append(f"its IngressClass {klass} does not exist (no controller serves it)")
    for name, port in dict.fromkeys(ingress_backends(ingress)):
        problem = _service_problem(snapshot, name, ingress.namespace, port)
        if problem:
            problems.append(f"backend {problem}")
    for tls in dicts(ingress.spec.get("tls")):
        secret = scalar(tls.get("secretName"))
        if secret and _absent(snapshot, "Secret", secret, ingress.namespace):
            problems.append(f"its TLS Secret {ingress.namespace}/{secret} does not exist")
    return problems


@check("ingress")
def ingress_problems(snapshot: Snapshot) -> list[Detection]:
    """Ingresses whose class, backend Service (or its port, or endpoints) or TLS Secret fail."""
    found: list[Detection] = []
    for ingress in snapshot.of_kind("Ingress"):
        problems = _ingress_problems(snapshot, ingress)
        if not problems:
            continue
        finding = f"Ingress {ingress.namespace}/{ingress.name}: {'; '.join(problems)}."
        found.append(detection(ingress.ref, finding, sources(ingress), Severity.LIKELY_CAUSE))
    return found


# ─── Gateway API ──────────────────────────────────────────────────────────────


def _failing_conditions(entries: list[dict[str, object]], kinds: tuple[str, ...]) -> list[str]:
    return [
        condition_text(entry)
        for entry in entries
        if entry.get("type") in kinds and entry.get("status") == "False"
    ]


def _route_problems(snapshot: Snapshot, route: KubeObject) -> list[str]:
    problems: list[str] = []
    for parent in dicts(route.status.get("parents")):
        gateway = scalar(as_dict(parent.get("parentRef")).get("name"))
        for text in _failing_conditions(
            dicts(parent.get("conditions")), ("Accepted", "ResolvedRefs")
        ):
            problems.append(f"parent {gateway or 'gateway'} reports {text}")
    for ref in dicts(route.spec.get("parentRefs")):
        name = scalar(ref.get("name"))
        namespace = scalar(ref.get("namespace")) or route.namespace
        if name and _absent(snapshot, "Gateway", name, namespace):
            problems.append(f"its parent Gateway {namespace}/{name} does not exist")
    for rule in dicts(route.spec.get("rules")):
        for backend in dicts(rule.get("backendRefs")):
            if scalar(backend.get("kind")) not in ("", "Service"):
                continue
            name = scalar(backend.get("name"))
            namespace = scalar(backend.get("namespace")) or route.namespace
            problem = (
                _service_problem(snapshot, name, namespace, backend.get("port")) if name else ""
            )
            if problem:
                problems.append(f"backend {problem}")
    return list(dict.fromkeys(problems))


@check("gateway")
def gateway_problems(snapshot: Snapshot) -> list[Detection]:
    """HTTPRoutes not accepted or with unresolved or missing backends; Gateways not programmed."""
    found: list[Detection] = []
    for route in [*snapshot.of_kind("HTTPRoute"), *snapshot.of_kind("GRPCRoute")]:
        problems = _route_problems(snapshot, route)
        if problems:
            finding = f"{route.kind} {route.namespace}/{route.name}: {'; '.join(problems)}."
            found.append(detection(route.ref, finding, sources(route), Severity.LIKELY_CAUSE))
    for gateway in snapshot.of_kind("Gateway"):
        failing = _failing_conditions(
            dicts(gateway.status.get("conditions")), ("Accepted", "Programmed")
        )
        if failing:
            finding = (
                f"Gateway {gateway.namespace}/{gateway.name} is not serving: {'; '.join(failing)}."
            )
            found.append(detection(gateway.ref, finding, sources(gateway), Severity.LIKELY_CAUSE))
    return found


# ─── admission webhooks ───────────────────────────────────────────────────────

WEBHOOK_KINDS = ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")


def webhook_services(configuration: KubeObject) -> Iterator[tuple[str, str, str]]:
    """(webhook name, Service namespace, Service name) of each webhook served in-cluster."""
    for hook in dicts(configuration.body.get("webhooks")):
        service = as_dict(as_dict(hook.get("clientConfig")).get("service"))
        if service.get("name") and service.get("namespace"):
            yield str(hook.get("name", "")), str(service["namespace"]), str(service["name"])


def _failure_policy(configuration: KubeObject, hook_name: str) -> str:
    for hook in dicts(configuration.body.get("webhooks")):
        if hook.get("name") == hook_name:
            return scalar(hook.get("failurePolicy")) or "Fail"  # the API's default
    return "Fail"


@check("webhook")
def webhook_unavailable(snapshot: Snapshot) -> list[Detection]:
    """Admission webhooks whose Service does not exist or has no ready endpoints.

    With failurePolicy Fail every matching request is rejected (the cause of
    the failures it blocks); with Ignore requests pass unchecked (context).
    """
    found: list[Detection] = []
    for configuration in [o for kind in WEBHOOK_KINDS for o in snapshot.of_kind(kind)]:
        for hook, namespace, name in webhook_services(configuration):
            problem = _service_problem(snapshot, name, namespace)
            if not problem:
                continue
            policy = _failure_policy(configuration, hook)
            effect = (
                "the API server rejects every request it matches (failurePolicy Fail)"
                if policy == "Fail"
                else "requests it matches pass unchecked (failurePolicy Ignore)"
            )
            finding = (
                f"{configuration.kind} {configuration.name} webhook {hook}: {problem}, so {effect}."
            )
            severity = Severity.LIKELY_CAUSE if policy == "Fail" else Severity.CONTEXT
            found.append(detection(configuration.ref, finding, sources(configuration), severity))
    return found
