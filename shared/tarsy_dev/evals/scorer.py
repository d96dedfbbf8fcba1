"""Scoring one evaluated investigation against its scenario's expected facts.

A run passes when the session completed, its final analysis states every
required finding, draws none of the forbidden conclusions, and the
investigation fetched every piece of evidence the scenario needs (each
:class:`~tarsy_dev.demo_cluster.models.ToolNeed` met by a successful call). Tool
precision (the share of calls that were relevant) is reported, not required.
Whether the analysis proposes the fix a reviewer would accept
(``expected.fix``, every part of it) is reported beside the verdict as
``fix_proposed``, never part of it: a right diagnosis with a wrong remedy
still passes, and the report shows how often each model proposed the fix.
"""

from __future__ import annotations

from pydantic import BaseModel, Field, computed_field

from tarsy.agent.scoring import SessionScore
from tarsy_dev.demo_cluster.models import Scenario
from tarsy_dev.evals.observation import RunObservation, ToolCallRecord


class FactResult(BaseModel):
    """A finding or forbidden conclusion, and the sentence that states it (if any)."""

    fact: str
    found: bool
    sentence: str | None = None


class ToolNeedResult(BaseModel):
    """A piece of evidence the investigation had to fetch, and the call that fetched it."""

    need: str
    met: bool
    by: str | None = Field(default=None, description="The successful call that met it.")


class RunScore(BaseModel):
    """The verdict on one run."""

    completed: bool
    findings: list[FactResult]
    forbidden: list[FactResult] = Field(description="found: the run drew this wrong conclusion.")
    tools: list[ToolNeedResult]
    tool_calls: int
    relevant_calls: int
    failed_calls: int
    fixes: list[FactResult] = Field(
        default_factory=list,
        description="Each part of the scenario's fix, and where it is proposed.",
    )
    judge: SessionScore | None = Field(default=None, description="The LLM judge's score, if any.")
    judge_error: str | None = None
    detection_findings: list[FactResult] = Field(
        default_factory=list,
        description="Each required finding, and whether the automatic checks' texts alone "
        "state it (the same matchers over the detections): what a model could copy.",
    )

    @computed_field  # type: ignore[prop-decorator]
    @property
    def detections_found(self) -> float:
        """Share of the required findings the detections alone state (0-1)."""
        stated = self.detection_findings
        return sum(f.found for f in stated) / len(stated) if stated else 0.0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def findings_found(self) -> float:
        """Share of the required findings stated (0-1)."""
        return sum(f.found for f in self.findings) / len(self.findings) if self.findings else 1.0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def tool_recall(self) -> float:
        """Share of the needed evidence fetched (0-1)."""
        return sum(t.met for t in self.tools) / len(self.tools) if self.tools else 1.0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def tool_precision(self) -> float:
        """Share of the calls that were relevant (0-1; 1 when no call was made)."""
        return self.relevant_calls / self.tool_calls if self.tool_calls else 1.0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def fix_proposed(self) -> bool:
        """Whether the analysis proposes every part of the scenario's fix (not part of passing)."""
        return bool(self.fixes) and all(f.found for f in self.fixes)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def reasons(self) -> list[str]:
        """Why the run failed (empty when it passed)."""
        reasons = [] if self.completed else ["the session did not complete"]
        reasons += [f"missing finding: {f.fact}" for f in self.findings if not f.found]
        reasons += [f"forbidden conclusion: {f.fact}" for f in self.forbidden if f.found]
        reasons += [f"evidence not fetched: {t.need}" for t in self.tools if not t.met]
        return reasons

    @computed_field  # type: ignore[prop-decorator]
    @property
    def passed(self) -> bool:
        """Whether the run passed."""
        return not self.reasons


def _describe(call: ToolCallRecord) -> str:
    arguments = ", ".join(f"{k}={v}" for k, v in sorted(call.arguments.items()) if v is not None)
    return f"{call.tool}({arguments})"


def score_run(scenario: Scenario, observation: RunObservation) -> RunScore:
    """Score one run of ``scenario``.

    Args:
        scenario: The scenario, with its expected facts.
        observation: What the run produced.

    Returns:
        The verdict, with the evidence for each part of it.
    """
    analysis = observation.final_analysis
    findings = []
    for finding in scenario.expected.findings:
        sentence = finding.found_in(analysis)
        findings.append(
            FactResult(fact=finding.fact, found=sentence is not None, sentence=sentence)
        )
    # One detection a paragraph: a matcher reads sentences, never across two findings.
    detected = "\n\n".join(observation.detections)
    detection_findings = []
    for finding in scenario.expected.findings:
        sentence = finding.found_in(detected) if detected else None
        detection_findings.append(
            FactResult(fact=finding.fact, found=sentence is not None, sentence=sentence)
        )
    forbidden = []
    for wrong in scenario.expected.forbidden:
        sentence = wrong.found_in(analysis)
        forbidden.append(
            FactResult(fact=wrong.claim, found=sentence is not None, sentence=sentence)
        )
    fixes = []
    for fix in scenario.expected.fix:
        sentence = fix.found_in(analysis)
        fixes.append(FactResult(fact=fix.accept, found=sentence is not None, sentence=sentence))
    succeeded = [call for call in observation.tool_calls if not call.is_error]
    tools = []
    for need in scenario.expected.tools:
        by = next(
            (
                call
                for call in succeeded
                if any(pattern.matches(call.tool, call.arguments) for pattern in need.any_of)
            ),
            None,
        )
        tools.append(
            ToolNeedResult(need=need.need, met=by is not None, by=_describe(by) if by else None)
        )
    return RunScore(
        completed=observation.status == "completed",
        findings=findings,
        forbidden=forbidden,
        tools=tools,
        fixes=fixes,
        tool_calls=len(observation.tool_calls),
        relevant_calls=sum(
            scenario.is_relevant_call(call.tool, call.arguments) for call in observation.tool_calls
        ),
        failed_calls=len(observation.tool_calls) - len(succeeded),
        detection_findings=detection_findings,
    )
