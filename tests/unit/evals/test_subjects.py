"""Which models an evaluation runs, and the scripted ones' replies."""

from __future__ import annotations

import json

import pytest

from tarsy.settings import Settings
from tarsy_dev.demo_cluster import load_scenario
from tarsy_dev.evals.subjects import EstimatedTokens, resolve_models
from tarsy_dev.fakes.fake_gemini import FakeCall, FakeReply
from tarsy_dev.fakes.sloppy import SLOPPY_LABEL


def test_without_credentials_the_default_is_the_two_scripted_models() -> None:
    models = resolve_models([], Settings())
    assert [(m.name, m.scripted, m.expected) for m in models] == [
        ("standin", True, "pass"),
        ("sloppy", True, "fail"),
    ]


def test_with_a_gemini_key_the_default_is_the_configured_model() -> None:
    settings = Settings(GEMINI_API_KEY="k", TARSY_DEFAULT_MODEL="gemini-2.5-pro")
    [model] = resolve_models([], settings)
    assert (model.name, model.scripted, model.expected) == ("gemini-2.5-pro", False, None)
    both = resolve_models(["gemini-2.5-flash", "standin", "gemini-2.5-flash"], settings)
    assert [m.name for m in both] == ["gemini-2.5-flash", "standin"]


def test_a_real_model_needs_credentials() -> None:
    with pytest.raises(ValueError, match="needs GEMINI_API_KEY or TARSY_VERTEX_PROJECT"):
        resolve_models(["gemini-2.5-pro"], Settings())
    [vertex] = resolve_models(["gemini-2.5-pro"], Settings(TARSY_VERTEX_PROJECT="p"))
    assert not vertex.scripted
    with pytest.raises(ValueError, match="not a scripted model"):
        vertex.responder(load_scenario("oom-killed"))


def call(text: str) -> FakeCall:
    return FakeCall(
        model="gemini-2.5-flash",
        method="streamGenerateContent",
        path="/v1beta/models/gemini-2.5-flash:streamGenerateContent",
        body={"contents": [{"role": "user", "parts": [{"text": text}]}]},
    )


def test_estimated_tokens_follow_the_sizes_of_request_and_reply() -> None:
    wrapped = EstimatedTokens(lambda c: FakeReply(text="x" * 400, thinking="t" * 80))
    request = call("y" * 4000)
    reply = wrapped(request)
    assert reply.input_tokens == len(json.dumps(request.body)) // 4
    assert reply.output_tokens == 100
    assert reply.thinking_tokens == 20
    assert reply.text == "x" * 400


def test_the_sloppy_responder_is_labelled_and_wrong() -> None:
    [_, sloppy] = resolve_models(["standin", "sloppy"], Settings())
    scenario = load_scenario("cart-victim-networkpolicy")
    reply = sloppy.responder(scenario)(call("<<<BEGIN ANALYSIS>>>\n...\n"))
    assert reply.text.startswith(SLOPPY_LABEL)
    assert scenario.expected.forbidden[0].claim in reply.text
