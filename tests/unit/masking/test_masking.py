from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from tarsy.tools.masking import BUILTIN_GROUPS, CustomPattern, Masker, MaskingConfig, mask_token

CORPUS = Path(__file__).parent / "corpus"

# Per corpus file: values that must be gone, and exact substrings that must survive.
CASES: dict[str, tuple[list[str], list[str]]] = {
    "secret-get.yaml": (
        [
            "Wng4cFEydkxtNC1jb3JwdXM=",
            "cGF5bWVudHM=",
            "cG9zdGdyZXM6Ly9wYXltZW50czpaeDhwUTJ2TG00LWNvcnB1c0BwYXltZW50cy1kYjo1NDMyL3BheW1lbnRz",
        ],
        [
            "  password: [MASKED_KUBERNETES_SECRETS]\n",
            "  DATABASE_DSN: [MASKED_KUBERNETES_SECRETS]\n",
            '"password":"[MASKED_KUBERNETES_SECRETS]"',
            "name: payments-db-credentials",
            "uid: 7b0c9a1e-3f52-4d6b-9e21-5a8f0c4d2e13",
            'creationTimestamp: "2026-09-14T11:02:37Z"',
            "type: Opaque",
        ],
    ),
    "secret-list.yaml": (
        ["LS0tLS1CRUdJTi", "s3cr3t-shared-key-corpus", "hooks.example.com/notify", "webhook\n"],
        [
            "    tls.crt: [MASKED_KUBERNETES_SECRETS]\n",
            "    config.yaml: [MASKED_KUBERNETES_SECRETS]\n",
            "    LOG_LEVEL: info\n",
            "    PAYMENTS_TIMEOUT: 30s\n",
            '    PASSWORD_MIN_LENGTH: "12"\n',
            "cert-manager.io/certificate-name: shop-api-tls",
            "  type: kubernetes.io/tls\n",
        ],
    ),
    "secret-list.json": (
        ["Wng4cFEydkxtNC1jb3JwdXM=", "cGF5bWVudHM=", "eyJhdXRocyI6"],
        [
            '"password": "[MASKED_KUBERNETES_SECRETS]"',
            '".dockerconfigjson": "[MASKED_KUBERNETES_SECRETS]"',
            '\\"password\\":\\"[MASKED_KUBERNETES_SECRETS]\\"',
            '"DATABASE_HOST": "payments-db.checkout.svc.cluster.local"',
            '"FEATURE_FLAGS": "{\\"instant-refunds\\": true, \\"3ds-v2\\": false}"',
            '"uid": "a1d4f7c2-9e38-4b60-b5d1-0c7e2f9a8b34"',
        ],
    ),
    "pod-describe.txt": (
        ["tok_live_corpus_4eC39HqLyjWDarjtT1zdp7dc", "sk_live_corpus_51H8xYzExampleKey"],
        [
            "Name:             payments-api-7d9f8b6c5-x2k4q",
            "payments-api@sha256:4f7c2a9e1b3d5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8",
            "containerd://8e2f4c1a9b7d3e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7",
            "Node:             gke-prod-eu-1-default-pool-3f1a2b7c-h2mt/10.132.0.13",
            "<set to the key 'password' in secret 'payments-db-credentials'>  Optional: false",
            "kubectl.kubernetes.io/restartedAt: 2026-11-23T07:55:03Z",
            "TokenExpirationSeconds:  3607",
            "OTEL_SERVICE_NAME: payments-api",
            "x2k4q_checkout(5e1f0a3b-2c4d-4e6f-8a9b-0c1d2e3f4a5b)",
            "Liveness:   http-get http://:8080/healthz",
        ],
    ),
    "pod.yaml": (
        ["r3dis-corpus-pass"],
        [
            "  automountServiceAccountToken: true\n",
            "          key: password\n          name: payments-db-credentials\n",
            "      secretName: payments-db-credentials\n",
            "    - name: REDIS_PASSWORD\n      value: [MASKED_PASSWORDS]\n",
            "value: http://otel-collector.monitoring.svc:4317",
            "  - name: artifact-registry-pull\n",
            "  podIP: 10.8.1.17\n",
        ],
    ),
    "env-dump.txt": (
        [
            "Zx8pQ2vLm4-corpus",
            "root pass with spaces",
            "c1i3nt-s3cr3t-corpus",
            "ghp_FAKEexampleTOKEN",
            "xoxb-000000000000",
            "AKIAIOSFODNN7EXAMPLE",
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "AIzaSyD-FAKEexampleKEY",
            "r3dis-corpus-pass",
            "rabbit-corpus-pw",
        ],
        [
            "HOSTNAME=payments-api-7d9f8b6c5-x2k4q\n",
            "PWD=/app\n",
            "OLDPWD=/\n",
            "KUBERNETES_SERVICE_HOST=10.96.0.1\n",
            "DB_USER=payments\n",
            "OAUTH_CLIENT_ID=checkout-web\n",
            "CACHE_URL=redis://:[MASKED_PASSWORDS]@redis-master.checkout.svc:6379/0\n",
            "amqp://checkout:[MASKED_PASSWORDS]@rabbitmq.messaging.svc:5672/checkout",
            "BUILD_SHA=9c1e4ab2f3d4e5f60718293a4b5c6d7e8f90a1b2\n",
            "RELEASE_ID=3f2b8c1e-5a7d-4e9f-b0c6-1d2e3f4a5b6c\n",
            "TOKEN_REFRESH_INTERVAL=300\n",
            "PASSWORD_MIN_LENGTH=12\n",
            "SESSION_SECRET_FILE=/var/run/secrets/session\n",
        ],
    ),
    "app-logs.txt": (
        [
            "Zx8pQ2vLm4-corpus",
            "sk_live_corpusBearer0123456789",
            "eyJhbGciOiJSUzI1NiIsImtpZCI6",
            "fc-corpus-key-8d7e6f",
            "geo-corpus-key-19af77",
            "FAKEcorpusWebhook01234",
            "bGVkZ2VyOmxlZGdlci1jb3JwdXMtcHc=",
            "hunter2-corpus",
        ],
        [
            "2026-11-23T08:03:41.112Z INFO  starting payments-api version=3.8.2 commit=9c1e4ab",
            "postgres://payments:[MASKED_PASSWORDS]@payments-db-primary.checkout.svc.cluster.local:5432",
            "Authorization: Bearer [MASKED_TOKENS]",
            '"X-Request-Id": "6f1c2d3e-4a5b-4c6d-8e7f-9a0b1c2d3e4f"',
            "api_key=[MASKED_TOKENS]&order=ord_7731 status=200",
            '"user":"ops@example.com"',
            '"client_ip":"10.8.2.33"',
            "payments-api@sha256:4f7c2a9e1b3d5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8",
            "lookup payments-db-primary.checkout.svc.cluster.local on 10.96.0.10:53: no such host",
            "the Bearer token scheme is required; token rotation every 3600s",
        ],
    ),
    "tls.pem": (
        [
            "MIIDfakeCERTcorpus",
            "MIIEfakeKEYcorpus",
            "LxoS2tFczGkPLPgizskuemMghRniWaoLcyehkd3qqGElvW",
        ],
        [
            "-----BEGIN CERTIFICATE-----\n[MASKED_CERTIFICATES]\n-----END CERTIFICATE-----",
            "-----BEGIN RSA PRIVATE KEY-----\n[MASKED_CERTIFICATES]\n-----END RSA PRIVATE KEY-----",
        ],
    ),
}


def corpus(name: str) -> str:
    return (CORPUS / name).read_text()


def test_every_corpus_file_has_a_case() -> None:
    assert sorted(p.name for p in CORPUS.iterdir()) == sorted([*CASES, "configmap.yaml"])


@pytest.mark.parametrize("name", sorted(CASES))
def test_corpus_secrets_are_masked(name: str) -> None:
    result = Masker().mask(corpus(name))
    for secret in CASES[name][0]:
        assert secret not in result.text, f"{secret!r} survived in {name}"
    assert result.total > 0


@pytest.mark.parametrize("name", sorted(CASES))
def test_corpus_ordinary_text_survives(name: str) -> None:
    result = Masker().mask(corpus(name))
    for kept in CASES[name][1]:
        assert kept in corpus(name) or "[MASKED_" in kept, f"bad test case {kept!r}"
        assert kept in result.text, f"{kept!r} missing from masked {name}"


def test_configmap_survives_untouched() -> None:
    text = corpus("configmap.yaml")
    result = Masker().mask(text)
    assert result.text == text
    assert result.counts == {}


@pytest.mark.parametrize("name", sorted([*CASES, "configmap.yaml"]))
def test_masking_is_idempotent(name: str) -> None:
    masker = Masker()
    once = masker.mask(corpus(name))
    twice = masker.mask(once.text)
    assert twice.text == once.text
    assert twice.counts == {}


@pytest.mark.parametrize(
    "name", ["secret-get.yaml", "secret-list.yaml", "configmap.yaml", "pod.yaml"]
)
def test_masked_yaml_stays_parseable(name: str) -> None:
    masked = Masker().mask(corpus(name)).text
    assert yaml.safe_load(masked)["kind"] == yaml.safe_load(corpus(name))["kind"]


def test_masked_json_stays_parseable() -> None:
    masked = json.loads(Masker().mask(corpus("secret-list.json")).text)
    secret, _pull, configmap = masked["items"]
    assert secret["data"] == {
        "password": "[MASKED_KUBERNETES_SECRETS]",
        "username": "[MASKED_KUBERNETES_SECRETS]",
    }
    assert configmap["data"]["DATABASE_PORT"] == "5432"
    assert "[MASKED_" not in json.dumps(configmap)


def test_counts_name_the_patterns() -> None:
    result = Masker().mask(corpus("secret-get.yaml"))
    assert result.counts == {"k8s_secret_yaml": 3, "k8s_secret_json": 3}
    assert result.total == 6


def test_data_outside_a_secret_is_kept() -> None:
    text = "kind: ConfigMap\ndata:\n  password: not-masked-here-but-by-passwords\n  mode: fast\n"
    only_k8s = Masker(MaskingConfig(pattern_groups=["kubernetes_secrets"])).mask(text)
    assert only_k8s.text == text


def test_secret_data_before_kind_and_multi_document() -> None:
    text = (
        "apiVersion: v1\nkind: ConfigMap\ndata:\n  a: keep-me\n---\n"
        "apiVersion: v1\ndata:\n  token: dG9rZW4tdmFsdWU=\n  multi: |\n    line one\n    line two\n"
        "kind: Secret\nmetadata:\n  name: s\n"
    )
    masked = Masker(MaskingConfig(pattern_groups=["kubernetes_secrets"])).mask(text).text
    assert "a: keep-me" in masked
    assert "dG9rZW4tdmFsdWU=" not in masked
    assert "line one" not in masked and "line two" not in masked
    assert "  multi: [MASKED_KUBERNETES_SECRETS]\nkind: Secret" in masked


def test_secret_data_in_flow_style() -> None:
    text = "kind: Secret\ndata: {token: dG9rZW4tdmFsdWU=}\nmetadata: {name: s}\n"
    masker = Masker(MaskingConfig(pattern_groups=["kubernetes_secrets"]))
    masked = masker.mask(text).text
    assert masked == "kind: Secret\ndata: [MASKED_KUBERNETES_SECRETS]\nmetadata: {name: s}\n"
    assert masker.mask(masked).counts == {}
    empty = "kind: Secret\ndata: {}\n"
    assert masker.mask(empty).text == empty


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("curl -H 'Authorization: Bearer abc123def456ghi789' https://x", "abc123def456ghi789"),
        ("X-API-Key: 0a1b2c3d4e5f", "0a1b2c3d4e5f"),
        ('{"apiKey": "k-12345-abcde"}', "k-12345-abcde"),
        ("token=ghs_" + "a" * 36, "ghs_" + "a" * 36),
        ("glpat-abcdefghij0123456789", "glpat-abcdefghij0123456789"),
        ("slack: xoxp-1234567890-abcdefghij", "xoxp-1234567890-abcdefghij"),
        ("key AKIAABCDEFGHIJKLMNOP in log", "AKIAABCDEFGHIJKLMNOP"),
        ("maps AIza" + "B" * 35 + " ok", "AIza" + "B" * 35),
        ("client_secret: hush-hush-99", "hush-hush-99"),
        ("  clientSecret: hush-hush-99", "hush-hush-99"),
        ("export APP_TOKEN='quoted value 1'", "quoted value 1"),
        ("mongodb+srv://admin:pa55w0rd@cluster0.example.net/db", "pa55w0rd"),
        (
            "kubeconfig client-key-data: LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQo=",
            "LS0tLS1CRUdJTi",
        ),
        (
            '{"private_key": "-----BEGIN PRIVATE KEY-----\\nMIIEvQIB\\n'
            '-----END PRIVATE KEY-----\\n"}',
            "MIIEvQIB",
        ),
    ],
)
def test_single_secrets(text: str, secret: str) -> None:
    masker = Masker()
    masked = masker.mask(text).text
    assert secret not in masked
    assert masker.mask(masked).text == masked


@pytest.mark.parametrize(
    "text",
    [
        "pod/checkout-7f9c6d5b8-2xkqz restarted; image nginx:1.27.3-alpine",
        "image@sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "request 123e4567-e89b-12d3-a456-426614174000 at 2026-11-23T07:58:12.345Z",
        "listening on 10.8.1.17:8080 and [fd00::1]:443, via https://api.example.com:8443/v1",
        "secretName: shop-api-tls",
        "kind: Secret",
        "type: kubernetes.io/service-account-token",
        "password reset emails are sent by the notifier",
        "Bearer authentication is required",
        "git commit 9c1e4ab2f3d4e5f60718293a4b5c6d7e8f90a1b2",
        "DB_PASSWORD: <set to the key 'password' in secret 'db'>",
        "PASSWORD=${DB_PASSWORD}",
        "tokens_per_minute=6000 secret_ref=vault://kv/app",
        "[MASKED_TOKENS] already masked",
    ],
)
def test_ordinary_text_is_untouched(text: str) -> None:
    result = Masker().mask(text)
    assert result.text == text
    assert result.counts == {}


def test_disabled_masks_nothing() -> None:
    text = corpus("env-dump.txt")
    masker = Masker(MaskingConfig(enabled=False))
    assert not masker.enabled
    assert masker.mask(text).text == text
    assert masker.mask_json({"password": "x"}).value == {"password": "x"}


def test_groups_can_be_selected() -> None:
    text = "DB_PASSWORD=hunter2 GITHUB=ghp_" + "b" * 36
    only_tokens = Masker(MaskingConfig(pattern_groups=["tokens"])).mask(text).text
    assert "hunter2" in only_tokens
    assert "ghp_" not in only_tokens
    only_passwords = Masker(MaskingConfig(pattern_groups=["passwords"])).mask(text).text
    assert "hunter2" not in only_passwords
    assert "ghp_" + "b" * 36 in only_passwords


def test_default_config_has_every_group() -> None:
    assert MaskingConfig().pattern_groups == list(BUILTIN_GROUPS)
    assert set(BUILTIN_GROUPS) == {"kubernetes_secrets", "tokens", "certificates", "passwords"}
    assert mask_token("kubernetes_secrets") == "[MASKED_KUBERNETES_SECRETS]"


def test_unknown_group_is_rejected() -> None:
    with pytest.raises(ValidationError):
        MaskingConfig.model_validate({"pattern_groups": ["tokens", "credit_cards"]})


def test_custom_patterns() -> None:
    config = MaskingConfig.model_validate(
        {
            "pattern_groups": [],
            "custom_patterns": [
                {"name": "account_id", "pattern": r"acct-\d{8}"},
                {
                    "name": "internal_key",
                    "pattern": r"ikey=(?P<secret>[a-f0-9]{6,})",
                    "replacement": "<redacted>",
                },
            ],
        }
    )
    masker = Masker(config)
    result = masker.mask("charged acct-12345678 with ikey=deadbeef01 ok")
    assert result.text == "charged [MASKED_ACCOUNT_ID] with ikey=<redacted> ok"
    assert result.counts == {"account_id": 1, "internal_key": 1}
    assert masker.mask(result.text).counts == {}


@pytest.mark.parametrize(
    "pattern",
    [
        {"name": "bad", "pattern": "acct-(\\d+"},
        {"name": "empty", "pattern": "x*"},
        {"name": "bad name!", "pattern": "x"},
        {"name": "jwt", "pattern": "x"},
    ],
)
def test_invalid_custom_patterns(pattern: dict[str, str]) -> None:
    with pytest.raises(ValidationError):
        MaskingConfig.model_validate({"custom_patterns": [pattern]})


def test_duplicate_custom_names() -> None:
    with pytest.raises(ValidationError, match="already used"):
        MaskingConfig(
            custom_patterns=[
                CustomPattern(name="a", pattern="x"),
                CustomPattern(name="a", pattern="y"),
            ]
        )


def test_mask_json_nested() -> None:
    value: dict[str, Any] = {
        "alert": {
            "labels": {"pod": "payments-api-7d9f8b6c5-x2k4q", "namespace": "checkout"},
            "annotations": {"description": "login failed with password=hunter2 for ops"},
        },
        "env": [{"name": "MODE", "value": "live"}, {"name": "DB_PASSWORD", "value": "s3cret"}],
        "credentials": {"password": "hunter2", "api_key": 123456, "token": None, "debug": True},
        "secret": {
            "kind": "Secret",
            "data": {"password": "aHVudGVyMg==", "empty": ""},
            "metadata": {"name": "db"},
        },
        "configmap": {"kind": "ConfigMap", "data": {"password": "plain-config"}},
        "items": ("Authorization: Bearer tok3n-abcdefghijk", 42, 1.5, None),
    }
    original = copy.deepcopy(value)
    result = Masker().mask_json(value)
    assert value == original  # not modified in place
    masked = result.value
    assert masked["alert"]["labels"] == original["alert"]["labels"]
    assert "hunter2" not in json.dumps(masked)
    assert masked["credentials"] == {
        "password": "[MASKED_PASSWORDS]",
        "api_key": "[MASKED_TOKENS]",
        "token": None,
        "debug": True,
    }
    assert masked["secret"]["data"] == {"password": "[MASKED_KUBERNETES_SECRETS]", "empty": ""}
    assert masked["secret"]["metadata"] == {"name": "db"}
    assert masked["configmap"]["data"]["password"] == "[MASKED_PASSWORDS]"
    assert masked["items"] == ["Authorization: Bearer [MASKED_TOKENS]", 42, 1.5, None]
    assert masked["env"] == [
        original["env"][0],
        {"name": "DB_PASSWORD", "value": "[MASKED_PASSWORDS]"},
    ]
    assert result.total == 7
    again = Masker().mask_json(masked)
    assert again.value == masked
    assert again.counts == {}
