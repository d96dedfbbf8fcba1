# ─── sources ──────────────────────────────────────────────────────────────────

resource "google_storage_bucket" "sources" {
  #checkov:skip=CKV_GCP_62:Holds only build inputs already in git; Cloud Audit Logs record access, a log bucket would add nothing.
  name                        = "${var.project_id}-${var.name_prefix}-sources"
  location                    = var.region
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  force_destroy               = true

  versioning {
    enabled = true
  }

  # Archives are named by their MD5 and kept (they are small); a deployed function
  # keeps pointing at its own. Only overwritten or deleted versions are purged.
  lifecycle_rule {
    condition {
      days_since_noncurrent_time = 7
    }
    action {
      type = "Delete"
    }
  }

  depends_on = [google_project_service.enabled]
}

# The archives built by scripts/package_functions.py; the MD5 in the name makes a
# changed archive a new object, which rebuilds the function.
resource "google_storage_bucket_object" "source" {
  for_each = local.packages

  bucket = google_storage_bucket.sources.name
  name   = "${each.key}-${filemd5(each.value)}.zip"
  source = each.value
}

# ─── functions ────────────────────────────────────────────────────────────────

resource "google_cloudfunctions2_function" "ingest" {
  #checkov:skip=CKV_GCP_124:Alert sources (Alertmanager, webhooks) call from anywhere; the app requires the API key on every request.
  name        = local.names.ingest
  location    = var.region
  description = "TARSy ingest: POST /alerts, /alerts/{alertmanager,grafana,pagerduty,sns} and /slack/events"

  build_config {
    runtime         = var.python_runtime
    entry_point     = "ingest"
    service_account = google_service_account.build.id
    source {
      storage_source {
        bucket = google_storage_bucket.sources.name
        object = google_storage_bucket_object.source["ingest"].name
      }
    }
  }

  service_config {
    service_account_email            = google_service_account.ingest.email
    available_memory                 = var.ingest_function.memory
    available_cpu                    = var.ingest_function.cpu
    timeout_seconds                  = var.ingest_function.timeout_seconds
    min_instance_count               = var.ingest_function.min_instances
    max_instance_count               = var.ingest_function.max_instances
    max_instance_request_concurrency = var.ingest_function.concurrency
    ingress_settings                 = "ALLOW_ALL"
    all_traffic_on_latest_revision   = true
    environment_variables            = { for k, v in local.function_env.ingest : k => v if v != null }

    dynamic "secret_environment_variables" {
      for_each = { for k, v in local.function_secret_env.ingest : k => v if v != null }
      content {
        key        = secret_environment_variables.key
        project_id = var.project_id
        secret     = secret_environment_variables.value
        version    = "latest"
      }
    }
  }

  depends_on = [
    google_secret_manager_secret_iam_member.api_key,
    google_secret_manager_secret_iam_member.pagerduty_signing_secret,
    google_secret_manager_secret_iam_member.slack_signing_secret,
    google_secret_manager_secret_iam_member.slack_bot_token,
    google_project_iam_member.build,
  ]
}

resource "google_cloudfunctions2_function" "step" {
  name        = local.names.step
  location    = var.region
  description = "TARSy step: one step of an investigation, pushed by Pub/Sub"

  build_config {
    runtime         = var.python_runtime
    entry_point     = "step"
    service_account = google_service_account.build.id
    source {
      storage_source {
        bucket = google_storage_bucket.sources.name
        object = google_storage_bucket_object.source["step"].name
      }
    }
  }

  service_config {
    service_account_email            = google_service_account.step.email
    available_memory                 = var.step_function.memory
    available_cpu                    = var.step_function.cpu
    timeout_seconds                  = var.step_function.timeout_seconds
    min_instance_count               = var.step_function.min_instances
    max_instance_count               = var.step_function.max_instances
    max_instance_request_concurrency = var.step_function.concurrency
    # Pub/Sub push from this project counts as internal traffic.
    ingress_settings               = "ALLOW_INTERNAL_ONLY"
    all_traffic_on_latest_revision = true
    environment_variables          = { for k, v in merge(local.function_env.step, local.config_env) : k => v if v != null }

    dynamic "secret_environment_variables" {
      for_each = { for k, v in merge(local.function_secret_env.step, local.config_secret_env) : k => v if v != null }
      content {
        key        = secret_environment_variables.key
        project_id = var.project_id
        secret     = secret_environment_variables.value
        version    = "latest"
      }
    }
  }

  depends_on = [
    google_secret_manager_secret_iam_member.gemini_api_key,
    google_secret_manager_secret_iam_member.config_secret,
    google_secret_manager_secret_iam_member.slack_bot_token,
    google_secret_manager_secret_iam_member.pagerduty_api_key,
    google_secret_manager_secret_iam_member.runbook_token,
    google_project_iam_member.build,
  ]
}

resource "google_cloudfunctions2_function" "api" {
  name        = local.names.api
  location    = var.region
  description = "TARSy api: sessions, cancel, resume, chat, sweep"

  build_config {
    runtime         = var.python_runtime
    entry_point     = "api"
    service_account = google_service_account.build.id
    source {
      storage_source {
        bucket = google_storage_bucket.sources.name
        object = google_storage_bucket_object.source["api"].name
      }
    }
  }

  service_config {
    service_account_email            = google_service_account.api.email
    available_memory                 = var.api_function.memory
    available_cpu                    = var.api_function.cpu
    timeout_seconds                  = var.api_function.timeout_seconds
    min_instance_count               = var.api_function.min_instances
    max_instance_count               = var.api_function.max_instances
    max_instance_request_concurrency = var.api_function.concurrency
    ingress_settings                 = "ALLOW_INTERNAL_AND_GCLB"
    all_traffic_on_latest_revision   = true
    environment_variables            = { for k, v in local.function_env.api : k => v if v != null }

    dynamic "secret_environment_variables" {
      for_each = { for k, v in local.function_secret_env.api : k => v if v != null }
      content {
        key        = secret_environment_variables.key
        project_id = var.project_id
        secret     = secret_environment_variables.value
        version    = "latest"
      }
    }
  }

  depends_on = [
    google_secret_manager_secret_iam_member.slack_bot_token,
    google_secret_manager_secret_iam_member.pagerduty_api_key,
    google_project_iam_member.build,
  ]
}

# Fails the execution and session of a step message that exhausted its deliveries.
# Step code and environment; no secrets (it only writes Firestore).
resource "google_cloudfunctions2_function" "dead_letter" {
  name        = local.names.dead_letter
  location    = var.region
  description = "TARSy dead letters: fail what Pub/Sub gave up delivering"

  build_config {
    runtime         = var.python_runtime
    entry_point     = "dead_letter"
    service_account = google_service_account.build.id
    source {
      storage_source {
        bucket = google_storage_bucket.sources.name
        object = google_storage_bucket_object.source["step"].name
      }
    }
  }

  service_config {
    service_account_email            = google_service_account.dead_letter.email
    available_memory                 = var.dead_letter_function.memory
    available_cpu                    = var.dead_letter_function.cpu
    timeout_seconds                  = var.dead_letter_function.timeout_seconds
    min_instance_count               = var.dead_letter_function.min_instances
    max_instance_count               = var.dead_letter_function.max_instances
    max_instance_request_concurrency = var.dead_letter_function.concurrency
    ingress_settings                 = "ALLOW_INTERNAL_ONLY"
    all_traffic_on_latest_revision   = true
    environment_variables            = { for k, v in local.function_env.step : k => v if v != null }
  }

  depends_on = [
    google_secret_manager_secret_iam_member.slack_bot_token,
    google_secret_manager_secret_iam_member.pagerduty_api_key,
    google_project_iam_member.build,
  ]
}

# ─── who may invoke ───────────────────────────────────────────────────────────

# ingest alone is public at the network level: alert senders call from anywhere, and
# every request must carry its source's secret (the API key, PagerDuty's signature,
# SNS's signature, Grafana's credentials), checked by the app.
resource "google_cloud_run_v2_service_iam_member" "public_ingest" {
  location = var.region
  name     = google_cloudfunctions2_function.ingest.service_config[0].service
  role     = "roles/run.invoker"
  member   = "allUsers"
}

# The api is not public: people reach it through the load balancer, whose
# Identity-Aware Proxy invokes it as its service agent (iap.tf), and Cloud Scheduler
# calls /sweep with the sweeper's OIDC token.
resource "google_cloud_run_v2_service_iam_member" "iap_invokes_api" {
  location = var.region
  name     = google_cloudfunctions2_function.api.service_config[0].service
  role     = "roles/run.invoker"
  member   = google_project_service_identity.iap.member
}

resource "google_cloud_run_v2_service_iam_member" "sweeper_invokes_api" {
  location = var.region
  name     = google_cloudfunctions2_function.api.service_config[0].service
  role     = "roles/run.invoker"
  member   = google_service_account.sweeper.member
}

resource "google_cloud_run_v2_service_iam_member" "push_invokes_step" {
  location = var.region
  name     = google_cloudfunctions2_function.step.service_config[0].service
  role     = "roles/run.invoker"
  member   = google_service_account.pubsub_push.member
}

resource "google_cloud_run_v2_service_iam_member" "push_invokes_dead_letter" {
  location = var.region
  name     = google_cloudfunctions2_function.dead_letter.service_config[0].service
  role     = "roles/run.invoker"
  member   = google_service_account.pubsub_push.member
}
