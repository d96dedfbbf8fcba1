"""Confirming a subscription: one GET of SubscribeURL, only on an SNS host."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tarsy.intake.sources.config import DEFAULT_CERT_HOST_PATTERN, SnsSourceConfig
from tarsy.intake.sources.sns import SubscriptionConfirmation, normalize_sns, parse_sns
from tarsy.intake.sources.sns_confirm import SubscriptionConfirmationFailed, confirm_subscription
from tarsy.intake.sources.sns_urls import UntrustedUrlError
from tests.unit.sources.loopback import Loopback, LoopbackTransport, loopback_server
from tests.unit.sources.samples import fixture_bytes


@pytest.fixture
def server() -> Iterator[Loopback]:
    with loopback_server() as state:
        state.routes["/"] = (200, b"<ConfirmSubscriptionResponse/>")
        yield state


def confirmation(url: str | None = None) -> SubscriptionConfirmation:
    outcome = normalize_sns(
        parse_sns(fixture_bytes("sns_subscription_confirmation.json")), SnsSourceConfig()
    )
    assert isinstance(outcome, SubscriptionConfirmation)
    return outcome if url is None else outcome.model_copy(update={"subscribe_url": url})


async def test_visits_the_subscribe_url(server: Loopback) -> None:
    transport = LoopbackTransport(server.port)
    outcome = confirmation()

    await confirm_subscription(outcome, DEFAULT_CERT_HOST_PATTERN, transport=transport)

    assert transport.requested == [outcome.subscribe_url]
    assert len(server.hits) == 1
    assert server.hits[0].startswith("/?Action=ConfirmSubscription&TopicArn=arn:aws:sns:")


async def test_refused_confirmation_is_503(server: Loopback) -> None:
    server.routes["/"] = (403, b"<ErrorResponse/>")

    with pytest.raises(SubscriptionConfirmationFailed) as raised:
        await confirm_subscription(
            confirmation(), DEFAULT_CERT_HOST_PATTERN, transport=LoopbackTransport(server.port)
        )
    assert raised.value.status == 503


@pytest.mark.parametrize(
    "url",
    [
        "https://attacker.example/?Action=ConfirmSubscription",
        "http://sns.eu-west-1.amazonaws.com/?Action=ConfirmSubscription",
        "https://169.254.169.254/latest/meta-data/",
    ],
)
async def test_foreign_host_is_never_contacted(server: Loopback, url: str) -> None:
    transport = LoopbackTransport(server.port)

    with pytest.raises(UntrustedUrlError):
        await confirm_subscription(
            confirmation(url), DEFAULT_CERT_HOST_PATTERN, transport=transport
        )

    assert transport.requested == []
    assert server.hits == []
