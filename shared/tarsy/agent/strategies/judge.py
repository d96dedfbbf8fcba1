"""``judge``: the scoring execution that closes a session when its chain asks for one.

One call, no tools: the judge reads the session (its prompts come from
:mod:`tarsy.agent.scoring`) and answers with a JSON score. A reply that does not
parse fails the execution with the reason; scoring is fail-open, so the
session completes either way (see :func:`tarsy.engine.progression.score_verdict`).
"""

from __future__ import annotations

from tarsy.agent.scoring import JudgeReplyError, parse_judge_reply
from tarsy.agent.strategies.base import IterationOutcome, IterationState
from tarsy.agent.strategies.single_call import ExecutiveSummaryStrategy
from tarsy.llm.base import LLMResult
from tarsy.models import ConversationMessage, ErrorInfo
from tarsy.tools.base import ToolResult


class JudgeStrategy(ExecutiveSummaryStrategy):
    """Score a finished session with an LLM judge (0-100, four categories, missing tools).

    Its request is the summary's (one call, no thinking, no tools); only what it
    makes of the answer differs.
    """

    name = "judge"

    def on_result(
        self, state: IterationState, result: LLMResult, tool_results: list[ToolResult]
    ) -> IterationOutcome:
        """The score as the execution's final analysis (JSON), or a failure with the reason."""
        messages = [ConversationMessage(role="assistant", content=result.text)]
        try:
            score = parse_judge_reply(result.text)
        except JudgeReplyError as e:
            error = ErrorInfo(message=f"the judge's reply is not a score: {e}", code="judge_reply")
            return IterationOutcome(messages=messages, next="fail", error=error)
        return IterationOutcome(
            messages=messages, next="complete", final_analysis=score.model_dump_json()
        )
