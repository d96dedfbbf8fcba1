output "ingest_url" {
  description = "Base URL of the ingest function: POST {ingest_url}/alerts with the API key."
  value       = google_cloudfunctions2_function.ingest.url
}

output "api_url" {
  description = "Base URL of the api function (GET /sessions/{id})."
  value       = google_cloudfunctions2_function.api.url
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
  description = "Secret Manager secret holding the API key callers present."
  value       = google_secret_manager_secret.api_key.secret_id
}
