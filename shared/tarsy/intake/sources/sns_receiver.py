"""The SNS source's receiver: check, verify the signature, then alerts or a (un)subscription.

Design constraint: the SNS payload models (:mod:`tarsy.intake.sources.sns`) stay
free of I/O and of the signature and confirmation modules, which import them;
the receiver that ties them together lives here, on top of all three.
"""

from __future__ import annotations

import logging
from typing import Any

from tarsy.errors import InputError
from tarsy.http.request import HttpRequest, HttpResponse
from tarsy.intake.sources.config import AlertSourcesConfig
from tarsy.intake.sources.receiver import ROUTE_PREFIX, AlertReceiver, Received
from tarsy.intake.sources.sns import SubscriptionConfirmation, normalize_sns, parse_sns
from tarsy.settings import Settings

logger = logging.getLogger(__name__)


class SnsReceiver(AlertReceiver):
    """``POST /alerts/sns``: an AWS SNS HTTPS subscription carrying CloudWatch alarms.

    The message's own signature is verified (possibly fetching SNS's
    certificate) between parsing and normalizing; a subscription confirmation
    is confirmed and answered 200, carrying no alert.
    """

    name = "sns"
    paths = (f"{ROUTE_PREFIX}sns",)
    media_types = frozenset({"text/plain", "application/json"})  # SNS posts JSON as text/plain

    async def receive(
        self, request: HttpRequest, settings: Settings, sources: AlertSourcesConfig
    ) -> Received:
        """Check, verify, then return the alarm's alerts or answer a (un)subscription."""
        # Imported here: httpx and cryptography are needed by this source only.
        from tarsy.intake.sources.sns_certificates import HttpxCertificateFetcher
        from tarsy.intake.sources.sns_confirm import confirm_subscription
        from tarsy.intake.sources.sns_endpoint import endpoint_transport
        from tarsy.intake.sources.sns_signature import SnsVerifier

        message = parse_sns(await self.checked_json(request, settings, sources))
        sns = sources.sns
        try:
            transport = endpoint_transport(settings.sns_endpoint_url)
        except ValueError as e:
            raise InputError(f"TARSY_SNS_ENDPOINT_URL: {e}", status=503) from e
        fetcher = HttpxCertificateFetcher(transport=transport) if transport is not None else None
        await SnsVerifier.from_config(sns, fetcher=fetcher).verify(message)
        outcome = normalize_sns(message, sns)
        if isinstance(outcome, list):
            return outcome
        body: dict[str, Any] = {"topic_arn": outcome.topic_arn, "message_id": outcome.message_id}
        if isinstance(outcome, SubscriptionConfirmation):
            await confirm_subscription(outcome, sns.cert_host_pattern, transport=transport)
            logger.info("confirmed the SNS subscription of topic %s", outcome.topic_arn)
            return HttpResponse(status=200, body={**body, "subscription": "confirmed"})
        # Visiting its SubscribeURL would subscribe again: the message is only noted.
        logger.warning("SNS topic %s unsubscribed this endpoint", outcome.topic_arn)
        return HttpResponse(status=200, body={**body, "subscription": "unsubscribed"})
