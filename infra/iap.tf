# People reach the api and its pages only through Identity-Aware Proxy: an external
# HTTPS load balancer with a serverless network endpoint group in front of the api
# function, IAP on its backend service. IAP lets through the members of var.access
# (roles/iap.httpsResourceAccessor) and signs each request it forwards
# (x-goog-iap-jwt-assertion, ES256); the api verifies that header on every request
# against this backend service's audience and grants the roles of var.access
# (TARSY_ACCESS_GRANTS). The function itself accepts only internal and load-balancer
# traffic and is invoked only by IAP's service agent and the sweeper (functions.tf).

locals {
  # The name people open. Without var.api_domain, sslip.io names the reserved address
  # (a first try; point your own domain at the address for real use).
  api_domain = var.api_domain != "" ? var.api_domain : "${replace(google_compute_global_address.api.address, ".", "-")}.sslip.io"
  # The audience IAP signs for a backend service; the api accepts no other.
  iap_audience = "/projects/${data.google_project.this.number}/global/backendServices/${google_compute_backend_service.api.generated_id}"
  # Everyone granted any role passes the proxy; the api then applies the role.
  access_members = sort(distinct(concat(var.access.viewer, var.access.responder, var.access.admin)))
}

resource "google_project_service_identity" "iap" {
  provider = google-beta

  project = var.project_id
  service = "iap.googleapis.com"

  depends_on = [google_project_service.enabled]
}

resource "google_compute_global_address" "api" {
  name       = "${var.name_prefix}-api"
  depends_on = [google_project_service.enabled]
}

resource "google_compute_managed_ssl_certificate" "api" {
  name = "${var.name_prefix}-api"
  managed {
    domains = [local.api_domain]
  }
}

resource "google_compute_region_network_endpoint_group" "api" {
  name                  = "${var.name_prefix}-api"
  region                = var.region
  network_endpoint_type = "SERVERLESS"
  cloud_run {
    service = google_cloudfunctions2_function.api.service_config[0].service
  }
}

resource "google_compute_backend_service" "api" {
  name                  = "${var.name_prefix}-api"
  load_balancing_scheme = "EXTERNAL_MANAGED"
  protocol              = "HTTPS"

  backend {
    group = google_compute_region_network_endpoint_group.api.id
  }

  iap {
    enabled = true
    # Empty: the Google-managed OAuth client (people of your organization only).
    oauth2_client_id     = var.iap_oauth2_client_id != "" ? var.iap_oauth2_client_id : null
    oauth2_client_secret = var.iap_oauth2_client_secret != "" ? var.iap_oauth2_client_secret : null
  }

  log_config {
    enable      = true
    sample_rate = 1.0
  }
}

resource "google_compute_url_map" "api" {
  name            = "${var.name_prefix}-api"
  default_service = google_compute_backend_service.api.id
}

resource "google_compute_ssl_policy" "api" {
  name            = "${var.name_prefix}-api"
  profile         = "RESTRICTED"
  min_tls_version = "TLS_1_2"
}

resource "google_compute_target_https_proxy" "api" {
  name             = "${var.name_prefix}-api"
  url_map          = google_compute_url_map.api.id
  ssl_certificates = [google_compute_managed_ssl_certificate.api.id]
  ssl_policy       = google_compute_ssl_policy.api.id
}

resource "google_compute_global_forwarding_rule" "api" {
  name                  = "${var.name_prefix}-api"
  load_balancing_scheme = "EXTERNAL_MANAGED"
  ip_address            = google_compute_global_address.api.id
  port_range            = "443"
  target                = google_compute_target_https_proxy.api.id
}

# Who passes the proxy: every member var.access grants a role to (user:, serviceAccount:
# or domain:, as IAM writes them). One member each, so grants made elsewhere stay.
resource "google_iap_web_backend_service_iam_member" "access" {
  for_each = toset(local.access_members)

  project             = var.project_id
  web_backend_service = google_compute_backend_service.api.name
  role                = "roles/iap.httpsResourceAccessor"
  member              = each.value
}
