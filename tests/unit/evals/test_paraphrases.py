"""The expected facts accept a correct analysis in other words, and catch wrong ones.

Real models do not write the playbook's analysis: each scenario gets a correct
analysis worded differently (different case, separators, phrasing, negated
mentions of the red herrings), which must state every finding and no forbidden
conclusion, and a wrong one, which must draw a forbidden conclusion.
"""

from __future__ import annotations

import pytest

from tarsy_dev.demo_cluster import load_scenario, scenario_names

CORRECT = {
    "cpu-throttling-latency": """
Since the rollout of Deployment revision 18 at 10:12 the pricing-api pods run with a CPU limit of
500m (it was 2 cores), and the CFS quota throttles them in 56% of periods. Throttling, not the
code, adds the wait: p99 went from 0.25 s to 2.4 s with the same image. Memory is flat and there
are no restarts. Undo the revision or raise the limit again.
""",
    "canary-5xx-by-version": """
Only version 3.9.0 fails: the orders-api-canary pod answers half its requests with 500 because
the customer profiles lack the LOYALTY_TIER field. Version 3.8.2 is at its usual 0.2%; its 502s
from the payment provider are old background noise and unrelated. Scale the canary to zero.
""",
    "memory-leak-toward-oom": """
The working set of every feed-builder pod climbs in a straight line (about 3.5 MiB/min) while
requests stay flat, the signature of a leak: the 2.3.0 feed cache never evicts because
feed_cache_max is not set. feed-builder-7c6b5d4f9-t9k4j already got OOM-killed (exit 137); the
others are past 90%. Bound the cache or roll back; a bigger limit only delays it.
""",
    "crashloop-bad-configmap": """
**Root cause:** someone ran kubectl edit on ConfigMap PAYMENTS-API-CONFIG and set the Database
Host to payments-db-primary.checkout.svc.cluster.local. There is no such Service, so the new pod
crash-loops on a DNS error. The database itself is healthy; payments-db-0 is running fine.
""",
    "oom-killed": """
The report-worker container hits its memory limit of 512 MiB and is OOM killed by the kernel
(exit code 137). The trigger is the new export batch size of 250000 rows in revision 9. This is
not a memory leak: memory grows with the batch.
""",
    "image-pull-error": """
The storefront rollout is stuck in ErrImagePull / ImagePullBackOff: the manifest asks for tag
2.41.0, which the registry does not have (NotFound, not an authentication error). The release is
2.14.0; the digits were swapped.
""",
    "expired-tls-cert": """
The certificate for api.shop.example.com has expired because cert-manager could not complete the
ACME HTTP01 challenge: the ClusterIssuer letsencrypt-prod still uses the nginx-legacy ingress
class, which no controller serves anymore. cert-manager itself is running, and this is not a rate
limit.
""",
    "noisy-neighbour": """
search-api-6d8f9c7b5-kp4xz is slow because its node (gke-prod-eu-1-default-pool-3f1a2b7c-wl5d)
is pegged at 99% CPU by three pods of the image-resizer backfill job. The slow queries are a
symptom of CPU starvation, not of the index.
""",
    "ledger-two-causes": """
There are two separate problems. First, ledger-consumer cannot authenticate to Kafka: SASL
SCRAM-SHA-512 fails because the secret now holds the staging user ledger-consumer-stg. Second,
the new ledger-api pod is unschedulable (Insufficient memory): revision 12 requests 16 GiB, more
than a node has. Adding nodes would not help; fix the request.
""",
    "invoice-red-herring": """
Since v2.3.0 was deployed at 09:12, POST /v1/invoices fails for reverse-charge customers with
KeyError 'vat_rate'. The OTel exporter errors are a red herring: they predate the incident by
three days and do not cause any failed request. DNS works.
""",
    "catalog-quota-events": """
The HPA wants 6 replicas but the ReplicaSet cannot create more pods: the namespace's resource
quota (catalog-quota) is exhausted at 12 GiB of limits.memory, so every create fails with
"exceeded quota". The existing pods are healthy and the nodes have room.
""",
    "media-evictions-flaky-api": """
The first events call timed out, so I retried it. The transcoder pods are evicted under
DiskPressure: with --keep-intermediate-files they fill their emptyDir scratch volume (about 40 GiB)
until the kubelet reclaims ephemeral storage. Memory is fine.
""",
    "cart-victim-networkpolicy": """
cart-api is crash-looping, but it is the victim: its connections to cart-redis on port 6379 time
out. Redis is healthy. A default-deny NetworkPolicy added to cart-data at 10:02 blocks ingress
from the cart namespace. Add an allow rule; do not touch cart-api's memory.
""",
    "notifier-self-resolved": """
This incident has already resolved itself. GKE drained the node for an automatic upgrade at 04:02,
the replacement notifier pod needed four minutes to warm its cache, and since 04:06:58 all three
replicas are available. Nothing needs to be done; the alert notification is stale.
""",
    "marketplace-noisy-namespace": """
Of 25 pods only reviews-api-canary-7f9b6c5d4-zq8mn is not ready. Its readiness probe calls
/healthz/ready, which reviews-api 3.0.0 answers with 404 (it serves /ready now). The pricing
liveness timeout at 09:52 is unrelated. All other pods are healthy.
""",
}

WRONG = {
    "cpu-throttling-latency": "Slow database queries behind pricing-api cause the latency.",
    "canary-5xx-by-version": "A payment provider outage makes orders-api fail.",
    "memory-leak-toward-oom": "The node is under memory pressure, so the kubelet evicts pods.",
    "crashloop-bad-configmap": "The payments database is down, so payments-api cannot start.",
    "invoice-red-herring": "The OTel collector outage causes the 500s on invoice creation.",
    "cart-victim-networkpolicy": "Redis is down; restart cart-redis.",
    "notifier-self-resolved": "Run kubectl rollout restart deployment/notifier to recover.",
    "marketplace-noisy-namespace": "The alert is a false positive.",
    "catalog-quota-events": "The nodes are full; add a node to the pool.",
}


@pytest.mark.parametrize("name", scenario_names())
def test_a_correct_analysis_in_other_words_passes_the_facts(name: str) -> None:
    scenario = load_scenario(name)
    text = CORRECT[name]
    missing = [f.fact for f in scenario.expected.findings if f.found_in(text) is None]
    drawn = [f.claim for f in scenario.expected.forbidden if f.found_in(text) is not None]
    assert missing == [] and drawn == []


@pytest.mark.parametrize("name", sorted(WRONG))
def test_a_wrong_conclusion_in_other_words_is_caught(name: str) -> None:
    scenario = load_scenario(name)
    assert any(f.found_in(WRONG[name]) for f in scenario.expected.forbidden)
