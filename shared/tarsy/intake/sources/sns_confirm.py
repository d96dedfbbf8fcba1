"""Confirming an SNS subscription: one GET of ``SubscribeURL``, host checked first.

SNS sends nothing to a new HTTPS subscription until the endpoint visits the
``SubscribeURL`` of its ``SubscriptionConfirmation``. The route does that
only after the message's signature verified and its topic is allow-listed;
this module adds the last check — the URL itself must be an SNS endpoint
(:func:`~tarsy.intake.sources.sns_urls.check_sns_url`) — and performs the request.

A failed confirmation is a 503: SNS then redelivers the confirmation message
(per the subscription's delivery policy) and the next attempt may succeed.
The response body (``ConfirmSubscriptionResponse`` XML with the
subscription ARN) is not needed.
"""

from __future__ import annotations

import re

import httpx

from tarsy.errors import InputError
from tarsy.intake.sources.sns import SubscriptionConfirmation
from tarsy.intake.sources.sns_urls import check_sns_url


class SubscriptionConfirmationFailed(InputError):
    """Visiting ``SubscribeURL`` failed; SNS should redeliver the confirmation (503)."""

    status = 503


async def confirm_subscription(
    confirmation: SubscriptionConfirmation,
    cert_host_pattern: str | re.Pattern[str],
    *,
    request_timeout: float = 10.0,
    transport: httpx.AsyncBaseTransport | None = None,
) -> None:
    """Confirm a verified subscription by visiting its ``SubscribeURL``.

    Args:
        confirmation: The outcome of a verified ``SubscriptionConfirmation``.
        cert_host_pattern: ``alert_sources.sns.cert_host_pattern``.
        request_timeout: Seconds for connecting and reading.
        transport: An httpx transport to use instead of the network (tests).

    Raises:
        UntrustedUrlError: The URL is not an allowed SNS endpoint (401); nothing fetched.
        SubscriptionConfirmationFailed: The request failed or was refused (503).
    """
    url = check_sns_url(confirmation.subscribe_url, cert_host_pattern, field="SubscribeURL")
    try:
        async with httpx.AsyncClient(
            timeout=request_timeout, follow_redirects=False, transport=transport
        ) as client:
            response = await client.get(url)
    except httpx.HTTPError as e:
        raise SubscriptionConfirmationFailed(f"confirming the SNS subscription failed: {e}") from e
    if response.status_code != 200:
        raise SubscriptionConfirmationFailed(
            f"confirming the SNS subscription failed: HTTP {response.status_code}"
        )
