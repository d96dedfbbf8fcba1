# ─── project and names ────────────────────────────────────────────────────────

variable "project_id" {
  description = "Google Cloud project that holds everything."
  type        = string
}

variable "region" {
  description = "Region of the functions, Pub/Sub push endpoints, the source bucket and the scheduler job."
  type        = string
  default     = "us-central1"
}

variable "name_prefix" {
  description = "Prefix of function, service account, secret, bucket and job names."
  type        = string
  default     = "tarsy"

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{1,14}$", var.name_prefix))
    error_message = "name_prefix: 2-15 lowercase letters, digits or hyphens, starting with a letter (service account ids are at most 30 characters)."
  }
}

variable "steps_topic" {
  description = "Pub/Sub topic that carries step messages (TARSY_STEPS_TOPIC)."
  type        = string
  default     = "tarsy-steps"
}

# ─── Firestore ────────────────────────────────────────────────────────────────

variable "firestore_database" {
  description = "Firestore database id (TARSY_FIRESTORE_DATABASE). \"(default)\" is the project's default database."
  type        = string
  default     = "(default)"
}

variable "firestore_location" {
  description = "Firestore location: a multi-region such as nam5 or eur3, or a region."
  type        = string
  default     = "nam5"
}

variable "firestore_delete_protection" {
  description = "Refuse to delete the Firestore database (terraform destroy leaves it in place)."
  type        = bool
  default     = true
}

# ─── functions ────────────────────────────────────────────────────────────────

variable "python_runtime" {
  description = "Cloud Functions runtime of every function."
  type        = string
  default     = "python312"
}

variable "package_dir" {
  description = "Where scripts/package_functions.py wrote <function>.zip (relative to infra/ or absolute)."
  type        = string
  default     = "../build/functions"
}

variable "ingest_function" {
  description = "Size of the ingest function (HTTP, public, API key)."
  type = object({
    memory          = string
    cpu             = string
    timeout_seconds = number
    min_instances   = number
    max_instances   = number
    concurrency     = number
  })
  default = {
    memory          = "512Mi"
    cpu             = "1"
    timeout_seconds = 60
    min_instances   = 0
    max_instances   = 20
    concurrency     = 40
  }
}

variable "step_function" {
  description = "Size of the step function (Pub/Sub push). timeout_seconds bounds one step, LLM call included."
  type = object({
    memory          = string
    cpu             = string
    timeout_seconds = number
    min_instances   = number
    max_instances   = number
    concurrency     = number
  })
  default = {
    memory          = "1Gi"
    cpu             = "1"
    timeout_seconds = 540
    min_instances   = 0
    max_instances   = 25
    concurrency     = 4
  }

  validation {
    # The push subscription's ack deadline (at most 600 s) must outlast a step.
    condition     = var.step_function.timeout_seconds >= 60 && var.step_function.timeout_seconds <= 540
    error_message = "step_function.timeout_seconds must be between 60 and 540 (Pub/Sub push ack deadline is at most 600 s)."
  }
}

variable "api_function" {
  description = "Size of the api function (HTTP, public, API key; the sweeper calls it with an OIDC token)."
  type = object({
    memory          = string
    cpu             = string
    timeout_seconds = number
    min_instances   = number
    max_instances   = number
    concurrency     = number
  })
  default = {
    memory          = "512Mi"
    cpu             = "1"
    timeout_seconds = 120
    min_instances   = 0
    max_instances   = 10
    concurrency     = 40
  }
}

variable "dead_letter_function" {
  description = "Size of the dead-letter function (step archive, entry point dead_letter)."
  type = object({
    memory          = string
    cpu             = string
    timeout_seconds = number
    min_instances   = number
    max_instances   = number
    concurrency     = number
  })
  default = {
    memory          = "512Mi"
    cpu             = "1"
    timeout_seconds = 120
    min_instances   = 0
    max_instances   = 5
    concurrency     = 4
  }
}

# ─── settings the functions read (see shared/tarsy/settings.py) ───────────────

variable "public_api_url" {
  description = "Base URL people use for the api (TARSY_PUBLIC_API_URL, status_url in ingest replies, Slack links). Empty: https://<api_domain>, the load balancer behind IAP."
  type        = string
  default     = ""
}

variable "max_alert_bytes" {
  description = "Largest accepted ingest body in bytes (TARSY_MAX_ALERT_BYTES)."
  type        = number
  default     = 1048576
}

variable "config_packaged" {
  description = "The zips were built with --config FILE: point TARSY_CONFIG_PATH at the packed tarsy.yaml."
  type        = bool
  default     = false
}

variable "default_model" {
  description = "Model of the built-in default LLM provider (TARSY_DEFAULT_MODEL)."
  type        = string
  default     = "gemini-2.5-flash"
}

variable "use_vertex_ai" {
  description = "true: Gemini through Vertex AI with the step service account. false: Gemini API key from Secret Manager (GEMINI_API_KEY)."
  type        = bool
  default     = true
}

variable "pagerduty_webhooks" {
  description = "true: POST /alerts/pagerduty checks X-PagerDuty-Signature with the signing secret kept in the secret <name_prefix>-pagerduty-signing-secret (TARSY_PAGERDUTY_SIGNING_SECRET) instead of the API key."
  type        = bool
  default     = false
}

variable "vertex_project" {
  description = "Vertex AI project when it is not project_id (TARSY_VERTEX_PROJECT)."
  type        = string
  default     = null
}

variable "vertex_location" {
  description = "Vertex AI location (TARSY_VERTEX_LOCATION)."
  type        = string
  default     = "us-central1"
}

variable "gemini_base_url" {
  description = "Gemini endpoint override, e.g. a proxy (GEMINI_BASE_URL). null: the public endpoint."
  type        = string
  default     = null
}

variable "log_level" {
  description = "Root log level of every function (TARSY_LOG_LEVEL)."
  type        = string
  default     = "INFO"
}

# ─── notifications and telemetry ──────────────────────────────────────────────

variable "runbook_domains" {
  description = "Hosts a runbook URL may name, exact host names (TARSY_ALLOWED_RUNBOOK_DOMAINS); a runbook elsewhere is not fetched."
  type        = list(string)
  default     = ["github.com", "raw.githubusercontent.com"]
}

variable "runbook_max_bytes" {
  description = "Largest runbook fetched, in bytes, at most 524288 (TARSY_RUNBOOK_MAX_BYTES); a larger one is not used."
  type        = number
  default     = 262144
  validation {
    condition     = var.runbook_max_bytes > 0 && var.runbook_max_bytes <= 524288
    error_message = "runbook_max_bytes must be between 1 and 524288 (the session document holds the runbook)."
  }
}

variable "runbook_token" {
  description = "true: the step function sends the token kept in the secret <name_prefix>-runbook-token (TARSY_RUNBOOK_TOKEN_SECRET) with runbook fetches, to the allowed hosts only (a GitHub token for private repositories)."
  type        = bool
  default     = false
}

variable "slack_notifications" {
  description = "true: the step, dead-letter and api functions post to Slack when a session ends, with the bot token kept in the secret <name_prefix>-slack-bot-token (TARSY_SLACK_TOKEN_SECRET)."
  type        = bool
  default     = false
}

variable "slack_channel" {
  description = "Default Slack channel id of session notifications (TARSY_SLACK_CHANNEL); a chain may name its own (slack_channel). Empty: only such chains notify."
  type        = string
  default     = ""
}

variable "slack_thread_questions" {
  description = "true: the ingest function serves Slack's Events API at /slack/events (the Slack app's Request URL): questions asked in a session's Slack thread are answered there, by people the access grants make responders. Verified with the app's signing secret kept in the secret <name_prefix>-slack-signing-secret (TARSY_SLACK_SIGNING_SECRET_NAME); needs slack_notifications."
  type        = bool
  default     = false
}

variable "pagerduty_notes" {
  description = "true: the step, dead-letter and api functions may add a note to a PagerDuty incident when its session completes, with the REST API key kept in the secret <name_prefix>-pagerduty-api-key (TARSY_PAGERDUTY_TOKEN_SECRET). The configuration opts in per source (alert_sources.pagerduty.incident_notes); needs pagerduty_from_email."
  type        = bool
  default     = false
}

variable "pagerduty_from_email" {
  description = "E-mail of the PagerDuty user the notes are written as (TARSY_PAGERDUTY_FROM_EMAIL, the From header an account-level API key needs). Empty: no notes."
  type        = string
  default     = ""
}

variable "memory_recall" {
  description = "How many earlier sessions of the same alert an investigation is told of as history to verify (TARSY_MEMORY_RECALL); 0 turns memory off."
  type        = number
  default     = 3

  validation {
    condition     = var.memory_recall >= 0 && var.memory_recall <= 10 && floor(var.memory_recall) == var.memory_recall
    error_message = "memory_recall must be a whole number from 0 to 10."
  }
}

variable "telemetry" {
  description = "true: every function exports traces to Cloud Trace and metrics to Cloud Monitoring (TARSY_TELEMETRY_CLOUD), with the roles to write them."
  type        = bool
  default     = false
}

variable "otlp_endpoint" {
  description = "OTLP/HTTP collector base URL for traces and metrics (OTEL_EXPORTER_OTLP_ENDPOINT). null: none."
  type        = string
  default     = null
}

variable "trace_sample_ratio" {
  description = "Share of sessions traced, decided at ingest and kept by every step (TARSY_TRACE_SAMPLE_RATIO)."
  type        = number
  default     = 1

  validation {
    condition     = var.trace_sample_ratio >= 0 && var.trace_sample_ratio <= 1
    error_message = "trace_sample_ratio is a share: between 0 and 1."
  }
}

# ─── secrets ──────────────────────────────────────────────────────────────────

variable "config_secrets" {
  description = <<-EOT
    Credentials the configuration names (MCP server tokens, LLM API keys: Gemini, OpenAI,
    Anthropic, xAI, a gateway's):
    environment variable name => Secret Manager secret id. Terraform creates each secret (add
    its value with `gcloud secrets versions add`) and exposes it to the step function under
    that name; the configuration refers to it as `{env: NAME}`. Names start with MCP_ or LLM_
    so they cannot shadow a TARSy setting.
  EOT
  type        = map(string)
  default     = {}

  validation {
    condition = alltrue([
      for name, secret in var.config_secrets :
      can(regex("^(MCP|LLM)_[A-Z0-9_]+$", name)) && can(regex("^[A-Za-z0-9_-]{1,255}$", secret))
    ])
    error_message = "config_secrets: keys must match ^(MCP|LLM)_[A-Z0-9_]+$ and values must be plain secret ids."
  }
}

# ─── Pub/Sub delivery ─────────────────────────────────────────────────────────

variable "max_delivery_attempts" {
  description = "Deliveries of a step message before it goes to the dead-letter topic (5-100)."
  type        = number
  default     = 10

  validation {
    condition     = var.max_delivery_attempts >= 5 && var.max_delivery_attempts <= 100
    error_message = "Pub/Sub accepts 5 to 100 delivery attempts."
  }
}

variable "retry_minimum_backoff" {
  description = "Shortest wait before a step message is redelivered."
  type        = string
  default     = "10s"
}

variable "retry_maximum_backoff" {
  description = "Longest wait before a step message is redelivered (at most 600s)."
  type        = string
  default     = "600s"
}

variable "message_retention" {
  description = "How long unacknowledged step messages are kept (topic and subscriptions)."
  type        = string
  default     = "86400s"
}

variable "dead_letter_retention" {
  description = "How long dead-lettered messages are kept."
  type        = string
  default     = "604800s"
}

# ─── sweeper ──────────────────────────────────────────────────────────────────

variable "sweep_schedule" {
  description = "Cron schedule of the sweeper job (POST {api}/sweep). Every minute: a lost or stalled step is picked up within its due time (45 s) plus a minute."
  type        = string
  default     = "* * * * *"
}

variable "retention_schedule" {
  description = "Cron schedule of the retention job (POST {api}/retention), which stamps expire_at on finished sessions, up to 20 a run; a job of its own so that the sweeper's cost does not grow with the sessions that have finished."
  type        = string
  default     = "*/5 * * * *"
}

# ─── retention and monitoring ─────────────────────────────────────────────────

variable "retention_days" {
  description = "Days a finished session and all its records are kept (TARSY_RETENTION_DAYS); Firestore TTL then deletes them, usually within a day."
  type        = number
  default     = 90

  validation {
    condition     = var.retention_days >= 1 && var.retention_days <= 36500 && floor(var.retention_days) == var.retention_days
    error_message = "retention_days must be a whole number of days between 1 and 36500."
  }
}

variable "notification_channels" {
  description = "Cloud Monitoring notification channel ids (projects/<p>/notificationChannels/<id>) every TARSy alert policy notifies. Empty: the policies open incidents in the console only."
  type        = list(string)
  default     = []
}

variable "alert_step_failure_ratio" {
  description = "Alert when more than this share of step messages end in an error over 10 minutes."
  type        = number
  default     = 0.1

  validation {
    condition     = var.alert_step_failure_ratio > 0 && var.alert_step_failure_ratio < 1
    error_message = "alert_step_failure_ratio is a share: between 0 and 1."
  }
}

variable "alert_model_error_ratio" {
  description = "Alert when more than this share of model calls fail (after their retries) over 10 minutes."
  type        = number
  default     = 0.2

  validation {
    condition     = var.alert_model_error_ratio > 0 && var.alert_model_error_ratio < 1
    error_message = "alert_model_error_ratio is a share: between 0 and 1."
  }
}

# ─── the kubernetes MCP server (kubernetes_mcp.tf, docs/deploy.md) ────────────

variable "kubernetes_mcp_image" {
  description = "kubernetes-mcp-server's image: its path on kubernetes_mcp_registry, pinned by digest. The default is the project's published v0.0.66 (quay.io/containers/kubernetes_mcp_server:v0.0.66)."
  type        = string
  default     = "containers/kubernetes_mcp_server@sha256:6d650f4bd6ac303ad82713c997e73a2d001602f9bf17392c9b9a0e30e29c6423"

  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9._/-]*@sha256:[0-9a-f]{64}$", var.kubernetes_mcp_image))
    error_message = "kubernetes_mcp_image: a repository path pinned by digest (path@sha256:<64 hex>), without the registry host."
  }
}

variable "kubernetes_mcp_registry" {
  description = "Registry that publishes kubernetes_mcp_image; an Artifact Registry remote repository proxies it for Cloud Run."
  type        = string
  default     = "https://quay.io"
}

variable "kubernetes_mcp_toolsets" {
  description = "kubernetes-mcp-server toolsets (--toolsets). \"core\" has every read-only tool the built-in agents use; \"config\" would add configuration_view, which prints the kubeconfig."
  type        = list(string)
  default     = ["core"]
}

variable "kubernetes_mcp_service" {
  description = "Size of the kubernetes-mcp-server Cloud Run service."
  type = object({
    memory          = string
    cpu             = string
    timeout_seconds = number
    min_instances   = number
    max_instances   = number
    concurrency     = number
  })
  default = {
    memory          = "512Mi"
    cpu             = "1"
    timeout_seconds = 300
    min_instances   = 0
    max_instances   = 5
    concurrency     = 40
  }
}

variable "kubernetes_mcp_network" {
  description = "Direct VPC egress for a private cluster: the VPC network and subnetwork (names or self links) the service sends private-range traffic through. null: no VPC."
  type = object({
    network    = string
    subnetwork = string
  })
  default = null
}

variable "gke_cluster" {
  description = "A GKE cluster to investigate with the service's own identity (roles/container.viewer on its project); Terraform writes the kubeconfig. private_endpoint: use the control plane's private address (with kubernetes_mcp_network). null: any cluster, through the kubeconfig you add to the <name_prefix>-kubeconfig secret."
  type = object({
    project          = string
    location         = string
    name             = string
    private_endpoint = optional(bool, false)
  })
  default = null
}

variable "gke_token_image" {
  description = "Image of the sidecar that keeps the GKE access token file fresh (needs sh, wget, sed and httpd: busybox), pinned by digest."
  type        = string
  default     = "docker.io/library/busybox@sha256:9db7b59979c38555a39def84a31fb98b5296952f9e3afd4f6f11f05b07adfab0"
}

variable "access" {
  description = <<-EOT
    Who may use the api and its pages, by role: viewer (read sessions), responder
    (also chat, cancel, resume, re-score), admin (everything). Members as IAM writes
    them: user:EMAIL, serviceAccount:EMAIL, domain:DOMAIN or group:EMAIL. Each passes
    Identity-Aware Proxy and holds the highest role listed for them (TARSY_ACCESS_GRANTS);
    a group's members are looked up in Cloud Identity by the api and ingest service
    accounts, which need the Groups Reader admin role (docs/deploy.md).
  EOT
  type = object({
    viewer    = optional(list(string), [])
    responder = optional(list(string), [])
    admin     = optional(list(string), [])
  })
  default = {}

  validation {
    condition = alltrue([
      for m in concat(var.access.viewer, var.access.responder, var.access.admin) :
      can(regex("^(user|serviceAccount|domain):[^\\s:]+$", m)) || can(regex("^group:[^\\s:@]+@[^\\s:@]+$", m))
    ])
    error_message = "Each member is user:EMAIL, serviceAccount:EMAIL, domain:DOMAIN or group:EMAIL (a group's membership is looked up in Cloud Identity: docs/deploy.md)."
  }
}

variable "api_domain" {
  description = "Domain people open the api's pages at (its A record: output api_address). Empty: <address>.sslip.io."
  type        = string
  default     = ""
}

variable "iap_oauth2_client_id" {
  description = "OAuth client of Identity-Aware Proxy. Empty: the Google-managed client (your organization's users only)."
  type        = string
  default     = ""
}

variable "iap_oauth2_client_secret" {
  description = "Secret of iap_oauth2_client_id."
  type        = string
  default     = ""
  sensitive   = true
}

# ─── the prometheus MCP server (prometheus_mcp.tf, docs/metrics.md) ───────────

variable "metrics" {
  description = "Where the built-in \"prometheus\" MCP server reads metrics. null: no metrics server (the metrics chain investigates with the cluster's tools only). managed_project: Google Cloud Managed Service for Prometheus of that project, read with the service's own identity (roles/monitoring.viewer). url: your own Prometheus-compatible endpoint; auth \"bearer\" or \"basic\" (with username) reads the token or password from the <name_prefix>-prometheus-credential secret; org_id sets the X-Scope-OrgID header (Mimir, Cortex); network routes private addresses through Direct VPC egress."
  type = object({
    managed_project = optional(string)
    url             = optional(string)
    auth            = optional(string, "none")
    username        = optional(string)
    org_id          = optional(string)
    network = optional(object({
      network    = string
      subnetwork = string
    }))
  })
  default = null

  validation {
    condition     = var.metrics == null || ((try(var.metrics.managed_project, null) == null) != (try(var.metrics.url, null) == null))
    error_message = "metrics: give exactly one of managed_project or url."
  }
  validation {
    condition     = var.metrics == null || contains(["none", "bearer", "basic"], try(var.metrics.auth, "none"))
    error_message = "metrics.auth: one of none, bearer, basic."
  }
  validation {
    condition     = var.metrics == null || try(var.metrics.auth, "none") != "basic" || try(var.metrics.username, null) != null
    error_message = "metrics.auth \"basic\" needs metrics.username (the password goes in the <name_prefix>-prometheus-credential secret)."
  }
  validation {
    condition     = var.metrics == null || try(var.metrics.url, null) == null || can(regex("^https?://", var.metrics.url))
    error_message = "metrics.url: an http(s) URL, e.g. https://prometheus.internal:9090."
  }
}

variable "prometheus_mcp_image" {
  description = "prometheus-mcp-server's image (the version tools/prometheus-mcp/requirements.txt locks: pab1it0/prometheus-mcp-server 1.6.2): its path on prometheus_mcp_registry, pinned by digest. Required when metrics is set."
  type        = string
  default     = null

  validation {
    condition     = var.prometheus_mcp_image == null || can(regex("^[a-z0-9][a-z0-9._/-]*@sha256:[0-9a-f]{64}$", var.prometheus_mcp_image))
    error_message = "prometheus_mcp_image: a repository path pinned by digest (path@sha256:<64 hex>), without the registry host."
  }
}

variable "prometheus_mcp_registry" {
  description = "Registry that publishes prometheus_mcp_image; an Artifact Registry remote repository proxies it for Cloud Run."
  type        = string
  default     = "https://ghcr.io"
}

variable "gmp_frontend_image" {
  description = "Managed Service for Prometheus' query frontend (prometheus-engine/frontend): its path on gmp_frontend_registry, pinned by digest. Required with metrics.managed_project."
  type        = string
  default     = null

  validation {
    condition     = var.gmp_frontend_image == null || can(regex("^[a-z0-9][a-z0-9._/-]*@sha256:[0-9a-f]{64}$", var.gmp_frontend_image))
    error_message = "gmp_frontend_image: a repository path pinned by digest (path@sha256:<64 hex>), without the registry host."
  }
}

variable "gmp_frontend_registry" {
  description = "Registry that publishes gmp_frontend_image; an Artifact Registry remote repository proxies it for Cloud Run."
  type        = string
  default     = "https://gke.gcr.io"
}

variable "prometheus_mcp_service" {
  description = "Size of the prometheus-mcp-server Cloud Run service."
  type = object({
    memory          = string
    cpu             = string
    timeout_seconds = number
    min_instances   = number
    max_instances   = number
    concurrency     = number
  })
  default = {
    memory          = "512Mi"
    cpu             = "1"
    timeout_seconds = 300
    min_instances   = 0
    max_instances   = 5
    concurrency     = 40
  }
}
