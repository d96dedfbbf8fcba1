"""``react``: text ReAct (Thought / Action / Action Input / Final Answer), seed 000 Q2.

The model answers in text; :mod:`tarsy.strategies.react_parser` reads the
complete answer once. An action runs one tool and its result comes back as an
``Observation:`` user message; a malformed answer gets specific feedback and a
format reminder instead; a final answer concludes. Works on any backend that
streams text (the ``langchain`` one by default).
"""

from __future__ import annotations

import json
from hashlib import sha256

from tarsy.llm.base import Capabilities, GenerateRequest, LLMResult
from tarsy.models import ConversationMessage, TimelineEvent, TimelineEventType, ToolCall
from tarsy.strategies.base import (
    IterationOutcome,
    IterationState,
    conclude,
    continue_or_stop,
    provider_notes,
    tool_events,
)
from tarsy.strategies.native_thinking import with_guidance
from tarsy.strategies.react_parser import FORMAT_REMINDER, ReActResult, parse_react
from tarsy.tools import ToolListing, ToolResult

LAST_ITERATION_NOTE = (
    "This is your last iteration: do not call a tool. Write your Final Answer now with the "
    "evidence you have, and say what remains unverified."
)


def tools_as_text(listing: ToolListing) -> str:
    """The agent's tools as the ReAct prompt lists them."""
    if not listing.tools:
        return "No tools are available: reason from the alert and conclude."
    lines = ["Available tools (use the exact server.tool name):"]
    for tool in listing.tools:
        lines.append(f"- {tool.name}: {tool.description.strip() or '(no description)'}")
        lines.append(f"  parameters (JSON schema): {json.dumps(tool.parameters, sort_keys=True)}")
    return "\n".join(lines)


def react_guidance(listing: ToolListing, *, last: bool) -> str:
    """The ReAct rules, the tools, and the last-iteration note when it applies."""
    parts = [
        "Work in the ReAct format, one step per response.",
        FORMAT_REMINDER,
        tools_as_text(listing),
    ]
    if last:
        parts.append(LAST_ITERATION_NOTE)
    return "\n\n".join(parts)


def call_id_for(state: IterationState) -> str:
    """A deterministic id for this iteration's tool call (redelivery reproduces it)."""
    digest = sha256(f"{state.execution.execution_id}:{state.iteration}".encode()).hexdigest()
    return f"react-{digest[:12]}"


class ReActStrategy:
    """Text ReAct over any text-streaming backend."""

    name = "react"
    requires = Capabilities(streaming=True)
    uses_tools = True

    def build_request(self, state: IterationState) -> GenerateRequest:
        """The conversation with the ReAct rules and tools; no function declarations."""
        guidance = react_guidance(state.tools, last=state.is_conclusion)
        return GenerateRequest(
            execution_id=state.execution.execution_id,
            messages=with_guidance(state.messages, guidance),
            config=state.config.provider,
        )

    def _parse(self, state: IterationState, result: LLMResult) -> ReActResult:
        return parse_react(result.text, state.tools.names)

    def tool_calls(self, state: IterationState, result: LLMResult) -> list[ToolCall]:
        """The one Action of a usable response, if it has one."""
        parsed = self._parse(state, result)
        if parsed.kind != "action" or parsed.action is None:
            return []
        arguments = json.dumps(parsed.action_input or {}, sort_keys=True)
        return [ToolCall(id=call_id_for(state), name=parsed.action, arguments=arguments)]

    def on_result(
        self, state: IterationState, result: LLMResult, tool_results: list[ToolResult]
    ) -> IterationOutcome:
        """Record the step: an observation, feedback on a malformed answer, or the conclusion."""
        parsed = self._parse(state, result)
        notes = {"iteration": state.iteration, "react_kind": parsed.kind, **provider_notes(result)}
        if parsed.fallbacks:
            notes["parser_fallbacks"] = list(parsed.fallbacks)
        timeline: list[TimelineEvent] = []
        if parsed.thought:
            timeline.append(
                TimelineEvent(
                    type=TimelineEventType.LLM_THINKING,
                    content=parsed.thought,
                    metadata={**notes, "source": "react"},
                )
            )
        assistant = ConversationMessage(role="assistant", content=result.text)
        if parsed.kind == "final_answer" and parsed.final_answer is not None:
            return conclude(state, result.text, parsed.final_answer.strip(), timeline, notes)
        if parsed.kind == "action":
            calls = self.tool_calls(state, result)
            timeline.extend(tool_events(calls, tool_results))
            observation = "\n\n".join(f"Observation: {r.content}" for r in tool_results)
            follow_up = ConversationMessage(role="user", content=observation)
        else:
            timeline.append(
                TimelineEvent(
                    type=TimelineEventType.LLM_RESPONSE,
                    content=result.text,
                    metadata={**notes, "error": parsed.error},
                )
            )
            follow_up = ConversationMessage(role="user", content=parsed.feedback() or "")
        messages = [assistant, follow_up]
        return continue_or_stop(state, messages, timeline)
