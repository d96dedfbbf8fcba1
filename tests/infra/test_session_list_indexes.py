"""The session listing's queries have the composite indexes Firestore needs in the cloud.

The emulator serves any query without an index, so only this check stands
between a new listing filter and a FAILED_PRECONDITION in production.
"""

from __future__ import annotations

import ast
import inspect
import textwrap

from tarsy.models import Session
from tarsy.persistence.session_list import (
    AUDIT_FIELD,
    EQUALITY_FILTERS,
    ORDER_FIELD,
    SUMMARY_FIELDS,
)
from tarsy.persistence.store import SESSIONS, Store
from tests.infra.test_terraform import resources


def _session_indexes() -> set[tuple[tuple[str, str], ...]]:
    return {
        tuple((f["field_path"], f.get("order") or f["array_config"]) for f in index["fields"])
        for index in resources("google_firestore_index").values()
        if index["collection"] == SESSIONS and index["query_scope"] == "COLLECTION"
    }


def test_every_equality_filter_has_an_index_ordered_newest_first() -> None:
    indexes = _session_indexes()
    for field in EQUALITY_FILTERS:
        assert ((field, "ASCENDING"), (ORDER_FIELD, "DESCENDING")) in indexes, field


def test_the_who_did_what_filter_has_an_array_contains_index_ordered_newest_first() -> None:
    assert ((AUDIT_FIELD, "CONTAINS"), (ORDER_FIELD, "DESCENDING")) in _session_indexes()


def test_filters_and_order_are_session_fields() -> None:
    assert set(EQUALITY_FILTERS) | {ORDER_FIELD, AUDIT_FIELD} <= set(Session.model_fields)
    assert set(EQUALITY_FILTERS) | {ORDER_FIELD} <= set(SUMMARY_FIELDS)


def test_the_store_filters_on_exactly_these_fields() -> None:
    """A filter added to Store.list_sessions without an index here would fail in the cloud."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(Store.list_sessions)))
    filtered = {
        str(node.args[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "FieldFilter"
        and isinstance(node.args[0], ast.Constant)
    }
    assert filtered == {*EQUALITY_FILTERS, ORDER_FIELD, AUDIT_FIELD}


def test_the_memory_of_earlier_incidents_has_its_array_contains_index_newest_first() -> None:
    """Store.earlier_sessions: array-contains-any on memory_keys, ordered by created_at."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(Store.earlier_sessions)))
    filtered = {
        str(node.args[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "FieldFilter"
        and isinstance(node.args[0], ast.Constant)
    }
    assert filtered == {"memory_keys", ORDER_FIELD}
    assert (("memory_keys", "CONTAINS"), (ORDER_FIELD, "DESCENDING")) in _session_indexes()
    assert "memory_keys" in Session.model_fields
