"""Target sources that follow references to where a dependency lives."""

from __future__ import annotations

from tarsy.evidence.snapshot import AlertFacts, ListedRow, ObjectRef
from tarsy.evidence.targets import service_hosts, targets_of

from .cluster import event, log, obj, pod, snapshot, waiting

ALERT = AlertFacts(labels={"namespace": "orders"})


def _names(source: str, *items: object, alert: AlertFacts = ALERT) -> list[tuple[str, str, str]]:
    built = snapshot(*items)  # type: ignore[arg-type]
    return [(t["kind"], t["namespace"], t["name"]) for t in targets_of(source, alert, built)]


def test_the_short_service_form_counts_only_for_a_namespace_the_cluster_has() -> None:
    text = "connect to ledger.payments:5432 and api.example failed; pay.payments.svc ok"
    assert service_hosts(text, {"payments"}) == [("pay", "payments"), ("ledger", "payments")]
    assert service_hosts(text, set()) == [("pay", "payments")]
    assert service_hosts("see www.ledger.payments.example", {"payments"}) == []


def test_a_service_in_another_namespace_named_in_a_log_is_followed_with_its_pods() -> None:
    namespace_row = ListedRow(kind="Namespace", name="payments", source="ns")
    logged = log("api-1", "dial tcp ledger.payments:5432: i/o timeout")
    assert _names("services.named", namespace_row, logged) == [("Service", "payments", "ledger")]
    related = targets_of("namespaces.related", ALERT, snapshot(namespace_row, logged))
    assert [t["namespace"] for t in related] == ["payments"]
    ledger = obj("Service", "ledger", namespace="payments", spec={"selector": {"app": "ledger"}})
    local = obj("Service", "web", spec={"selector": {"app": "web"}})
    built = snapshot(ledger, local)
    [target] = targets_of("services.dependencies", ALERT, built)
    assert (target["namespace"], target["name"], target["selector"]) == (
        "payments",
        "ledger",
        "app=ledger",
    )
    rows = [
        ListedRow(kind="Pod", namespace="payments", name="ledger-0", source="l",
                  columns={"STATUS": "Running", "READY": "1/1"}),
        ListedRow(kind="Pod", namespace="payments", name="ledger-1", source="l",
                  columns={"STATUS": "CrashLoopBackOff", "READY": "0/1"}),
        ListedRow(kind="Pod", namespace="orders", name="web-1", source="l",
                  columns={"STATUS": "Running", "READY": "1/1"}),
    ]  # fmt: skip
    assert _names("pods.dependencies", *rows) == [
        ("Pod", "payments", "ledger-1"),
        ("Pod", "payments", "ledger-0"),
    ]


def test_what_ingresses_statefulsets_claims_hpas_and_webhooks_name_is_followed() -> None:
    ingress = obj(
        "Ingress",
        "shop",
        spec={
            "ingressClassName": "edge",
            "tls": [{"secretName": "shop-tls"}],
            "rules": [{"http": {"paths": [{"backend": {"service": {"name": "front"}}}]}}],
        },
    )
    sts = obj(
        "StatefulSet",
        "store",
        spec={
            "serviceName": "store-hl",
            "volumeClaimTemplates": [{"spec": {"storageClassName": "fast"}}],
        },
    )
    hpa = obj(
        "HorizontalPodAutoscaler",
        "web",
        spec={"scaleTargetRef": {"kind": "Deployment", "name": "web"}},
    )
    hook = obj(
        "MutatingWebhookConfiguration",
        "inject",
        namespace="",
        webhooks=[
            {"name": "w", "clientConfig": {"service": {"name": "injector", "namespace": "mesh"}}}
        ],
    )
    fetched_secret = obj("Secret", "shop-tls")
    found = _names("references", ingress, sts, hpa, hook, fetched_secret)
    assert found == [
        ("Service", "orders", "front"),
        ("IngressClass", "", "edge"),
        ("Service", "orders", "store-hl"),
        ("StorageClass", "", "fast"),
        ("Deployment", "orders", "web"),
        ("Service", "mesh", "injector"),
    ]
    assert _names("references.endpoints", ingress, hook) == [
        ("Endpoints", "orders", "front"),
        ("Endpoints", "mesh", "injector"),
    ]
    [klass] = targets_of("references", ALERT, snapshot(ingress, fetched_secret))[1:]
    assert klass["api_version"] == "networking.k8s.io/v1"


def test_webhook_configurations_are_listed_only_when_something_mentions_a_webhook() -> None:
    rs = obj("ReplicaSet", "web-1")
    quiet = event(rs, "FailedCreate", "exceeded quota")
    loud = event(rs, "FailedCreate", 'Internal error: failed calling webhook "v.example.com"')
    assert targets_of("webhooks.failing", ALERT, snapshot(quiet)) == []
    assert len(targets_of("webhooks.failing", ALERT, snapshot(quiet, loud))) == 1


def test_the_cluster_components_are_gathered_when_many_workloads_fail_alike() -> None:
    def failing(name: str, namespace: str = "orders") -> object:
        return pod(name, namespace, statuses=[waiting("app", "ContainerCreating")])

    few = [failing("api-7f-a"), failing("api-7f-b"), failing("web-5c-a")]
    assert _names("cluster.components", *few) == []
    many = [*few, failing("cart-9d-a", "shop")]
    [target] = targets_of("cluster.components", ALERT, snapshot(*many))  # type: ignore[arg-type]
    assert target["namespace"] == "kube-system"


def test_listed_suspects_keep_rows_that_look_failing() -> None:
    rows = [
        ListedRow(kind="HorizontalPodAutoscaler", namespace="orders", name="full", source="h",
                  columns={"TARGETS": "90%/70%", "MAXPODS": "5", "REPLICAS": "5"}),
        ListedRow(kind="HorizontalPodAutoscaler", namespace="orders", name="calm", source="h",
                  columns={"TARGETS": "20%/70%", "MAXPODS": "5", "REPLICAS": "2"}),
        ListedRow(kind="PodDisruptionBudget", namespace="orders", name="tight", source="p",
                  columns={"ALLOWED DISRUPTIONS": "0"}),
        ListedRow(kind="CronJob", namespace="orders", name="paused", source="c",
                  columns={"SUSPEND": "True", "LAST SCHEDULE": "3h"}),
        ListedRow(kind="CronJob", namespace="orders", name="fine", source="c",
                  columns={"SUSPEND": "False", "LAST SCHEDULE": "3h"}),
        ListedRow(kind="Ingress", namespace="orders", name="shop", source="i"),
    ]  # fmt: skip
    found = _names(
        "listed.suspect:HorizontalPodAutoscaler,PodDisruptionBudget,CronJob,Ingress", *rows
    )
    assert sorted(name for _, _, name in found) == ["full", "paused", "shop", "tight"]
    assert ObjectRef(kind="CronJob", name="fine", namespace="orders") not in [
        ObjectRef(kind=k, name=n, namespace=ns) for k, ns, n in found
    ]


def test_failed_jobs_are_suspects_and_a_claims_volume_is_followed() -> None:
    rows = [
        ListedRow(kind="Job", namespace="orders", name="nightly-1", source="j",
                  columns={"STATUS": "Failed", "COMPLETIONS": "0/1"}),
        ListedRow(kind="Job", namespace="orders", name="nightly-2", source="j",
                  columns={"STATUS": "Complete", "COMPLETIONS": "1/1"}),
        ListedRow(kind="Job", namespace="orders", name="old-style", source="j",
                  columns={"COMPLETIONS": "0/1"}),
    ]  # fmt: skip
    found = _names("listed.suspect:Job", *rows)
    assert sorted(name for _, _, name in found) == ["nightly-1", "old-style"]
    claim = obj("PersistentVolumeClaim", "data-0", spec={"volumeName": "pv-7"})
    [volume] = targets_of("references", ALERT, snapshot(claim))
    assert (volume["kind"], volume["name"], volume["namespace"]) == ("PersistentVolume", "pv-7", "")
    assert volume["api_version"] == "v1"
