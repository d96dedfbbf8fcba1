"""Native alert sources: Alertmanager, Grafana, PagerDuty and AWS SNS/CloudWatch webhooks.

The pure half of accepting alerts as their senders send them: payload models
written from each sender's documentation, normalization of a notification
into one :class:`~tarsy.intake.sources.normalized.NormalizedAlert` per alert, the
``alert_sources:`` config model, and the authentication each sender can do
(basic auth, PagerDuty's HMAC signature, SNS's certificate signature). The
ingest routes add storage, dedup claims and publishing on top.

Modules:

* ``normalized`` — :class:`NormalizedAlert`, the shape every source becomes.
* ``config`` — ``alert_sources:`` (per-source alert type, dedup window, cap, trust).
* ``alert_type`` — reading an alert's type from its data.
* ``limits`` — the per-notification cap (first N processed, rest ignored).
* ``parsing`` / ``errors`` — bytes to models; 400 / 401 / 403 / 422 / 503 errors.
* ``grouped`` — the Alertmanager-style group shape and its normalization.
* ``alertmanager``, ``grafana``, ``pagerduty`` — each sender's payload.
* ``alertmanager_api`` — alerts posted to Alertmanager's own API
  (``POST /api/v2/alerts``), as Grafana's "Alertmanager" contact point does.
* ``cloudwatch``, ``sns`` — the SNS envelope and the CloudWatch alarm inside.
* ``dispatch`` — body to alerts in one call for Alertmanager (both routes), Grafana,
  PagerDuty.
* ``basic_auth`` — the API key as Bearer, X-API-Key or basic-auth password.
* ``pagerduty_signature`` — ``X-PagerDuty-Signature`` HMAC verification.
* ``sns_urls``, ``sns_certificates``, ``sns_signature``, ``sns_confirm`` — SNS
  URL trust, certificate fetch and cache, signature verification, confirmation.

This package imports nothing on purpose: ``config`` is loaded with the YAML
schema by every function, and must not pull in httpx or ``cryptography``
(which only the SNS route needs). Import the submodules you use.
"""
