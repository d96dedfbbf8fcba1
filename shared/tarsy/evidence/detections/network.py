"""Network checks: hosts that do not resolve, NetworkPolicies that deny, Services without endpoints.

Design constraint: pure functions of the snapshot, and no guess presented
as a fact. A host is "missing" only against the Services gathered in its
namespace; a policy "denies" only when every selecting policy was evaluated
and none admits the traffic (a selector on a namespace whose labels were
not gathered counts as "may admit", and then nothing is reported).
"""

from __future__ import annotations

import difflib
import ipaddress
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from tarsy.evidence.detections.check import check
from tarsy.evidence.detections.kube import (
    as_dict,
    detection,
    dicts,
    items,
    labels,
    owner_name,
    plural,
    pod_ready,
    pods_in,
    quoted,
    selector_description,
    selector_text,
    selects,
    sources,
    text_map,
    trim,
)
from tarsy.evidence.snapshot import Detection, KubeObject, ObjectRef, PodLog, Snapshot
from tarsy.models import Severity

_HOST = r"([A-Za-z0-9][A-Za-z0-9_.-]*[A-Za-z0-9])"
_NOT_RESOLVED = (
    r"(?:Name or service not known|Temporary failure in name resolution"
    r"|nodename nor servname|No address associated)"
)
_RESOLVE_FAILURES = tuple(
    re.compile(pattern, re.IGNORECASE)
    for pattern in (
        rf"lookup {_HOST}(?: on \S+)?: (?:no such host|server misbehaving)",
        rf"getaddrinfo (?:ENOTFOUND|EAI_AGAIN|EAI_NONAME) {_HOST}",
        rf"could not resolve(?: host(?:name)?)?:? ['\"]?{_HOST}",
        rf"(?:failed|unable) to resolve(?: host(?:name)?)?:? ['\"]?{_HOST}",
        rf"UnknownHostException:? {_HOST}",
        rf"host='{_HOST}'.*{_NOT_RESOLVED}",
        rf"{_HOST}(?::\d+)?['\"]?: (?:\[Errno -?\d+\] )?{_NOT_RESOLVED}",
        # CoreDNS's query log: "A IN <name>. udp ..." NXDOMAIN
        rf"\b(?:A|AAAA|SRV) IN {_HOST}\.? .*NXDOMAIN",
        rf"NXDOMAIN\W+(?:for|resolving|looking up) ['\"]?{_HOST}",
    )
)
_NOT_HOSTS = {"localhost", "tcp", "udp", "dial", "lookup", "error", "errno", "host"}


def failing_hosts(text: str) -> list[str]:
    """The hosts a log names as failing to resolve, in order of first mention, lower-case.

    Args:
        text: A log's text.

    Returns:
        Host names (ports and trailing dots removed; IP addresses left out).
    """
    found: dict[str, None] = {}
    for line in text.splitlines():
        for pattern in _RESOLVE_FAILURES:
            match = pattern.search(line)
            if not match:
                continue
            host = match.group(1).lower().rstrip(".")
            if host in _NOT_HOSTS or _is_ip(host) or not re.search(r"[a-z]", host):
                continue
            if re.search(r"(error|exception)$", host):  # an exception's name, not a host
                continue
            if host.count(".svc") > 1 or host.count(".cluster.local") > 1:
                continue  # a search-path expansion a DNS server answers NXDOMAIN by design
            found.setdefault(host, None)
            break
    return list(found)


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _namespaces_known(snapshot: Snapshot) -> set[str]:
    known = {obj.name for obj in snapshot.of_kind("Namespace")}
    return known | {obj.namespace for obj in snapshot.objects if obj.namespace}


def service_of_host(
    host: str, namespace: str, known_namespaces: set[str]
) -> tuple[str, str] | None:
    """The in-cluster Service a host names, as (service, namespace); None for other hosts.

    ``svc``, ``svc.cluster.local`` names and ``name.namespace`` of a known
    namespace name a Service; a bare name is a Service of the caller's
    namespace.

    Args:
        host: The host, lower-case.
        namespace: The namespace of the pod that looked it up.
        known_namespaces: The namespaces the snapshot knows of.

    Returns:
        The Service's name and namespace, or None for an outside host.
    """
    parts = host.split(".")
    if len(parts) == 1:
        return host, namespace
    if len(parts) >= 3 and parts[2] == "svc":
        return parts[0], parts[1]
    if len(parts) >= 4 and parts[3] == "svc":  # a StatefulSet pod: <pod>.<service>.<namespace>.svc
        return parts[1], parts[2]
    if len(parts) == 2 and parts[1] in known_namespaces:
        return parts[0], parts[1]
    return None


def _services_in(snapshot: Snapshot, namespace: str) -> tuple[set[str], bool, list[str]]:
    """The Service names seen in ``namespace``, whether a list showed them all, and sources."""
    objects = [s for s in snapshot.of_kind("Service") if s.namespace == namespace]
    rows = [r for r in snapshot.rows if r.kind == "Service" and r.namespace == namespace]
    names = {s.name for s in objects} | {r.name for r in rows}
    return names, bool(rows), sources(*objects, *(r.source for r in rows))


def _config_key_holding(
    snapshot: Snapshot, names: list[str], namespace: str
) -> tuple[str, str | None]:
    """The ConfigMap key of ``namespace`` whose value names the host (tried in order)."""
    config_maps = [c for c in snapshot.of_kind("ConfigMap") if c.namespace == namespace]
    for name in names:
        # A whole name only: "db" must not be found inside "mongodb".
        pattern = re.compile(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", re.IGNORECASE)
        for config_map in config_maps:
            for key, value in text_map(config_map.body.get("data")).items():
                if pattern.search(value):
                    return (
                        f"; ConfigMap {config_map.name} key {key} holds it ({quoted(value, 100)})",
                        config_map.source,
                    )
    return "", None


def _existing_service(snapshot: Snapshot, host: str, namespace: str) -> str | None:
    """The Service ``host`` names when it was seen to exist."""
    target = service_of_host(host, namespace, _namespaces_known(snapshot))
    if target is None:
        return None
    names, _listed, _ = _services_in(snapshot, target[1])
    return f"{target[1]}/{target[0]}" if target[0] in names else None


def _host_finding(
    snapshot: Snapshot, host: str, pod_namespace: str, pod: str
) -> tuple[str, Severity, list[str]] | None:
    target = service_of_host(host, pod_namespace, _namespaces_known(snapshot))
    if target is None:
        return None
    service, namespace = target
    names, listed, seen = _services_in(snapshot, namespace)
    absent = ObjectRef(kind="Service", name=service, namespace=namespace) in snapshot.absent
    if service in names:
        return None
    close = difflib.get_close_matches(service, sorted(names), n=1, cutoff=0.6)
    hint = f"; the closest existing Service is {close[0]}" if close else ""
    if absent:
        there = f"Service {namespace}/{service} does not exist{hint}"
    elif listed:
        there = f"namespace {namespace} has no Service {service}{hint}"
    else:
        # Services fetched one by one say nothing of the others.
        there = f"no Service {namespace}/{service} was among the objects gathered{hint}"
    # The log may show the name expanded by the search path; the ConfigMap the short one.
    key, config_source = _config_key_holding(snapshot, [host, service], pod_namespace)
    finding = f"Pod {pod_namespace}/{pod} cannot resolve host {host}: {there}{key}."
    severity = Severity.LIKELY_CAUSE if listed or absent else Severity.SYMPTOM
    return finding, severity, [*seen, *sources(config_source)]


def _dns_down(snapshot: Snapshot, log: PodLog, hosts: list[str]) -> Detection | None:
    """One finding when even existing Services do not resolve: resolution itself fails."""
    existing = [e for h in hosts if (e := _existing_service(snapshot, h, log.namespace))]
    if not existing:
        return None
    finding = (
        f"Pod {log.namespace}/{log.pod} cannot resolve {', '.join(hosts[:4])}, including "
        f"existing Service {existing[0]}: name resolution itself fails (the cluster DNS, "
        f"or a policy blocking DNS), not a missing Service."
    )
    subject = ObjectRef(kind="Pod", name=log.pod, namespace=log.namespace)
    return detection(subject, finding, [log.source], Severity.LIKELY_CAUSE)


@check("unresolvable_host")
def unresolvable_host(snapshot: Snapshot) -> list[Detection]:
    """In-cluster hosts a log says do not resolve, against the Services gathered.

    When an existing Service fails to resolve too, the finding is that
    resolution itself fails, and no Service is called missing.
    """
    found: list[Detection] = []
    reported: set[tuple[str, str]] = set()
    for log in snapshot.logs:
        hosts = failing_hosts(log.text)
        down = _dns_down(snapshot, log, hosts)
        if down is not None:
            found.append(down)
            continue
        for host in hosts:
            if (log.namespace, host) in reported:
                continue
            result = _host_finding(snapshot, host, log.namespace, log.pod)
            if result is None:
                continue
            reported.add((log.namespace, host))
            finding, severity, evidence = result
            subject = ObjectRef(kind="Pod", name=log.pod, namespace=log.namespace)
            found.append(detection(subject, finding, [log.source, *evidence], severity))
    return found


@dataclass(frozen=True)
class _Port:
    number: int | None
    name: str
    protocol: str

    def __str__(self) -> str:
        shown = str(self.number) if self.number is not None else self.name
        return f"{shown}/{self.protocol}"


@dataclass(frozen=True)
class _Pod:
    obj: KubeObject
    labels: Mapping[str, str]

    @property
    def namespace(self) -> str:
        return self.obj.namespace

    @property
    def ip(self) -> str:
        return str(self.obj.status.get("podIP") or "")

    @property
    def owner(self) -> str:
        return owner_name(self.obj, "ReplicaSet") or owner_name(self.obj, "StatefulSet") or ""

    def __str__(self) -> str:
        return f"pod {self.namespace}/{self.obj.name} ({selector_text(dict(self.labels))})"


def _container_ports(pod: KubeObject) -> list[_Port]:
    return [
        _Port(
            port.get("containerPort") if isinstance(port.get("containerPort"), int) else None,
            str(port.get("name") or ""),
            str(port.get("protocol") or "TCP"),
        )
        for container in dicts(pod.spec.get("containers"))
        for port in dicts(container.get("ports"))
    ]


def _resolve_target(target: object, pod_ports: list[_Port], protocol: str) -> _Port:
    if isinstance(target, str) and not target.isdecimal():
        for port in pod_ports:
            if port.name == target:
                return port
        return _Port(None, target, protocol)
    number = int(target) if isinstance(target, int | str) else None
    name = next((p.name for p in pod_ports if p.number == number), "")
    return _Port(number, name, protocol)


def _selecting_services(snapshot: Snapshot, pod: _Pod) -> list[KubeObject]:
    return [
        service
        for service in snapshot.of_kind("Service")
        if service.namespace == pod.namespace
        and (selector := text_map(service.spec.get("selector")))
        and all(pod.labels.get(k) == v for k, v in selector.items())
    ]


def _destination_ports(services: list[KubeObject], pod: _Pod) -> list[_Port]:
    """The pod ports its Services send to; the container ports when no Service selects it."""
    pod_ports = _container_ports(pod.obj)
    ports = [
        _resolve_target(
            port.get("targetPort", port.get("port")), pod_ports, str(port.get("protocol") or "TCP")
        )
        for service in services
        for port in dicts(service.spec.get("ports"))
    ]
    return list(dict.fromkeys(ports or pod_ports))


def _policy_types(policy: KubeObject) -> set[str]:
    declared = policy.spec.get("policyTypes")
    if isinstance(declared, list) and declared:
        return {str(t) for t in declared}
    return {"Ingress", "Egress"} if "egress" in policy.spec else {"Ingress"}


def _namespace_labels(snapshot: Snapshot, name: str) -> dict[str, str] | None:
    namespace = snapshot.get("Namespace", name)
    if namespace is None:
        return None
    # The API server sets this label on every namespace; a gathered body may predate it.
    return {**labels(namespace), "kubernetes.io/metadata.name": name}


def _namespace_selected(snapshot: Snapshot, selector: object, name: str) -> bool | None:
    have = _namespace_labels(snapshot, name)
    if have is not None:
        return selects(selector, have)
    if selects(selector, {"kubernetes.io/metadata.name": name}):
        return True
    return None  # the namespace's labels were not gathered: it may match


def _in_block(block: Mapping[str, Any], ip: str) -> bool | None:
    try:
        address = ipaddress.ip_address(ip)
        inside = address in ipaddress.ip_network(str(block.get("cidr")), strict=False)
        outside = any(
            address in ipaddress.ip_network(str(e), strict=False)
            for e in items(block.get("except"))
        )
    except ValueError:
        return None  # no pod IP gathered, or a malformed block: it may match
    return inside and not outside


def _peer_matches(snapshot: Snapshot, peer: Mapping[str, Any], home: str, pod: _Pod) -> bool | None:
    if "ipBlock" in peer:
        return _in_block(as_dict(peer.get("ipBlock")), pod.ip)
    if "namespaceSelector" in peer:
        namespace_ok = _namespace_selected(snapshot, peer.get("namespaceSelector"), pod.namespace)
    else:
        namespace_ok = pod.namespace == home
    if namespace_ok is False:
        return False
    pod_ok = "podSelector" not in peer or selects(peer.get("podSelector"), pod.labels)
    return pod_ok if namespace_ok else (None if pod_ok else False)


def _port_matches(rule_port: Mapping[str, Any], port: _Port) -> bool:
    if str(rule_port.get("protocol") or "TCP") != port.protocol:
        return False
    wanted = rule_port.get("port")
    if wanted is None:
        return True
    if isinstance(wanted, str) and not wanted.isdecimal():
        return wanted == port.name
    if port.number is None:
        return False
    low = int(str(wanted)) if str(wanted).isdecimal() else -1
    end = rule_port.get("endPort")
    high = end if isinstance(end, int) else low
    return low <= port.number <= high


def _any_of(results: Iterable[bool | None]) -> bool | None:
    """True if any is True, else None if any is unknown, else False."""
    values = list(results)
    if True in values:
        return True
    return None if None in values else False


def _rule_admits(
    snapshot: Snapshot, rule: Mapping[str, Any], key: str, home: str, peer: _Pod, port: _Port
) -> bool | None:
    ports = dicts(rule.get("ports"))
    if ports and not any(_port_matches(p, port) for p in ports):
        return False
    peers = dicts(rule.get(key))
    if not peers:
        return True  # no peers listed: every source (or destination)
    return _any_of(_peer_matches(snapshot, p, home, peer) for p in peers)


def _peer_text(peer: Mapping[str, Any]) -> str:
    parts = []
    if "namespaceSelector" in peer:
        parts.append(f"namespaces {selector_description(peer.get('namespaceSelector'))}")
    if "podSelector" in peer:
        parts.append(f"pods {selector_description(peer.get('podSelector'))}")
    if "ipBlock" in peer:
        parts.append(f"ipBlock {as_dict(peer.get('ipBlock')).get('cidr')}")
    return " and ".join(parts) or "anywhere"


def _rules_text(policy: KubeObject, key: str, peer_key: str) -> str:
    rules = dicts(policy.spec.get(key))
    if not rules:
        return f"nothing (it has no {key} rules)"
    texts = []
    for rule in rules:
        peers = ", ".join(_peer_text(p) for p in dicts(rule.get(peer_key))) or "anywhere"
        ports = ", ".join(
            f"{p.get('port', 'any')}/{p.get('protocol', 'TCP')}" for p in dicts(rule.get("ports"))
        )
        texts.append(f"{peers}" + (f" on {ports}" if ports else ""))
    return "only " + "; ".join(texts)


_DIRECTIONS = {
    "Ingress": ("ingress", "from"),
    "Egress": ("egress", "to"),
}


def _verdict(
    snapshot: Snapshot, direction: str, selected: _Pod, peer: _Pod, port: _Port
) -> list[KubeObject] | None:
    """The policies that deny ``peer`` ↔ ``selected`` on ``port``; None when admitted or unknown."""
    key, peer_key = _DIRECTIONS[direction]
    policies = [
        p
        for p in snapshot.of_kind("NetworkPolicy")
        if p.namespace == selected.namespace
        and direction in _policy_types(p)
        and selects(p.spec.get("podSelector"), selected.labels)
    ]
    if not policies:
        return None
    admitted = _any_of(
        _rule_admits(snapshot, rule, peer_key, p.namespace, peer, port)
        for p in policies
        for rule in dicts(p.spec.get(key))
    )
    return policies if admitted is False else None


def _alert_pods(snapshot: Snapshot, pods: list[_Pod]) -> list[_Pod]:
    """The pods the alert names (by pod, or by workload prefix); none when it names none."""
    alert = snapshot.alert.labels
    names = {alert[k] for k in ("pod", "pod_name") if alert.get(k)}
    workloads = [
        alert[k] for k in ("deployment", "statefulset", "daemonset", "job_name") if alert.get(k)
    ]
    chosen = [
        p
        for p in pods
        if p.obj.name in names or any(p.obj.name.startswith(f"{w}-") for w in workloads)
    ]
    return chosen


def _mentions(snapshot: Snapshot, pod: _Pod, target: _Pod, services: list[KubeObject]) -> bool:
    """Whether ``pod``'s logs, env or namespace's ConfigMaps name ``target``'s Service or IP."""
    texts = [log.text for log in snapshot.logs_of(pod.namespace, pod.obj.name)]
    texts += [
        value
        for c in snapshot.of_kind("ConfigMap")
        if c.namespace == pod.namespace
        for value in text_map(c.body.get("data")).values()
    ]
    texts += [
        str(env.get("value", ""))
        for container in dicts(pod.obj.spec.get("containers"))
        for env in dicts(container.get("env"))
    ]
    names = [s.name for s in services] + [str(s.spec.get("clusterIP") or "") for s in services]
    names = [n for n in [*names, target.ip] if n and n != "None"]
    return any(re.search(rf"(?<![\w.-]){re.escape(n)}(?![\w-])", t) for n in names for t in texts)


def _pairs(snapshot: Snapshot) -> Iterator[tuple[_Pod, _Pod, bool]]:
    """(source, destination, whether the alert names the source) for every pair of pods."""
    pods = [_Pod(p, labels(p)) for p in snapshot.of_kind("Pod")]
    named = {p.obj.ref for p in _alert_pods(snapshot, pods)}
    for source in pods:
        for target in pods:
            if target.obj.ref != source.obj.ref and (
                not source.owner or source.owner != target.owner
            ):
                yield source, target, source.obj.ref in named


def _blocked_ports(
    snapshot: Snapshot, source: _Pod, target: _Pod, ports: list[_Port]
) -> tuple[str, list[KubeObject], list[_Port]] | None:
    for direction in ("Ingress", "Egress"):
        selected, peer = (target, source) if direction == "Ingress" else (source, target)
        denied = [
            (port, policies)
            for port in ports
            if (policies := _verdict(snapshot, direction, selected, peer, port))
        ]
        if denied:
            return direction, denied[0][1], [port for port, _ in denied]
    return None


def _pair_finding(
    snapshot: Snapshot, source: _Pod, target: _Pod, named: bool, reported: set[tuple[str, str, str]]
) -> Detection | None:
    services = _selecting_services(snapshot, target)
    talks = _mentions(snapshot, source, target, services)
    if not talks and not named:
        return None  # two pods that may never talk: a policy between them says nothing
    ports = _destination_ports(services, target) or [_Port(None, "", "TCP")]
    blocked = _blocked_ports(snapshot, source, target, ports)
    if blocked is None:
        return None
    direction, policies, denied = blocked
    key = (source.owner or source.obj.name, services[0].name if services else target.obj.name)
    if (*key, direction) in reported:
        return None
    reported.add((*key, direction))
    through = f" (Service {services[0].name})" if services else ""
    port_text = ", ".join(str(p) for p in denied if p.number is not None or p.name)
    finding = (
        f"NetworkPolicy {', '.join(p.name for p in policies)} in namespace "
        f"{policies[0].namespace} denies {direction.lower()} traffic from {source} to "
        f"{target}{through}"
        + (f" on port {port_text}" if port_text else "")
        + f": {_admits_text(policies, direction)}."
    )
    # Known to talk: a likely cause; only the alert's pod: worth knowing, no more.
    severity = Severity.LIKELY_CAUSE if talks else Severity.CONTEXT
    evidence = sources(*policies, source.obj, target.obj, *services)
    return detection(policies[0].ref, trim(finding, 900), evidence, severity)


def _admits_text(policies: list[KubeObject], direction: str) -> str:
    key, peer_key = _DIRECTIONS[direction]
    return "; ".join(f"{p.name} admits {_rules_text(p, key, peer_key)}" for p in policies[:2])


# The cluster DNS as most distributions label it; a rule naming other labels is read as
# not admitting it, and the finding says which pods it assumed.
_DNS = _Pod(
    KubeObject(
        kind="Pod",
        body={"metadata": {"name": "kube-dns", "namespace": "kube-system"}},
        source="",
    ),
    {"k8s-app": "kube-dns"},
)
_DNS_PORT = _Port(53, "dns", "UDP")


def _dns_finding(
    snapshot: Snapshot, pod: _Pod, reported: set[tuple[str, str, str]]
) -> Detection | None:
    key = (pod.namespace, pod.owner or pod.obj.name, "dns")
    policies = _verdict(snapshot, "Egress", pod, _DNS, _DNS_PORT)
    if policies is None or key in reported:
        return None
    reported.add(key)
    failing = any(failing_hosts(log.text) for log in snapshot.logs_of(pod.namespace, pod.obj.name))
    finding = (
        f"NetworkPolicy {', '.join(p.name for p in policies)} in namespace {pod.namespace} "
        f"selects {pod} for egress and admits no DNS traffic (53/UDP to kube-system pods "
        f"k8s-app=kube-dns), so its name lookups fail: {_admits_text(policies, 'Egress')}."
    )
    evidence = sources(*policies, pod.obj)
    return detection(
        policies[0].ref,
        trim(finding, 900),
        evidence,
        Severity.LIKELY_CAUSE if failing else Severity.SYMPTOM,
    )


@check("network_policy_blocks")
def network_policy_blocks(snapshot: Snapshot) -> list[Detection]:
    """NetworkPolicies under which no rule admits a gathered pod's traffic to another one.

    A pair of gathered pods is evaluated when the source's logs, env or
    ConfigMaps name the destination's Service or IP (a likely cause), or the
    alert names the source (context); the destination's ports are those its
    Services send to (its container ports when no Service selects it). Traffic is
    denied when policies select the destination for Ingress (or the source
    for Egress) and none of their rules admits the peer on that port. Every
    gathered pod's egress is also checked for DNS (53/UDP to the cluster DNS).
    """
    found: list[Detection] = []
    reported: set[tuple[str, str, str]] = set()
    for source, target, named in _pairs(snapshot):
        result = _pair_finding(snapshot, source, target, named, reported)
        if result is not None:
            found.append(result)
    for pod in snapshot.of_kind("Pod"):
        result = _dns_finding(snapshot, _Pod(pod, labels(pod)), reported)
        if result is not None:
            found.append(result)
    return found


def _listed_pods(snapshot: Snapshot, namespace: str) -> dict[str, tuple[dict[str, str], str]]:
    """The pods listed in ``namespace`` with their labels: name → (labels, source).

    Only a list shows what is *not* there; pods fetched one by one (the
    alert's) say nothing of the others, so they only lend their labels.
    """
    listed = {
        row.name: (row.labels, row.source)
        for row in snapshot.rows
        if row.kind == "Pod" and row.namespace == namespace and "LABELS" in row.columns
    }
    for pod in snapshot.of_kind("Pod"):
        if pod.name in listed:
            listed[pod.name] = (labels(pod), listed[pod.name][1])
    return listed


def _ready_addresses(snapshot: Snapshot, service: KubeObject) -> tuple[int, int, list[str]] | None:
    """Ready and not-ready endpoints (Endpoints or EndpointSlices); None when not gathered."""
    endpoints = snapshot.get("Endpoints", service.name, service.namespace)
    if endpoints is not None:
        subsets = dicts(endpoints.body.get("subsets"))
        ready = sum(len(dicts(s.get("addresses"))) for s in subsets)
        waiting = sum(len(dicts(s.get("notReadyAddresses"))) for s in subsets)
        return ready, waiting, [endpoints.source]
    slices = [
        s
        for s in snapshot.of_kind("EndpointSlice")
        if s.namespace == service.namespace
        and labels(s).get("kubernetes.io/service-name") == service.name
    ]
    if not slices:
        return None
    points = [e for s in slices for e in dicts(s.body.get("endpoints"))]
    ready = sum(1 for e in points if as_dict(e.get("conditions")).get("ready") is not False)
    return ready, len(points) - ready, [s.source for s in slices]


def _selected_text(
    snapshot: Snapshot, service: KubeObject, selector: dict[str, str]
) -> tuple[str, Severity, list[str]] | None:
    listed = _listed_pods(snapshot, service.namespace)
    fetched = {p.name: p for p in pods_in(snapshot, service.namespace)}
    seen = {name: have for name, (have, _) in listed.items()}
    seen.update((name, labels(pod)) for name, pod in fetched.items())
    matching = {name for name, have in seen.items() if selects({"matchLabels": selector}, have)}
    if not matching:
        if not listed:
            return None
        shown = sorted({selector_text(have) for have, _ in listed.values()})[:4]
        text = (
            f"its selector {selector_text(selector)} matches none of the "
            f"{plural(len(listed), 'pod')} listed in the namespace "
            f"(their labels: {'; '.join(shown)})"
        )
        return text, Severity.LIKELY_CAUSE, sorted({src for _, src in listed.values()})
    pods = [fetched[n] for n in sorted(matching) if n in fetched]
    if len(pods) < len(matching) or any(pod_ready(p) for p in pods):
        return None
    text = f"its selector {selector_text(selector)} matches {plural(len(pods), 'pod')}, none ready"
    return text, Severity.SYMPTOM, [p.source for p in pods]


@check("service_no_endpoints")
def service_no_endpoints(snapshot: Snapshot) -> list[Detection]:
    """Services with no ready endpoints, or whose selector matches no pod seen."""
    found: list[Detection] = []
    for service in snapshot.of_kind("Service"):
        selector = text_map(service.spec.get("selector"))
        if not selector or service.spec.get("type") == "ExternalName":
            continue
        counted = _ready_addresses(snapshot, service)
        if counted is not None and counted[0] > 0:
            continue
        matched = _selected_text(snapshot, service, selector)
        parts, evidence, severity = [], [service.source], Severity.SYMPTOM
        if counted is not None:
            parts.append(f"it has no ready endpoint ({counted[1]} not ready)")
            evidence += counted[2]
        if matched is not None:
            parts.append(matched[0])
            # A list may have been filtered: only the Endpoints confirm that nothing matches.
            severity = matched[1] if counted is not None else Severity.SYMPTOM
            evidence += matched[2]
        if not parts:
            continue
        finding = (
            f"Service {service.namespace}/{service.name} (selector {selector_text(selector)}): "
            f"{'; '.join(parts)}."
        )
        found.append(detection(service.ref, finding, evidence, severity))
    return found


def _port_text(port: _Port) -> str:
    return f"{port} ({port.name})" if port.name and port.number is not None else str(port)


def _unexposed(service: KubeObject, pods: list[KubeObject]) -> list[str]:
    """The Service ports whose targetPort none of ``pods`` declares (pods declaring ports)."""
    declared = [port for pod in pods for port in _container_ports(pod)]
    missing: list[str] = []
    for port in dicts(service.spec.get("ports")):
        target = port.get("targetPort", port.get("port"))
        protocol = str(port.get("protocol") or "TCP")
        resolved = _resolve_target(target, declared, protocol)
        if resolved.number is not None and any(
            d.number == resolved.number and d.protocol == protocol for d in declared
        ):
            continue
        missing.append(f"port {port.get('port')} → targetPort {target}")
    return missing


@check("service_port_mismatch")
def service_port_mismatch(snapshot: Snapshot) -> list[Detection]:
    """Services whose targetPort none of their pods declares as a container port.

    Only pods that declare container ports are judged (a container may listen
    on a port it does not declare; one that declares some says where it listens).
    """
    found: list[Detection] = []
    for service in snapshot.of_kind("Service"):
        selector = text_map(service.spec.get("selector"))
        pods = [
            p
            for p in pods_in(snapshot, service.namespace)
            if selector and selects({"matchLabels": selector}, labels(p)) and _container_ports(p)
        ]
        missing = _unexposed(service, pods) if pods else []
        if not missing:
            continue
        declared = sorted({_port_text(p) for p in _container_ports(pods[0])})
        finding = (
            f"Service {service.namespace}/{service.name} sends {'; '.join(missing)}, but its "
            f"pods ({', '.join(p.name for p in pods[:3])}) declare container ports "
            f"{', '.join(declared)}: connections to the Service find nothing listening."
        )
        evidence = sources(service, *pods[:3])
        found.append(detection(service.ref, finding, evidence, Severity.LIKELY_CAUSE))
    return found
