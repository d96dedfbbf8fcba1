"""The session commands a person gives: cancel, resume, rescore, chat, feedback, erase...

Design constraint: an action's state change and its audit record are one
commit (:mod:`tarsy.commands.recorded`): no action exists without its record.
Each command checks the session's state first (404 for none, 409 for the
wrong state) and writes nothing on a refusal; who may give it is the door's
check (the api's roles, Slack's linked identity), not the command's.
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from datetime import timedelta
from typing import Any

from pydantic import ConfigDict, Field

from tarsy import telemetry
from tarsy._pydantic import DeferredModel
from tarsy.access.roles import Principal
from tarsy.app import Deps
from tarsy.commands.recorded import Recorder, recorded_deps
from tarsy.commands.start import new_session, start_or_undo, status_url
from tarsy.engine import transitions
from tarsy.engine.messages import iterate_message
from tarsy.engine.roles import rules
from tarsy.errors import InputError, NotFoundError
from tarsy.feedback import FeedbackRequest, audit_detail, feedback_of, feedback_update
from tarsy.models import ExecutionStatus, Feedback, ThreadReply, utcnow
from tarsy.persistence.audit_log import ActionWrites
from tarsy.persistence.ports import SessionReader
from tarsy.persistence.updates import ExecutionUpdate, StageUpdate
from tarsy.tools.masking import Masker

logger = logging.getLogger(__name__)


class ChatRequest(DeferredModel):
    """``POST /sessions/{id}/chat`` body."""

    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1)


class ResumeRequest(DeferredModel):
    """``POST /sessions/{id}/resume`` body: ``{}`` or how many more iterations."""

    model_config = ConfigDict(extra="forbid")

    extra_iterations: int | None = Field(default=None, ge=1, le=200)


class EraseRequest(DeferredModel):
    """``DELETE /sessions/{id}`` body: why the session is erased (kept in its erasure's record)."""

    model_config = ConfigDict(extra="forbid")

    reason: str = Field(min_length=3, max_length=2000)


class InvestigateRequest(DeferredModel):
    """``POST /sessions/{id}/investigate`` body: ``{}``, or why it is investigated again."""

    model_config = ConfigDict(extra="forbid")

    reason: str | None = Field(default=None, max_length=2000)


def masked_typed_text(deps: Deps, text: str) -> str:
    """What a person typed, masked by the rules alert data is masked by.

    Design constraint: a question, a corrected cause or a reason is stored (the
    timeline, the conversation, the audit, memory) and reaches the model, so a
    secret pasted into it is masked before any of that, as an alert's would be.
    """
    return Masker(deps.config.alert_masking).mask(text).text


async def session_view(store: SessionReader, session_id: str) -> dict[str, Any]:
    """Return a session with its stages, executions and their timelines, in order.

    Each execution that has not ended carries ``progress``: the thinking and text
    of the LLM call streaming now (``tarsy chat`` shows it as it grows), or None.
    """
    session = await store.get_session(session_id)
    if session is None:
        raise NotFoundError(f"no session {session_id!r}")
    stages = await store.list_stages(session_id)
    executions = await store.list_executions(session_id)
    # Calls streaming now: their text so far (each commit replaces it with the records).
    live = await store.live_progress(
        [e.execution_id for e in executions if not e.status.is_terminal]
    )
    execution_views: list[dict[str, Any]] = []
    timeline: list[dict[str, Any]] = []
    for execution in executions:
        events = await store.list_timeline(execution.execution_id)
        event_views = [
            {
                **event.model_dump(mode="json"),
                "execution_id": execution.execution_id,
                "stage": execution.stage,
                "agent": execution.agent,
            }
            for event in events
        ]
        progress = live.get(execution.execution_id)
        execution_views.append(
            {
                **execution.model_dump(mode="json"),
                "timeline": event_views,
                "progress": None if progress is None else progress.model_dump(mode="json"),
            }
        )
        timeline.extend(event_views)
    timeline.sort(key=lambda e: (e["created_at"], e["stage"]))
    audit = await store.list_audit(session_id)
    return {
        "session": session.model_dump(mode="json"),
        "stages": [stage.model_dump(mode="json") for stage in stages],
        "executions": execution_views,
        "timeline": timeline,
        "audit": [event.model_dump(mode="json") for event in audit],
    }


async def cancel(deps: Deps, session_id: str, recorder: Recorder | None = None) -> dict[str, Any]:
    """Ask for a session to stop; steps check the flag before each LLM call and publish.

    The session's mark, its executions' and the audit record are one commit.
    """
    session = await deps.store.get_session(session_id)
    if session is None:
        raise NotFoundError(f"no session {session_id!r}")
    if session.status.is_terminal:
        raise InputError(f"session {session_id} is already {session.status.value}", status=409)
    # Nothing runs for a paused execution: end it here. A running one is marked, so
    # that its step's commit fails its precondition and the step cancels instead.
    now = utcnow()
    executions: list[tuple[str, ExecutionUpdate]] = []
    for execution in await deps.store.list_executions(session_id):
        if execution.status is ExecutionStatus.PAUSED:
            executions.append(
                (execution.execution_id, transitions.cancel_execution(execution, now))
            )
        elif not execution.status.is_terminal and rules(execution.role).stopped_with_its_session:
            executions.append(
                (execution.execution_id, transitions.request_cancel_of_execution(execution))
            )
    await deps.store.commit_action(
        ActionWrites(
            session_id,
            recorder.record() if recorder else None,
            session=transitions.request_cancel(session),
            executions=tuple(executions),
        )
    )
    if session.status is ExecutionStatus.PAUSED:
        # Imported here: only ending a paused session notifies (reads never load the notifiers).
        from tarsy.notify.session_end import on_session_end

        await deps.store.update_session(session_id, transitions.cancel_session(session, now))
        await on_session_end(session_id, deps)
    logger.info("cancel requested for %s", session_id)
    return {"session_id": session_id, "cancel_requested": True}


async def rescore(deps: Deps, session_id: str, recorder: Recorder | None = None) -> dict[str, Any]:
    """Score a finished session again with the chain's judge (the new score replaces the old).

    The judge's execution is created with the audit record, in one commit.
    """
    session = await deps.store.get_session(session_id)
    if session is None:
        raise NotFoundError(f"no session {session_id!r}")
    if not session.status.is_terminal:
        raise InputError(
            f"session {session_id} is still {session.status.value}; score it when it has finished",
            status=409,
        )
    if deps.settings.scoring_off_reason:
        raise InputError(
            f"not scored ({deps.settings.scoring_off_reason}): no judge to score it with",
            status=409,
        )
    scorings = [e for e in await deps.store.list_executions(session_id) if e.role == "scoring"]
    if any(not e.status.is_terminal for e in scorings):
        raise InputError(f"session {session_id} is being scored; try again shortly", status=409)
    # Imported here: only starting a judge or a chat needs the engine's chains and prompts.
    from tarsy.engine.chains import start_scoring

    acting = deps if recorder is None else recorded_deps(deps, recorder)[0]
    with telemetry.in_session_trace(session.trace_context):
        execution = await start_scoring(session, len(scorings), acting)
    await deps.store.update_session(session_id, transitions.keep_until_answered(session, utcnow()))
    return {"session_id": session_id, "execution_id": execution.execution_id}


async def cancel_agent(
    deps: Deps, session_id: str, execution_id: str, recorder: Recorder | None = None
) -> dict[str, Any]:
    """Cancel one running agent; its stage completes per its success_policy without it.

    A cancelled sub-agent gives its parent an error observation instead of an answer.
    The mark (or a paused agent's end) and the audit record are one commit.
    """
    session = await deps.store.get_session(session_id)
    if session is None:
        raise NotFoundError(f"no session {session_id!r}")
    execution = await deps.store.get_execution(execution_id)
    if execution is None or execution.session_id != session_id:
        raise NotFoundError(f"no execution {execution_id!r} in session {session_id!r}")
    if session.status.is_terminal or execution.status.is_terminal:
        what = "session" if session.status.is_terminal else "execution"
        status = session.status if session.status.is_terminal else execution.status
        raise InputError(f"the {what} is already {status.value}", status=409)
    if not rules(execution.role).cancellable_alone:
        raise InputError(
            f"only a stage's agents and sub-agents can be cancelled on their own, "
            f"not a {execution.role}",
            status=409,
        )
    # The mark voids a running step's commit (it then cancels the agent) and is seen
    # by the next step of an idle one; a paused agent is ended here.
    if execution.status is ExecutionStatus.PAUSED:
        # Imported here: ending a paused agent runs the engine's fan-in (tarsy.engine.chains).
        from tarsy.engine.lifecycle import cancel_one

        await cancel_one(execution, deps if recorder is None else recorded_deps(deps, recorder)[0])
    else:
        await deps.store.commit_action(
            ActionWrites(
                session_id,
                recorder.record(target=execution_id) if recorder else None,
                executions=((execution_id, transitions.request_cancel_of_execution(execution)),),
            )
        )
    logger.info("cancel requested for %s of %s", execution_id, session_id)
    return {"session_id": session_id, "execution_id": execution_id, "cancel_requested": True}


async def resume(
    deps: Deps, session_id: str, request: ResumeRequest, recorder: Recorder | None = None
) -> dict[str, Any]:
    """Continue a session paused at max_iterations, with more iterations.

    The executions, their stages, the session and the audit record are one
    commit; the steps are published after it (each resumed execution carries a
    due time, so the sweeper publishes one whose publish was lost).
    """
    session = await deps.store.get_session(session_id)
    if session is None:
        raise NotFoundError(f"no session {session_id!r}")
    if session.status is not ExecutionStatus.PAUSED:
        raise InputError(f"session {session_id} is {session.status.value}, not paused", status=409)
    paused = [
        e for e in await deps.store.list_executions(session_id)
        if e.status is ExecutionStatus.PAUSED
    ]  # fmt: skip
    due = utcnow() + timedelta(seconds=deps.settings.step_due_seconds)
    executions = tuple(
        (
            e.execution_id,
            transitions.resume_execution(e, request.extra_iterations or e.max_iterations, due),
        )
        for e in paused
    )
    stages: dict[int, StageUpdate] = {
        e.stage: transitions.resume_stage()
        for e in paused
        if rules(e.role).pauses == "stage_and_session"
    }
    # The pause did not use the session's time: it gets a whole timeout again.
    deadline = utcnow() + timedelta(seconds=deps.config.session_timeout(session.chain_id))
    await deps.store.commit_action(
        ActionWrites(
            session_id,
            recorder.record() if recorder else None,
            session=transitions.resume_session(session, deadline),
            executions=executions,
            stages=tuple(stages.items()),
        )
    )
    with telemetry.in_session_trace(session.trace_context):
        for execution in paused:
            await deps.bus.publish(iterate_message(execution, execution.step))
    return {"session_id": session_id, "resumed": [e.execution_id for e in paused]}


async def investigate_again(
    deps: Deps, session_id: str, recorder: Recorder | None = None
) -> dict[str, Any]:
    """Start a new session from a finished session's alert, with today's configuration.

    Design constraint: after a fix, a configuration change or a provider outage
    the same alert must be run again, but a native sender's re-send is rightly
    answered ``duplicate``; so this starts the new session directly (no source's
    dedup window applies) and links the two both ways, while native re-sends
    stay deduplicated. Its chain is routed afresh; its alert, runbook, tool
    selection, metadata and source are the first's. The new session, both
    links and the audit record are one commit (undone, record too, when the
    start cannot be published).
    """
    first = await deps.store.get_session(session_id)
    if first is None:
        raise NotFoundError(f"no session {session_id!r}")
    if not first.status.is_terminal:
        raise InputError(
            f"session {session_id} is still {first.status.value}; cancel it or let it finish, "
            "then investigate again",
            status=409,
        )
    session = new_session(
        alert_type=first.alert_type,
        data_text=first.alert_data,
        data=alert_object(first.alert_data),
        config=deps.config,
        settings=deps.settings,
        now=utcnow(),
        masker=Masker(deps.config.alert_masking),
        runbook=first.runbook,
        mcp=first.mcp,
        metadata=first.metadata,
        source=first.source,
    ).model_copy(update={"investigation_of": first.session_id})
    writes = ActionWrites(
        session_id,
        recorder.record(target=session.session_id) if recorder else None,
        new_session=session,
    )
    await deps.store.commit_action(writes)

    async def undo() -> None:
        await deps.store.undo_reinvestigation(writes)

    if not await start_or_undo(deps.bus, session.session_id, undo):
        raise InputError("queue unavailable, retry", status=503)
    logger.info("%s investigates %s again", session.session_id, session_id)
    return {
        "session_id": session.session_id,
        "investigation_of": session_id,
        "status_url": status_url(deps.settings, session.session_id),
    }


async def give_feedback(
    deps: Deps, session_id: str, request: FeedbackRequest, principal: Principal
) -> Feedback:
    """Store a responder's verdict (and corrected cause) on a finished session.

    Design constraint: feedback judges an analysis, so only a finished session
    takes it (409 while it runs); a later one replaces it on the session, while
    the audit keeps each one. The cause is masked as alert data is: a later
    alert's investigation reads it as history (tarsy.memory). The verdict, the
    cause and the audit record are one commit.
    """
    session = await deps.store.get_session(session_id)
    if session is None:
        raise NotFoundError(f"no session {session_id!r}")
    if not session.status.is_terminal:
        raise InputError(
            f"session {session_id} is still {session.status.value}; give feedback when it has "
            "finished",
            status=409,
        )
    feedback = feedback_of(
        request, principal.email, utcnow(), lambda text: masked_typed_text(deps, text)
    )
    update = feedback_update(feedback)
    # A confirmed or corrected session is found by memory's query of judged ones too.
    # Imported here: only feedback touches memory's keys (reads never load it).
    from tarsy.memory import keys_after_feedback

    keys = keys_after_feedback(session.memory_keys, feedback)
    if keys != session.memory_keys:
        update = update.model_copy(update={"memory_keys": keys})
    record = Recorder(principal, "feedback", session_id).record(detail=audit_detail(feedback))
    await deps.store.commit_action(ActionWrites(session_id, record, session=update))
    return feedback


def alert_object(alert_data: str) -> object:
    """The alert's data as it was posted, for routing by its labels: JSON, else the text."""
    try:
        parsed: object = json.loads(alert_data)
    except ValueError:
        return alert_data
    return parsed


MAX_QUESTION_CHARS = 100_000  # as TARSy accepts (its #194)


async def chat(
    deps: Deps,
    session_id: str,
    request: ChatRequest,
    *,
    reply_to: ThreadReply | None = None,
    recorder: Recorder | None = None,
) -> dict[str, Any]:
    """Ask a question about a finished investigation; the answer lands in the timeline.

    Any finished session takes questions (completed, failed, timed out,
    cancelled); the chat sees the investigation and every earlier question and
    answer. One question at a time: another is refused with 409 until the
    previous one is answered. ``reply_to``: the question came from the
    session's Slack thread, and the answer goes there too.
    """
    if len(request.question) > MAX_QUESTION_CHARS:
        raise InputError(
            f"the question has {len(request.question):,} characters; "
            f"at most {MAX_QUESTION_CHARS:,} are accepted",
            status=413,
        )
    session = await deps.store.get_session(session_id)
    if session is None:
        raise NotFoundError(f"no session {session_id!r}")
    if not session.status.is_terminal:
        raise InputError(
            f"session {session_id} is still {session.status.value}: the investigation has "
            "not finished; ask when it has",
            status=409,
        )
    # Imported here: only starting a judge or a chat needs the engine's chains and prompts.
    from tarsy.engine.chains import start_chat

    # Masked before it is stored anywhere (the conversation, the timeline, the audit)
    # or sent to a model.
    question = masked_typed_text(deps, request.question)
    acting = deps
    if recorder is not None:
        # The chat's execution is created with the audit record, in one commit.
        acting = recorded_deps(deps, replace(recorder, detail=question))[0]
    with telemetry.in_session_trace(session.trace_context):
        execution = await start_chat(session, question, acting, reply_to=reply_to)
    await deps.store.update_session(session_id, transitions.keep_until_answered(session, utcnow()))
    return {"session_id": session_id, "execution_id": execution.execution_id}


async def erase(deps: Deps, session_id: str, request: EraseRequest, recorder: Recorder) -> None:
    """Delete every record of a session (an admin's, for a person's request or a pasted secret).

    Design constraint: the erasure is audited with who and why, and that record
    is the one thing of the session kept; the reason is masked like anything typed.
    Only a session nothing runs for is erased (409 otherwise): a running step, chat
    or judge would write its records again after them.
    """
    session = await deps.store.get_session(session_id)
    if session is None:
        raise NotFoundError(f"no session {session_id!r}")
    running = [e for e in await deps.store.list_executions(session_id) if not e.status.is_terminal]
    if not session.status.is_terminal or running:
        raise InputError(
            f"session {session_id} is still running ({session.status.value}, "
            f"{len(running)} execution(s) not ended); cancel it or let it finish, then erase it",
            status=409,
        )
    reason = masked_typed_text(deps, request.reason)
    if not await deps.store.erase_session(recorder.record(target=session_id, detail=reason)):
        raise NotFoundError(f"no session {session_id!r}")
    logger.info("%s erased by %s", session_id, recorder.principal.email)
