"""The chain state machine: what follows when an execution or a stage ends (pure).

Design constraint: a session moves on along two paths, and both must follow
the same rules. When one execution alone decides what follows (the agent of a
single-agent stage, a synthesis, the executive summary), the decision is
written in that execution's last step commit, atomically with it. When several
must have ended (the agents of a parallel stage), or when a lost publish is
healed, the fan-in decides after the fact. Both paths call
:func:`after_execution` (and, for a whole stage, :func:`after_stage`) and apply
the :class:`Next` it returns in :mod:`tarsy.engine.chains`; this module reads
nothing and writes nothing.

A decision is either a :class:`Next` (the writes and the message that follow)
or a :class:`FanIn` (it needs what only the store can tell: the other agents
of a parallel stage, a sub-agent's waiting parent, the session's whole
timeline for the judge). The fan-in reads what it needs and comes back here:
:func:`synthesis_start` with the parallel agents' records,
:func:`judge_after_summary` and :func:`judge_opening` with the session's
timeline as the judge reads it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Literal, assert_never

from pydantic import Field

from tarsy._pydantic import DeferredModel
from tarsy.agent.context import ExecutionRecord, format_synthesis_stage
from tarsy.agent.prompts import delimit, system_prompt
from tarsy.agent.scoring import JudgeInput, SessionScore, build_judge_prompt
from tarsy.agent.strategies.base import budget_crossed
from tarsy.config.schema import ChainConfig, TarsyConfig
from tarsy.engine import transitions
from tarsy.engine.messages import (
    FIRST_ITERATION_STEP,
    SCORING_STAGE,
    SUMMARY_STAGE,
    iterate_message,
    new_execution,
    scoring_id_for,
    start_stage_message,
    summary_id_for,
    synthesis_id_for,
)
from tarsy.engine.transitions import SessionUpdate, StageUpdate
from tarsy.models import (
    AgentExecution,
    ConversationMessage,
    ErrorInfo,
    ExecutionStatus,
    Session,
    StepMessage,
)
from tarsy.money import usd_float


class Next(DeferredModel):
    """What follows an ending: the writes besides the execution's own, then one message.

    ``stage`` ends the stage, ``session`` moves the session, ``create`` (with its
    ``opening``) is the execution that runs next, ``publish`` the message that
    starts what follows. Every field may be empty: nothing follows a chat.
    """

    stage: StageUpdate | None = None
    session: SessionUpdate | None = None
    create: AgentExecution | None = None
    opening: list[ConversationMessage] = Field(default_factory=list)
    publish: StepMessage | None = None


class FanIn(DeferredModel):
    """The decision needs the store: it is taken by the fan-in, after the commit."""

    reason: Literal["parallel_stage", "sub_agent_answer", "judge_after_summary"]


Decision = Next | FanIn


class JudgeStart(DeferredModel):
    """The judge starts on the session with ``executive_summary``; ``session`` records it first."""

    session: SessionUpdate | None = None
    executive_summary: str | None = None


def after_execution(
    config: TarsyConfig,
    session: Session,
    execution: AgentExecution,
    status: ExecutionStatus,
    analysis: str | None,
    now: datetime,
    due: datetime,
) -> Decision:
    """What follows ``execution`` ending in ``status`` with ``analysis``.

    ``execution.error`` is the reason when it did not complete.
    """
    role = execution.role
    match role:
        case "sub_agent":
            return FanIn(reason="sub_agent_answer")
        case "chat":
            return Next()  # a chat answers on a finished session; nothing follows it
        case "scoring":
            return Next(session=score_verdict(session, execution, status, analysis, now))
        case "summary":
            if (stopped := _session_stopped(session, now)) is not None:
                return stopped
            return _after_summary(config, session, status, analysis, now)
        case "agent":
            if (stopped := _session_stopped(session, now)) is not None:
                return stopped
            if config.chain(session.chain_id).stages[execution.stage].is_parallel:
                return FanIn(reason="parallel_stage")
            ended = {execution.execution_id: status.value}
            return _stage_ends_with(config, session, execution, status, analysis, now, due, ended)
        case "synthesis":
            if (stopped := _session_stopped(session, now)) is not None:
                return stopped
            return _stage_ends_with(config, session, execution, status, analysis, now, due, None)
        case _:
            assert_never(role)


def _session_stopped(session: Session, now: datetime) -> Next | None:
    """What follows any stage's or summary's end on a session that ended or is cancelled."""
    if session.status.is_terminal:
        return Next()
    if session.cancel_requested:
        return Next(session=transitions.cancel_session(session, now))
    return None


def _after_summary(
    config: TarsyConfig,
    session: Session,
    status: ExecutionStatus,
    analysis: str | None,
    now: datetime,
) -> Decision:
    """The executive summary ended: the judge starts (fan-in), or the session completes."""
    if config.chain(session.chain_id).scoring:
        return FanIn(reason="judge_after_summary")
    # The investigation itself succeeded even when only its summary did not.
    text = analysis if status is ExecutionStatus.COMPLETED else None
    return Next(
        session=transitions.complete_session(
            session, now, executive_summary=text, with_summary=True
        )
    )


def _stage_ends_with(
    config: TarsyConfig,
    session: Session,
    execution: AgentExecution,
    status: ExecutionStatus,
    analysis: str | None,
    now: datetime,
    due: datetime,
    finished: dict[str, str] | None,
) -> Next:
    """The one execution whose result is its stage's ended: the stage ends with it."""
    reasons = [f"{execution.agent}: {execution.error.message}"] if execution.error else []
    return after_stage(
        config, session, execution.stage, status, analysis, reasons, now, due, finished=finished
    )


def after_stage(
    config: TarsyConfig,
    session: Session,
    index: int,
    status: ExecutionStatus,
    analysis: str | None,
    reasons: list[str],
    now: datetime,
    due: datetime,
    *,
    finished: dict[str, str] | None = None,
) -> Next:
    """What follows stage ``index`` ending in ``status`` with its result ``analysis``.

    A stage that did not complete fails the session with ``reasons``; else the
    next stage starts, unless it was the last or the session's budget is spent:
    then the executive summary runs (or the session completes without one).
    """
    chain = config.chain(session.chain_id)
    stage = transitions.end_stage(status, now, finished)
    if status is not ExecutionStatus.COMPLETED:
        error = stage_error(chain.stages[index].name, status, reasons)
        return Next(
            stage=stage, session=transitions.fail_session(session, error, now, status=status)
        )
    spent = session_spent(config, session)
    if index + 1 < len(chain.stages) and spent is None:
        return Next(
            stage=stage,
            session=transitions.await_stage(session, index + 1, due),
            publish=start_stage_message(session.session_id, index + 1),
        )
    final = with_budget_note(analysis or "", spent, skipped_stages(chain, index))
    if chain.executive_summary:
        summary, opening = summary_opening(config, session, final, due)
        update = transitions.record_final_analysis(session, final)
        return Next(
            stage=stage,
            session=transitions.cut_short_by_budget(update, spent),
            create=summary,
            opening=opening,
            publish=iterate_message(summary, FIRST_ITERATION_STEP),
        )
    ended = transitions.complete_session(session, now, final_analysis=final)
    return Next(stage=stage, session=transitions.cut_short_by_budget(ended, spent))


def stage_result_of(in_stage: Sequence[AgentExecution]) -> list[AgentExecution]:
    """The executions whose results are a stage's result: its synthesis, else its agents.

    Sub-agents answer their parents; their own results are not the stage's.
    """
    synthesis = [e for e in in_stage if e.role == "synthesis"]
    return synthesis or [e for e in in_stage if e.role == "agent"]


def stage_status(statuses: list[str], policy: str) -> ExecutionStatus:
    """A stage's status from its agents' (seed 003's aggregation, with success_policy)."""
    values = [ExecutionStatus(s) for s in statuses]
    completed = sum(1 for s in values if s is ExecutionStatus.COMPLETED)
    if values and all(s is ExecutionStatus.CANCELLED for s in values):
        return ExecutionStatus.CANCELLED
    if policy == "any":
        return ExecutionStatus.COMPLETED if completed else ExecutionStatus.FAILED
    if completed == len(values):
        return ExecutionStatus.COMPLETED
    if any(s is ExecutionStatus.TIMED_OUT for s in values):
        return ExecutionStatus.TIMED_OUT
    # Some agents cancelled on their own (a cancelled session never gets here): under
    # "all", the stage did not get every result it needs.
    return ExecutionStatus.FAILED


def stage_error(stage_name: str, status: ExecutionStatus, reasons: list[str]) -> ErrorInfo:
    """Why a session ended with a stage that did not complete."""
    detail = f" ({'; '.join(reasons)})" if reasons else ""
    return ErrorInfo(
        message=f"stage {stage_name!r} ended {status.value}{detail}",
        code=f"stage_{status.value}",
        retryable=False,
    )


def session_spent(config: TarsyConfig, session: Session) -> str | None:
    """What the session's spend, as committed, has crossed of its chain's budget, or None."""
    budget = config.session_budget(session.chain_id)
    return budget_crossed(session.tokens.total_tokens, usd_float(session.cost), budget)


def skipped_stages(chain: ChainConfig, index: int) -> list[str]:
    """The names of the chain's stages after stage ``index``."""
    return [stage.name for stage in chain.stages[index + 1 :]]


def with_budget_note(analysis: str, spent: str | None, skipped: list[str]) -> str:
    """The chain's analysis, saying so when a spent budget ended the session early.

    An agent that was made to conclude already opens its analysis with "Cut
    short"; what is added here is the stages that did not run at all.
    """
    if spent is None or not skipped:
        return analysis
    note = f"_(Budget spent: {spent}; stages not run: {', '.join(skipped)}.)_"
    return f"{analysis.rstrip()}\n\n{note}" if analysis.strip() else note


def summary_opening(
    config: TarsyConfig, session: Session, analysis: str, due: datetime
) -> tuple[AgentExecution, list[ConversationMessage]]:
    """The executive-summary execution of a session and its opening messages."""
    resolved = config.resolve_role(session.chain_id, None, "summary")
    opening = [
        ConversationMessage(role="system", content=system_prompt(resolved)),
        ConversationMessage(
            role="user",
            content=f"Final analysis of the investigation:\n{delimit('ANALYSIS', analysis)}",
        ),
    ]
    execution = new_execution(
        session, SUMMARY_STAGE, 0, "summary", resolved, summary_id_for(session.session_id), due
    )
    return execution, opening


def score_verdict(
    session: Session,
    execution: AgentExecution,
    status: ExecutionStatus,
    analysis: str | None,
    now: datetime,
) -> SessionUpdate:
    """What a scoring execution's end writes: the score, and the end of a session it closes.

    Scoring is fail-open: a judge that failed leaves the reason in
    ``score_error`` and the session completes all the same.
    """
    if status is ExecutionStatus.COMPLETED and analysis:
        report = SessionScore.model_validate_json(analysis)
        verdict = transitions.record_score(report.score, report.model_dump(mode="json"), None)
    else:
        reason = execution.error.message if execution.error else f"scoring {status.value}"
        verdict = transitions.record_score(None, None, reason)
    if session.status.is_terminal:
        return verdict  # a re-score of a finished session
    ended = transitions.complete_session(session, now)
    return ended.model_copy(update=verdict.model_dump(exclude_unset=True))


def synthesis_start(
    config: TarsyConfig,
    session: Session,
    index: int,
    records: Sequence[ExecutionRecord],
    finished: dict[str, str],
    due: datetime,
) -> Next:
    """The agents of parallel stage ``index`` completed: its synthesis runs on their ``records``.

    ``finished`` (the agents' statuses) is recorded on the stage with the
    synthesis's id; the synthesis is numbered after the stage's agents.
    """
    stage_name = config.chain(session.chain_id).stages[index].name
    resolved = config.resolve_role(session.chain_id, index, "synthesis")
    results = format_synthesis_stage(stage_name, records)
    opening = [
        ConversationMessage(role="system", content=system_prompt(resolved)),
        ConversationMessage(
            role="user",
            content=(
                f"Alert type: {session.alert_type}\n\n{delimit('ALERT DATA', session.alert_data)}"
                f"\n\nResults of the agents that investigated in parallel:\n"
                f"{delimit('PARALLEL RESULTS', results)}\n\n"
                "Write the merged analysis in Markdown."
            ),
        ),
    ]
    synthesis_id = synthesis_id_for(session.session_id, index)
    execution = new_execution(
        session, index, len(finished), "synthesis", resolved, synthesis_id, due
    )
    return Next(
        stage=transitions.start_synthesis(finished, synthesis_id),
        create=execution,
        opening=opening,
        publish=iterate_message(execution, FIRST_ITERATION_STEP),
    )


def judge_after_summary(
    session: Session, summary: AgentExecution, scoring_off_reason: str | None, now: datetime
) -> Next | JudgeStart:
    """The summary ended on a chain that scores: the judge starts, unless nothing can judge.

    With ``scoring_off_reason`` (the scripted stand-in cannot judge) the session
    completes and says why it was not scored, instead of recording a failed judge.
    """
    # The investigation itself succeeded even when only its summary did not.
    completed = summary.status is ExecutionStatus.COMPLETED
    text = summary.final_analysis if completed else None
    if scoring_off_reason:
        ended = transitions.complete_session(
            session, now, executive_summary=text, with_summary=True
        )
        verdict = transitions.record_score(None, None, f"not scored ({scoring_off_reason})")
        return Next(session=ended.model_copy(update=verdict.model_dump(exclude_unset=True)))
    record = None
    if session.executive_summary is None and text is not None:
        record = transitions.record_executive_summary(session, text)
    return JudgeStart(session=record, executive_summary=text)


def judge_opening(
    config: TarsyConfig, session: Session, judged: JudgeInput, number: int, due: datetime
) -> tuple[AgentExecution, list[ConversationMessage]]:
    """The judge's execution ``number`` of a session and its opening, on what it reads."""
    resolved = config.resolve_role(session.chain_id, None, "scoring")
    prompt = build_judge_prompt(judged)
    opening = [
        ConversationMessage(role="system", content=prompt.system),
        ConversationMessage(role="user", content=prompt.user),
    ]
    execution = new_execution(
        session, SCORING_STAGE, number, "scoring", resolved,
        scoring_id_for(session.session_id, number), due,
    )  # fmt: skip
    return execution, opening
