"""The gather step: an investigating agent's first step, before its first model call.

Design constraint: it is a step like any other, so it obeys the same
exactly-once rules (:mod:`tarsy.engine.steps` claims it under a lease and
commits it in one batch conditional on the claim; a crash before the commit
runs it again, a duplicate after the commit finds it done). What it commits:
each gathered call as an ``mcp_interactions`` record and an ``mcp_tool_call``
event marked ``gathered``, each detection as a ``detection`` event, and the
opening user message rewritten with the findings and the evidence brief. The
execution's ``gather_pending`` flag is cleared in the same batch, so the next
step is the first model call.

The I/O is :func:`gather_evidence` (the agent's tools, through the same
executor as the model's calls); everything else here is pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from tarsy.agent.compact import CHARS_PER_TOKEN as COMPACT_CHARS_PER_TOKEN
from tarsy.agent.compact import RUNBOOK_CHARS
from tarsy.agent.compact import brief_tokens as compact_brief_tokens
from tarsy.agent.compact import guidance as answer_guidance
from tarsy.agent.prompts import (
    EvidenceBrief,
    compact_system_prompt,
    compact_user_prompt,
    initial_messages,
)
from tarsy.config.schema import CompactPathSettings, ResolvedAgentConfig, TarsyConfig
from tarsy.engine import transitions
from tarsy.evidence import brief
from tarsy.evidence.alert import alert_facts
from tarsy.evidence.catalog import applicable
from tarsy.evidence.gather import Gathered, gather
from tarsy.evidence.snapshot import AlertFacts, Detection, Snapshot
from tarsy.evidence.targets import targets_of
from tarsy.models import (
    AgentExecution,
    ConversationMessage,
    DetectionEvent,
    EventSubject,
    GatherSummary,
    MCPInteraction,
    MCPToolCallEvent,
    Session,
    StepMessage,
    TimelineEvent,
)
from tarsy.persistence.step_values import Claim, StepCommit
from tarsy.tools.base import ToolExecutor, ToolListing


def session_alert(session: Session) -> AlertFacts:
    """What the session's alert says, with a start time: its own, else when tarsy received it.

    Detections judge times against the alert's start, and the metric collectors read
    the hour before it; an alert without one (plain JSON) started, for both, when it came.
    """
    alert = alert_facts(session.alert_data)
    if alert.starts_at is None:
        alert = alert.model_copy(update={"starts_at": session.created_at})
    return alert


def gathers(config: TarsyConfig, agent: ResolvedAgentConfig, session: Session) -> bool:
    """Whether an investigating agent starts with a gather phase (pure).

    It does when evidence is on for it, it has MCP servers, and at least one
    collector that applies to the alert has something to look at before anything
    was gathered: an alert that names nothing gathers nothing, and costs no step.
    """
    if agent.evidence is None or not agent.mcp_servers:
        return False
    alert = session_alert(session)
    collectors = applicable(config.collectors, agent.evidence, alert).values()
    return any(targets_of(c.for_each, alert, Snapshot(alert=alert)) for c in collectors)


async def gather_evidence(
    config: TarsyConfig,
    agent: ResolvedAgentConfig,
    session: Session,
    tools: ToolExecutor | None,
    listing: ToolListing,
) -> Gathered:
    """Run the collectors that apply to the session's alert with the agent's tools."""
    alert = session_alert(session)
    if agent.evidence is None or tools is None or not listing.tools:
        return Gathered(stopped="no tools to gather with")
    collectors = applicable(config.collectors, agent.evidence, alert)
    return await gather(collectors, config.evidence, alert, tools, listing)


def evidence_brief(
    config: TarsyConfig, agent: ResolvedAgentConfig, gathered: Gathered
) -> EvidenceBrief:
    """The findings and the compact evidence, sized to the budget and the model's window."""
    # Imported here: the api imports this module (a resumed chain) but calls no model.
    from tarsy.llm.backends import capabilities_of

    settings = config.evidence
    window = capabilities_of(agent.provider).context_window
    budget = brief.brief_chars(settings.brief_tokens, window, settings.brief_window_share)
    findings = brief.findings_text(gathered.detections)
    evidence = brief.evidence_text(
        gathered.calls, gathered.detections, max(budget - len(findings), 0)
    )
    return EvidenceBrief(findings=findings, evidence=evidence)


def gathered_events(gathered: Gathered) -> list[TimelineEvent]:
    """An ``mcp_tool_call`` event per gathered call, then a ``detection`` event per finding."""
    events: list[TimelineEvent] = [
        MCPToolCallEvent(
            content=call.result.content,
            call_id=call.result.call_id,
            tool_name=call.result.tool,
            server_name=call.result.server,
            arguments=call.result.arguments,
            is_error=call.result.is_error,
            duration_ms=round(call.result.duration_ms, 1),
            shown_as=call.result.shown_as,
            gathered=True,
            collector=call.collector,
            evidence_label=brief.evidence_label(call.result.call_id),
        )
        for call in gathered.calls
    ]
    events += [detection_event(detection) for detection in gathered.detections]
    return events


def detection_event(detection: Detection) -> DetectionEvent:
    """A detection as the timeline shows it: its sentence, subject, severity and evidence."""
    subject = detection.subject
    return DetectionEvent(
        content=detection.finding,
        check=detection.check,
        subject=EventSubject(kind=subject.kind, name=subject.name, namespace=subject.namespace),
        severity=detection.severity,
        evidence=list(detection.evidence),
        evidence_labels=[brief.evidence_label(e) for e in detection.evidence],
    )


def gathered_records(step: int, gathered: Gathered) -> list[MCPInteraction]:
    """The full record of each gathered call (masked, like every tool result)."""
    return [
        MCPInteraction(
            step=step,
            call_id=call.result.call_id,
            server=call.result.server,
            tool=call.result.tool,
            arguments=call.result.arguments,
            result=call.result.full_content,
            is_error=call.result.is_error,
            error=call.result.error,
            duration_ms=call.result.duration_ms,
            shown_as=call.result.shown_as,
            masked=call.result.masked,
        )
        for call in gathered.calls
    ]


def gather_commit(
    message: StepMessage,
    execution: AgentExecution,
    session: Session,
    opening: list[ConversationMessage],
    gathered: Gathered,
    claim: Claim | None,
    next_due: datetime,
    brief_chars: int = 0,
) -> StepCommit:
    """Everything the gather step writes, as one batch (pure).

    ``brief_chars`` is the size of the findings and evidence the opening got.
    """
    return StepCommit(
        execution_id=execution.execution_id,
        session_id=session.session_id,
        step=message.step,
        next_step=message.step + 1,
        claim=claim,
        timeline=gathered_events(gathered),
        mcp_interactions=gathered_records(message.step, gathered),
        opening=opening,
        execution=transitions.gathered(next_due),
        session=transitions.record_gathering(
            [d.finding for d in gathered.detections],
            GatherSummary(
                calls=len(gathered.calls),
                detections=len(gathered.detections),
                elapsed_ms=round(gathered.elapsed_ms, 1),
                stopped=gathered.stopped,
                brief_chars=brief_chars if opening else 0,
            ),
        ),
        role=execution.role,
    )


@dataclass(frozen=True)
class EvidenceOpening:
    """The agent's opening rewritten with the evidence, and how much of it the brief is."""

    messages: list[ConversationMessage] = field(default_factory=list)
    brief_chars: int = 0


def opening_with_evidence(
    config: TarsyConfig,
    agent: ResolvedAgentConfig,
    session: Session,
    previous_context: str,
    gathered: Gathered,
) -> EvidenceOpening:
    """The agent's opening messages, now with the findings and the evidence brief.

    Nothing gathered (no tools, no collector applied): no messages, so the
    opening stays as it was.
    """
    if not gathered.calls:
        return EvidenceOpening()
    if agent.compact is not None:
        return compact_opening(config, agent, agent.compact, session, previous_context, gathered)
    evidence = evidence_brief(config, agent, gathered)
    return EvidenceOpening(
        messages=initial_messages(agent, session, previous_context, evidence),
        brief_chars=len(evidence.findings) + len(evidence.evidence),
    )


def compact_opening(
    config: TarsyConfig,
    agent: ResolvedAgentConfig,
    compact: CompactPathSettings,
    session: Session,
    previous_context: str,
    gathered: Gathered,
) -> EvidenceOpening:
    """The compact path's opening: the answer form, then the incident, the brief sized to read.

    The brief gets what the model reads in ``read_seconds`` at its reading speed
    once the rest of the opening is counted (:func:`tarsy.agent.compact.brief_tokens`),
    never more than the evidence budget or a share of a small window.
    """
    # Imported here: the api imports this module (a resumed chain) but calls no model.
    from tarsy.llm.backends import capabilities_of

    capabilities = capabilities_of(agent.provider)
    system = compact_system_prompt(agent, answer_guidance(capabilities))
    findings = EvidenceBrief(findings=brief.findings_text(gathered.detections))

    def user(evidence: EvidenceBrief) -> str:
        return compact_user_prompt(session, previous_context, evidence, RUNBOOK_CHARS)

    rest_tokens = int((len(system) + len(user(findings))) / COMPACT_CHARS_PER_TOKEN)
    settings = config.evidence
    tokens = compact_brief_tokens(capabilities, compact, settings.brief_tokens, rest_tokens)
    budget = brief.brief_chars(
        tokens,
        capabilities.context_window,
        settings.brief_window_share,
        chars_per_token=COMPACT_CHARS_PER_TOKEN,
    )
    text = brief.evidence_text(gathered.calls, gathered.detections, budget)
    evidence = findings.model_copy(update={"evidence": text})
    return EvidenceOpening(
        messages=[
            ConversationMessage(role="system", content=system),
            ConversationMessage(role="user", content=user(evidence)),
        ],
        brief_chars=len(evidence.findings) + len(text),
    )
