"""Whether each notifier is configured (cheap: no secret is read, no client is imported).

Every session end asks these; a notifier's module (its client, its message) is
imported only when its answer is yes (:mod:`tarsy.notify.session_end`).
"""

from __future__ import annotations

from tarsy.config.schema import TarsyConfig
from tarsy.settings import Settings


def slack(settings: Settings) -> bool:
    """Whether a Slack bot token is configured at all."""
    return settings.slack_bot_token is not None or bool(settings.slack_token_secret)


def pagerduty(settings: Settings) -> bool:
    """Whether a PagerDuty REST API key and a From address are configured."""
    has_token = settings.pagerduty_api_token is not None or bool(settings.pagerduty_token_secret)
    return has_token and bool(settings.pagerduty_from_email)


def pagerduty_notes(settings: Settings, config: TarsyConfig) -> bool:
    """Whether PagerDuty incidents get notes: opted in (``incident_notes``) and configured."""
    return config.alert_sources.pagerduty.incident_notes and pagerduty(settings)
