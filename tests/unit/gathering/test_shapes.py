"""A collector call says what its result is; kubernetes-mcp-server's tools need not."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tarsy.evidence.catalog import KNOWN_SHAPES, CollectorCall
from tarsy.evidence.parse import add_result
from tarsy.evidence.snapshot import Snapshot


def test_a_known_tool_has_its_shape_and_a_measured_query_is_promql() -> None:
    assert CollectorCall(tool="pods_log").shape == "log"
    assert CollectorCall(tool="nodes_top").shape == "top"
    assert CollectorCall(tool="execute_range_query", measures="restarts").shape == "promql"
    assert CollectorCall(tool="pods_get", shape="table").shape == "table"  # declared wins
    assert set(KNOWN_SHAPES.values()) <= {"object", "table", "events", "log", "top"}


def test_an_unknown_tool_without_a_shape_or_promql_without_measures_is_refused() -> None:
    with pytest.raises(ValidationError, match="say what its result is"):
        CollectorCall(tool="describe")
    with pytest.raises(ValidationError, match="promql result needs measures"):
        CollectorCall(tool="query", shape="promql")


def test_a_result_is_read_by_its_shape_whatever_the_tool_is_called() -> None:
    snapshot = Snapshot()
    table = "NAMESPACE   KIND         NAME\nshop        Deployment   web\n"
    add_result(snapshot, "table", {}, table, "g-1", is_error=False)
    add_result(snapshot, "log", {"namespace": "shop", "name": "web-0"}, "boom", "g-2",
               is_error=False)  # fmt: skip
    [row] = snapshot.rows
    assert (row.kind, row.namespace, row.name) == ("Deployment", "shop", "web")
    [log] = snapshot.logs
    assert (log.namespace, log.pod, log.text) == ("shop", "web-0", "boom")
