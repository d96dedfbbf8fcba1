"""``react``: text ReAct (Thought / Action / Action Input / Final Answer), seed 000 Q2.

The model answers in text; :mod:`tarsy.agent.strategies.react_parser` reads the
complete answer once. An action runs one tool and its result comes back as an
``Observation:`` user message; a malformed answer gets specific feedback and a
format reminder instead; a final answer concludes. Works on any backend that
streams text (the ``langchain`` one by default).

The conclusion call (after ``max_iterations``, or after a second detected loop)
lists no tools and asks for the Final Answer alone; whatever it writes ends the
execution: an ``Action`` there is never run, its reasoning becomes the forced
final answer. An agent whose ``tool_choice`` is ``none`` works the same way on
every call; ``required`` and a named function cannot be imposed on text and act
as ``auto``.
"""

from __future__ import annotations

import json
import re
from hashlib import sha256

from tarsy.agent.strategies import answers
from tarsy.agent.strategies.base import (
    ConclusionReason,
    IterationOutcome,
    IterationState,
    code_execution_events,
    conclude,
    conclusion_reason,
    continue_or_stop,
    detect_loops,
    force_conclusion,
    thinking_events,
    tool_events,
    turn_notes,
)
from tarsy.agent.strategies.native_thinking import with_guidance
from tarsy.agent.strategies.react_parser import FORMAT_REMINDER, ReActResult, parse_react
from tarsy.llm.base import Capabilities, GenerateRequest, LLMResult
from tarsy.models import ConversationMessage, LLMResponseEvent, ToolCall, TurnNotes
from tarsy.tools.base import ToolListing, ToolResult

LAST_ITERATION_NOTE = (
    "This is your last iteration: no tool will run. Write your Final Answer now with the "
    "evidence you have, and say what remains unverified."
)
LOOP_CONCLUSION_NOTE = (
    "You kept repeating the same tool calls, so no more tools will run. Write your Final "
    "Answer now with the evidence you have, and say what remains unverified."
)
NO_TOOLS_NOTE = "No tools are available: reason from what you were given and conclude."
BUDGET_CONCLUSION_NOTE = (
    "The investigation's token or cost budget is spent, so no more tools will run. Write your "
    "Final Answer now with the evidence you have, and say what remains unverified."
)
CONCLUSION_NOTES: dict[ConclusionReason, str] = {
    "max_iterations": LAST_ITERATION_NOTE,
    "loop_detected": LOOP_CONCLUSION_NOTE,
    "budget": BUDGET_CONCLUSION_NOTE,
}
CONCLUSION_FORMAT = """\
Write exactly:
Thought: <what the evidence shows>
Final Answer: <your complete analysis>"""
# Put before a forced final answer that the model did not write as one.
FORCED_ANSWER_NOTE = (
    "_(No Final Answer was given when the agent had to conclude; this is its last reasoning.)_"
)
_TOOL_LINE = re.compile(r"^\W*(Action Input|Action|Observation)\W*:", re.IGNORECASE)


def tools_as_text(listing: ToolListing) -> str:
    """The agent's tools as the ReAct prompt lists them."""
    if not listing.tools:
        return NO_TOOLS_NOTE
    lines = ["Available tools (use the exact server.tool name):"]
    for tool in listing.tools:
        lines.append(f"- {tool.name}: {tool.description.strip() or '(no description)'}")
        lines.append(f"  parameters (JSON schema): {json.dumps(tool.parameters, sort_keys=True)}")
    return "\n".join(lines)


def react_guidance(listing: ToolListing, *, conclusion: ConclusionReason | None = None) -> str:
    """The ReAct rules and the tools; for a conclusion call, the Final Answer format alone."""
    if conclusion is not None:
        return "\n\n".join(
            ["Work in the ReAct format.", CONCLUSION_NOTES[conclusion], CONCLUSION_FORMAT]
        )
    rules = "Work in the ReAct format, one step per response."
    return "\n\n".join([rules, FORMAT_REMINDER, tools_as_text(listing)])


def call_id_for(state: IterationState) -> str:
    """A deterministic id for this iteration's tool call (redelivery reproduces it)."""
    digest = sha256(f"{state.execution.execution_id}:{state.iteration}".encode()).hexdigest()
    return f"react-{digest[:12]}"


def action_call(parsed: ReActResult, call_id: str) -> ToolCall | None:
    """The tool call of a parsed Action, if it is one."""
    if parsed.kind != "action" or parsed.action is None:
        return None
    arguments = json.dumps(parsed.action_input or {}, sort_keys=True)
    return ToolCall(id=call_id, name=parsed.action, arguments=arguments)


def past_calls(state: IterationState) -> list[ToolCall]:
    """The Actions of the execution so far, re-read from its answers (run or not)."""
    calls: list[ToolCall] = []
    for n, message in enumerate(state.messages):
        if message.role == "assistant":
            call = action_call(parse_react(message.content, state.tools.names), f"past-{n}")
            if call is not None:
                calls.append(call)
    return calls


def unwritten_answer(answer: str) -> str | None:
    """Why a Final Answer is no analysis (empty, or the format's template copied), or None."""
    return answers.unwritten_answer(answer, (FORMAT_REMINDER, CONCLUSION_FORMAT))


def answer_feedback(problem: str) -> str:
    """What a model whose Final Answer was not accepted is told (worded as ReAct feedback)."""
    return (
        f"Observation: Error in reasoning - your Final Answer was not used: {problem}.\n\n"
        f"{FORMAT_REMINDER}"
    )


def _unused_reply(result: LLMResult, notes: TurnNotes, problem: str | None) -> LLMResponseEvent:
    """The timeline's record of a reply that was not used, and why (``error``)."""
    shown = notes.copy()
    if problem is not None:
        shown["error"] = problem
    return LLMResponseEvent(content=result.text, **shown)


def salvage(parsed: ReActResult, text: str) -> str:
    """The forced final answer of a conclusion call that wrote no Final Answer."""
    reasoning = (parsed.thought or "").strip()
    if not reasoning:
        kept = [line for line in text.splitlines() if not _TOOL_LINE.match(line)]
        reasoning = "\n".join(kept).strip()
    return f"{FORCED_ANSWER_NOTE}\n\n{reasoning}" if reasoning else ""


class ReActStrategy:
    """Text ReAct over any text-streaming backend."""

    name = "react"
    requires = Capabilities(streaming=True)
    uses_tools = True

    def _conclusion(self, state: IterationState) -> ConclusionReason | None:
        return conclusion_reason(state, past_calls(state))

    def _toolless(self, state: IterationState, reason: ConclusionReason | None) -> bool:
        return reason is not None or state.config.tool_choice == "none"

    def build_request(self, state: IterationState) -> GenerateRequest:
        """The conversation with the ReAct rules and tools; no function declarations."""
        reason = self._conclusion(state)
        toolless = self._toolless(state, reason)
        guidance = react_guidance(state.tools if not toolless else ToolListing(), conclusion=reason)
        return GenerateRequest(
            execution_id=state.execution.execution_id,
            messages=with_guidance(state.messages, guidance),
            config=state.config.provider,
            tool_choice="none" if toolless else None,
        )

    def _parse(self, state: IterationState, result: LLMResult) -> ReActResult:
        return parse_react(result.text, state.tools.names)

    def tool_calls(self, state: IterationState, result: LLMResult) -> list[ToolCall]:
        """The one Action of a usable response, unless it loops or no tool may run."""
        history = past_calls(state)
        if self._toolless(state, conclusion_reason(state, history)):
            return []
        call = action_call(self._parse(state, result), call_id_for(state))
        if call is None or detect_loops(state, history, [call]):
            return []
        return [call]

    def on_result(
        self, state: IterationState, result: LLMResult, tool_results: list[ToolResult]
    ) -> IterationOutcome:
        """Record the step: an observation, feedback on a malformed answer, or the conclusion."""
        history = past_calls(state)
        reason = conclusion_reason(state, history)
        parsed = self._parse(state, result)
        notes = turn_notes(state, result)
        notes["react_kind"] = parsed.kind
        if parsed.fallbacks:
            notes["parser_fallbacks"] = list(parsed.fallbacks)
        timeline = thinking_events(parsed.thought or "", notes, "react")
        timeline.extend(code_execution_events(result, notes))
        final = parsed.final_answer if parsed.kind == "final_answer" else None
        unwritten = unwritten_answer(final) if final is not None else None
        if unwritten is not None:
            notes["answer_error"] = unwritten
        if reason is not None:
            if parsed.kind == "action" and parsed.action:
                notes["ignored_tool_calls"] = [parsed.action]
            if final is not None and unwritten is None:
                analysis = final
            elif final is not None:  # a template: the model's own reasoning, if it wrote any
                thought = parsed.thought or ""
                analysis = "" if unwritten_answer(thought) else f"{FORCED_ANSWER_NOTE}\n\n{thought}"
            else:
                analysis = salvage(parsed, result.text)
            return force_conclusion(state, reason, result.text, analysis, timeline, notes)
        if final is not None:
            problem = unwritten
            if problem is None and not state.at_limit:
                problem = answers.unnamed_evidence(final, state.messages)
                if problem is not None:
                    notes["nudge"] = "unnamed_evidence"
            if problem is None:
                return conclude(state, result.text, final.strip(), timeline, notes)
            timeline.append(_unused_reply(result, notes, problem))
            exchange = [
                ConversationMessage(role="assistant", content=result.text),
                ConversationMessage(role="user", content=answer_feedback(problem)),
            ]
            return continue_or_stop(state, exchange, timeline)
        if self._toolless(state, reason):
            if parsed.kind == "action" and parsed.action:
                notes["ignored_tool_calls"] = [parsed.action]
            return conclude(
                state, result.text, salvage(parsed, result.text).strip(), timeline, notes
            )
        assistant = ConversationMessage(role="assistant", content=result.text)
        call = action_call(parsed, call_id_for(state))
        if call is not None:
            loops = detect_loops(state, history, [call])
            timeline.extend(tool_events([call], tool_results, loops))
            observations = (
                [loops[call.id].observation] if loops else [r.content for r in tool_results]
            )
            observation = "\n\n".join(f"Observation: {text}" for text in observations)
            follow_up = ConversationMessage(role="user", content=observation)
        else:
            timeline.append(_unused_reply(result, notes, parsed.error))
            follow_up = ConversationMessage(role="user", content=parsed.feedback() or "")
        return continue_or_stop(state, [assistant, follow_up], timeline)
