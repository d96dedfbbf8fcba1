resource "google_pubsub_topic" "steps" {
  #checkov:skip=CKV_GCP_83:Step messages hold ids only (session, execution, step number); Google-managed encryption is enough.
  name                       = var.steps_topic
  message_retention_duration = var.message_retention
  depends_on                 = [google_project_service.enabled]
}

resource "google_pubsub_topic" "dead_letter" {
  #checkov:skip=CKV_GCP_83:Dead letters are copies of step messages (ids only); Google-managed encryption is enough.
  name                       = "${var.steps_topic}-dead-letter"
  message_retention_duration = var.dead_letter_retention
  depends_on                 = [google_project_service.enabled]
}

# The step function's trigger: a push subscription Terraform owns, so it can carry
# the retry and dead-letter policies (an Eventarc-managed subscription cannot be
# given a dead-letter policy here). The function decodes the push body as a
# CloudEvent (functions-framework converts it), and raises to get a redelivery.
resource "google_pubsub_subscription" "step" {
  name                       = "${var.steps_topic}-step"
  topic                      = google_pubsub_topic.steps.id
  ack_deadline_seconds       = min(600, var.step_function.timeout_seconds + 30)
  message_retention_duration = var.message_retention

  retry_policy {
    minimum_backoff = var.retry_minimum_backoff
    maximum_backoff = var.retry_maximum_backoff
  }

  dead_letter_policy {
    dead_letter_topic     = google_pubsub_topic.dead_letter.id
    max_delivery_attempts = var.max_delivery_attempts
  }

  push_config {
    push_endpoint = google_cloudfunctions2_function.step.service_config[0].uri
    oidc_token {
      service_account_email = google_service_account.pubsub_push.email
      audience              = google_cloudfunctions2_function.step.service_config[0].uri
    }
  }

  expiration_policy {
    ttl = ""
  }

  depends_on = [
    google_cloud_run_v2_service_iam_member.push_invokes_step,
    google_service_account_iam_member.pubsub_push_token,
  ]
}

# The dead-letter handler's trigger: retried with backoff, never dead-lettered again.
resource "google_pubsub_subscription" "dead_letter" {
  name                       = "${var.steps_topic}-dead-letter-handler"
  topic                      = google_pubsub_topic.dead_letter.id
  ack_deadline_seconds       = min(600, var.dead_letter_function.timeout_seconds + 30)
  message_retention_duration = var.dead_letter_retention

  retry_policy {
    minimum_backoff = var.retry_minimum_backoff
    maximum_backoff = var.retry_maximum_backoff
  }

  push_config {
    push_endpoint = google_cloudfunctions2_function.dead_letter.service_config[0].uri
    oidc_token {
      service_account_email = google_service_account.pubsub_push.email
      audience              = google_cloudfunctions2_function.dead_letter.service_config[0].uri
    }
  }

  expiration_policy {
    ttl = ""
  }

  depends_on = [
    google_cloud_run_v2_service_iam_member.push_invokes_dead_letter,
    google_service_account_iam_member.pubsub_push_token,
  ]
}

# Publishers: the functions that start or continue investigations, on this topic only.
resource "google_pubsub_topic_iam_member" "steps_publisher" {
  for_each = {
    ingest = google_service_account.ingest.member
    step   = google_service_account.step.member
    api    = google_service_account.api.member
  }

  topic  = google_pubsub_topic.steps.id
  role   = "roles/pubsub.publisher"
  member = each.value
}

# Dead-lettering: the Pub/Sub service agent publishes to the dead-letter topic
# and acknowledges on the source subscription.
resource "google_pubsub_topic_iam_member" "dead_letter_publisher" {
  topic  = google_pubsub_topic.dead_letter.id
  role   = "roles/pubsub.publisher"
  member = google_project_service_identity.pubsub.member
}

resource "google_pubsub_subscription_iam_member" "dead_letter_subscriber" {
  subscription = google_pubsub_subscription.step.id
  role         = "roles/pubsub.subscriber"
  member       = google_project_service_identity.pubsub.member
}
