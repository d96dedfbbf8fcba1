"""A scripted stand-in model that investigates a demo-cluster scenario by its playbook.

Used by ``make demo`` when no real model is configured: it calls the scenario's
tools in the playbook's order (as Gemini function calls, so the whole tool path
runs for real: kubernetes-mcp-server on the demo cluster's Kubernetes API) and then answers with the
playbook's analysis. Every text it writes starts with :data:`STAND_IN_LABEL`; it
is never presented as a model.

:class:`ScriptedInvestigator` is the machinery, shared with the deliberately
careless :class:`tarsy_dev.fakes.sloppy.SloppyModel` of the evaluations.
"""

from __future__ import annotations

from collections.abc import Sequence

from tarsy_dev.demo_cluster import load_scenario
from tarsy_dev.demo_cluster.models import PlaybookStep, Scenario
from tarsy_dev.fakes.fake_gemini import (
    STAND_IN_LABEL,
    FakeCall,
    FakeReply,
    FakeToolCall,
    Responder,
    StandInResponder,
)


def tool_results_so_far(call: FakeCall) -> int:
    """How many function responses the conversation already holds."""
    return sum(
        1
        for content in call.body.get("contents", [])
        for part in content.get("parts", [])
        if "functionResponse" in part
    )


class ScriptedInvestigator:
    """Answers like an investigating model from a script: one tool call per turn, then a text.

    Args:
        tag: Prefix of its call ids and thought signatures (``standin-0``...).
        label: Starts every text and thought it writes (it never passes for a model).
        steps: The tool calls, in order (one per turn while tools are offered).
        analysis: The final analysis, after the last call.
        summary: The executive summary (asked for without tools, the analysis quoted).
        plain: Answers any other call (no tools offered, nothing to summarize).
    """

    def __init__(
        self,
        *,
        tag: str,
        label: str,
        steps: Sequence[PlaybookStep],
        analysis: str,
        summary: str,
        plain: Responder,
    ) -> None:
        self.tag = tag
        self.label = label
        self.steps = list(steps)
        self.analysis = analysis
        self.summary = summary
        self._plain = plain

    def __call__(self, call: FakeCall) -> FakeReply:
        """The next scripted move for this conversation."""
        offered = call.function_names()
        done = tool_results_so_far(call)
        if done == 0 and "<<<BEGIN QUESTION>>>" in call.last_user_text():
            return FakeReply(text=chat_answer(call.last_user_text(), self.label))
        if not offered and done == 0:
            if "<<<BEGIN ANALYSIS>>>" in call.last_user_text():
                return FakeReply(text=f"{self.label} {self.summarize(call.last_user_text())}")
            return self._plain(call)
        if offered and done < len(self.steps):
            step = self.steps[done]
            # kubernetes-mcp-server may be configured under any server id.
            name = next((n for n in offered if n.endswith(f"__{step.tool}")), "")
            if name:
                return FakeReply(
                    thinking=f"{self.label} {step.thought}".rstrip(),
                    tool_calls=[
                        FakeToolCall(name=name, args=step.arguments, id=f"{self.tag}-{done}")
                    ],
                    thought_signature=f"{self.tag}-signature-{done}".encode(),
                )
        return FakeReply(
            text=f"{self.label}\n\n{self.analysis}",
            thinking=f"{self.label} The evidence is sufficient; writing the analysis.",
        )

    def summarize(self, prompt: str) -> str:
        """The executive summary for a summary request (``prompt`` holds the analysis)."""
        return self.summary


class ScenarioStandIn(ScriptedInvestigator):
    """Follows a scenario's playbook: one tool call per turn, then the analysis."""

    def __init__(self, scenario: Scenario | str) -> None:
        self.scenario = load_scenario(scenario) if isinstance(scenario, str) else scenario
        super().__init__(
            tag="standin",
            label=STAND_IN_LABEL,
            steps=self.scenario.playbook.steps,
            analysis=self.scenario.playbook.analysis,
            summary=f"{self.scenario.title}: {first_paragraph(self.scenario.playbook.analysis)}",
            plain=StandInResponder(),
        )

    def summarize(self, prompt: str) -> str:
        """The summary of the analysis it was given: the scenario's, or a restated alert.

        The stand-in follows its scenario's playbook only where the scenario's tools
        are offered; any other alert gets the restating analysis, and its summary
        must say that, not tell the scenario's story.
        """
        analysis = delimited(prompt, "ANALYSIS").replace(self.label, "")
        headline = first_paragraph(self.scenario.playbook.analysis)
        if headline and headline in " ".join(analysis.split()):
            return f"{self.scenario.title}: {headline}"
        quoted = [line for line in analysis.splitlines() if line.startswith(">")]
        lead = first_paragraph(analysis) or "The analysis it was given is empty."
        return "\n".join([lead, "", *quoted[:SUMMARY_QUOTED_LINES]]).rstrip()


# How much of a restated alert the stand-in's summary repeats.
SUMMARY_QUOTED_LINES = 8


def delimited(prompt: str, label: str) -> str:
    """The text between ``<<<BEGIN label>>>`` and ``<<<END label>>>`` ('' when absent)."""
    begin, end = f"<<<BEGIN {label}>>>", f"<<<END {label}>>>"
    start = prompt.find(begin)
    if start < 0:
        return ""
    stop = prompt.find(end, start)
    return prompt[start + len(begin) : stop if stop >= 0 else None].strip()


def chat_answer(prompt: str, label: str) -> str:
    """The stand-in's reply to a follow-up: the question, and what the investigation found.

    It cannot reason about the question, and says so; it quotes the question and
    points back at the session's own summary (or its investigation).
    """
    question = " ".join(delimited(prompt, "QUESTION").split())
    alert_type = next(
        (line.removeprefix("Alert type:").strip() for line in prompt.splitlines()
         if line.startswith("Alert type:")),
        "this",
    )  # fmt: skip
    found = delimited(prompt, "SUMMARY") or delimited(prompt, "INVESTIGATION")
    gist = first_paragraph(found.replace(label, "")) or "(the investigation left no text)"
    return (
        f"{label}\n\n"
        f"You asked: \u201c{question}\u201d\n\n"
        "The stand-in does not reason, so it cannot answer that. What the investigation "
        f"of the {alert_type} alert found:\n\n{gist}\n\n"
        "Set GEMINI_API_KEY (or Vertex credentials) and run the demo again for a real answer."
    )


def first_paragraph(markdown: str) -> str:
    """The first paragraph of prose in ``markdown``, unwrapped onto one line."""
    lines: list[str] = []
    for raw in markdown.splitlines():
        line = raw.strip()
        if line.startswith("#"):
            continue
        if not line:
            if lines:
                break
            continue
        lines.append(line)
    return " ".join(lines)
