"""Sub-agents (seed 004): an agent messages other agents with the ``message_agent`` tool.

Collaboration, not delegation: the parent stays in control, asks a sub-agent
for help, reads the answer as a tool result and goes on; it may message
several at once, and continue a conversation with a follow-up.

In a serverless engine the parent cannot wait inside a step. A sub-agent
conversation is an execution of its own (role ``sub_agent``, its
``execution_id`` is the ``conversation_id``) that steps through Pub/Sub like
any other. The parent's step that sent the messages commits a waiting state
(:class:`PendingTurn`: the model's answer and the turn's other tool results)
and ends. Each sub-agent, when it has answered, records a
:class:`SubAgentAnswer` under the parent; the last one publishes the parent's
next step (a contention-free ``create()`` of a marker decides who), which puts
every answer into the conversation as tool results, exactly as if the tools
had returned them in the first place. A sub-agent that has not answered by the
deadline gives an error observation instead.

Everything here is pure: planning the calls of a turn, the sub-agents'
openings, and turning answers into tool results. The I/O is in
:mod:`tarsy.engine.step_kinds` (a model turn dispatches, ``CollectAnswers``
collects) and :mod:`tarsy.engine.chains` (answering).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime

from pydantic import ConfigDict, Field, ValidationError, model_validator

from tarsy._pydantic import DeferredModel
from tarsy.agent.prompts import delimit, system_prompt
from tarsy.config.schema import AgentDefinition, ResolvedAgentConfig
from tarsy.llm.base import ToolDefinition
from tarsy.models import (
    AgentExecution,
    ConversationMessage,
    ExecutionStatus,
    LLMToolCallEvent,
    MCPToolCallEvent,
    Session,
    TimelineEvent,
    ToolCall,
    UserQuestionEvent,
)

# Re-exported: what a waiting turn stores is persistence's vocabulary (tarsy.persistence.turns).
from tarsy.persistence.turns import Dispatch as Dispatch
from tarsy.persistence.turns import PendingTurn as PendingTurn
from tarsy.persistence.turns import SubAgentAnswer as SubAgentAnswer
from tarsy.tools.base import ToolListing, ToolResult, error_result, parse_arguments

MESSAGE_AGENT = "message_agent"
# What one answer may take of the parent's context; the sub-agent's own records keep it all.
ANSWER_CHARS = 40_000


def sub_agent_id_for(parent_execution_id: str, step: int, n: int) -> str:
    """The id of the conversation started by call ``n`` of the parent's ``step``."""
    return f"{parent_execution_id}-sub{step:04d}-{n:02d}"


def offers_message_agent(execution: AgentExecution, config: ResolvedAgentConfig) -> bool:
    """Whether this execution may message sub-agents (it has some, and depth allows)."""
    return bool(config.sub_agents) and execution.depth < config.max_sub_agent_depth


def with_message_agent(
    listing: ToolListing,
    execution: AgentExecution,
    config: ResolvedAgentConfig,
    agents: Mapping[str, AgentDefinition],
) -> ToolListing:
    """``listing`` with ``message_agent`` added when this execution may message sub-agents."""
    if not offers_message_agent(execution, config):
        return listing
    tool = message_agent_tool(config, agents)
    return listing.model_copy(update={"tools": [*listing.tools, tool]})


def message_agent_tool(
    config: ResolvedAgentConfig, agents: Mapping[str, AgentDefinition]
) -> ToolDefinition:
    """The ``message_agent`` tool of an agent, naming the sub-agents it may message."""
    roster = "\n".join(
        f"- {name}: {agents[name].description or agents[name].instructions[:200]}".rstrip(": ")
        for name in config.sub_agents
        if name in agents
    )
    return ToolDefinition(
        name=MESSAGE_AGENT,
        description=(
            "Message another agent for help with a subtask and get its answer. Give "
            "agent_name to start a conversation, or the conversation_id of an earlier "
            "answer to follow up in the same conversation (the agent remembers it). "
            f"Several calls in one turn run at the same time. Agents:\n{roster}"
        ),
        parameters={
            "type": "object",
            "properties": {
                "agent_name": {"type": "string", "enum": list(config.sub_agents)},
                "conversation_id": {"type": "string"},
                "message": {"type": "string", "minLength": 1},
            },
            "required": ["message"],
        },
    )


class MessageAgentArguments(DeferredModel):
    """``message_agent``'s arguments: a new conversation (agent_name) or a follow-up."""

    model_config = ConfigDict(extra="forbid")

    agent_name: str | None = None
    conversation_id: str | None = None
    message: str = Field(min_length=1)

    @model_validator(mode="after")
    def _one_target(self) -> MessageAgentArguments:
        if (self.agent_name is None) == (self.conversation_id is None):
            raise ValueError("give either agent_name (a new conversation) or conversation_id")
        return self


class DispatchPlan(DeferredModel):
    """A turn's ``message_agent`` calls: those sent, and those refused with a reason."""

    dispatches: list[Dispatch] = Field(default_factory=list)
    refused: list[ToolResult] = Field(default_factory=list)


def plan_dispatch(
    parent: AgentExecution,
    config: ResolvedAgentConfig,
    calls: Sequence[ToolCall],
    step: int,
    conversations: Mapping[str, AgentExecution],
) -> DispatchPlan:
    """Which of a turn's ``message_agent`` calls go out, and why the others do not.

    Args:
        parent: The execution whose model made the calls.
        config: Its resolved configuration (sub-agents and limits).
        calls: The turn's ``message_agent`` calls, in order.
        step: The parent's step (new conversations' ids derive from it).
        conversations: The parent's existing sub-agent executions by id.
    """
    plan = DispatchPlan()
    busy: set[str] = set()
    for n, call in enumerate(calls):
        try:
            arguments = MessageAgentArguments.model_validate(parse_arguments(call))
        except (ValueError, ValidationError) as error:
            plan.refused.append(error_result(call, _reason(error)))
            continue
        if len(plan.dispatches) >= config.max_concurrent_sub_agents:
            plan.refused.append(
                error_result(
                    call,
                    f"at most {config.max_concurrent_sub_agents} sub-agent messages at once; "
                    "send this one in a later turn",
                )
            )
            continue
        if arguments.agent_name is not None:
            if arguments.agent_name not in config.sub_agents:
                allowed = ", ".join(config.sub_agents)
                plan.refused.append(
                    error_result(call, f"unknown agent {arguments.agent_name!r}; ask {allowed}")
                )
                continue
            plan.dispatches.append(
                Dispatch(
                    call_id=call.id,
                    agent_name=arguments.agent_name,
                    conversation_id=sub_agent_id_for(parent.execution_id, step, n),
                    message=arguments.message,
                    new=True,
                )
            )
            continue
        conversation_id = arguments.conversation_id or ""
        conversation = conversations.get(conversation_id)
        refusal = _follow_up_refusal(conversation_id, conversation, busy)
        if refusal is not None or conversation is None:
            plan.refused.append(error_result(call, refusal or "unknown conversation"))
            continue
        busy.add(conversation_id)
        plan.dispatches.append(
            Dispatch(
                call_id=call.id,
                agent_name=conversation.agent,
                conversation_id=conversation_id,
                message=arguments.message,
                new=False,
            )
        )
    return plan


def _reason(error: Exception) -> str:
    if isinstance(error, ValidationError):
        return "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
            for e in error.errors()
        )
    return str(error)


def _follow_up_refusal(
    conversation_id: str, conversation: AgentExecution | None, busy: set[str]
) -> str | None:
    """Why a follow-up cannot be sent to ``conversation``, or None."""
    if conversation is None:
        return f"no conversation {conversation_id!r}; start one with agent_name"
    if conversation_id in busy or not conversation.status.is_terminal:
        return f"conversation {conversation_id!r} is still answering; wait for its answer"
    if conversation.status is not ExecutionStatus.COMPLETED:
        return (
            f"conversation {conversation_id!r} has ended ({conversation.status.value}); "
            "start a new one with agent_name"
        )
    return None


# ─── the sub-agent's side ─────────────────────────────────────────────────────


def sub_agent_execution(
    parent: AgentExecution,
    dispatch: Dispatch,
    step: int,
    config: ResolvedAgentConfig,
    *,
    first_step: int,
    due: datetime,
) -> AgentExecution:
    """The execution of a new conversation, linked to its parent and the call."""
    return AgentExecution(
        execution_id=dispatch.conversation_id,
        session_id=parent.session_id,
        stage=parent.stage,
        role="sub_agent",
        agent=dispatch.agent_name,
        agent_index=parent.agent_index,
        strategy=config.iteration_strategy,
        provider=config.provider_name,
        step=first_step,
        max_iterations=config.max_iterations,
        due_at=due,
        parent_execution_id=parent.execution_id,
        parent_tool_call_id=dispatch.call_id,
        parent_step=step,
        depth=parent.depth + 1,
    )


def sub_agent_opening(
    config: ResolvedAgentConfig, session: Session, parent_agent: str, message: str
) -> list[ConversationMessage]:
    """A new conversation's first messages: the sub-agent's prompt, the alert, the message."""
    user = (
        f"Agent {parent_agent} asks for your help with the investigation of this alert.\n\n"
        f"Alert type: {session.alert_type}\n\n{delimit('ALERT DATA', session.alert_data)}\n\n"
        f"Message from {parent_agent}:\n{delimit('MESSAGE', message)}\n\n"
        f"Answer {parent_agent} with what you found; your answer is returned to it."
    )
    return [
        ConversationMessage(role="system", content=system_prompt(config)),
        ConversationMessage(role="user", content=user),
    ]


def follow_up_message(parent_agent: str, message: str) -> ConversationMessage:
    """A follow-up in an existing conversation."""
    return ConversationMessage(
        role="user",
        content=f"Follow-up from {parent_agent}:\n{delimit('MESSAGE', message)}",
    )


def message_event(parent_agent: str, dispatch: Dispatch) -> UserQuestionEvent:
    """How a message appears on the sub-agent's own timeline."""
    return UserQuestionEvent(
        content=dispatch.message, from_agent=parent_agent, call_id=dispatch.call_id
    )


# ─── waiting and answering ────────────────────────────────────────────────────


def answer_of(execution: AgentExecution, now: datetime) -> SubAgentAnswer:
    """What a sub-agent that just ended its turn answers its parent."""
    error = execution.error.message if execution.error else None
    if execution.status is not ExecutionStatus.COMPLETED and error is None:
        error = f"the sub-agent {execution.status.value}"
    return SubAgentAnswer(
        call_id=execution.parent_tool_call_id or "",
        conversation_id=execution.execution_id,
        agent_name=execution.agent,
        status=execution.status,
        response=execution.final_analysis,
        error=error,
        answered_at=now,
    )


def answer_result(
    dispatch: Dispatch, answer: SubAgentAnswer | None, arguments: str, timeout: float
) -> ToolResult:
    """A sub-agent's answer (or its silence) as the tool result the parent's model reads.

    The shape is seed 004's: ``{conversation_id, agent_name, response,
    is_complete}``; ``is_complete`` says the conversation cannot continue.
    """
    call = ToolCall(id=dispatch.call_id, name=MESSAGE_AGENT, arguments=arguments)
    if answer is None:
        return _answer_error(
            call,
            dispatch,
            f"{dispatch.agent_name} did not answer within {timeout:g}s; the conversation "
            "was cancelled",
        )
    if answer.status is not ExecutionStatus.COMPLETED:
        return _answer_error(call, dispatch, answer.error or f"the sub-agent {answer.status}")
    response = answer.response or ""
    if len(response) > ANSWER_CHARS:
        response = response[:ANSWER_CHARS] + f"\n[… {len(response) - ANSWER_CHARS} more chars]"
    content = json.dumps(
        {
            "conversation_id": dispatch.conversation_id,
            "agent_name": dispatch.agent_name,
            "response": response,
            "is_complete": False,
        },
        ensure_ascii=False,
    )
    return ToolResult(
        call_id=call.id,
        name=MESSAGE_AGENT,
        arguments=parse_arguments(call),
        content=content,
        full_content=content,
    )


def _answer_error(call: ToolCall, dispatch: Dispatch, reason: str) -> ToolResult:
    content = json.dumps(
        {
            "conversation_id": dispatch.conversation_id,
            "agent_name": dispatch.agent_name,
            "error": reason,
            "is_complete": True,
        },
        ensure_ascii=False,
    )
    return error_result(call, reason).model_copy(
        update={"content": content, "full_content": content}
    )


def turn_results(
    pending: PendingTurn, answers: Mapping[str, SubAgentAnswer], timeout: float
) -> list[ToolResult]:
    """Every tool result of the waiting turn, in the order the model made the calls."""
    by_id = {result.call_id: result for result in pending.tool_results}
    calls = {call.id: call for call in pending.result.tool_calls}
    for dispatch in pending.dispatches:
        arguments = calls[dispatch.call_id].arguments if dispatch.call_id in calls else "{}"
        by_id[dispatch.call_id] = answer_result(
            dispatch, answers.get(dispatch.call_id), arguments, timeout
        )
    return [by_id[call.id] for call in pending.result.tool_calls if call.id in by_id]


def split_timeline(
    events: Sequence[TimelineEvent], dispatches: Sequence[Dispatch]
) -> tuple[list[TimelineEvent], list[TimelineEvent]]:
    """A waiting turn's events: what its first step shows, and the answers its next adds.

    The first step shows the turn as it happened (thinking, the calls, the other
    tools' results), each message marked with the conversation it went to; the
    answers appear when they are in.
    """
    sent = {d.call_id: d for d in dispatches}
    now: list[TimelineEvent] = []
    later: list[TimelineEvent] = []
    for event in events:
        if not isinstance(event, LLMToolCallEvent | MCPToolCallEvent):
            now.append(event)
            continue
        dispatch = sent.get(event.call_id)
        if dispatch is None:
            now.append(event)
            continue
        marked = event.model_copy(
            update={"sub_agent": dispatch.agent_name, "conversation_id": dispatch.conversation_id}
        )
        (later if isinstance(marked, MCPToolCallEvent) else now).append(marked)
    return now, later
