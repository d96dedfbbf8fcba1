# The built-in "kubernetes" MCP server: kubernetes-mcp-server's published image, read-only,
# as a private Cloud Run service that only the step function may invoke. The step function
# finds it through MCP_KUBERNETES_URL (named by the built-in configuration) and calls it
# over streamable HTTP with an ID token minted from its own identity.
#
# The cluster it reads: a kubeconfig kept in Secret Manager (any cluster; you add the
# version), or, with var.gke_cluster, a GKE cluster reached with the service's own
# identity: Terraform writes a kubeconfig holding no credential (endpoint, CA, a token
# file) and a sidecar keeps that file filled with the service account's access token.
# Private clusters are reached through Direct VPC egress (var.kubernetes_mcp_network).
# docs/deploy.md walks through both.

locals {
  kubernetes_mcp_gke = var.gke_cluster != null
  # The version var.kubernetes_mcp_image's default digest is; the local stack and the tests run
  # the same one (package.json pins kubernetes-mcp-server-linux-amd64 to it; tests/infra checks).
  kubernetes_mcp_version = "0.0.66"
  # Cloud Run pulls from Artifact Registry: the upstream registry is proxied by a remote
  # repository, and the image keeps its digest.
  kubernetes_mcp_image = "${var.region}-docker.pkg.dev/${var.project_id}/${google_artifact_registry_repository.kubernetes_mcp.repository_id}/${var.kubernetes_mcp_image}"
  kubernetes_mcp_port  = 8080
  kubeconfig_dir       = "/etc/kubernetes-mcp"
  gke_token_dir        = "/var/run/gke-token"
  # Every minute: a metadata-server token has at least five minutes left when handed
  # out, and client-go re-reads a token file about every minute.
  gke_token_script = <<-EOT
    set -eu
    fetch() {
      wget -q -O - --header 'Metadata-Flavor: Google' \
        'http://metadata.google.internal/computeMetadata/v1/instance/service-accounts/default/token' |
        sed -n 's/.*"access_token" *: *"\([^"]*\)".*/\1/p' > ${local.gke_token_dir}/token.next
      test -s ${local.gke_token_dir}/token.next
      mv ${local.gke_token_dir}/token.next ${local.gke_token_dir}/token
    }
    until fetch; do sleep 2; done
    # Listening tells Cloud Run the first token is there (the MCP server starts after it).
    httpd -p 8081 -h /tmp
    while true; do sleep 60; fetch || true; done
  EOT
}

resource "google_service_account" "kubernetes_mcp" {
  account_id   = "${var.name_prefix}-k8s-mcp"
  display_name = "TARSy kubernetes-mcp-server (Cloud Run)"
  depends_on   = [google_project_service.enabled]
}

resource "google_artifact_registry_repository" "kubernetes_mcp" {
  #checkov:skip=CKV_GCP_84:A pull-through cache of a public image pinned by digest; Google-managed encryption, as everywhere in this deployment.
  location      = var.region
  repository_id = "${var.name_prefix}-kubernetes-mcp"
  description   = "Pull-through cache of ${var.kubernetes_mcp_registry} for the kubernetes-mcp-server image"
  format        = "DOCKER"
  mode          = "REMOTE_REPOSITORY"

  remote_repository_config {
    description = "kubernetes-mcp-server's published images"
    docker_repository {
      custom_repository {
        uri = var.kubernetes_mcp_registry
      }
    }
  }

  depends_on = [google_project_service.enabled]
}

# The kubeconfig kubernetes-mcp-server reads, mounted as a file. For a GKE cluster
# Terraform writes it (no credential in it); otherwise add your cluster's version:
#   gcloud secrets versions add <name_prefix>-kubeconfig --data-file=kubeconfig.yaml
resource "google_secret_manager_secret" "kubeconfig" {
  secret_id = "${var.name_prefix}-kubeconfig"
  replication {
    auto {}
  }
  depends_on = [google_project_service.enabled]
}

data "google_container_cluster" "target" {
  count    = local.kubernetes_mcp_gke ? 1 : 0
  project  = var.gke_cluster.project
  location = var.gke_cluster.location
  name     = var.gke_cluster.name
}

resource "google_secret_manager_secret_version" "gke_kubeconfig" {
  count  = local.kubernetes_mcp_gke ? 1 : 0
  secret = google_secret_manager_secret.kubeconfig.id
  secret_data = yamlencode({
    apiVersion      = "v1"
    kind            = "Config"
    current-context = "gke"
    clusters = [{
      name = "gke"
      cluster = {
        server                     = "https://${var.gke_cluster.private_endpoint ? data.google_container_cluster.target[0].private_cluster_config[0].private_endpoint : data.google_container_cluster.target[0].endpoint}"
        certificate-authority-data = data.google_container_cluster.target[0].master_auth[0].cluster_ca_certificate
      }
    }]
    users    = [{ name = "gke", user = { tokenFile = "${local.gke_token_dir}/token" } }]
    contexts = [{ name = "gke", context = { cluster = "gke", user = "gke" } }]
  })
}

resource "google_secret_manager_secret_iam_member" "kubeconfig" {
  secret_id = google_secret_manager_secret.kubeconfig.id
  role      = "roles/secretmanager.secretAccessor"
  member    = google_service_account.kubernetes_mcp.member
}

# GKE: the service's identity reads Kubernetes objects (not Secrets' contents) through IAM.
resource "google_project_iam_member" "kubernetes_mcp_gke" {
  count   = local.kubernetes_mcp_gke ? 1 : 0
  project = var.gke_cluster.project
  role    = "roles/container.viewer"
  member  = google_service_account.kubernetes_mcp.member
}

resource "google_cloud_run_v2_service" "kubernetes_mcp" {
  name                = local.names.kubernetes_mcp
  location            = var.region
  description         = "TARSy's kubernetes MCP server (kubernetes-mcp-server ${local.kubernetes_mcp_version}, read-only)"
  deletion_protection = false
  # The step function reaches it over the internet path (it has no VPC egress), so ingress
  # stays open and access is IAM's: no allUsers, the step account is the only invoker.
  ingress = "INGRESS_TRAFFIC_ALL"

  template {
    service_account                  = google_service_account.kubernetes_mcp.email
    max_instance_request_concurrency = var.kubernetes_mcp_service.concurrency
    timeout                          = "${var.kubernetes_mcp_service.timeout_seconds}s"

    scaling {
      min_instance_count = var.kubernetes_mcp_service.min_instances
      max_instance_count = var.kubernetes_mcp_service.max_instances
    }

    dynamic "vpc_access" {
      for_each = var.kubernetes_mcp_network == null ? [] : [var.kubernetes_mcp_network]
      content {
        # Only the cluster's private addresses go through the VPC.
        egress = "PRIVATE_RANGES_ONLY"
        network_interfaces {
          network    = vpc_access.value.network
          subnetwork = vpc_access.value.subnetwork
        }
      }
    }

    containers {
      name  = "kubernetes-mcp-server"
      image = local.kubernetes_mcp_image
      # Read-only tools only; "core" leaves out configuration_view, which would print the
      # kubeconfig; stateless, since instances share no MCP sessions.
      args = [
        "--port", tostring(local.kubernetes_mcp_port),
        "--read-only",
        "--stateless",
        "--toolsets", join(",", var.kubernetes_mcp_toolsets),
        "--kubeconfig", "${local.kubeconfig_dir}/kubeconfig",
      ]
      depends_on = local.kubernetes_mcp_gke ? ["gke-token"] : []

      ports {
        container_port = local.kubernetes_mcp_port
      }

      resources {
        limits = {
          cpu    = var.kubernetes_mcp_service.cpu
          memory = var.kubernetes_mcp_service.memory
        }
      }

      startup_probe {
        http_get {
          path = "/healthz"
          port = local.kubernetes_mcp_port
        }
      }

      volume_mounts {
        name       = "kubeconfig"
        mount_path = local.kubeconfig_dir
      }

      dynamic "volume_mounts" {
        for_each = local.kubernetes_mcp_gke ? [1] : []
        content {
          name       = "gke-token"
          mount_path = local.gke_token_dir
        }
      }
    }

    # GKE: keeps the token file filled with this service account's access token.
    dynamic "containers" {
      for_each = local.kubernetes_mcp_gke ? [1] : []
      content {
        name    = "gke-token"
        image   = var.gke_token_image
        command = ["sh", "-c", local.gke_token_script]

        resources {
          limits = {
            cpu    = "1"
            memory = "128Mi"
          }
        }

        startup_probe {
          tcp_socket {
            port = 8081
          }
        }

        volume_mounts {
          name       = "gke-token"
          mount_path = local.gke_token_dir
        }
      }
    }

    volumes {
      name = "kubeconfig"
      secret {
        secret = google_secret_manager_secret.kubeconfig.secret_id
        items {
          version = "latest"
          path    = "kubeconfig"
        }
      }
    }

    dynamic "volumes" {
      for_each = local.kubernetes_mcp_gke ? [1] : []
      content {
        name = "gke-token"
        empty_dir {
          medium     = "MEMORY"
          size_limit = "1Mi"
        }
      }
    }
  }

  depends_on = [
    google_secret_manager_secret_iam_member.kubeconfig,
    google_secret_manager_secret_version.gke_kubeconfig,
  ]
}

# The step function, and no one else, may call it.
resource "google_cloud_run_v2_service_iam_member" "step_invokes_kubernetes_mcp" {
  location = var.region
  name     = google_cloud_run_v2_service.kubernetes_mcp.name
  role     = "roles/run.invoker"
  member   = google_service_account.step.member
}
