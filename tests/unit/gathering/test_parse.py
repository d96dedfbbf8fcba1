"""Tool results as kubernetes-mcp-server prints them, read into the snapshot."""

from __future__ import annotations

from tarsy.evidence.parse import add_result, events, quantity, table_rows
from tarsy.evidence.snapshot import ObjectRef, Snapshot

PODS_TABLE = "\n".join(
    [
        "NAMESPACE   APIVERSION   KIND   NAME              READY   STATUS             "
        "RESTARTS      AGE   NOMINATED NODE   LABELS",
        "orders      v1           Pod    orders-api-a1     1/1     Running            "
        "0             8d    <none>           app=orders-api",
        "orders      v1           Pod    orders-api-b2     0/1     CrashLoopBackOff   "
        "5 (40s ago)   9m    <none>           app=orders-api,tier=web",
    ]
)

TOP_TABLE = """\
NAMESPACE   POD             NAME      CPU(cores)   MEMORY(bytes)   SWAP(bytes)
orders      orders-api-a1   api       120m         200Mi           0Mi
orders      orders-api-a1   sidecar   10m          20Mi            0Mi
                                                   ________        ________
                                                   130m            220Mi
"""

EVENTS = """\
# The following events (YAML format) were found:
- InvolvedObject:
    Kind: Pod
    Name: orders-api-b2
    apiVersion: v1
  Message: Back-off restarting failed container api in pod orders-api-b2
  Namespace: orders
  Reason: BackOff
  Timestamp: 2026-01-02 03:04:05 +0000 UTC
  Type: Warning
"""


def test_a_table_cell_with_spaces_stays_whole_and_headers_with_spaces_are_one_column() -> None:
    rows = table_rows(PODS_TABLE)
    assert [r["NAME"] for r in rows] == ["orders-api-a1", "orders-api-b2"]
    assert rows[1]["RESTARTS"] == "5 (40s ago)"
    assert rows[1]["NOMINATED NODE"] == "<none>"
    assert rows[1]["LABELS"] == "app=orders-api,tier=web"


def test_pods_top_rows_stop_at_the_totals_and_containers_add_up_per_pod() -> None:
    snapshot = Snapshot()
    add_result(snapshot, "top", {"namespace": "orders"}, TOP_TABLE, "g-1", is_error=False)
    [usage] = snapshot.usage
    assert usage.ref == ObjectRef(kind="Pod", name="orders-api-a1", namespace="orders")
    assert usage.cpu_millicores == 130
    assert usage.memory_bytes == 220 * 2**20


def test_events_are_read_with_their_object_reason_and_time() -> None:
    [event] = events(EVENTS, "g-2")
    assert event.object == ObjectRef(kind="Pod", name="orders-api-b2", namespace="orders")
    assert (event.type, event.reason, event.source) == ("Warning", "BackOff", "g-2")
    assert (
        event.last_seen is not None and event.last_seen.isoformat() == "2026-01-02T03:04:05+00:00"
    )


def test_an_object_looked_up_that_does_not_exist_is_recorded_as_absent() -> None:
    snapshot = Snapshot()
    arguments = {"apiVersion": "v1", "kind": "Service", "namespace": "orders", "name": "db"}
    text = 'failed to get resource: services "db" not found'
    add_result(snapshot, "object", arguments, text, "g-3", is_error=True)
    assert snapshot.absent == [ObjectRef(kind="Service", name="db", namespace="orders")]
    assert snapshot.errors == {"g-3": text}


def test_an_object_and_a_list_become_an_object_and_rows() -> None:
    snapshot = Snapshot()
    pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: orders-api-b2, namespace: orders}\n"
    add_result(snapshot, "object", {"namespace": "orders"}, pod, "g-4", is_error=False)
    add_result(snapshot, "table", {}, PODS_TABLE, "g-5", is_error=False)
    assert snapshot.get("Pod", "orders-api-b2", "orders") is not None
    assert [r.ref.name for r in snapshot.rows] == ["orders-api-a1", "orders-api-b2"]
    assert snapshot.rows[1].labels == {"app": "orders-api", "tier": "web"}


def test_unreadable_text_is_left_out_rather_than_raising() -> None:
    snapshot = Snapshot()
    add_result(snapshot, "object", {}, ": not yaml : [", "g-6", is_error=False)
    add_result(snapshot, "events", {}, "nothing here", "g-7", is_error=False)
    assert snapshot.objects == [] and snapshot.events == []


def test_quantities_read_as_numbers() -> None:
    assert quantity("250m") == 0.25
    assert quantity("512Mi") == 512 * 2**20
    assert quantity("2") == 2
    assert quantity("lots") is None


NODES_TOP_ONE = """\
NAME       CPU(cores)   CPU(%)      MEMORY(bytes)   MEMORY(%)   SWAP(bytes)   SWAP(%)
node-b     3871m        98%         10212Mi         77%         0Mi
node-a     <unknown>    <unknown>   <unknown>       <unknown>   <unknown>     <unknown>
"""


def test_nodes_top_for_one_node_keeps_only_rows_with_figures() -> None:
    # kubernetes-mcp-server's nodes_top with a name still lists the other nodes, as
    # <unknown>: such a row read first would hide that node's figures from a later call.
    snapshot = Snapshot()
    add_result(snapshot, "top", {"name": "node-b"}, NODES_TOP_ONE, "g-1", is_error=False)
    [usage] = snapshot.usage
    assert usage.ref == ObjectRef(kind="Node", name="node-b")
    assert usage.cpu_millicores == 3871
