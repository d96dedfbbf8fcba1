"""``schema-actions``: every reply is one JSON object that a JSON schema allows.

Design constraint: the model never writes free text the engine must parse by
guesswork; the backend's structured-output feature (``response_format`` JSON
schema on OpenAI and compatible servers such as llama.cpp, ``response_json_schema``
on Gemini) constrains the reply to either calling one offered tool with
arguments that match its parameter schema, or the final answer. Small
self-hosted models call tools reliably this way and not through native tool
calls (``docs/models.md``), so this is the default of ``openai-compatible``.

It keeps every guarantee of the other tool strategies: timeline events,
interaction records, loop detection on effective arguments, budgets, the
conclusion call (whose schema allows the final answer only), and sub-agents
(``message_agent`` is offered like any tool). A reply that breaks the schema
anyway (a server that ignores ``response_format``, a cut reply) is recorded on
the timeline and answered with feedback; the next iteration tries again, within
``max_iterations``: it is never a crash. So is a final answer the schema allows
but that is no analysis: empty, or the guidance's placeholder copied back; an
answer that names nothing from the evidence gets one nudge first
(:mod:`tarsy.agent.strategies.answers`).

The conversation is stored as text, as ReAct stores it: the assistant turn is
the JSON reply, and the observation a user message; past calls are re-read
from the replies.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from hashlib import sha256
from typing import Any, Literal

from tarsy._pydantic import DeferredModel
from tarsy.agent.strategies import answers
from tarsy.agent.strategies.base import (
    ConclusionReason,
    IterationOutcome,
    IterationState,
    conclude,
    conclusion_reason,
    continue_or_stop,
    detect_loops,
    force_conclusion,
    thinking_events,
    tool_events,
    turn_notes,
)
from tarsy.agent.strategies.native_thinking import CONCLUSION_NOTES, with_guidance
from tarsy.llm.base import Capabilities, GenerateRequest, LLMResult, ToolDefinition
from tarsy.models import (
    ConversationMessage,
    LLMResponseEvent,
    TimelineEvent,
    ToolCall,
    TurnNotes,
)
from tarsy.tools.base import ToolResult

CALL_TOOL = "call_tool"
FINAL_ANSWER = "final_answer"
# Keys of a tool's parameter schema that say nothing about valid arguments.
_ANNOTATIONS = ("$schema", "title", "$id")
_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)

GUIDANCE = """\
Reply with exactly one JSON object and nothing else, in one of two forms:
{"thought": "<what you know and what to check next>", "action": "call_tool", \
"tool": "<server.tool>", "arguments": {<the tool's arguments>}}
{"thought": "<what the evidence shows>", "action": "final_answer", \
"answer": "<your final analysis in Markdown>"}
Call one tool per reply; its result comes back as an observation. Gather evidence \
before concluding: check state, events, logs and configuration, not only the pod \
list. Do not repeat a call you already made with the same arguments: its result \
is above. The final analysis says what is broken, the root cause and its evidence, \
the impact, and the fix."""
CONCLUSION_GUIDANCE = """\
Reply with exactly one JSON object and nothing else:
{"thought": "<what the evidence shows>", "action": "final_answer", \
"answer": "<your final analysis in Markdown>"}"""


class Action(DeferredModel):
    """A reply that matched the schema."""

    action: Literal["call_tool", "final_answer"]
    thought: str = ""
    tool: str | None = None
    arguments: dict[str, Any] = {}
    answer: str = ""


def _arguments_schema(tool: ToolDefinition) -> dict[str, Any]:
    schema = {k: v for k, v in tool.parameters.items() if k not in _ANNOTATIONS}
    if schema.get("type") != "object":
        return {"type": "object"}
    return schema


def call_variant(tool: ToolDefinition) -> dict[str, Any]:
    """The schema of a reply that calls ``tool`` with arguments its parameter schema allows."""
    return {
        "type": "object",
        "properties": {
            "thought": {"type": "string"},
            "action": {"type": "string", "enum": [CALL_TOOL]},
            "tool": {"type": "string", "enum": [tool.name]},
            "arguments": _arguments_schema(tool),
        },
        "required": ["thought", "action", "tool", "arguments"],
        "additionalProperties": False,
    }


FINAL_VARIANT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "thought": {"type": "string"},
        "action": {"type": "string", "enum": [FINAL_ANSWER]},
        "answer": {"type": "string"},
    },
    "required": ["thought", "action", "answer"],
    "additionalProperties": False,
}


def action_schema(tools: Sequence[ToolDefinition], *, final: bool = True) -> dict[str, Any]:
    """The schema of one reply: call one of ``tools``, or (when ``final``) the final answer."""
    variants = [call_variant(tool) for tool in tools]
    if final or not variants:
        variants.append(FINAL_VARIANT)
    return variants[0] if len(variants) == 1 else {"anyOf": variants}


def offered_tools(state: IterationState, reason: ConclusionReason | None) -> list[ToolDefinition]:
    """The tools this reply may call: none to conclude, else the agent's ``tool_choice``."""
    choice = state.config.tool_choice
    if reason is not None or choice == "none":
        return []
    named = state.tools.get(choice)
    return [named] if named is not None else list(state.tools.tools)


def parse_action(text: str, schema: dict[str, Any]) -> Action | str:
    """The reply as an :class:`Action`, or why it is not one (a model-readable reason)."""
    match = _FENCE.match(text)
    raw = match.group(1) if match else text.strip()
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as e:
        return f"the reply is not one JSON object ({e.msg} at character {e.pos})"
    # Imported here: only an agent of this strategy validates replies against a schema.
    import jsonschema

    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError as e:
        where = ".".join(str(p) for p in e.absolute_path) or "the reply"
        return f"{where} does not match the reply schema: {e.message[:300]}"
    return Action.model_validate(value)


def unwritten_answer(answer: str) -> str | None:
    """Why a final answer that matched the schema is still no analysis, or None if it is one.

    The schema can only say "a string": an empty one, or the guidance's own
    placeholder or template copied back (small models do), would otherwise
    become the session's final analysis (:func:`answers.unwritten_answer`).
    """
    return answers.unwritten_answer(answer, (GUIDANCE, CONCLUSION_GUIDANCE))


def _type_of(schema: Any) -> str:
    """A parameter's type in a word or two (``string``, ``one of a|b``, ``list of string``)."""
    if not isinstance(schema, dict):
        return "any"
    if "enum" in schema:
        return "one of " + "|".join(str(v) for v in schema["enum"])
    kind = schema.get("type")
    if kind == "array":
        return f"list of {_type_of(schema.get('items'))}"
    if isinstance(kind, list):
        return "|".join(str(k) for k in kind)
    return str(kind) if kind else "any"


def signature(tool: ToolDefinition) -> str:
    """A tool's arguments as one line: ``name: type`` each, optional ones with ``?``.

    Design constraint: the schema is stated once. The reply's JSON schema
    already holds each tool's full parameter schema and constrains the
    arguments to it, so the prompt names the arguments and their types only
    (the full schemas written out in the text were about half the opening).
    """
    schema = _arguments_schema(tool)
    properties = schema.get("properties")
    if not isinstance(properties, dict) or not properties:
        return "()"
    required = set(schema.get("required") or ())
    parts = []
    for name, spec in properties.items():
        mark = "" if name in required else "?"
        default = (
            f" = {json.dumps(spec['default'])}"
            if isinstance(spec, dict) and "default" in spec
            else ""
        )
        parts.append(f"{name}{mark}: {_type_of(spec)}{default}")
    return f"({', '.join(parts)})"


def tools_as_text(tools: Sequence[ToolDefinition]) -> str:
    """The offered tools, each with its arguments and description, as the prompt lists them."""
    if not tools:
        return "No tools are available: reason from what you were given and conclude."
    lines = ["Tools (use the exact server.tool name; arguments marked ? are optional):"]
    for tool in tools:
        description = " ".join(tool.description.split()) or "(no description)"
        lines.append(f"- {tool.name}{signature(tool)}: {description}")
    return "\n".join(lines)


def call_id_for(state: IterationState) -> str:
    """A deterministic id for this iteration's tool call (redelivery reproduces it)."""
    digest = sha256(f"{state.execution.execution_id}:{state.iteration}".encode()).hexdigest()
    return f"action-{digest[:12]}"


def _call(action: Action, call_id: str) -> ToolCall | None:
    if action.action != CALL_TOOL or action.tool is None:
        return None
    return ToolCall(
        id=call_id, name=action.tool, arguments=json.dumps(action.arguments, sort_keys=True)
    )


def past_calls(state: IterationState) -> list[ToolCall]:
    """The calls of the execution so far, re-read from its replies (run or not)."""
    calls: list[ToolCall] = []
    schema = action_schema(state.tools.tools)
    for n, message in enumerate(state.messages):
        if message.role == "assistant":
            parsed = parse_action(message.content, schema)
            if isinstance(parsed, Action):
                call = _call(parsed, f"past-{n}")
                if call is not None:
                    calls.append(call)
    return calls


def feedback(problem: str) -> str:
    """What a model that broke the schema is told."""
    return (
        f"Your reply was not used: {problem}. Reply again with exactly one JSON object in "
        "one of the two forms described, calling one of the listed tools or giving the "
        "final answer."
    )


def observation(call: ToolCall, content: str) -> str:
    """A tool's result as the next user message."""
    return f"Observation from {call.name} {call.arguments}:\n{content}"


def _unused_reply(result: LLMResult, notes: TurnNotes) -> LLMResponseEvent:
    """The timeline's record of a reply that was not used (its problem is in ``notes``)."""
    return LLMResponseEvent(content=result.text, **notes)


def _answered_with_feedback(
    state: IterationState,
    result: LLMResult,
    problem: str,
    timeline: list[TimelineEvent],
    notes: TurnNotes,
) -> IterationOutcome:
    """Record a reply that was not used and tell the model why; the next iteration retries."""
    timeline.append(_unused_reply(result, notes))
    exchange = [
        ConversationMessage(role="assistant", content=result.text),
        ConversationMessage(role="user", content=feedback(problem)),
    ]
    return continue_or_stop(state, exchange, timeline)


class SchemaActionsStrategy:
    """One schema-constrained JSON action per reply: a tool call or the final answer."""

    name = "schema-actions"
    requires = Capabilities(structured_output=True)
    uses_tools = True

    def build_request(self, state: IterationState) -> GenerateRequest:
        """The conversation, the tools as text, and the schema of this reply."""
        reason = conclusion_reason(state, past_calls(state))
        tools = offered_tools(state, reason)
        required = state.config.tool_choice not in ("auto", "none") and reason is None and tools
        if reason is not None:
            guidance = f"{CONCLUSION_NOTES[reason]}\n\n{CONCLUSION_GUIDANCE}"
        else:
            guidance = f"{GUIDANCE}\n\n{tools_as_text(tools)}"
        return GenerateRequest(
            execution_id=state.execution.execution_id,
            messages=self.guided(state.messages, guidance),
            config=state.config.provider,
            response_schema=action_schema(tools, final=not required),
        )

    def guided(
        self, messages: list[ConversationMessage], guidance: str
    ) -> list[ConversationMessage]:
        """The conversation as sent: the guidance and tool catalogue after the system prompt."""
        return with_guidance(messages, guidance)

    def _parse(self, state: IterationState, result: LLMResult) -> Action | str:
        reason = conclusion_reason(state, past_calls(state))
        tools = offered_tools(state, reason)
        required = state.config.tool_choice not in ("auto", "none") and reason is None and tools
        return parse_action(result.text, action_schema(tools, final=not required))

    def tool_calls(self, state: IterationState, result: LLMResult) -> list[ToolCall]:
        """The reply's one tool call, unless it broke the schema or loops."""
        parsed = self._parse(state, result)
        if not isinstance(parsed, Action):
            return []
        call = _call(parsed, call_id_for(state))
        if call is None or detect_loops(state, past_calls(state), [call]):
            return []
        return [call]

    def on_result(
        self, state: IterationState, result: LLMResult, tool_results: list[ToolResult]
    ) -> IterationOutcome:
        """Record the reply: an observation, feedback on a broken reply, or the conclusion."""
        history = past_calls(state)
        reason = conclusion_reason(state, history)
        parsed = self._parse(state, result)
        notes = turn_notes(state, result)
        if not isinstance(parsed, Action):
            notes["schema_error"] = parsed
            timeline = thinking_events(result.thinking, notes, "native")
            if reason is not None:
                # The conclusion call broke its schema: its text, if any, is all there is.
                timeline.append(_unused_reply(result, notes))
                return force_conclusion(state, reason, result.text, result.text, timeline, notes)
            return _answered_with_feedback(state, result, parsed, timeline, notes)
        notes["action"] = parsed.action
        timeline = thinking_events(
            "\n\n".join(t for t in (result.thinking, parsed.thought) if t), notes, "native"
        )
        if parsed.action == FINAL_ANSWER:
            unwritten = unwritten_answer(parsed.answer)
            if unwritten is not None:
                notes["schema_error"] = unwritten
            if reason is not None:
                # The last call: an unwritten answer leaves the model's thought, if any.
                analysis = parsed.thought if unwritten is not None else parsed.answer
                return force_conclusion(state, reason, result.text, analysis, timeline, notes)
            if unwritten is not None:
                return _answered_with_feedback(state, result, unwritten, timeline, notes)
            nudge = (
                None if state.at_limit else answers.unnamed_evidence(parsed.answer, state.messages)
            )
            if nudge is not None:
                notes["nudge"] = "unnamed_evidence"
                return _answered_with_feedback(state, result, nudge, timeline, notes)
            return conclude(state, result.text, parsed.answer.strip(), timeline, notes)
        call = _call(parsed, call_id_for(state))
        assert call is not None  # a call_tool action that matched the schema names its tool
        loops = detect_loops(state, history, [call])
        timeline.extend(tool_events([call], tool_results, loops))
        if loops:
            content = loops[call.id].observation
        else:
            content = "\n\n".join(r.content for r in tool_results) or "Error: no result"
        exchange = [
            ConversationMessage(role="assistant", content=result.text),
            ConversationMessage(role="user", content=observation(call, content)),
        ]
        return continue_or_stop(state, exchange, timeline)


class TrailingGuidanceActions(SchemaActionsStrategy):
    """Schema actions with the guidance at the end of the request, not in the system message.

    The compact path's follow-up (:mod:`tarsy.agent.strategies.compact`): its
    conversation opened with another system message (the answer form), which a
    server's prefix cache already holds; guidance added to the last message
    leaves everything before it as it was read.
    """

    def guided(
        self, messages: list[ConversationMessage], guidance: str
    ) -> list[ConversationMessage]:
        """The conversation with the guidance appended to its last message (not stored)."""
        if not messages:
            return [ConversationMessage(role="user", content=guidance)]
        last = messages[-1]
        return [
            *messages[:-1],
            last.model_copy(update={"content": f"{last.content}\n\n{guidance}"}),
        ]
