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

# The sweeper's queries (Store.expired_leases, Store.overdue_sessions): equality on
# status and a range on a timestamp need a composite index each.
resource "google_firestore_index" "executions_status_lease" {
  database    = google_firestore_database.main.name
  collection  = "executions"
  query_scope = "COLLECTION"

  fields {
    field_path = "status"
    order      = "ASCENDING"
  }
  fields {
    field_path = "lease_until"
    order      = "ASCENDING"
  }
}

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
