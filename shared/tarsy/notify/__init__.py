"""Telling people that a session ended: Slack and PagerDuty, effectively once per session.

Once whatever the redeliveries, and never lost nor doubled by a process that
dies between the claim and the post (a leased claim, taken over after a check).

* :mod:`tarsy.notify.result`: what one notification attempt came to.
* :mod:`tarsy.notify.ledger`: the leased claim, ``sessions/{sid}/notifications/{notifier}``.
* :mod:`tarsy.notify.configured`: whether each notifier is configured (no import of it).
* :mod:`tarsy.notify.slack`: the Slack message, its thread, the post.
* :mod:`tarsy.notify.pagerduty`: the note on the PagerDuty incident.
* :mod:`tarsy.notify.session_end`: :func:`on_session_end`, the one call the step
  engine and the api make after anything that may have ended a session, and
  :func:`retry_stale`, which the sweeper calls for claims whose holder died.
"""
