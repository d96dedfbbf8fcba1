"""Session scoring by an LLM judge: the prompt it reads and the reply it must give.

A finished investigation is scored 0-100 over four categories, each with a
one-line reason, plus the tools that were missing (MCP tools that would have
made the investigation better): the scoring of TARSy's Go edition. This module is
pure: :func:`build_judge_prompt` turns a session into the judge's system and user
prompts, :func:`parse_judge_reply` turns the judge's text into a
:class:`SessionScore` or raises :class:`JudgeReplyError`. Calling a model is the
caller's business (a scoring stage, ``tarsy eval``).

The session's content (alert, tool output, the agents' own text) is untrusted
and goes inside :func:`tarsy.agent.prompts.delimit` markers. ``prompt_hash`` names the
scoring criteria, so scores made with other criteria can be told apart.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationError, field_validator

from tarsy._pydantic import DeferredModel
from tarsy.agent.prompts import UNTRUSTED_NOTICE, delimit
from tarsy.models import (
    ExecutiveSummaryEvent,
    FinalAnalysisEvent,
    LLMToolCallEvent,
    MCPToolCallEvent,
    TimelineEvent,
    timeline_event,
)

Category = Literal["logical_flow", "consistency", "tool_relevance", "synthesis_quality"]
CATEGORIES: tuple[Category, ...] = (
    "logical_flow",
    "consistency",
    "tool_relevance",
    "synthesis_quality",
)
# Largest share of the prompt one timeline item, and the whole timeline, may take.
ITEM_CHARS = 4_000
TIMELINE_CHARS = 120_000
REASON_CHARS = 300

_CRITERIA = """\
Score the investigation below as a demanding senior SRE reviewing a colleague's incident work.
Judge the method and the evidence, not the style. Be strict: 90+ only for work you would
publish unchanged; below 50 when the conclusion is unsupported or wrong.

Categories, each scored 0-100:
- logical_flow: each step follows from what the previous ones showed; the investigation
  starts from what the alert names and narrows down instead of wandering.
- consistency: the conclusion agrees with the evidence gathered; nothing in the final analysis
  contradicts a tool result; uncertainty is admitted where evidence is missing.
- tool_relevance: the tools called were the right ones for the question at hand; no needless
  calls; failed calls were retried or worked around rather than ignored.
- synthesis_quality: the final analysis names the root cause with its evidence, the impact and
  a concrete, correct remediation, and separates causes from symptoms and noise.

Also list missing_tools: tools (MCP tools, possibly ones that do not exist yet) that the agent
lacked and that would have made the investigation faster or more certain, each with a one-line
rationale. An empty list is fine.

Reply with one JSON object and nothing else, in exactly this shape:
{"score": <0-100, overall>,
 "categories": {
   "logical_flow": {"score": <0-100>, "reason": "<one line>"},
   "consistency": {"score": <0-100>, "reason": "<one line>"},
   "tool_relevance": {"score": <0-100>, "reason": "<one line>"},
   "synthesis_quality": {"score": <0-100>, "reason": "<one line>"}},
 "missing_tools": [{"name": "<tool>", "rationale": "<one line>"}]}
"""

SYSTEM_PROMPT = (
    "You are TARSy's investigation judge. You score finished incident investigations.\n\n"
    f"{_CRITERIA}\n{UNTRUSTED_NOTICE}"
)
PROMPT_HASH = hashlib.sha256(SYSTEM_PROMPT.encode()).hexdigest()[:16]


class JudgeReplyError(ValueError):
    """The judge's reply is not a valid score (not JSON, fields missing, out of range)."""


class _Model(DeferredModel):
    model_config = ConfigDict(extra="ignore")


# ─── what the judge reads ─────────────────────────────────────────────────────


class TimelineItem(_Model):
    """One thing that happened in the session, as the judge reads it."""

    kind: str
    agent: str = ""
    text: str = ""
    tool: str = ""
    arguments: dict[str, Any] = Field(default_factory=dict)
    is_error: bool = False

    @classmethod
    def of_event(cls, event: TimelineEvent, agent: str) -> TimelineItem | None:
        """An event as the judge reads it; None for those it reads elsewhere.

        A tool request is shown with its result; the analyses and the summary
        come apart, in the judge's input.
        """
        if isinstance(event, LLMToolCallEvent | FinalAnalysisEvent | ExecutiveSummaryEvent):
            return None
        call = event if isinstance(event, MCPToolCallEvent) else None
        return cls(
            kind=event.type.value,
            agent=agent,
            text=event.content,
            tool=call.tool_name if call else "",
            arguments=dict(call.arguments) if call else {},
            is_error=call.is_error if call else False,
        )


class JudgeInput(_Model):
    """A finished session, reduced to what the judge needs."""

    alert_type: str
    alert_data: str
    chain_id: str = ""
    final_analysis: str = ""
    executive_summary: str = ""
    timeline: list[TimelineItem] = Field(default_factory=list)
    available_tools: list[str] = Field(
        default_factory=list, description="Tools the agents could call (server.tool)."
    )

    @classmethod
    def from_session_view(
        cls, view: Mapping[str, Any], available_tools: Sequence[str] = ()
    ) -> JudgeInput:
        """Build the input from ``GET /sessions/{id}``'s body (session, timeline...).

        Args:
            view: The api's session view: ``{"session": {...}, "timeline": [...]}``.
            available_tools: The tools the agents were offered.

        Returns:
            The judge's input.
        """
        session = view.get("session") or {}
        items: list[TimelineItem] = []
        for event in view.get("timeline") or []:
            item = TimelineItem.of_event(timeline_event(event), str(event.get("agent") or ""))
            if item is not None:
                items.append(item)
        return cls(
            alert_type=str(session.get("alert_type", "")),
            alert_data=str(session.get("alert_data", "")),
            chain_id=str(session.get("chain_id", "")),
            final_analysis=str(session.get("final_analysis") or ""),
            executive_summary=str(session.get("executive_summary") or ""),
            timeline=items,
            available_tools=list(available_tools),
        )


class JudgePrompt(_Model):
    """The judge's two prompts, and the hash of the criteria they carry."""

    system: str
    user: str
    prompt_hash: str


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n[... {len(text) - limit} chars cut]"


def _render_item(n: int, item: TimelineItem) -> str:
    who = f" ({item.agent})" if item.agent else ""
    if item.kind == "mcp_tool_call":
        status = "FAILED" if item.is_error else "ok"
        arguments = json.dumps(item.arguments, sort_keys=True)
        head = f"{n}. tool call{who}: {item.tool} {arguments} -> {status}"
    else:
        head = f"{n}. {item.kind}{who}"
    return f"{head}\n{_clip(item.text, ITEM_CHARS)}"


def _fit(rendered: list[str], budget: int) -> list[str]:
    """The items within ``budget`` characters: from both ends (how it began, how it ended)."""
    if sum(len(r) for r in rendered) <= budget:
        return rendered
    head: list[str] = []
    tail: list[str] = []
    first, last = 0, len(rendered) - 1
    from_front = True
    while first <= last:
        item = rendered[first] if from_front else rendered[last]
        if len(item) > budget:
            break
        budget -= len(item)
        if from_front:
            head.append(item)
            first += 1
        else:
            tail.append(item)
            last -= 1
        from_front = not from_front
    cut = last - first + 1
    return [*head, f"[... {cut} timeline items cut for length]", *reversed(tail)]


def build_judge_prompt(
    judge_input: JudgeInput, *, timeline_chars: int = TIMELINE_CHARS
) -> JudgePrompt:
    """The system and user prompts that ask the judge to score one session.

    Args:
        judge_input: The session.
        timeline_chars: Budget for the timeline; the oldest middle items go first when over.

    Returns:
        The prompts, with the criteria's hash.
    """
    rendered = [_render_item(n, item) for n, item in enumerate(judge_input.timeline, 1)]
    kept = _fit(rendered, timeline_chars)
    tools = ", ".join(judge_input.available_tools) or "(none listed)"
    user = "\n\n".join(
        [
            f"Alert type: {judge_input.alert_type}"
            + (f"; chain: {judge_input.chain_id}" if judge_input.chain_id else ""),
            delimit("ALERT DATA", judge_input.alert_data),
            f"Tools the agents could call: {tools}",
            delimit("INVESTIGATION TIMELINE", "\n\n".join(kept) or "(empty)"),
            delimit("FINAL ANALYSIS", judge_input.final_analysis or "(none)"),
            delimit("EXECUTIVE SUMMARY", judge_input.executive_summary or "(none)"),
            "Score this investigation. Reply with the JSON object only.",
        ]
    )
    return JudgePrompt(system=SYSTEM_PROMPT, user=user, prompt_hash=PROMPT_HASH)


# ─── what the judge answers ───────────────────────────────────────────────────


def _one_line(value: str) -> str:
    line = " ".join(str(value).split())
    if not line:
        raise ValueError("must not be empty")
    return line if len(line) <= REASON_CHARS else line[: REASON_CHARS - 1] + "…"


class CategoryScore(_Model):
    """One category's score and the reason for it, on one line."""

    score: int = Field(ge=0, le=100)
    reason: str

    _line = field_validator("reason")(_one_line)


class MissingTool(_Model):
    """A tool the investigation lacked."""

    name: str = Field(min_length=1)
    rationale: str = ""

    @field_validator("rationale")
    @classmethod
    def _rationale_line(cls, value: str) -> str:
        return " ".join(value.split())


class CategoryScores(_Model):
    """The four categories."""

    logical_flow: CategoryScore
    consistency: CategoryScore
    tool_relevance: CategoryScore
    synthesis_quality: CategoryScore


class SessionScore(_Model):
    """The judge's verdict on one session."""

    score: int = Field(ge=0, le=100)
    categories: CategoryScores
    missing_tools: list[MissingTool] = Field(default_factory=list)
    prompt_hash: str = ""

    @field_validator("missing_tools", mode="before")
    @classmethod
    def _names_alone(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [{"name": v} if isinstance(v, str) else v for v in value]
        return value


_FENCE = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.DOTALL)


def _json_object(text: str) -> Any:
    """The JSON object in a reply: the whole text, a fenced block, or the outermost braces."""
    candidates = [text.strip()]
    candidates += [m.group(1) for m in _FENCE.finditer(text)]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except ValueError:
            continue
    raise JudgeReplyError("the judge's reply holds no JSON object")


def parse_judge_reply(text: str, *, prompt_hash: str = PROMPT_HASH) -> SessionScore:
    """Read the judge's reply: a JSON object, bare or in a fenced block, maybe with prose around.

    Args:
        text: The judge model's answer.
        prompt_hash: The hash of the criteria it was given (kept on the score).

    Returns:
        The score.

    Raises:
        JudgeReplyError: No JSON object, a missing or extra-typed field, a score outside
            0-100, an empty reason.
    """
    data = _json_object(text)
    if not isinstance(data, dict):
        raise JudgeReplyError("the judge's reply is JSON but not an object")
    try:
        return SessionScore.model_validate({**data, "prompt_hash": prompt_hash})
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in error['loc'])}: {error['msg']}" for error in e.errors()
        )
        raise JudgeReplyError(f"the judge's reply is not a valid score: {problems}") from e
