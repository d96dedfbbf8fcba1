"""Fitting a conversation into the model's context window: the oldest tool results go first."""

from __future__ import annotations

from tarsy.agent.window import KEEP_LATEST, conversation_tokens, fit_to_window
from tarsy.config.schema import LLMProviderConfig
from tarsy.engine.iteration import fitted
from tarsy.llm.base import GenerateRequest
from tarsy.models import ConversationMessage, ToolCall

BIG = "x" * 8000  # about 2,000 tokens


def observation(n: int) -> ConversationMessage:
    return ConversationMessage(
        role="user", content=f"Observation from k8s.pods_log {{n: {n}}}:\n{BIG}"
    )


def schema_conversation(turns: int) -> list[ConversationMessage]:
    messages = [
        ConversationMessage(role="system", content="You are an SRE agent."),
        ConversationMessage(role="user", content="Alert: payments-api crashloops. " + BIG),
    ]
    for n in range(turns):
        messages.append(
            ConversationMessage(role="assistant", content=f'{{"action": "call_tool", "n": {n}}}')
        )
        messages.append(observation(n))
    return messages


def test_a_conversation_that_fits_is_sent_as_it_is() -> None:
    messages = schema_conversation(3)
    fitted = fit_to_window(messages, 32768, 2048)
    assert fitted.elided == 0 and fitted.messages == messages


def test_an_unknown_window_never_elides() -> None:
    messages = schema_conversation(40)
    assert fit_to_window(messages, None, None).messages == messages


def test_the_oldest_observations_are_elided_first_until_the_conversation_fits() -> None:
    messages = schema_conversation(14)  # about 30,000 tokens: over 80% of 32k less the reply
    fitted = fit_to_window(messages, 32768, 2048)
    assert fitted.elided > 0
    assert conversation_tokens(fitted.messages) <= int(32768 * 0.8) - 2048
    assert len(fitted.messages) == len(messages)  # nothing is dropped
    elided = [m for m in fitted.messages if "was removed to fit" in m.content]
    assert elided == fitted.messages[3 : 3 + 2 * fitted.elided : 2]  # the oldest ones
    # The call each elided result answered is still named, and the agent's turns are intact.
    assert elided[0].content.startswith("Observation from k8s.pods_log {n: 0}:\n")
    assert [m for m in fitted.messages if m.role == "assistant"] == [
        m for m in messages if m.role == "assistant"
    ]


def test_the_system_prompt_the_alert_and_the_latest_exchange_are_never_elided() -> None:
    messages = schema_conversation(30)
    fitted = fit_to_window(messages, 8192, 1024)
    assert fitted.messages[:2] == messages[:2]
    assert fitted.messages[-KEEP_LATEST:] == messages[-KEEP_LATEST:]


def test_native_tool_results_keep_their_call_ids_when_elided() -> None:
    messages = [
        ConversationMessage(role="system", content="You are an SRE agent."),
        ConversationMessage(role="user", content="Alert."),
    ]
    for n in range(20):
        call = ToolCall(id=f"call-{n}", name="k8s.pods_log", arguments="{}")
        messages.append(ConversationMessage(role="assistant", tool_calls=[call]))
        messages.append(
            ConversationMessage(role="tool", content=BIG, tool_call_id=call.id, tool_name=call.name)
        )
    fitted = fit_to_window(messages, 32768, 2048)
    first = fitted.messages[3]
    assert fitted.elided > 0 and "was removed to fit" in first.content
    assert (first.tool_call_id, first.tool_name) == ("call-0", "k8s.pods_log")


def test_a_request_to_a_small_self_hosted_model_is_fitted_to_its_configured_window() -> None:
    config = LLMProviderConfig.model_validate(
        {
            "type": "openai-compatible",
            "model": "qwen2.5-coder-1.5b-instruct",
            "base_url": "http://127.0.0.1:8080/v1",
            "context_window": 8192,
            "max_output_tokens": 1024,
        }
    )
    request = GenerateRequest(execution_id="e", messages=schema_conversation(6), config=config)
    sent = fitted(request)
    assert conversation_tokens(sent.messages) <= int(8192 * 0.8) - 1024
    roomy = config.model_copy(update={"context_window": 1_000_000})
    unchanged = request.model_copy(update={"config": roomy})
    assert fitted(unchanged) is unchanged
