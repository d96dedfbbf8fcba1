"""What a sender hears when an accepted alert's session could not be started.

Design constraint: tarsy's own ``POST /alerts`` and the native senders are
receivers behind one door (:mod:`tarsy.intake.routes`); what an accepted alert
becomes is the session command's (:func:`tarsy.commands.start.new_session`),
and what a caller hears when the queue is down is built here, once.
"""

from __future__ import annotations

from tarsy.http.request import HttpResponse

# How soon a sender should retry when the steps topic could not take the start.
RETRY_AFTER_SECONDS = 5


def queue_unavailable() -> HttpResponse:
    """503 when a session's start could not be published (it was removed again)."""
    return HttpResponse(
        status=503,
        body={"error": {"status": 503, "message": "queue unavailable, retry"}},
        headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
    )
