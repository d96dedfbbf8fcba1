resource "google_firestore_database" "main" {
  name                              = var.firestore_database
  location_id                       = var.firestore_location
  type                              = "FIRESTORE_NATIVE"
  point_in_time_recovery_enablement = "POINT_IN_TIME_RECOVERY_ENABLED"
  delete_protection_state           = var.firestore_delete_protection ? "DELETE_PROTECTION_ENABLED" : "DELETE_PROTECTION_DISABLED"
  deletion_policy                   = var.firestore_delete_protection ? "ABANDON" : "DELETE"

  depends_on = [google_project_service.enabled]
}

# Provider state of a model conversation (thought signatures) expires by itself.
# An empty index_config turns off the single-field indexes a TTL field does not need.
resource "google_firestore_field" "thought_signatures_ttl" {
  database   = google_firestore_database.main.name
  collection = "thought_signatures"
  field      = "expire_at"

  ttl_config {}
  index_config {}
}

# Alert fingerprint claims (dedup of native alert sources) expire by themselves once
# their session's deadline and the source's dedup window have passed.
resource "google_firestore_field" "alert_fingerprints_ttl" {
  database   = google_firestore_database.main.name
  collection = "alert_fingerprints"
  field      = "expire_at"

  ttl_config {}
  index_config {}
}

# Fields stored as JSON text that no query reads: an LLM call's request and a server's
# tool list (shared/tarsy/persistence: llm_interaction_document, tool_list_document).
# Each is one long string per document; indexing it would only cost writes.
locals {
  unindexed_json_fields = {
    llm_interactions = "request"
    mcp_tool_lists   = "tools"
  }
}

resource "google_firestore_field" "unindexed_json" {
  for_each = local.unindexed_json_fields

  database   = google_firestore_database.main.name
  collection = each.key
  field      = each.value

  index_config {}
}

# Retention: a finished session and every document of it carry expire_at (stamped by
# the retention job, var.retention_days after the session ended; shared/tarsy/persistence/retention.py).
# TTL never cascades to subcollections, so every collection group a session's
# documents live in has its own policy. Deletion usually follows within a day.
locals {
  retention_collection_groups = toset([
    "sessions",
    "stages",
    "done",
    "markers",
    "notifications",
    "executions",
    "messages",
    "timeline",
    "llm_interactions",
    "mcp_interactions",
    "progress",
    "published",
    "sub_agent_turns",
    "answers",
    "audit",
    "chunks",
  ])
}

resource "google_firestore_field" "retention_ttl" {
  for_each = local.retention_collection_groups

  database   = google_firestore_database.main.name
  collection = each.value
  field      = "expire_at"

  ttl_config {}
  index_config {}
}

# The sweeper's query for session-end notifications to retry (FirestoreLedger.stale):
# a range on lease_until across every session's notifications, a collection-group
# query, which needs its single-field index declared.
resource "google_firestore_field" "notification_leases" {
  database   = google_firestore_database.main.name
  collection = "notifications"
  field      = "lease_until"

  index_config {
    indexes {
      order       = "ASCENDING"
      query_scope = "COLLECTION_GROUP"
    }
  }
}

# Slack thread questions (tarsy.intake.slack_events): the session whose Slack message opened
# a thread, or was posted in it, is found by two collection-group equality queries on the
# recorded result (FirestoreLedger.thread_session), which need their single-field indexes.
resource "google_firestore_field" "notification_slack_threads" {
  for_each = toset(["result.ts", "result.thread_ts"])

  database   = google_firestore_database.main.name
  collection = "notifications"
  field      = each.value

  index_config {
    indexes {
      order       = "ASCENDING"
      query_scope = "COLLECTION_GROUP"
    }
  }
}

# The sweeper's deadline query (Store.overdue_sessions): equality on
# status and a range on a timestamp need a composite index. Its due-time queries
# (Store.due_executions, Store.due_sessions) filter one field: indexed by default.
resource "google_firestore_index" "sessions_status_deadline" {
  database    = google_firestore_database.main.name
  collection  = "sessions"
  query_scope = "COLLECTION"

  fields {
    field_path = "status"
    order      = "ASCENDING"
  }
  fields {
    field_path = "deadline"
    order      = "ASCENDING"
  }
}

# Listing sessions (GET /sessions, Store.list_sessions): newest first, with an
# equality filter on status, alert_type, source or verdict. One index per filter field;
# Firestore merges them when filters are combined, and appends the document id
# (which breaks ties) in the direction of the last field.
resource "google_firestore_index" "sessions_by_status" {
  database    = google_firestore_database.main.name
  collection  = "sessions"
  query_scope = "COLLECTION"

  fields {
    field_path = "status"
    order      = "ASCENDING"
  }
  fields {
    field_path = "created_at"
    order      = "DESCENDING"
  }
}

resource "google_firestore_index" "sessions_by_alert_type" {
  database    = google_firestore_database.main.name
  collection  = "sessions"
  query_scope = "COLLECTION"

  fields {
    field_path = "alert_type"
    order      = "ASCENDING"
  }
  fields {
    field_path = "created_at"
    order      = "DESCENDING"
  }
}

resource "google_firestore_index" "sessions_by_source" {
  database    = google_firestore_database.main.name
  collection  = "sessions"
  query_scope = "COLLECTION"

  fields {
    field_path = "source"
    order      = "ASCENDING"
  }
  fields {
    field_path = "created_at"
    order      = "DESCENDING"
  }
}

# The feedback filter (?verdict=; tarsy.feedback): sessions a responder judged so.
resource "google_firestore_index" "sessions_by_verdict" {
  database    = google_firestore_database.main.name
  collection  = "sessions"
  query_scope = "COLLECTION"

  fields {
    field_path = "verdict"
    order      = "ASCENDING"
  }
  fields {
    field_path = "created_at"
    order      = "DESCENDING"
  }
}

# Memory of earlier incidents (tarsy.memory): a starting session reads the
# earlier sessions sharing one of its memory_keys (array-contains-any), newest first.
resource "google_firestore_index" "sessions_memory_created" {
  database    = google_firestore_database.main.name
  collection  = "sessions"
  query_scope = "COLLECTION"

  fields {
    field_path   = "memory_keys"
    array_config = "CONTAINS"
  }
  fields {
    field_path = "created_at"
    order      = "DESCENDING"
  }
}

# The session list's "who did what" filter (?actor=, ?action=; tarsy.access.audit):
# array-contains on audit_keys, newest first.
resource "google_firestore_index" "sessions_audit_created" {
  database    = google_firestore_database.main.name
  collection  = "sessions"
  query_scope = "COLLECTION"

  fields {
    field_path   = "audit_keys"
    array_config = "CONTAINS"
  }
  fields {
    field_path = "created_at"
    order      = "DESCENDING"
  }
}

# The audit across sessions (GET /audit, AuditLog.list_all_audit): one collection-group
# query on "audit" (every session's sessions/{sid}/audit and the erasures' top-level
# audit/), newest first (at DESC, the document path breaking ties), with an equality
# filter on actor or action and a range on at. A collection-group query is served by
# no automatic index: the unfiltered listing needs at's collection-group index, each
# equality filter its composite. Firestore merges the two composites when actor and
# action are combined, and appends the document path in the direction of the last field.
resource "google_firestore_field" "audit_at" {
  database   = google_firestore_database.main.name
  collection = "audit"
  field      = "at"

  # Declaring a field's indexes replaces its automatic ones: keep the collection scope.
  index_config {
    indexes {
      order       = "ASCENDING"
      query_scope = "COLLECTION"
    }
    indexes {
      order       = "DESCENDING"
      query_scope = "COLLECTION"
    }
    indexes {
      order       = "DESCENDING"
      query_scope = "COLLECTION_GROUP"
    }
  }
}

resource "google_firestore_index" "audit_by_actor" {
  database    = google_firestore_database.main.name
  collection  = "audit"
  query_scope = "COLLECTION_GROUP"

  fields {
    field_path = "actor"
    order      = "ASCENDING"
  }
  fields {
    field_path = "at"
    order      = "DESCENDING"
  }
}

resource "google_firestore_index" "audit_by_action" {
  database    = google_firestore_database.main.name
  collection  = "audit"
  query_scope = "COLLECTION_GROUP"

  fields {
    field_path = "action"
    order      = "ASCENDING"
  }
  fields {
    field_path = "at"
    order      = "DESCENDING"
  }
}
