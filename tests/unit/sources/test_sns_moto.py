"""Cross-check with a second implementation: moto's SNS signs, tarsy verifies.

moto signs the HTTP(S) notifications it delivers (SignatureVersion 2, a fresh
key and certificate) and serves the certificate at its SigningCertURL. Its
code is independent of tarsy's, so a message it produces verifying here is
evidence that both follow AWS's rule for the string to sign. The test runs
moto in-process; the certificate is handed over by an injected fetcher.
"""

from __future__ import annotations

import json

import boto3  # type: ignore[import-untyped]
from moto import mock_aws
from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.sns.models import sns_backends

from tarsy.intake.sources.config import SnsSourceConfig
from tarsy.intake.sources.sns import normalize_sns, parse_sns
from tarsy.intake.sources.sns_certificates import CertificateCache
from tarsy.intake.sources.sns_signature import SnsVerifier

REGION = "eu-west-1"


async def test_a_notification_signed_by_moto_verifies() -> None:
    alarm = json.dumps(
        {
            "AlarmName": "moto-alarm",
            "NewStateValue": "ALARM",
            "StateChangeTime": "2026-11-22T05:15:42.871+0000",
            "AlarmArn": f"arn:aws:cloudwatch:{REGION}:123456789012:alarm:moto-alarm",
            "Trigger": {"Namespace": "AWS/EC2", "MetricName": "CPUUtilization"},
        }
    )
    with mock_aws():
        client = boto3.client("sns", region_name=REGION)
        topic = client.create_topic(Name="alarms")["TopicArn"]
        arn = client.subscribe(
            TopicArn=topic,
            Protocol="lambda",  # any protocol: only the signing helper is used
            Endpoint=f"arn:aws:lambda:{REGION}:123456789012:function:unused",
        )["SubscriptionArn"]
        backend = sns_backends[DEFAULT_ACCOUNT_ID][REGION]
        post = backend.subscriptions[arn].get_post_data(alarm, "0b7c7d3e-moto", None)
        pem = backend._message_public_keys[post["SigningCertURL"].rsplit("/", 1)[1]]

    fetched: list[str] = []

    async def fetch(url: str) -> bytes:
        fetched.append(url)
        return bytes(pem)

    config = SnsSourceConfig(allowed_topic_arns=[topic])
    verifier = SnsVerifier.from_config(config, fetcher=fetch, cache=CertificateCache())
    message = parse_sns(json.dumps(post).encode())

    await verifier.verify(message)

    assert fetched == [post["SigningCertURL"]]
    outcome = normalize_sns(message, config)
    assert isinstance(outcome, list)
    assert [(a.event, a.alert_type) for a in outcome] == [("firing", "AWS/EC2")]
