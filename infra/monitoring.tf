# Monitoring: log-based metrics, alert policies and a dashboard.
#
# The step and api functions write one structured log line per step, model call and
# session end (TARSY_METRIC_LOGS, field tarsy_metric; see shared/tarsy/telemetry.py).
# The metrics below count and measure those lines, so they work whether or not
# var.telemetry exports OpenTelemetry metrics, and Terraform creates them before the
# alert policies that read them. Dead letters and sweeper failures come from
# Pub/Sub's and Cloud Logging's own metrics.
#
# A first apply may stop on "Cannot find metric(s) that match type" for a log-based
# metric created seconds earlier (Cloud Monitoring takes up to 10 minutes to see
# one); apply again.

locals {
  # The functions that write metric lines (gen2 functions run as Cloud Run services
  # of the same name).
  metric_log_filter = join(" AND ", [
    "resource.type=\"cloud_run_revision\"",
    "resource.labels.service_name=(\"${local.names.step}\" OR \"${local.names.api}\" OR \"${local.names.dead_letter}\")",
  ])
  log_metric_prefix = "logging.googleapis.com/user/"
}

# ─── log-based metrics ────────────────────────────────────────────────────────

resource "google_logging_metric" "steps" {
  name        = "${var.name_prefix}_steps"
  description = "Step messages handled by the step function, by kind and outcome (ok, error, retry)."
  filter      = "${local.metric_log_filter} AND jsonPayload.tarsy_metric=\"step\""

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "INT64"
    labels {
      key         = "kind"
      value_type  = "STRING"
      description = "start_session, start_stage or iterate"
    }
    labels {
      key         = "outcome"
      value_type  = "STRING"
      description = "ok, error, or retry (redelivered later)"
    }
  }
  label_extractors = {
    kind    = "EXTRACT(jsonPayload.kind)"
    outcome = "EXTRACT(jsonPayload.outcome)"
  }

  depends_on = [google_project_service.enabled]
}

resource "google_logging_metric" "step_latency" {
  name        = "${var.name_prefix}_step_latency"
  description = "Wall time of one step message in the step function, by kind."
  filter      = "${local.metric_log_filter} AND jsonPayload.tarsy_metric=\"step\""

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "DISTRIBUTION"
    unit        = "s"
    labels {
      key         = "kind"
      value_type  = "STRING"
      description = "start_session, start_stage or iterate"
    }
  }
  value_extractor  = "EXTRACT(jsonPayload.seconds)"
  label_extractors = { kind = "EXTRACT(jsonPayload.kind)" }
  bucket_options {
    exponential_buckets {
      num_finite_buckets = 40
      growth_factor      = 1.4
      scale              = 0.01
    }
  }

  depends_on = [google_project_service.enabled]
}

resource "google_logging_metric" "model_calls" {
  name        = "${var.name_prefix}_model_calls"
  description = "Model calls (retries included), by model, outcome (ok, error) and error type."
  filter      = "${local.metric_log_filter} AND jsonPayload.tarsy_metric=\"model_call\""

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "INT64"
    labels {
      key         = "model"
      value_type  = "STRING"
      description = "the model requested"
    }
    labels {
      key         = "outcome"
      value_type  = "STRING"
      description = "ok or error"
    }
    labels {
      key         = "error_type"
      value_type  = "STRING"
      description = "rate_limit, timeout, server, ... (empty when ok)"
    }
  }
  label_extractors = {
    model      = "EXTRACT(jsonPayload.model)"
    outcome    = "EXTRACT(jsonPayload.outcome)"
    error_type = "EXTRACT(jsonPayload.error_type)"
  }

  depends_on = [google_project_service.enabled]
}

resource "google_logging_metric" "model_latency" {
  name        = "${var.name_prefix}_model_latency"
  description = "Duration of one model call, retries included, by model."
  filter      = "${local.metric_log_filter} AND jsonPayload.tarsy_metric=\"model_call\""

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "DISTRIBUTION"
    unit        = "s"
    labels {
      key         = "model"
      value_type  = "STRING"
      description = "the model requested"
    }
  }
  value_extractor  = "EXTRACT(jsonPayload.seconds)"
  label_extractors = { model = "EXTRACT(jsonPayload.model)" }
  bucket_options {
    exponential_buckets {
      num_finite_buckets = 40
      growth_factor      = 1.4
      scale              = 0.01
    }
  }

  depends_on = [google_project_service.enabled]
}

resource "google_logging_metric" "sessions_ended" {
  name        = "${var.name_prefix}_sessions_ended"
  description = "Sessions that reached a terminal status (completed, failed, timed_out, cancelled), by chain."
  filter      = "${local.metric_log_filter} AND jsonPayload.tarsy_metric=\"session_end\""

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "INT64"
    labels {
      key         = "status"
      value_type  = "STRING"
      description = "completed, failed, timed_out or cancelled"
    }
    labels {
      key         = "chain"
      value_type  = "STRING"
      description = "the chain that ran"
    }
  }
  label_extractors = {
    status = "EXTRACT(jsonPayload.status)"
    chain  = "EXTRACT(jsonPayload.chain)"
  }

  depends_on = [google_project_service.enabled]
}

resource "google_logging_metric" "session_tokens" {
  name        = "${var.name_prefix}_session_tokens"
  description = "Tokens one session spent (all its model calls), by terminal status."
  filter      = "${local.metric_log_filter} AND jsonPayload.tarsy_metric=\"session_end\""

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "DISTRIBUTION"
    unit        = "{token}"
    labels {
      key         = "status"
      value_type  = "STRING"
      description = "completed, failed, timed_out or cancelled"
    }
  }
  value_extractor  = "EXTRACT(jsonPayload.total_tokens)"
  label_extractors = { status = "EXTRACT(jsonPayload.status)" }
  bucket_options {
    exponential_buckets {
      num_finite_buckets = 40
      growth_factor      = 1.6
      scale              = 100
    }
  }

  depends_on = [google_project_service.enabled]
}

resource "google_logging_metric" "session_cost" {
  name        = "${var.name_prefix}_session_cost"
  description = "Model cost of one session in US dollars (the chain's prices), by terminal status."
  filter      = "${local.metric_log_filter} AND jsonPayload.tarsy_metric=\"session_end\""

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "DISTRIBUTION"
    unit        = "USD"
    labels {
      key         = "status"
      value_type  = "STRING"
      description = "completed, failed, timed_out or cancelled"
    }
  }
  value_extractor  = "EXTRACT(jsonPayload.cost_usd)"
  label_extractors = { status = "EXTRACT(jsonPayload.status)" }
  bucket_options {
    exponential_buckets {
      num_finite_buckets = 40
      growth_factor      = 1.6
      scale              = 0.0001
    }
  }

  depends_on = [google_project_service.enabled]
}

# ─── alert policies ───────────────────────────────────────────────────────────

# Pub/Sub gave up on a step message: the dead-letter function fails its session.
resource "google_monitoring_alert_policy" "dead_letters" {
  display_name          = "TARSy: step messages dead-lettered"
  combiner              = "OR"
  severity              = "ERROR"
  notification_channels = var.notification_channels

  conditions {
    display_name = "dead-lettered step messages > 0"
    condition_threshold {
      filter          = "resource.type=\"pubsub_subscription\" AND resource.labels.subscription_id=\"${google_pubsub_subscription.step.name}\" AND metric.type=\"pubsub.googleapis.com/subscription/dead_letter_message_count\""
      comparison      = "COMPARISON_GT"
      threshold_value = 0
      duration        = "0s"
      aggregations {
        alignment_period     = "300s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
      }
      trigger {
        count = 1
      }
    }
  }

  alert_strategy {
    auto_close = "1800s"
  }

  documentation {
    mime_type = "text/markdown"
    content   = "A step message was delivered ${var.max_delivery_attempts} times without success and went to the dead-letter topic; its session is marked failed with the reason. Find it in Firestore (sessions where error.code == \"dead_letter\") and read the step function's logs for its session_id. See docs/deploy.md, Monitoring."
  }
}

# The sweeper timed a session out: it ran past its deadline.
resource "google_monitoring_alert_policy" "sessions_timed_out" {
  display_name          = "TARSy: sessions past their deadline"
  combiner              = "OR"
  severity              = "WARNING"
  notification_channels = var.notification_channels

  conditions {
    display_name = "sessions timed out > 0"
    condition_threshold {
      filter          = "resource.type=\"cloud_run_revision\" AND metric.type=\"${local.log_metric_prefix}${google_logging_metric.sessions_ended.name}\" AND metric.labels.status=\"timed_out\""
      comparison      = "COMPARISON_GT"
      threshold_value = 0
      duration        = "0s"
      aggregations {
        alignment_period     = "300s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
      }
      trigger {
        count = 1
      }
    }
  }

  alert_strategy {
    auto_close = "1800s"
  }

  documentation {
    mime_type = "text/markdown"
    content   = "The sweeper timed out a session that passed its deadline (the chain's or the default session timeout). A model that hangs, a step that keeps failing, or a session waiting on a sub-agent are the usual causes: read the session's timeline and the step function's logs for its session_id."
  }
}

# Steps that ended in an error (not a redelivery for a held lease), as a share of all.
resource "google_monitoring_alert_policy" "step_failures" {
  display_name          = "TARSy: step failure rate"
  combiner              = "OR"
  severity              = "ERROR"
  notification_channels = var.notification_channels

  conditions {
    display_name = "failed steps / steps > ${var.alert_step_failure_ratio}"
    condition_threshold {
      filter             = "resource.type=\"cloud_run_revision\" AND metric.type=\"${local.log_metric_prefix}${google_logging_metric.steps.name}\" AND metric.labels.outcome=\"error\""
      denominator_filter = "resource.type=\"cloud_run_revision\" AND metric.type=\"${local.log_metric_prefix}${google_logging_metric.steps.name}\""
      comparison         = "COMPARISON_GT"
      threshold_value    = var.alert_step_failure_ratio
      duration           = "0s"
      aggregations {
        alignment_period     = "600s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
      }
      denominator_aggregations {
        alignment_period     = "600s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
      }
      trigger {
        count = 1
      }
    }
  }

  alert_strategy {
    auto_close = "3600s"
  }

  documentation {
    mime_type = "text/markdown"
    content   = "More than ${var.alert_step_failure_ratio * 100}% of step messages ended in an error over 10 minutes (a step that raised: Pub/Sub redelivers it, then dead-letters it). Read the step function's error logs."
  }
}

# Model calls that failed after their retries (rate limits, timeouts, 5xx), as a share.
resource "google_monitoring_alert_policy" "model_errors" {
  display_name          = "TARSy: model error rate"
  combiner              = "OR"
  severity              = "WARNING"
  notification_channels = var.notification_channels

  conditions {
    display_name = "failed model calls / model calls > ${var.alert_model_error_ratio}"
    condition_threshold {
      filter             = "resource.type=\"cloud_run_revision\" AND metric.type=\"${local.log_metric_prefix}${google_logging_metric.model_calls.name}\" AND metric.labels.outcome=\"error\""
      denominator_filter = "resource.type=\"cloud_run_revision\" AND metric.type=\"${local.log_metric_prefix}${google_logging_metric.model_calls.name}\""
      comparison         = "COMPARISON_GT"
      threshold_value    = var.alert_model_error_ratio
      duration           = "0s"
      aggregations {
        alignment_period     = "600s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
      }
      denominator_aggregations {
        alignment_period     = "600s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
      }
      trigger {
        count = 1
      }
    }
  }

  alert_strategy {
    auto_close = "3600s"
  }

  documentation {
    mime_type = "text/markdown"
    content   = "More than ${var.alert_model_error_ratio * 100}% of model calls failed over 10 minutes, retries included. The dashboard's model errors chart gives the error type (rate_limit: quota; timeout; server: the provider)."
  }
}

# The sweeper itself failing: then nothing re-publishes lost steps or times sessions out.
resource "google_monitoring_alert_policy" "sweeper_failures" {
  display_name          = "TARSy: sweeper job failing"
  combiner              = "OR"
  severity              = "ERROR"
  notification_channels = var.notification_channels

  conditions {
    display_name = "sweeper job errors > 2 in 10 minutes"
    condition_threshold {
      filter          = "resource.type=\"cloud_scheduler_job\" AND resource.labels.job_id=\"${google_cloud_scheduler_job.sweeper.name}\" AND metric.type=\"logging.googleapis.com/log_entry_count\" AND metric.labels.severity=\"ERROR\""
      comparison      = "COMPARISON_GT"
      threshold_value = 2
      duration        = "0s"
      aggregations {
        alignment_period     = "600s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
      }
      trigger {
        count = 1
      }
    }
  }

  alert_strategy {
    auto_close = "1800s"
  }

  documentation {
    mime_type = "text/markdown"
    content   = "Cloud Scheduler's calls of POST {api}/sweep fail. Until they succeed, lost steps are not re-published and sessions past their deadline are not timed out. Read the api function's logs for /sweep."
  }
}

# ─── dashboard ────────────────────────────────────────────────────────────────

locals {
  metric_types = {
    steps          = "${local.log_metric_prefix}${google_logging_metric.steps.name}"
    step_latency   = "${local.log_metric_prefix}${google_logging_metric.step_latency.name}"
    model_calls    = "${local.log_metric_prefix}${google_logging_metric.model_calls.name}"
    model_latency  = "${local.log_metric_prefix}${google_logging_metric.model_latency.name}"
    sessions_ended = "${local.log_metric_prefix}${google_logging_metric.sessions_ended.name}"
    session_tokens = "${local.log_metric_prefix}${google_logging_metric.session_tokens.name}"
    session_cost   = "${local.log_metric_prefix}${google_logging_metric.session_cost.name}"
  }

  # One chart: a metric, aligned per 5 minutes, summed or reduced over series, by labels.
  dashboard_charts = [
    { title = "Sessions ended, by status", metric = "sessions_ended", aligner = "ALIGN_SUM", reducer = "REDUCE_SUM", by = ["metric.label.status"], plot = "STACKED_BAR" },
    { title = "Steps, by outcome", metric = "steps", aligner = "ALIGN_SUM", reducer = "REDUCE_SUM", by = ["metric.label.outcome"], plot = "STACKED_BAR" },
    { title = "Step latency p50 (s), by kind", metric = "step_latency", aligner = "ALIGN_DELTA", reducer = "REDUCE_PERCENTILE_50", by = ["metric.label.kind"], plot = "LINE" },
    { title = "Step latency p95 (s), by kind", metric = "step_latency", aligner = "ALIGN_DELTA", reducer = "REDUCE_PERCENTILE_95", by = ["metric.label.kind"], plot = "LINE" },
    { title = "Model latency p50 (s), by model", metric = "model_latency", aligner = "ALIGN_DELTA", reducer = "REDUCE_PERCENTILE_50", by = ["metric.label.model"], plot = "LINE" },
    { title = "Model latency p95 (s), by model", metric = "model_latency", aligner = "ALIGN_DELTA", reducer = "REDUCE_PERCENTILE_95", by = ["metric.label.model"], plot = "LINE" },
    { title = "Model calls, by outcome and error type", metric = "model_calls", aligner = "ALIGN_SUM", reducer = "REDUCE_SUM", by = ["metric.label.outcome", "metric.label.error_type"], plot = "STACKED_BAR" },
    { title = "Tokens per session, mean", metric = "session_tokens", aligner = "ALIGN_DELTA", reducer = "REDUCE_MEAN", by = ["metric.label.status"], plot = "LINE" },
    { title = "Tokens per session, p95", metric = "session_tokens", aligner = "ALIGN_DELTA", reducer = "REDUCE_PERCENTILE_95", by = ["metric.label.status"], plot = "LINE" },
    { title = "Cost per session (USD), mean", metric = "session_cost", aligner = "ALIGN_DELTA", reducer = "REDUCE_MEAN", by = ["metric.label.status"], plot = "LINE" },
    { title = "Cost per session (USD), p95", metric = "session_cost", aligner = "ALIGN_DELTA", reducer = "REDUCE_PERCENTILE_95", by = ["metric.label.status"], plot = "LINE" },
  ]
}

resource "google_monitoring_dashboard" "tarsy" {
  dashboard_json = jsonencode({
    displayName = "TARSy (${var.name_prefix})"
    mosaicLayout = {
      columns = 12
      tiles = concat(
        [
          for index, chart in local.dashboard_charts : {
            xPos   = (index % 2) * 6
            yPos   = floor(index / 2) * 4
            width  = 6
            height = 4
            widget = {
              title = chart.title
              xyChart = {
                dataSets = [{
                  plotType = chart.plot
                  timeSeriesQuery = {
                    timeSeriesFilter = {
                      filter = "resource.type=\"cloud_run_revision\" AND metric.type=\"${local.metric_types[chart.metric]}\""
                      aggregation = {
                        alignmentPeriod    = "300s"
                        perSeriesAligner   = chart.aligner
                        crossSeriesReducer = chart.reducer
                        groupByFields      = chart.by
                      }
                    }
                  }
                }]
              }
            }
          }
        ],
        [{
          xPos   = (length(local.dashboard_charts) % 2) * 6
          yPos   = floor(length(local.dashboard_charts) / 2) * 4
          width  = 6
          height = 4
          widget = {
            title = "Dead-lettered step messages"
            xyChart = {
              dataSets = [{
                plotType = "STACKED_BAR"
                timeSeriesQuery = {
                  timeSeriesFilter = {
                    filter = "resource.type=\"pubsub_subscription\" AND resource.labels.subscription_id=\"${google_pubsub_subscription.step.name}\" AND metric.type=\"pubsub.googleapis.com/subscription/dead_letter_message_count\""
                    aggregation = {
                      alignmentPeriod    = "300s"
                      perSeriesAligner   = "ALIGN_SUM"
                      crossSeriesReducer = "REDUCE_SUM"
                    }
                  }
                }
              }]
            }
          }
        }]
      )
    }
  })

  depends_on = [google_project_service.enabled]
}
