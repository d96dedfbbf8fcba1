# One service account per function, plus the identities that call them. Every
# grant is on the narrowest resource that works; no basic roles anywhere.

resource "google_service_account" "ingest" {
  account_id   = "${var.name_prefix}-ingest"
  display_name = "TARSy ingest function"
  depends_on   = [google_project_service.enabled]
}

resource "google_service_account" "step" {
  account_id   = "${var.name_prefix}-step"
  display_name = "TARSy step function"
  depends_on   = [google_project_service.enabled]
}

resource "google_service_account" "api" {
  account_id   = "${var.name_prefix}-api"
  display_name = "TARSy api function"
  depends_on   = [google_project_service.enabled]
}

resource "google_service_account" "dead_letter" {
  account_id   = "${var.name_prefix}-dead-letter"
  display_name = "TARSy dead-letter function"
  depends_on   = [google_project_service.enabled]
}

# Identity of the Cloud Scheduler job; the api accepts its OIDC token on /sweep.
resource "google_service_account" "sweeper" {
  account_id   = "${var.name_prefix}-sweeper"
  display_name = "TARSy sweeper (Cloud Scheduler)"
  depends_on   = [google_project_service.enabled]
}

# Identity of Pub/Sub push deliveries to the step and dead-letter functions.
resource "google_service_account" "pubsub_push" {
  account_id   = "${var.name_prefix}-pubsub-push"
  display_name = "TARSy Pub/Sub push invoker"
  depends_on   = [google_project_service.enabled]
}

# Cloud Build builds the function images as this account instead of the default
# compute account (which often holds the Editor basic role).
resource "google_service_account" "build" {
  account_id   = "${var.name_prefix}-build"
  display_name = "TARSy function builds"
  depends_on   = [google_project_service.enabled]
}

locals {
  function_accounts = {
    ingest      = google_service_account.ingest
    step        = google_service_account.step
    api         = google_service_account.api
    dead_letter = google_service_account.dead_letter
  }
}

# Firestore: read and write documents, in the TARSy database only.
resource "google_project_iam_member" "firestore_user" {
  for_each = local.function_accounts

  project = var.project_id
  role    = "roles/datastore.user"
  member  = each.value.member

  condition {
    title      = "tarsy-database-only"
    expression = "resource.name == \"projects/${var.project_id}/databases/${google_firestore_database.main.name}\""
  }
}

# Gemini through Vertex AI, for the step function only.
resource "google_project_iam_member" "step_vertex" {
  project = coalesce(var.vertex_project, var.project_id)
  role    = "roles/aiplatform.user"
  member  = google_service_account.step.member
}

# Traces and metrics, when exported to Google Cloud (var.telemetry): every function
# writes spans to Cloud Trace and points to Cloud Monitoring, nothing more.
resource "google_project_iam_member" "telemetry" {
  for_each = var.telemetry ? {
    for pair in setproduct(keys(local.function_accounts), ["roles/cloudtrace.agent", "roles/monitoring.metricWriter"]) :
    "${pair[0]} ${pair[1]}" => { account = pair[0], role = pair[1] }
  } : {}

  project = var.project_id
  role    = each.value.role
  member  = local.function_accounts[each.value.account].member
}

# The build account: write build logs, push images, read the uploaded sources.
resource "google_project_iam_member" "build" {
  for_each = toset([
    "roles/logging.logWriter",
    "roles/artifactregistry.writer",
    "roles/storage.objectViewer",
  ])

  project = var.project_id
  role    = each.value
  member  = google_service_account.build.member
}

# Pub/Sub mints OIDC tokens for push deliveries as the push account.
resource "google_service_account_iam_member" "pubsub_push_token" {
  service_account_id = google_service_account.pubsub_push.name
  role               = "roles/iam.serviceAccountTokenCreator"
  member             = google_project_service_identity.pubsub.member
}
