# Terraform creates the secrets but never their values, so no key lands in the
# state: add a version with `gcloud secrets versions add` (docs/deploy.md) before
# the functions are created. Encryption is Google-managed.

resource "google_secret_manager_secret" "api_key" {
  secret_id = "${var.name_prefix}-api-key"
  replication {
    auto {}
  }
  depends_on = [google_project_service.enabled]
}

resource "google_secret_manager_secret" "gemini_api_key" {
  count     = var.use_vertex_ai ? 0 : 1
  secret_id = "${var.name_prefix}-gemini-api-key"
  replication {
    auto {}
  }
  depends_on = [google_project_service.enabled]
}

# The signing secret of the PagerDuty webhook subscription (several, comma-separated,
# while one is rotated): a signed delivery needs no API key.
resource "google_secret_manager_secret" "pagerduty_signing_secret" {
  count     = var.pagerduty_webhooks ? 1 : 0
  secret_id = "${var.name_prefix}-pagerduty-signing-secret"
  replication {
    auto {}
  }
  depends_on = [google_project_service.enabled]
}

# The Slack bot token (xoxb-...): read at run time through TARSY_SLACK_TOKEN_SECRET by the
# functions that may end a session, the dead-letter one included (it has no secret env).
resource "google_secret_manager_secret" "slack_bot_token" {
  count     = var.slack_notifications ? 1 : 0
  secret_id = "${var.name_prefix}-slack-bot-token"
  replication {
    auto {}
  }
  depends_on = [google_project_service.enabled]
}

# The Slack app's signing secret: read at run time through TARSY_SLACK_SIGNING_SECRET_NAME by
# the ingest function, which verifies every Events API request with it.
resource "google_secret_manager_secret" "slack_signing_secret" {
  count     = var.slack_thread_questions ? 1 : 0
  secret_id = "${var.name_prefix}-slack-signing-secret"
  replication {
    auto {}
  }
  depends_on = [google_project_service.enabled]
}

# A PagerDuty REST API key: read at run time through TARSY_PAGERDUTY_TOKEN_SECRET by the
# functions that may end a session, to add the note to its incident.
resource "google_secret_manager_secret" "pagerduty_api_key" {
  count     = var.pagerduty_notes ? 1 : 0
  secret_id = "${var.name_prefix}-pagerduty-api-key"
  replication {
    auto {}
  }
  depends_on = [google_project_service.enabled]
}

# A token sent with runbook fetches (a GitHub token that reads private runbook repositories):
# read at run time through TARSY_RUNBOOK_TOKEN_SECRET by the step function, which fetches them.
resource "google_secret_manager_secret" "runbook_token" {
  count     = var.runbook_token ? 1 : 0
  secret_id = "${var.name_prefix}-runbook-token"
  replication {
    auto {}
  }
  depends_on = [google_project_service.enabled]
}

resource "google_secret_manager_secret" "config_secret" {
  for_each  = var.config_secrets
  secret_id = each.value
  labels = {
    tarsy-env = lower(replace(each.key, "_", "-"))
  }
  replication {
    auto {}
  }
  depends_on = [google_project_service.enabled]
}

# Accessors: each secret to the functions that read it, and to no one else.
# Only ingest: the api takes people signed in through Identity-Aware Proxy, never the key.
resource "google_secret_manager_secret_iam_member" "api_key" {
  for_each = {
    ingest = google_service_account.ingest.member
  }

  secret_id = google_secret_manager_secret.api_key.id
  role      = "roles/secretmanager.secretAccessor"
  member    = each.value
}

resource "google_secret_manager_secret_iam_member" "gemini_api_key" {
  count = var.use_vertex_ai ? 0 : 1

  secret_id = google_secret_manager_secret.gemini_api_key[0].id
  role      = "roles/secretmanager.secretAccessor"
  member    = google_service_account.step.member
}

resource "google_secret_manager_secret_iam_member" "pagerduty_signing_secret" {
  count = var.pagerduty_webhooks ? 1 : 0

  secret_id = google_secret_manager_secret.pagerduty_signing_secret[0].id
  role      = "roles/secretmanager.secretAccessor"
  member    = google_service_account.ingest.member
}

resource "google_secret_manager_secret_iam_member" "slack_bot_token" {
  for_each = var.slack_notifications ? merge({
    step        = google_service_account.step.member
    dead_letter = google_service_account.dead_letter.member
    api         = google_service_account.api.member
    }, var.slack_thread_questions ? {
    # Thread questions: who asked (users.info), and a refusal answered in the thread.
    ingest = google_service_account.ingest.member
  } : {}) : {}

  secret_id = google_secret_manager_secret.slack_bot_token[0].id
  role      = "roles/secretmanager.secretAccessor"
  member    = each.value
}

resource "google_secret_manager_secret_iam_member" "slack_signing_secret" {
  count = var.slack_thread_questions ? 1 : 0

  secret_id = google_secret_manager_secret.slack_signing_secret[0].id
  role      = "roles/secretmanager.secretAccessor"
  member    = google_service_account.ingest.member
}

resource "google_secret_manager_secret_iam_member" "pagerduty_api_key" {
  for_each = var.pagerduty_notes ? {
    step        = google_service_account.step.member
    dead_letter = google_service_account.dead_letter.member
    api         = google_service_account.api.member
  } : {}

  secret_id = google_secret_manager_secret.pagerduty_api_key[0].id
  role      = "roles/secretmanager.secretAccessor"
  member    = each.value
}

resource "google_secret_manager_secret_iam_member" "runbook_token" {
  count = var.runbook_token ? 1 : 0

  secret_id = google_secret_manager_secret.runbook_token[0].id
  role      = "roles/secretmanager.secretAccessor"
  member    = google_service_account.step.member
}

resource "google_secret_manager_secret_iam_member" "config_secret" {
  for_each = var.config_secrets

  secret_id = google_secret_manager_secret.config_secret[each.key].id
  role      = "roles/secretmanager.secretAccessor"
  member    = google_service_account.step.member
}
