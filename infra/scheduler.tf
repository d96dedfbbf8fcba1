# The sweeper: POST {api}/sweep with an OIDC token of the sweeper account, whose
# e-mail and audience the api reads from TARSY_SWEEPER_INVOKER/_AUDIENCE.
resource "google_cloud_scheduler_job" "sweeper" {
  name             = "${var.name_prefix}-sweeper"
  region           = var.region
  description      = "Fail expired leases and stuck sessions"
  schedule         = var.sweep_schedule
  time_zone        = "Etc/UTC"
  attempt_deadline = "${var.api_function.timeout_seconds}s"

  retry_config {
    # The next run sweeps again; no need to pile up retries.
    retry_count = 0
  }

  http_target {
    http_method = "POST"
    uri         = "${local.api_url}/sweep"
    headers = {
      "Content-Type" = "application/json"
    }
    body = base64encode("{}")

    oidc_token {
      service_account_email = google_service_account.sweeper.email
      audience              = local.api_url
    }
  }

  depends_on = [google_cloudfunctions2_function.api, google_project_service.enabled]
}

# Retention: POST {api}/retention stamps expire_at on finished sessions and all their
# records (shared/tarsy/persistence/retention.py). Its own job, so that the sweeper,
# which recovers steps, never waits on it. Same identity and audience as the sweeper.
resource "google_cloud_scheduler_job" "retention" {
  name             = "${var.name_prefix}-retention"
  region           = var.region
  description      = "Stamp the expiry of finished sessions and their records"
  schedule         = var.retention_schedule
  time_zone        = "Etc/UTC"
  attempt_deadline = "${var.api_function.timeout_seconds}s"

  retry_config {
    # The next run stamps what this one left due.
    retry_count = 0
  }

  http_target {
    http_method = "POST"
    uri         = "${local.api_url}/retention"
    headers = {
      "Content-Type" = "application/json"
    }
    body = base64encode("{}")

    oidc_token {
      service_account_email = google_service_account.sweeper.email
      audience              = local.api_url
    }
  }

  depends_on = [google_cloudfunctions2_function.api, google_project_service.enabled]
}
