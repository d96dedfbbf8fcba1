"""cert-manager checks: Certificates not Ready or expired, and the issuance chain's state.

Design constraint: pure functions of the snapshot. A Certificate's trouble
is usually explained further down its chain (CertificateRequest → ACME
Order → Challenge, and the Issuer); the finding follows the chain through
whatever was gathered and quotes each link's reason.
"""

from __future__ import annotations

from tarsy.evidence.detections.check import check
from tarsy.evidence.detections.kube import (
    as_dict,
    condition,
    condition_text,
    detection,
    items,
    owner_name,
    parse_time,
    quoted,
    reference_time,
    sources,
    stamp,
    text_map,
)
from tarsy.evidence.snapshot import Detection, KubeObject, Snapshot
from tarsy.models import Severity


def _issuer(snapshot: Snapshot, cert: KubeObject) -> tuple[str, str | None]:
    ref = as_dict(cert.spec.get("issuerRef"))
    kind = str(ref.get("kind") or "Issuer")
    name = str(ref.get("name") or "")
    namespace = "" if kind == "ClusterIssuer" else cert.namespace
    issuer = snapshot.get(kind, name, namespace)
    if issuer is None:
        return f"issuer {kind} {name}", None
    ready = condition(issuer, "Ready")
    state = f" ({condition_text(ready)})" if ready else ""
    return f"issuer {kind} {name}{state}", issuer.source


def _requests(snapshot: Snapshot, cert: KubeObject) -> list[KubeObject]:
    """The cert's CertificateRequests, by owner or annotation, newest revision first."""
    found = [
        r
        for r in snapshot.of_kind("CertificateRequest")
        if r.namespace == cert.namespace
        and (
            owner_name(r, "Certificate") == cert.name
            or text_map(r.metadata.get("annotations")).get("cert-manager.io/certificate-name")
            == cert.name
        )
    ]

    def revision(request: KubeObject) -> int:
        value = text_map(request.metadata.get("annotations")).get(
            "cert-manager.io/certificate-revision", ""
        )
        return int(value) if value.isdecimal() else 0

    return sorted(found, key=revision, reverse=True)


def _children(snapshot: Snapshot, kind: str, parent: KubeObject) -> list[KubeObject]:
    return [
        o
        for o in snapshot.of_kind(kind)
        if o.namespace == parent.namespace and owner_name(o, parent.kind) == parent.name
    ]


def _acme_state(obj: KubeObject) -> str:
    state = obj.status.get("state") or "unknown"
    reason = obj.status.get("reason")
    said = f": {quoted(str(reason), 300)}" if reason else ""
    if obj.kind == "Challenge":
        spec = obj.spec
        what = f" ({spec.get('type', 'challenge')} for {spec.get('dnsName', '?')})"
        presented = "" if obj.status.get("presented") is not False else ", not presented"
        return f"Challenge {obj.name}{what} state {state}{presented}{said}"
    return f"{obj.kind} {obj.name} state {state}{said}"


def _chain(snapshot: Snapshot, cert: KubeObject) -> tuple[list[str], list[str]]:
    """The texts of the cert's newest CertificateRequest, its Orders and Challenges."""
    texts: list[str] = []
    evidence: list[str] = []
    requests = _requests(snapshot, cert)
    if not requests:
        # Without the request, its Orders and Challenges are known by their names' prefix.
        for obj in snapshot.objects:
            if (
                obj.kind in ("Order", "Challenge")
                and obj.namespace == cert.namespace
                and obj.name.startswith(f"{cert.name}-")
            ):
                texts.append(_acme_state(obj))
                evidence.append(obj.source)
    for request in requests[:1]:
        ready = condition(request, "Ready")
        texts.append(
            f"CertificateRequest {request.name} "
            + (condition_text(ready) if ready else "has no Ready condition")
        )
        evidence.append(request.source)
        for order in _children(snapshot, "Order", request):
            texts.append(_acme_state(order))
            evidence.append(order.source)
            for challenge in _children(snapshot, "Challenge", order):
                texts.append(_acme_state(challenge))
                evidence.append(challenge.source)
    return texts, evidence


@check("certificate")
def certificate(snapshot: Snapshot) -> list[Detection]:
    """cert-manager Certificates with Ready=False or past their notAfter, with the chain's state."""
    found: list[Detection] = []
    now = reference_time(snapshot)
    for cert in snapshot.of_kind("Certificate"):
        ready = condition(cert, "Ready")
        not_after = parse_time(cert.status.get("notAfter"))
        expired = not_after is not None and not_after <= now
        if not expired and (ready is None or ready.get("status") != "False"):
            continue
        problems: list[str] = []
        if expired:
            problems.append(f"it expired at {stamp(not_after)} (notAfter)")
        elif not_after is not None:
            problems.append(f"the current certificate is valid until {stamp(not_after)}")
        if ready is not None and ready.get("status") != "True":
            problems.insert(0, f"it is not ready: {condition_text(ready)}")
        issuer, issuer_source = _issuer(snapshot, cert)
        chain, chain_sources = _chain(snapshot, cert)
        names = ", ".join(str(n) for n in items(cert.spec.get("dnsNames"))) or "no dnsNames"
        finding = (
            f"Certificate {cert.namespace}/{cert.name} (secret {cert.spec.get('secretName')}, "
            f"{names}; {issuer}): {'; '.join(problems)}"
            + (f"; {'; '.join(chain)}" if chain else "")
            + "."
        )
        evidence = sources(cert, issuer_source, *chain_sources)
        found.append(detection(cert.ref, finding, evidence, Severity.LIKELY_CAUSE))
    return found
