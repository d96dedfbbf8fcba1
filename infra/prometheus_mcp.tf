# The built-in "prometheus" MCP server: prometheus-mcp-server (the version that
# tools/prometheus-mcp/requirements.txt locks; docs/metrics.md says why this one), read-only,
# as a private Cloud Run service that only the step function may invoke. The step function
# finds it through MCP_PROMETHEUS_URL (named by the built-in configuration) and calls it over
# streamable HTTP with an ID token minted from its own identity, as it calls the kubernetes
# server. Off unless var.metrics is set.
#
# What it reads (var.metrics):
#   managed_project  Google Cloud Managed Service for Prometheus, through its Prometheus-
#                    compatible API (monitoring.googleapis.com/v1/projects/P/location/global/
#                    prometheus). A sidecar, Google's GMP frontend, answers PromQL on
#                    localhost:9090 and signs each query with the service's own identity,
#                    which holds roles/monitoring.viewer on that project and nothing else.
#   url              A team's own Prometheus (or Thanos, Mimir, VictoriaMetrics: anything that
#                    serves /api/v1/query). With auth "bearer" or "basic", the token or the
#                    password is read from the Secret Manager secret <name_prefix>-prometheus-
#                    credential (you add its version), mounted as an environment variable.

locals {
  metrics_enabled     = var.metrics != null
  metrics_managed     = local.metrics_enabled && try(var.metrics.managed_project, null) != null
  metrics_secret      = local.metrics_enabled && contains(["bearer", "basic"], try(var.metrics.auth, "none"))
  prometheus_mcp_port = 8080
  gmp_frontend_port   = 9090
  prometheus_mcp_env = local.metrics_enabled ? merge(
    {
      PROMETHEUS_URL                  = local.metrics_managed ? "http://localhost:${local.gmp_frontend_port}" : var.metrics.url
      PROMETHEUS_MCP_SERVER_TRANSPORT = "http"
      PROMETHEUS_MCP_BIND_HOST        = "0.0.0.0"
      PROMETHEUS_MCP_BIND_PORT        = tostring(local.prometheus_mcp_port)
      PROMETHEUS_MCP_STATELESS_HTTP   = "true"
      # The links name a URL the model cannot open.
      PROMETHEUS_DISABLE_LINKS = "true"
      # No banner, and no check of PyPI for a newer FastMCP at every start.
      FASTMCP_CHECK_FOR_UPDATES  = "off"
      FASTMCP_SHOW_SERVER_BANNER = "false"
    },
    try(var.metrics.auth, "none") == "basic" ? { PROMETHEUS_USERNAME = var.metrics.username } : {},
    try(var.metrics.org_id, null) != null ? { ORG_ID = var.metrics.org_id } : {},
  ) : {}
  # The Secret Manager secret that fills PROMETHEUS_TOKEN or PROMETHEUS_PASSWORD.
  prometheus_mcp_secret_env = local.metrics_secret ? (
    var.metrics.auth == "bearer" ? "PROMETHEUS_TOKEN" : "PROMETHEUS_PASSWORD"
  ) : null
}

resource "google_service_account" "prometheus_mcp" {
  count        = local.metrics_enabled ? 1 : 0
  account_id   = "${var.name_prefix}-prom-mcp"
  display_name = "TARSy prometheus-mcp-server (Cloud Run)"
  depends_on   = [google_project_service.enabled]
}

# Cloud Run pulls from Artifact Registry: the upstream registries are proxied by remote
# repositories, and the images keep their digests.
resource "google_artifact_registry_repository" "prometheus_mcp" {
  #checkov:skip=CKV_GCP_84:A pull-through cache of public images pinned by digest; Google-managed encryption, as everywhere in this deployment.
  count         = local.metrics_enabled ? 1 : 0
  location      = var.region
  repository_id = "${var.name_prefix}-prometheus-mcp"
  description   = "Pull-through cache of ${var.prometheus_mcp_registry} for the prometheus-mcp-server image"
  format        = "DOCKER"
  mode          = "REMOTE_REPOSITORY"

  remote_repository_config {
    description = "prometheus-mcp-server's published images"
    docker_repository {
      custom_repository {
        uri = var.prometheus_mcp_registry
      }
    }
  }

  depends_on = [google_project_service.enabled]
}

resource "google_artifact_registry_repository" "gmp_frontend" {
  #checkov:skip=CKV_GCP_84:A pull-through cache of a public image pinned by digest; Google-managed encryption, as everywhere in this deployment.
  count         = local.metrics_managed ? 1 : 0
  location      = var.region
  repository_id = "${var.name_prefix}-gmp-frontend"
  description   = "Pull-through cache of ${var.gmp_frontend_registry} for the Managed Service for Prometheus frontend"
  format        = "DOCKER"
  mode          = "REMOTE_REPOSITORY"

  remote_repository_config {
    description = "Managed Service for Prometheus images"
    docker_repository {
      custom_repository {
        uri = var.gmp_frontend_registry
      }
    }
  }

  depends_on = [google_project_service.enabled]
}

# Managed Service for Prometheus: the service's identity reads metrics, nothing else.
resource "google_project_iam_member" "prometheus_mcp_monitoring_viewer" {
  count   = local.metrics_managed ? 1 : 0
  project = var.metrics.managed_project
  role    = "roles/monitoring.viewer"
  member  = google_service_account.prometheus_mcp[0].member
}

# A team's own Prometheus: its bearer token or basic-auth password. Add the version:
#   printf %s "$TOKEN" | gcloud secrets versions add <name_prefix>-prometheus-credential --data-file=-
resource "google_secret_manager_secret" "prometheus_credential" {
  count     = local.metrics_secret ? 1 : 0
  secret_id = "${var.name_prefix}-prometheus-credential"
  replication {
    auto {}
  }
  depends_on = [google_project_service.enabled]
}

resource "google_secret_manager_secret_iam_member" "prometheus_credential" {
  count     = local.metrics_secret ? 1 : 0
  secret_id = google_secret_manager_secret.prometheus_credential[0].id
  role      = "roles/secretmanager.secretAccessor"
  member    = google_service_account.prometheus_mcp[0].member
}

resource "google_cloud_run_v2_service" "prometheus_mcp" {
  count               = local.metrics_enabled ? 1 : 0
  name                = local.names.prometheus_mcp
  location            = var.region
  description         = "TARSy's prometheus MCP server (prometheus-mcp-server, read-only PromQL)"
  deletion_protection = false
  # The step function reaches it over the internet path (it has no VPC egress), so ingress
  # stays open and access is IAM's: no allUsers, the step account is the only invoker.
  ingress = "INGRESS_TRAFFIC_ALL"

  template {
    service_account                  = google_service_account.prometheus_mcp[0].email
    max_instance_request_concurrency = var.prometheus_mcp_service.concurrency
    timeout                          = "${var.prometheus_mcp_service.timeout_seconds}s"

    scaling {
      min_instance_count = var.prometheus_mcp_service.min_instances
      max_instance_count = var.prometheus_mcp_service.max_instances
    }

    dynamic "vpc_access" {
      for_each = try(var.metrics.network, null) == null ? [] : [var.metrics.network]
      content {
        # Only a private Prometheus' addresses go through the VPC.
        egress = "PRIVATE_RANGES_ONLY"
        network_interfaces {
          network    = vpc_access.value.network
          subnetwork = vpc_access.value.subnetwork
        }
      }
    }

    containers {
      name       = "prometheus-mcp-server"
      image      = "${var.region}-docker.pkg.dev/${var.project_id}/${google_artifact_registry_repository.prometheus_mcp[0].repository_id}/${var.prometheus_mcp_image}"
      depends_on = local.metrics_managed ? ["gmp-frontend"] : []

      ports {
        container_port = local.prometheus_mcp_port
      }

      dynamic "env" {
        for_each = local.prometheus_mcp_env
        content {
          name  = env.key
          value = env.value
        }
      }

      dynamic "env" {
        for_each = local.metrics_secret ? [local.prometheus_mcp_secret_env] : []
        content {
          name = env.value
          value_source {
            secret_key_ref {
              secret  = google_secret_manager_secret.prometheus_credential[0].secret_id
              version = "latest"
            }
          }
        }
      }

      resources {
        limits = {
          cpu    = var.prometheus_mcp_service.cpu
          memory = var.prometheus_mcp_service.memory
        }
      }

      startup_probe {
        tcp_socket {
          port = local.prometheus_mcp_port
        }
      }
    }

    # Managed Service for Prometheus: PromQL on localhost, each query signed with the
    # service's identity (roles/monitoring.viewer on var.metrics.managed_project).
    dynamic "containers" {
      for_each = local.metrics_managed ? [1] : []
      content {
        name  = "gmp-frontend"
        image = "${var.region}-docker.pkg.dev/${var.project_id}/${google_artifact_registry_repository.gmp_frontend[0].repository_id}/${var.gmp_frontend_image}"
        args = [
          "--web.listen-address=:${local.gmp_frontend_port}",
          "--query.project-id=${var.metrics.managed_project}",
        ]

        resources {
          limits = {
            cpu    = "1"
            memory = "256Mi"
          }
        }

        startup_probe {
          http_get {
            path = "/-/ready"
            port = local.gmp_frontend_port
          }
        }
      }
    }
  }

  lifecycle {
    precondition {
      condition     = var.prometheus_mcp_image != null && (!local.metrics_managed || var.gmp_frontend_image != null)
      error_message = "metrics is set: give prometheus_mcp_image (and gmp_frontend_image for managed_project), pinned by digest."
    }
  }

  depends_on = [
    google_project_iam_member.prometheus_mcp_monitoring_viewer,
    google_secret_manager_secret_iam_member.prometheus_credential,
  ]
}

# The step function, and no one else, may call it.
resource "google_cloud_run_v2_service_iam_member" "step_invokes_prometheus_mcp" {
  count    = local.metrics_enabled ? 1 : 0
  location = var.region
  name     = google_cloud_run_v2_service.prometheus_mcp[0].name
  role     = "roles/run.invoker"
  member   = google_service_account.step.member
}
