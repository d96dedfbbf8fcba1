from __future__ import annotations

from typing import Any

from tarsy.evidence.detections import routing
from tarsy.evidence.snapshot import KubeObject, ObjectRef

from .cluster import obj, snapshot


def _ingress(**spec: Any) -> KubeObject:
    rules = [
        {
            "host": "shop.example.com",
            "http": {
                "paths": [
                    {"path": "/", "backend": {"service": {"name": "front", "port": {"number": 80}}}}
                ]
            },
        }
    ]
    return obj("Ingress", "shop", spec={"rules": rules, **spec})


def _service(name: str, *ports: int) -> KubeObject:
    return obj("Service", name, spec={"ports": [{"port": p} for p in ports]})


def _endpoints(name: str, ready: int) -> KubeObject:
    addresses = [{"ip": f"10.0.0.{n}"} for n in range(ready)]
    return obj("Endpoints", name, subsets=[{"addresses": addresses}] if ready else [])


def test_an_ingress_whose_backend_tls_secret_and_class_are_missing_names_each() -> None:
    ingress = _ingress(ingressClassName="edge", tls=[{"secretName": "shop-tls"}])
    missing = [
        ObjectRef(kind="Service", name="front", namespace="orders"),
        ObjectRef(kind="Secret", name="shop-tls", namespace="orders"),
        ObjectRef(kind="IngressClass", name="edge"),
    ]
    [found] = routing.ingress_problems(snapshot(ingress, *missing))
    assert found.severity == 1
    assert "its IngressClass edge does not exist" in found.finding
    assert "backend Service orders/front does not exist" in found.finding
    assert "its TLS Secret orders/shop-tls does not exist" in found.finding


def test_an_ingress_backend_on_a_port_the_service_lacks_or_without_endpoints() -> None:
    [wrong_port] = routing.ingress_problems(snapshot(_ingress(), _service("front", 8080)))
    assert "Service orders/front has no port 80 (it serves 8080)" in wrong_port.finding
    [empty] = routing.ingress_problems(
        snapshot(_ingress(), _service("front", 80), _endpoints("front", 0))
    )
    assert "Service orders/front has no ready endpoints" in empty.finding


def test_a_healthy_ingress_and_one_whose_objects_were_not_looked_up_are_quiet() -> None:
    healthy = snapshot(_ingress(), _service("front", 80), _endpoints("front", 2))
    assert routing.ingress_problems(healthy) == []
    assert routing.ingress_problems(snapshot(_ingress(tls=[{"secretName": "x"}]))) == []


def _route(**status: Any) -> KubeObject:
    return obj(
        "HTTPRoute",
        "checkout",
        spec={
            "parentRefs": [{"name": "public"}],
            "rules": [{"backendRefs": [{"name": "pay", "port": 8443}]}],
        },
        status=status,
    )


def test_an_httproute_not_accepted_with_a_missing_backend_says_both() -> None:
    parents = [
        {
            "parentRef": {"name": "public"},
            "conditions": [
                {"type": "Accepted", "status": "True"},
                {
                    "type": "ResolvedRefs",
                    "status": "False",
                    "reason": "BackendNotFound",
                    "message": "service pay not found",
                },
            ],
        }
    ]
    missing = ObjectRef(kind="Service", name="pay", namespace="orders")
    [found] = routing.gateway_problems(snapshot(_route(parents=parents), missing))
    assert found.check == "gateway" and found.severity == 1
    assert "parent public reports ResolvedRefs=False (BackendNotFound" in found.finding
    assert "backend Service orders/pay does not exist" in found.finding


def test_a_gateway_not_programmed_quotes_its_condition() -> None:
    gateway = obj(
        "Gateway",
        "public",
        status={
            "conditions": [
                {
                    "type": "Programmed",
                    "status": "False",
                    "reason": "AddressNotAssigned",
                    "message": "no address",
                }
            ]
        },
    )
    [found] = routing.gateway_problems(snapshot(gateway))
    assert "Gateway orders/public is not serving: Programmed=False (AddressNotAssigned" in (
        found.finding
    )
    assert routing.gateway_problems(snapshot(_route())) == []


def _webhook(policy: str | None) -> KubeObject:
    hook: dict[str, Any] = {
        "name": "validate.policy.example.com",
        "clientConfig": {
            "service": {"name": "policy-svc", "namespace": "guard", "path": "/validate"}
        },
    }
    if policy:
        hook["failurePolicy"] = policy
    return obj("ValidatingWebhookConfiguration", "policy", namespace="", webhooks=[hook])


def test_a_webhook_whose_service_is_missing_rejects_requests_under_fail() -> None:
    missing = ObjectRef(kind="Service", name="policy-svc", namespace="guard")
    [found] = routing.webhook_unavailable(snapshot(_webhook(None), missing))
    assert found.severity == 1
    assert (
        "ValidatingWebhookConfiguration policy webhook validate.policy.example.com: "
        "Service guard/policy-svc does not exist, so the API server rejects every request "
        "it matches (failurePolicy Fail)." == found.finding
    )


def test_a_webhook_without_endpoints_under_ignore_is_context() -> None:
    service = obj("Service", "policy-svc", namespace="guard", spec={"ports": [{"port": 443}]})
    endpoints = obj("Endpoints", "policy-svc", namespace="guard", subsets=[])
    [found] = routing.webhook_unavailable(snapshot(_webhook("Ignore"), service, endpoints))
    assert found.severity == 3
    assert "has no ready endpoints, so requests it matches pass unchecked" in found.finding


def test_a_webhook_with_ready_endpoints_is_quiet() -> None:
    endpoints = obj(
        "Endpoints", "policy-svc", namespace="guard", subsets=[{"addresses": [{"ip": "10.0.0.9"}]}]
    )
    assert routing.webhook_unavailable(snapshot(_webhook(None), endpoints)) == []


def test_the_older_class_annotation_is_read_too() -> None:
    ingress = _ingress()
    ingress.body["metadata"]["annotations"] = {"kubernetes.io/ingress.class": "legacy"}
    missing = ObjectRef(kind="IngressClass", name="legacy")
    [found] = routing.ingress_problems(
        snapshot(ingress, missing, _service("front", 80), _endpoints("front", 1))
    )
    assert found.finding == (
        "Ingress orders/shop: its IngressClass legacy does not exist (no controller serves it)."
    )
