"""A reply that did not finish: cut at the output-token limit, or blocked by a filter.

Design constraint: such a reply is never taken as a conclusion or acted on.
Every backend reports why a reply ended (``LLMResult.finish_reason``, from
Gemini's ``finishReason``, OpenAI's ``finish_reason``, Anthropic's
``stop_reason``); when it is ``length`` or ``blocked``, the step records the
reply on the interaction (its ``error``) and on the timeline (an
``llm_response`` marked ``cut_short``), runs none of its tool calls, and
treats it as a failed attempt: the iteration is tried again in the next step,
and a second failure in a row fails the execution with the reason in its error.
The retry of a reply cut at the token limit is told so (:func:`retry_messages`):
a small model that repeats itself until the limit would otherwise do it again.
"""

from __future__ import annotations

from tarsy.llm.base import LLMResult
from tarsy.models import ConversationMessage, ErrorInfo, LLMResponseEvent


def cut_short_error(result: LLMResult) -> ErrorInfo | None:
    """Why ``result`` is not a whole answer, or None when it is."""
    if not result.cut_short:
        return None
    raw = result.raw_finish_reason or result.finish_reason
    if result.finish_reason == "length":
        message = f"the model's reply was cut at its output-token limit (finish reason {raw!r})"
        code = "truncated"
    else:
        message = f"the model's reply was blocked by a safety or content filter ({raw!r})"
        code = "blocked"
    return ErrorInfo(message=message, code=code, retryable=True)


def cut_short_event(result: LLMResult, error: ErrorInfo, iteration: int) -> LLMResponseEvent:
    """The timeline's record of a reply that did not finish (what there was of it)."""
    return LLMResponseEvent(
        content=result.text,
        iteration=iteration,
        cut_short=error.code,
        finish_reason=result.raw_finish_reason or result.finish_reason,
        error=error.message,
    )


def cut_note(max_output_tokens: int | None = None) -> str:
    """What the model is told before the retry of a reply cut at its output-token limit."""
    limit = f" ({max_output_tokens:,} tokens)" if max_output_tokens else ""
    return (
        f"Your previous reply was cut off at the output-token limit{limit} and was not used. "
        "Reply again, much shorter: one step at a time, without repeating yourself; a final "
        "analysis of a few short paragraphs."
    )


def retry_messages(
    error: ErrorInfo, max_output_tokens: int | None = None
) -> list[ConversationMessage]:
    """The conversation's addition before the retry of a reply that did not finish.

    A cut reply gets :func:`cut_note` (its text stays out of the conversation:
    it is on the timeline); a blocked one gets nothing, since shorter is no remedy.
    """
    if error.code != "truncated":
        return []
    return [ConversationMessage(role="user", content=cut_note(max_output_tokens))]
