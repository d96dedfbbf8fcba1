"""Telling people that a session ended: Slack today, once per session whatever the redeliveries.

* :mod:`tarsy.notify.result`: what one notification attempt came to.
* :mod:`tarsy.notify.ledger`: the once-only claim, ``sessions/{sid}/notifications/{notifier}``.
* :mod:`tarsy.notify.slack`: the Slack message, its thread, the post.
* :mod:`tarsy.notify.session_end`: :func:`on_session_end`, the one call the step
  engine and the api make after anything that may have ended a session.
"""
