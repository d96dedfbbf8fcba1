"""A scripted stand-in model that investigates a demo-cluster scenario by its playbook.

Used by ``make demo`` when no real model is configured: it calls the scenario's
tools in the playbook's order (as Gemini function calls, so the whole tool path
runs for real against the demo cluster MCP server) and then answers with the
playbook's analysis. Every text it writes starts with :data:`STAND_IN_LABEL`; it
is never presented as a model.
"""

from __future__ import annotations

from tarsy.mcp.demo_cluster import load_scenario
from tarsy.mcp.demo_cluster.models import Scenario
from tarsy.testing.fake_gemini import (
    STAND_IN_LABEL,
    FakeCall,
    FakeReply,
    FakeToolCall,
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


class ScenarioStandIn:
    """Follows a scenario's playbook: one tool call per turn, then the analysis."""

    def __init__(self, scenario: Scenario | str) -> None:
        self.scenario = load_scenario(scenario) if isinstance(scenario, str) else scenario
        self._plain = StandInResponder()

    def __call__(self, call: FakeCall) -> FakeReply:
        """The next playbook move for this conversation."""
        offered = call.function_names()
        steps = self.scenario.playbook.steps
        done = tool_results_so_far(call)
        if not offered and done == 0:
            if "<<<BEGIN ANALYSIS>>>" in call.last_user_text():
                return self._summary(call)
            return self._plain(call)
        if offered and done < len(steps):
            step = steps[done]
            # The demo cluster may be configured under any server id (http or stdio).
            name = next((n for n in offered if n.endswith(f"__{step.tool}")), "")
            if name:
                return FakeReply(
                    thinking=f"{STAND_IN_LABEL} {step.thought}",
                    tool_calls=[FakeToolCall(name=name, args=step.arguments, id=f"standin-{done}")],
                    thought_signature=f"standin-signature-{done}".encode(),
                )
        return FakeReply(
            text=f"{STAND_IN_LABEL}\n\n{self.scenario.playbook.analysis}",
            thinking=f"{STAND_IN_LABEL} The evidence is sufficient; writing the analysis.",
        )

    def _summary(self, call: FakeCall) -> FakeReply:
        paragraph = first_paragraph(self.scenario.playbook.analysis)
        return FakeReply(text=f"{STAND_IN_LABEL} {self.scenario.title}: {paragraph}")


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
