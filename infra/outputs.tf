output "ingest_url" {
  description = "Base URL of the ingest function: POST {ingest_url}/alerts with the API key."
  value       = google_cloudfunctions2_function.ingest.url
}

output "api_url" {
  description = "Where people open the api and its pages (/ui/), through Identity-Aware Proxy."
  value       = "https://${local.api_domain}"
}

output "api_function_url" {
  description = "The api function's own URL: only IAP's service agent and the sweeper may call it."
  value       = google_cloudfunctions2_function.api.url
}

output "api_address" {
  description = "The load balancer's address: point var.api_domain's A record at it."
  value       = google_compute_global_address.api.address
}

output "iap_audience" {
  description = "The audience of IAP's signed header that the api accepts (TARSY_IAP_AUDIENCE)."
  value       = local.iap_audience
}

output "firestore_console_url" {
  description = "The TARSy Firestore database in the Cloud console."
  value       = "https://console.cloud.google.com/firestore/databases/${replace(google_firestore_database.main.name, "(default)", "-default-")}/data?project=${var.project_id}"
}

output "steps_topic" {
  description = "Pub/Sub topic of step messages."
  value       = google_pubsub_topic.steps.name
}

output "api_key_secret" {
  description = "Secret Manager secret holding the API key alert senders present to ingest."
  value       = google_secret_manager_secret.api_key.secret_id
}
