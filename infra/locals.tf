locals {
  names = {
    ingest         = "${var.name_prefix}-ingest"
    step           = "${var.name_prefix}-step"
    api            = "${var.name_prefix}-api"
    dead_letter    = "${var.name_prefix}-dead-letter"
    kubernetes_mcp = "${var.name_prefix}-kubernetes-mcp"
    prometheus_mcp = "${var.name_prefix}-prometheus-mcp"
  }

  # Known before the function exists, so the api can name its own URL (sweeper
  # audience) without a dependency cycle. 2nd gen functions answer on it too.
  api_url = "https://${var.region}-${var.project_id}.cloudfunctions.net/${local.names.api}"
  # Where people open a session (status_url in ingest replies, links in Slack): the
  # load balancer in front of the api, behind Identity-Aware Proxy (iap.tf).
  public_api_url = var.public_api_url != "" ? var.public_api_url : "https://${local.api_domain}"

  packages = {
    for name in ["ingest", "step", "api"] :
    name => abspath(startswith(var.package_dir, "/") ? "${var.package_dir}/${name}.zip" : "${path.module}/${var.package_dir}/${name}.zip")
  }

  # Plain environment per function as the code sees it: keys are the first
  # environment name of a field of tarsy.settings.Settings, and a function gets
  # only the fields whose json_schema_extra lists it (tests/infra checks both).
  # null leaves the variable unset, so the Settings default applies. The
  # dead-letter function runs the step code and uses the step environment.
  function_env = {
    ingest = {
      GOOGLE_CLOUD_PROJECT        = var.project_id
      TARSY_FIRESTORE_DATABASE    = google_firestore_database.main.name
      TARSY_STEPS_TOPIC           = google_pubsub_topic.steps.name
      TARSY_STEP_DUE_SECONDS      = tostring(local.step_due_seconds)
      TARSY_PUBLIC_API_URL        = local.public_api_url
      TARSY_MAX_ALERT_BYTES       = tostring(var.max_alert_bytes)
      TARSY_CONFIG_PATH           = var.config_packaged ? "/workspace/tarsy.yaml" : null
      TARSY_TELEMETRY_CLOUD       = var.telemetry ? "true" : null
      OTEL_EXPORTER_OTLP_ENDPOINT = var.otlp_endpoint
      TARSY_TRACE_SAMPLE_RATIO    = tostring(var.trace_sample_ratio)
      TARSY_LOG_FORMAT            = "json"
      TARSY_LOG_LEVEL             = var.log_level

      # Slack thread questions (/slack/events): the bot token, and the roles of the askers.
      TARSY_SLACK_TOKEN_SECRET        = var.slack_thread_questions ? one(google_secret_manager_secret.slack_bot_token[*].secret_id) : null
      TARSY_SLACK_SIGNING_SECRET_NAME = one(google_secret_manager_secret.slack_signing_secret[*].secret_id)
      TARSY_ACCESS_GRANTS             = var.slack_thread_questions ? jsonencode(var.access) : null
    }
    step = {
      GOOGLE_CLOUD_PROJECT        = var.project_id
      TARSY_FIRESTORE_DATABASE    = google_firestore_database.main.name
      TARSY_STEPS_TOPIC           = google_pubsub_topic.steps.name
      TARSY_STEP_DUE_SECONDS      = tostring(local.step_due_seconds)
      TARSY_CONFIG_PATH           = var.config_packaged ? "/workspace/tarsy.yaml" : null
      TARSY_DEFAULT_MODEL         = var.default_model
      TARSY_VERTEX_PROJECT        = var.vertex_project
      TARSY_VERTEX_LOCATION       = var.vertex_location
      GEMINI_BASE_URL             = var.gemini_base_url
      TARSY_STEP_LEASE_SECONDS    = tostring(local.step_lease_seconds)
      TARSY_STEP_TIMEOUT_SECONDS  = tostring(var.step_function.timeout_seconds)
      TARSY_TELEMETRY_CLOUD       = var.telemetry ? "true" : null
      OTEL_EXPORTER_OTLP_ENDPOINT = var.otlp_endpoint
      TARSY_TRACE_SAMPLE_RATIO    = tostring(var.trace_sample_ratio)
      TARSY_PUBLIC_API_URL        = local.public_api_url
      TARSY_SLACK_CHANNEL         = var.slack_channel != "" ? var.slack_channel : null
      TARSY_SLACK_TOKEN_SECRET    = one(google_secret_manager_secret.slack_bot_token[*].secret_id)
      TARSY_LOG_FORMAT            = "json"
      TARSY_LOG_LEVEL             = var.log_level
      TARSY_METRIC_LOGS           = "true"

      # Runbook URLs, fetched by the step that starts a session.
      TARSY_ALLOWED_RUNBOOK_DOMAINS = join(",", var.runbook_domains)
      TARSY_RUNBOOK_MAX_BYTES       = tostring(var.runbook_max_bytes)
      TARSY_RUNBOOK_TOKEN_SECRET    = one(google_secret_manager_secret.runbook_token[*].secret_id)
      TARSY_MEMORY_RECALL           = tostring(var.memory_recall)

      # PagerDuty incident notes (alert_sources.pagerduty.incident_notes).
      TARSY_PAGERDUTY_TOKEN_SECRET = one(google_secret_manager_secret.pagerduty_api_key[*].secret_id)
      TARSY_PAGERDUTY_FROM_EMAIL   = var.pagerduty_from_email != "" ? var.pagerduty_from_email : null
    }
    api = {
      GOOGLE_CLOUD_PROJECT        = var.project_id
      TARSY_FIRESTORE_DATABASE    = google_firestore_database.main.name
      TARSY_STEPS_TOPIC           = google_pubsub_topic.steps.name
      TARSY_STEP_DUE_SECONDS      = tostring(local.step_due_seconds)
      TARSY_CONFIG_PATH           = var.config_packaged ? "/workspace/tarsy.yaml" : null
      TARSY_STEP_LEASE_SECONDS    = tostring(local.step_lease_seconds)
      TARSY_SWEEPER_INVOKER       = google_service_account.sweeper.email
      TARSY_SWEEPER_AUDIENCE      = local.api_url
      TARSY_TELEMETRY_CLOUD       = var.telemetry ? "true" : null
      OTEL_EXPORTER_OTLP_ENDPOINT = var.otlp_endpoint
      TARSY_TRACE_SAMPLE_RATIO    = tostring(var.trace_sample_ratio)
      TARSY_PUBLIC_API_URL        = local.public_api_url
      TARSY_SLACK_CHANNEL         = var.slack_channel != "" ? var.slack_channel : null
      TARSY_SLACK_TOKEN_SECRET    = one(google_secret_manager_secret.slack_bot_token[*].secret_id)
      TARSY_LOG_FORMAT            = "json"
      TARSY_LOG_LEVEL             = var.log_level
      TARSY_METRIC_LOGS           = "true"
      TARSY_RETENTION_DAYS        = tostring(var.retention_days)

      # People: Identity-Aware Proxy's signed header, its audience, and the roles (iap.tf).
      TARSY_IAP_AUDIENCE  = local.iap_audience
      TARSY_ACCESS_GRANTS = jsonencode(var.access)

      # PagerDuty incident notes: a cancel or a sweep may end a session too.
      TARSY_PAGERDUTY_TOKEN_SECRET = one(google_secret_manager_secret.pagerduty_api_key[*].secret_id)
      TARSY_PAGERDUTY_FROM_EMAIL   = var.pagerduty_from_email != "" ? var.pagerduty_from_email : null
    }
  }

  # Settings fields served from Secret Manager: env name => secret id. null: not set.
  function_secret_env = {
    ingest = {
      TARSY_API_KEY                  = google_secret_manager_secret.api_key.secret_id
      TARSY_PAGERDUTY_SIGNING_SECRET = one(google_secret_manager_secret.pagerduty_signing_secret[*].secret_id)
    }
    api  = {}
    step = { GEMINI_API_KEY = one(google_secret_manager_secret.gemini_api_key[*].secret_id) }
  }

  # Not settings: plain values the configuration names ({env: MCP_...}), for the step
  # function. The built-in "kubernetes" server is the Cloud Run service's /mcp endpoint,
  # and so is "prometheus" when var.metrics is set (prometheus_mcp.tf).
  config_env = merge(
    { MCP_KUBERNETES_URL = "${google_cloud_run_v2_service.kubernetes_mcp.uri}/mcp" },
    { for service in google_cloud_run_v2_service.prometheus_mcp : "MCP_PROMETHEUS_URL" => "${service.uri}/mcp" },
  )

  # Not settings: variables that the user's configuration names ({env: MCP_...}, {env: LLM_...}).
  config_secret_env = {
    for name, secret in var.config_secrets :
    name => google_secret_manager_secret.config_secret[name].secret_id
  }

  # A running step renews its lease every third of it (Settings.step_lease_seconds):
  # a short lease means a step whose process died is re-run within about a minute.
  step_lease_seconds = 45
  # How soon a published step must have been claimed before the sweeper re-publishes it.
  # With a sweep every minute, a lost step is re-run within 45 + 60 s: under two minutes.
  step_due_seconds = 45
}
