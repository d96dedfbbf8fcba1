from __future__ import annotations

from typing import Any

from tarsy.evidence.detections import certificates
from tarsy.evidence.snapshot import KubeObject

from .cluster import iso, obj, snapshot


def _owned(kind: str, name: str, owner_kind: str, owner: str, **body: Any) -> KubeObject:
    return obj(
        kind,
        name,
        "shop",
        metadata={"ownerReferences": [{"kind": owner_kind, "name": owner}]},
        **body,
    )


def _cert(
    ready: str = "True", not_after: float = 60 * 24 * 30, reason: str = "Ready"
) -> KubeObject:
    return obj(
        "Certificate",
        "storefront-tls",
        "shop",
        spec={
            "secretName": "storefront-tls",
            "dnsNames": ["shop.example.org"],
            "issuerRef": {"kind": "ClusterIssuer", "name": "acme-prod"},
        },
        status={
            "notAfter": iso(not_after),
            "conditions": [
                {
                    "type": "Ready",
                    "status": ready,
                    "reason": reason,
                    "message": "Issuing certificate as Secret does not exist",
                }
            ],
        },
    )


def test_a_certificate_not_ready_follows_its_chain_to_the_failing_challenge() -> None:
    cert = _cert("False", reason="DoesNotExist")
    issuer = obj(
        "ClusterIssuer",
        "acme-prod",
        "",
        status={
            "conditions": [{"type": "Ready", "status": "True", "reason": "ACMEAccountRegistered"}]
        },
    )
    request = _owned(
        "CertificateRequest",
        "storefront-tls-1",
        "Certificate",
        "storefront-tls",
        status={
            "conditions": [
                {
                    "type": "Ready",
                    "status": "False",
                    "reason": "Pending",
                    "message": "Waiting on certificate issuance from order shop/storefront-tls-1-42",  # noqa: E501
                }
            ]
        },
    )
    order = _owned(
        "Order",
        "storefront-tls-1-42",
        "CertificateRequest",
        "storefront-tls-1",
        status={"state": "pending"},
    )
    challenge = _owned(
        "Challenge",
        "storefront-tls-1-42-7",
        "Order",
        "storefront-tls-1-42",
        spec={"type": "HTTP-01", "dnsName": "shop.example.org"},
        status={
            "state": "pending",
            "presented": True,
            "reason": "Waiting for HTTP-01 challenge propagation: failed to perform self check GET request 'http://shop.example.org/.well-known/acme-challenge/x': wrong status code '404', expected '200'",  # noqa: E501
        },
    )
    [found] = certificates.certificate(snapshot(cert, issuer, request, order, challenge))
    text = found.finding
    assert "Certificate shop/storefront-tls (secret storefront-tls, shop.example.org" in text
    assert "issuer ClusterIssuer acme-prod (Ready=True (ACMEAccountRegistered))" in text
    assert (
        "not ready: Ready=False (DoesNotExist: Issuing certificate as Secret does not exist)"
        in text
    )
    assert "CertificateRequest storefront-tls-1 Ready=False (Pending" in text
    assert "Order storefront-tls-1-42 state pending" in text
    assert "Challenge storefront-tls-1-42-7 (HTTP-01 for shop.example.org) state pending" in text
    assert "wrong status code '404'" in text
    assert found.evidence == [
        cert.source,
        issuer.source,
        request.source,
        order.source,
        challenge.source,
    ]


def test_a_certificate_past_its_not_after_is_expired_even_when_ready() -> None:
    [found] = certificates.certificate(snapshot(_cert("True", not_after=-120)))
    assert f"it expired at {iso(-120)} (notAfter)" in found.finding


def test_a_ready_certificate_in_its_validity_is_not_reported() -> None:
    assert certificates.certificate(snapshot(_cert())) == []


def test_a_challenge_is_found_by_its_name_when_the_request_was_not_gathered() -> None:
    challenge = obj(
        "Challenge",
        "storefront-tls-1-42-7",
        "shop",
        spec={"type": "DNS-01", "dnsName": "shop.example.org"},
        status={"state": "pending", "reason": "DNS record not yet propagated"},
    )
    other = obj("Challenge", "billing-tls-1-1-1", "shop", status={"state": "valid"})
    [found] = certificates.certificate(
        snapshot(_cert("False", reason="DoesNotExist"), challenge, other)
    )
    assert (
        'Challenge storefront-tls-1-42-7 (DNS-01 for shop.example.org) state pending: "DNS record not yet propagated"'  # noqa: E501
        in found.finding
    )
    assert "billing" not in found.finding
