from __future__ import annotations

from typing import Any

import pytest

from tarsy.evidence.detections import network
from tarsy.evidence.snapshot import AlertFacts, KubeObject, ListedRow, ObjectRef

from .cluster import T0, container, log, obj, pod, running, snapshot

_GO = "dial tcp: lookup inventry-svc.orders.svc.cluster.local on 10.96.0.10:53: no such host"


@pytest.mark.parametrize(
    ("line", "host"),
    [
        (_GO, "inventry-svc.orders.svc.cluster.local"),
        ("Error: getaddrinfo ENOTFOUND payments-api", "payments-api"),
        ("curl: (6) Could not resolve host: ledger.billing.svc", "ledger.billing.svc"),
        ("java.net.UnknownHostException: cache-redis: Name or service not known", "cache-redis"),
        (
            "HTTPConnectionPool(host='stock-api', port=80): Max retries exceeded "
            "(Caused by NameResolutionError: Failed to resolve 'stock-api' "
            "([Errno -2] Name or service not known))",
            "stock-api",
        ),
        ("socket.gaierror: [Errno -3] Temporary failure in name resolution", None),
        (
            "resolver: NXDOMAIN for search-index.catalog.svc.cluster.local.",
            "search-index.catalog.svc.cluster.local",
        ),
        ("connect to 10.0.0.5:5432 failed: connection refused", None),
        (
            '[INFO] 10.244.0.5:43420 - 1 "A IN stock.orders.svc.cluster.local. udp 60 false 512" '
            "NXDOMAIN qr,aa,rd 153 0.0001s",
            "stock.orders.svc.cluster.local",
        ),
        ("upstream dns query failed: NXDOMAIN", None),
        (
            '"A IN stock.orders.svc.cluster.local.orders.svc.cluster.local. udp 80" NXDOMAIN qr',
            None,
        ),
    ],
)
def test_the_host_a_log_line_fails_to_resolve_is_extracted(line: str, host: str | None) -> None:
    assert network.failing_hosts(line) == ([host] if host else [])


def _service(
    name: str, namespace: str = "orders", selector: dict[str, str] | None = None, **spec: Any
) -> KubeObject:
    ports = spec.pop("ports", [{"port": 80, "targetPort": 8080}])
    return obj(
        "Service",
        name,
        namespace,
        spec={"selector": selector or {"app": name}, "ports": ports, **spec},
    )


def test_a_host_that_names_no_service_is_reported_with_the_closest_service_and_its_config_key() -> (
    None
):
    caller = log("checkout-1", f"starting\n{_GO}\n")
    settings = obj(
        "ConfigMap",
        "checkout-env",
        data={"INVENTORY_URL": "http://inventry-svc.orders.svc.cluster.local:8080", "MODE": "live"},
    )
    listed = [_row("inventory-svc"), _row("payments")]
    [found] = network.unresolvable_host(snapshot(caller, settings, *listed))
    assert found.severity == 1
    text = found.finding
    assert "cannot resolve host inventry-svc.orders.svc.cluster.local" in text
    assert "namespace orders has no Service inventry-svc" in text
    assert "closest existing Service is inventory-svc" in text
    assert "ConfigMap checkout-env key INVENTORY_URL holds it" in text
    assert found.evidence[0] == caller.source and settings.source in found.evidence


def test_a_host_whose_service_was_listed_in_another_namespace_is_checked_there() -> None:
    caller = log("checkout-1", "lookup ledger.billing.svc.cluster.local: no such host")
    row = ListedRow(
        kind="Service", namespace="billing", name="ledger-api", source="list-services-billing"
    )
    [found] = network.unresolvable_host(snapshot(caller, row))
    assert "namespace billing has no Service ledger" in found.finding
    assert "list-services-billing" in found.evidence


def test_a_service_looked_up_and_not_found_is_said_not_to_exist() -> None:
    caller = log("checkout-1", "getaddrinfo ENOTFOUND stock")
    [found] = network.unresolvable_host(
        snapshot(caller, ObjectRef(kind="Service", name="stock", namespace="orders"))
    )
    assert "Service orders/stock does not exist" in found.finding


def _row(service: str, namespace: str = "orders") -> ListedRow:
    return ListedRow(
        kind="Service", namespace=namespace, name=service, source=f"list-services-{namespace}"
    )


def test_services_fetched_one_by_one_make_a_missing_host_only_a_symptom() -> None:
    caller = log("checkout-1", _GO)
    [found] = network.unresolvable_host(snapshot(caller, _service("inventory-svc")))
    assert found.severity == 2
    assert (
        "no Service orders/inventry-svc was among the objects gathered; the closest existing Service is inventory-svc"  # noqa: E501
        in found.finding
    )


def test_a_statefulset_pod_name_is_checked_against_its_headless_service() -> None:
    caller = log("checkout-1", "lookup ledger-0.ledgr.orders.svc.cluster.local: no such host")
    [found] = network.unresolvable_host(snapshot(caller, _row("ledger")))
    assert (
        "namespace orders has no Service ledgr; the closest existing Service is ledger"
        in found.finding
    )


def test_an_outside_host_that_does_not_resolve_is_not_a_missing_service() -> None:
    caller = log("checkout-1", "lookup api.payments.example.com: no such host\n")
    assert network.unresolvable_host(snapshot(caller, _row("inventory-svc"))) == []


def test_an_existing_service_that_does_not_resolve_means_resolution_itself_fails() -> None:
    caller = log(
        "checkout-1", "getaddrinfo ENOTFOUND inventory-svc\ngetaddrinfo ENOTFOUND payments\n"
    )
    [found] = network.unresolvable_host(snapshot(caller, _row("inventory-svc")))
    assert found.finding == (
        "Pod orders/checkout-1 cannot resolve inventory-svc, payments, including existing Service "
        "orders/inventory-svc: name resolution itself fails (the cluster DNS, or a policy blocking "
        "DNS), not a missing Service."
    )


def _namespace(name: str, **labels: str) -> KubeObject:
    return obj("Namespace", name, "", metadata={"labels": labels})


def _policy(
    namespace: str,
    selector: dict[str, Any],
    ingress: list[dict[str, Any]] | None,
    name: str = "inventory-ingress",
) -> KubeObject:
    spec: dict[str, Any] = {"podSelector": selector, "policyTypes": ["Ingress"]}
    if ingress is not None:
        spec["ingress"] = ingress
    return obj("NetworkPolicy", name, namespace, spec=spec)


def _peers() -> tuple[KubeObject, KubeObject, KubeObject]:
    caller = pod(
        "checkout-7f-a", "orders", labels={"app": "checkout"}, ip="10.1.0.5", owner="checkout-7f"
    )
    served = pod(
        "inventory-5c-b",
        "inventory",
        labels={"app": "inventory"},
        containers=[container("app", ports=[{"containerPort": 8080, "name": "http"}])],
        owner="inventory-5c",
    )
    return caller, served, _service("inventory-svc", "inventory", {"app": "inventory"})


_FROM_WEB = [
    {
        "from": [
            {
                "namespaceSelector": {"matchLabels": {"team": "storefront"}},
                "podSelector": {"matchLabels": {"app": "web"}},
            }
        ],
        "ports": [{"port": 8080}],
    }
]


def test_a_policy_admitting_only_other_pods_blocks_the_caller_and_says_what_it_admits() -> None:
    caller, served, service = _peers()
    policy = _policy("inventory", {"matchLabels": {"app": "inventory"}}, _FROM_WEB)
    config = obj("ConfigMap", "checkout-env", data={"INVENTORY": "http://inventory-svc.inventory"})
    cluster = snapshot(
        caller,
        served,
        service,
        policy,
        config,
        _namespace("orders", team="orders"),
        _namespace("inventory"),
    )
    [found] = network.network_policy_blocks(cluster)
    assert found.severity == 1  # the caller's configuration names the Service
    text = found.finding
    assert "NetworkPolicy inventory-ingress in namespace inventory denies ingress traffic" in text
    assert "from pod orders/checkout-7f-a (app=checkout)" in text
    assert (
        "to pod inventory/inventory-5c-b (app=inventory) (Service inventory-svc) on port 8080/TCP"
        in text
    )
    assert "admits only namespaces team=storefront and pods app=web on 8080/TCP" in text
    assert found.evidence[0] == policy.source


def test_a_policy_whose_rule_admits_the_callers_namespace_and_labels_does_not_block() -> None:
    caller, served, service = _peers()
    caller.body["metadata"]["labels"] = {"app": "web"}
    policy = _policy("inventory", {"matchLabels": {"app": "inventory"}}, _FROM_WEB)
    cluster = snapshot(caller, served, service, policy, _namespace("orders", team="storefront"))
    assert network.network_policy_blocks(cluster) == []


def test_an_empty_pod_selector_with_no_rules_denies_the_alerts_pod_as_context() -> None:
    caller, served, service = _peers()
    deny = _policy("inventory", {}, None, name="default-deny")
    alert = AlertFacts(labels={"namespace": "orders", "pod": "checkout-7f-a"}, starts_at=T0)
    [found] = network.network_policy_blocks(snapshot(caller, served, service, deny, alert=alert))
    assert "default-deny admits nothing (it has no ingress rules)" in found.finding
    assert found.severity == 3  # nothing shows the caller talks to inventory


def test_a_denied_pair_neither_named_by_the_alert_nor_known_to_talk_is_not_reported() -> None:
    caller, served, service = _peers()
    deny = _policy("inventory", {}, None, name="default-deny")
    assert network.network_policy_blocks(snapshot(caller, served, service, deny)) == []


def test_a_rule_on_another_port_does_not_admit_the_service_port() -> None:
    caller, served, service = _peers()
    service.spec["clusterIP"] = "10.96.4.20"
    timeout = log("checkout-7f-a", "error: dial tcp 10.96.4.20:80: i/o timeout")
    rule = [{"from": [{"namespaceSelector": {}}], "ports": [{"port": 9090}]}]
    deny = _policy("inventory", {}, rule)
    [found] = network.network_policy_blocks(snapshot(caller, served, service, deny, timeout))
    assert (
        "on port 8080/TCP" in found.finding
        and "admits only namespaces all on 9090/TCP" in found.finding
    )
    assert found.severity == 1  # the caller's log names the Service's address


def test_a_named_port_rule_admits_the_container_port_of_that_name() -> None:
    caller, served, service = _peers()
    rule = [{"from": [{"namespaceSelector": {}}], "ports": [{"port": "http"}]}]
    assert (
        network.network_policy_blocks(
            snapshot(caller, served, service, _policy("inventory", {}, rule))
        )
        == []
    )


def test_a_namespace_selector_on_labels_not_gathered_is_not_taken_as_a_denial() -> None:
    caller, served, service = _peers()
    policy = _policy("inventory", {}, _FROM_WEB)
    caller.body["metadata"]["labels"] = {"app": "web"}
    assert network.network_policy_blocks(snapshot(caller, served, service, policy)) == []


def test_a_policy_selecting_other_pods_leaves_the_destination_open() -> None:
    caller, served, service = _peers()
    policy = _policy("inventory", {"matchLabels": {"app": "billing"}}, None)
    assert network.network_policy_blocks(snapshot(caller, served, service, policy)) == []


def test_an_egress_policy_on_the_caller_blocks_it_too() -> None:
    caller, served, service = _peers()
    egress = obj(
        "NetworkPolicy",
        "checkout-egress",
        "orders",
        spec={
            "podSelector": {"matchLabels": {"app": "checkout"}},
            "policyTypes": ["Egress"],
            "egress": [{"to": [{"ipBlock": {"cidr": "10.9.0.0/16"}}]}],
        },
    )
    served.body["status"]["podIP"] = "10.2.0.9"
    alert = AlertFacts(labels={"pod": "checkout-7f-a", "namespace": "orders"}, starts_at=T0)
    [found] = network.network_policy_blocks(snapshot(caller, served, service, egress, alert=alert))
    assert "checkout-egress" in found.finding and "egress traffic" in found.finding
    assert "ipBlock 10.9.0.0/16" in found.finding


def test_an_egress_policy_that_forgets_dns_is_reported_with_the_pods_failing_lookups() -> None:
    caller = _peers()[0]
    only_db = {"to": [{"podSelector": {"matchLabels": {"app": "db"}}}], "ports": [{"port": 5432}]}
    egress = obj(
        "NetworkPolicy",
        "checkout-egress",
        "orders",
        spec={"podSelector": {}, "policyTypes": ["Egress"], "egress": [only_db]},
    )
    failing = log("checkout-7f-a", "getaddrinfo EAI_AGAIN inventory-svc.inventory")
    [found] = network.network_policy_blocks(snapshot(caller, egress, failing))
    assert found.severity == 1
    assert (
        "selects pod orders/checkout-7f-a (app=checkout) for egress and admits no DNS traffic"
        in found.finding
    )
    assert "checkout-egress admits only pods app=db on 5432/TCP" in found.finding


def test_an_egress_policy_admitting_dns_to_any_namespace_is_not_reported() -> None:
    caller = _peers()[0]
    dns = {"to": [{"namespaceSelector": {}}], "ports": [{"port": 53, "protocol": "UDP"}]}
    egress = obj(
        "NetworkPolicy",
        "checkout-egress",
        "orders",
        spec={"podSelector": {}, "policyTypes": ["Egress"], "egress": [dns]},
    )
    assert network.network_policy_blocks(snapshot(caller, egress)) == []


def test_a_service_whose_selector_matches_no_pod_names_the_selector_and_the_labels_seen() -> None:
    service = _service("search", selector={"app": "search", "tier": "api"})
    endpoints = obj("Endpoints", "search", subsets=[])
    row = ListedRow(
        kind="Pod",
        namespace="orders",
        name="search-1",
        columns={"LABELS": "app=search,tier=backend"},
        source="list-pods-orders",
    )
    [found] = network.service_no_endpoints(snapshot(service, endpoints, row))
    assert found.severity == 1
    text = found.finding
    assert "Service orders/search (selector app=search,tier=api)" in text
    assert "no ready endpoint (0 not ready)" in text
    assert (
        "matches none of the 1 pod listed in the namespace (their labels: app=search,tier=backend)"
        in text
    )


def test_pods_fetched_one_by_one_do_not_show_that_a_selector_matches_nothing() -> None:
    service = _service("search")
    assert network.service_no_endpoints(snapshot(service, pod("checkout-1"))) == []


def test_a_service_whose_pods_are_not_ready_counts_them() -> None:
    service = _service("search")
    endpoints = obj(
        "Endpoints",
        "search",
        subsets=[{"notReadyAddresses": [{"ip": "10.1.0.7"}, {"ip": "10.1.0.8"}]}],
    )
    sick = pod("search-1", labels={"app": "search"}, statuses=[running("app", ready=False)])
    [found] = network.service_no_endpoints(snapshot(service, endpoints, sick))
    assert "no ready endpoint (2 not ready)" in found.finding
    assert "matches 1 pod, none ready" in found.finding


def test_a_service_with_ready_endpoints_is_not_reported() -> None:
    service = _service("search")
    endpoints = obj("Endpoints", "search", subsets=[{"addresses": [{"ip": "10.1.0.7"}]}])
    assert (
        network.service_no_endpoints(
            snapshot(service, endpoints, pod("search-1", labels={"app": "search"}))
        )
        == []
    )


def test_a_service_with_ready_endpoint_slices_is_not_reported() -> None:
    service = _service("search")
    sliced = obj(
        "EndpointSlice",
        "search-abc",
        metadata={"labels": {"kubernetes.io/service-name": "search"}},
        endpoints=[{"addresses": ["10.1.0.7"], "conditions": {"ready": True}}],
    )
    assert network.service_no_endpoints(snapshot(service, sliced)) == []


def test_a_service_whose_target_port_no_pod_declares_names_both_ports() -> None:
    service = _service("search", ports=[{"port": 80, "targetPort": 8081}])
    serving = pod(
        "search-1",
        labels={"app": "search"},
        containers=[container("app", ports=[{"containerPort": 8080, "name": "http"}])],
    )
    [found] = network.service_port_mismatch(snapshot(service, serving))
    assert found.finding == (
        "Service orders/search sends port 80 → targetPort 8081, but its pods (search-1) declare "
        "container ports 8080/TCP (http): connections to the Service find nothing listening."
    )


def test_a_named_target_port_the_pod_declares_or_a_pod_declaring_no_ports_is_not_a_mismatch() -> (
    None
):
    named = _service("search", ports=[{"port": 80, "targetPort": "http"}])
    serving = pod(
        "search-1",
        labels={"app": "search"},
        containers=[container("app", ports=[{"containerPort": 8080, "name": "http"}])],
    )
    silent = pod("search-2", labels={"app": "search"})
    assert network.service_port_mismatch(snapshot(named, serving)) == []
    assert network.service_port_mismatch(snapshot(_service("search"), silent)) == []


def test_the_configmap_key_is_found_by_the_short_service_name_as_a_whole_word() -> None:
    caller = log("checkout-1", "lookup stok.orders.svc.cluster.local: no such host")
    settings = obj(
        "ConfigMap", "checkout-env", data={"A": "http://mystok:80", "STOCK_ADDR": "stok:9000"}
    )
    [found] = network.unresolvable_host(snapshot(caller, settings, _service("stock")))
    assert 'ConfigMap checkout-env key STOCK_ADDR holds it ("stok:9000")' in found.finding
