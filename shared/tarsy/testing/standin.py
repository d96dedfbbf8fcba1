"""A scripted stand-in model that investigates a demo-cluster scenario by its playbook.

Used by ``make demo`` when no real model is configured: it calls the scenario's
tools in the playbook's order (as Gemini function calls, so the whole tool path
runs for real: kubernetes-mcp-server on the demo cluster's Kubernetes API) and then answers with the
playbook's analysis. Every text it writes starts with :data:`STAND_IN_LABEL`; it
is never presented as a model.

:class:`ScriptedInvestigator` is the machinery, shared with the deliberately
careless :class:`tarsy.testing.sloppy.SloppyModel` of the evaluations.
"""

from __future__ import annotations

from collections.abc import Sequence

from tarsy.mcp.demo_cluster import load_scenario
from tarsy.mcp.demo_cluster.models import PlaybookStep, Scenario
from tarsy.testing.fake_gemini import (
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
        if not offered and done == 0:
            if "<<<BEGIN ANALYSIS>>>" in call.last_user_text():
                return FakeReply(text=f"{self.label} {self.summary}")
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
