"""The compact path: after the evidence, one short conclusion call; tools only if it asks (pure).

Design constraint: a small model on a CPU reads a prompt at tens of tokens a
second and writes at about ten (``docs/models.md``), and it copies findings
faithfully but does not plan a search. So its first call after the gather step
offers no tools: it reads the alert, the part of the runbook about it, the
findings and a brief sized to what it reads in ``read_seconds``, and answers in
a fixed short structure under an output limit. Only if it says the evidence is
not enough does a bounded follow-up with tools run
(:class:`~tarsy.agent.strategies.compact.CompactStrategy`).

The static part of the opening (who the agent is, its instructions, the answer
form) is the system message, identical between sessions of the same agent, so
a server with a prefix cache reads it once; everything about the incident is
in the user message after it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import field_validator

from tarsy._pydantic import DeferredModel
from tarsy.agent.prompts import undelimit
from tarsy.config.schema import CompactPathSettings
from tarsy.evidence.brief import compact as compact_result
from tarsy.evidence.brief import parse_findings
from tarsy.evidence.catalog import shape_of_tool
from tarsy.llm.base import Capabilities
from tarsy.models import ConversationMessage
from tarsy.tools.base import ToolResult

# The smallest brief worth sending: below this the findings alone are the evidence.
MIN_BRIEF_TOKENS = 300
# Characters a token, counted for the compact opening. Small open models' tokenizers
# split numbers digit by digit (Qwen, Llama 3), so timestamps, metric series, YAML and
# logs run about 2.5 characters a token where prose runs 4: measured here, an opening
# sized at 3.5 came out 1.15-1.35 times the tokens it was meant to be. The opening is
# the reading time, so it is counted short rather than long.
CHARS_PER_TOKEN = 2.5
# The runbook's share of the opening: the part about the alert, not the whole book.
RUNBOOK_CHARS = 1200
# The user message that starts the follow-up; the strategy recognises the phase by it.
FOLLOW_UP_HEAD = "Follow-up: you said the evidence above is not enough."

ANSWER_FIELDS = ("broken", "root_cause", "evidence", "fix")
_HEADINGS = {
    "broken": "What is broken",
    "root_cause": "Root cause",
    "evidence": "Evidence",
    "fix": "Fix",
}

STRUCTURED_GUIDANCE = """\
Answer with one JSON object:
"broken": in one sentence, what is broken, naming the resource as the findings name it;
"root_cause": in one or two sentences, the cause: the resource (kind and name, as the \
findings write them) and the exact value or change that caused it (a finding marked \
"likely cause" usually is it; a "symptom" is not the cause);
"findings": the numbers of the findings that show the cause, as a list (all that apply, \
most telling first; [] when none does): the analysis quotes them word for word;
"fix": in one or two sentences, the concrete change that resolves it (what to set or \
change back, and where), or that no action is needed when a finding shows it recovered;
"evidence_enough": true when you could name the root cause above from the findings and \
the evidence; false when you could not name it;
"check_next": when evidence_enough is false, what to look at with the cluster tools; \
else "".
Write nothing else."""

TEXT_GUIDANCE = """\
Answer in exactly this form, nothing else:
What is broken: <one sentence: what is broken, naming the resource as the findings name it>
Root cause: <one or two sentences: the resource (kind and name, as the findings write \
them) and the exact value or change that caused it; a finding marked "likely cause" \
usually is it, a "symptom" is not>
Findings: <the numbers of the findings that show the cause, most telling first, e.g. 2, 5; \
none when none does: the analysis quotes them word for word>
Fix: <one or two sentences: the concrete change that resolves it, what and where; or that \
no action is needed when a finding shows it recovered>
Evidence enough: <yes when you could name the root cause above from the findings and the \
evidence, no when you could not name it>
Check next: <when the evidence is not enough, what to look at with the cluster tools>"""

# The most findings an answer cites: a brief numbers about a dozen, and the analysis
# quotes each cited one, so more than this is a list copied rather than chosen.
MAX_CITED_FINDINGS = 8
# Characters a token of the answer's prose, counted short (names and values split into
# several tokens) so that bounded texts always fit the output limit.
ANSWER_CHARS_PER_TOKEN = 3
# Tokens of an answer that are not its texts: the keys, quotes, the booleans, the numbers.
ANSWER_FRAME_TOKENS = 90
# Each text's share of the answer's characters.
_TEXT_SHARES = {"broken": 0.2, "root_cause": 0.35, "fix": 0.3, "check_next": 0.15}
# llama.cpp writes ``maxLength: N`` as ``char{0,N}`` in its grammar and refuses a
# repetition count much above a couple of thousand; a longer text is a report anyway.
MAX_TEXT_CHARS = 1500


def answer_schema(output_tokens: int) -> dict[str, Any]:
    """The answer's JSON schema, bounded so that a whole answer fits ``output_tokens``.

    Design constraint: a reply cut at the output limit is no conclusion at all
    (:meth:`CompactAnswer.written`), and a small model under a JSON grammar can
    repeat a list or a sentence until it is cut (measured: a 0.5B model ran every
    answer to its 600-token limit, twice in a row). Servers that constrain decoding
    by the schema (llama.cpp, vLLM) enforce ``maxItems`` and ``maxLength``, so the
    grammar closes each part in time and the answer always ends; hosted models
    read them as guidance.
    """
    characters = max(0, output_tokens - ANSWER_FRAME_TOKENS) * ANSWER_CHARS_PER_TOKEN
    texts = {
        name: {
            "type": "string",
            "maxLength": max(80, min(MAX_TEXT_CHARS, int(characters * share))),
        }
        for name, share in _TEXT_SHARES.items()
    }
    properties: dict[str, Any] = {
        "broken": texts["broken"],
        "root_cause": texts["root_cause"],
        "findings": {
            "type": "array",
            "items": {"type": "integer", "minimum": 1},
            "maxItems": MAX_CITED_FINDINGS,
        },
        "fix": texts["fix"],
        "evidence_enough": {"type": "boolean"},
        "check_next": texts["check_next"],
    }
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


class CompactAnswer(DeferredModel):
    """The conclusion call's answer, whichever form it came in.

    The model cites findings by their number rather than copying them: a small
    model's copy drops the names and values that make a finding evidence
    (measured: it restated 16-20 of the 28 findings its detections stated), so
    the analysis quotes the cited findings itself (:meth:`analysis`). ``evidence``
    is free text a model wrote instead of numbers, kept when it cites none.
    """

    broken: str = ""
    root_cause: str = ""
    findings: list[int] = []
    evidence: str = ""
    fix: str = ""
    evidence_enough: bool = True
    check_next: str = ""

    @field_validator("findings", mode="before")
    @classmethod
    def _cited(cls, value: object) -> list[int]:
        return finding_numbers(value)

    @property
    def written(self) -> bool:
        """Whether it says anything at all (a cut or empty reply does not)."""
        return bool(self.findings) or any(getattr(self, f).strip() for f in ANSWER_FIELDS)

    def analysis(self, findings: Mapping[int, str]) -> str:
        """The answer as the session's final analysis (Markdown, one paragraph a part).

        Args:
            findings: The opening's findings by number (:func:`opening_findings`);
                the cited ones are quoted as the evidence, in the order cited.
        """
        quoted = cited_findings(self.findings, findings)
        texts = {f: getattr(self, f).strip() for f in ANSWER_FIELDS}
        if quoted:  # the quoted findings stand in for any evidence it wrote itself
            texts["evidence"] = "\n" + "\n".join(f"- {line}" for line in quoted)
        return "\n\n".join(
            f"**{_HEADINGS[f]}:**{'' if text.startswith(chr(10)) else ' '}{text}"
            for f, text in texts.items()
            if text
        )


_LEADING_NUMBER = re.compile(r"^\W*(\d+)\b")


def finding_numbers(value: object) -> list[int]:
    """The finding numbers in a reply's ``findings``, however the model wrote them.

    A list of numbers is the form asked; small models also write ``"2, 5"``,
    ``["2", "5"]`` or the findings themselves (``"2. (likely cause) ..."``): each
    item's leading number is the citation, and a number inside a finding's text
    is never taken for one.
    """
    if isinstance(value, bool):
        return []
    if isinstance(value, int):
        return [value]
    if isinstance(value, str):
        pieces = [p.strip() for p in re.split(r",|;|\band\b|\n", value) if p.strip()]
        if len(pieces) > 1:
            return [n for piece in pieces for n in finding_numbers(piece)]
        match = _LEADING_NUMBER.match(value)
        return [int(match.group(1))] if match else []
    if isinstance(value, list):
        return [n for item in value for n in finding_numbers(item)[:1]]
    return []


def cited_findings(numbers: Iterable[int], findings: Mapping[int, str]) -> list[str]:
    """The findings cited by number, in the order cited, each once; unknown numbers are skipped."""
    seen: set[int] = set()
    quoted = []
    for number in numbers:
        if number in findings and number not in seen:
            seen.add(number)
            quoted.append(findings[number])
    return quoted


def opening_findings(messages: Sequence[ConversationMessage]) -> dict[int, str]:
    """The numbered findings of the compact opening, read back from its first user message.

    The strategy does no I/O and stores nothing (the phase is read from the
    conversation), so the findings the answer cites are read where the model
    read them: the FINDINGS part, written by :func:`tarsy.evidence.brief.findings_text`.
    """
    for message in messages:
        if message.role == "user":
            return parse_findings(undelimit("FINDINGS", message.content))
    return {}


def guidance(capabilities: Capabilities) -> str:
    """The answer form: a JSON object where replies can be constrained, else labelled lines."""
    return STRUCTURED_GUIDANCE if capabilities.structured_output else TEXT_GUIDANCE


# ─── reading the answer ───────────────────────────────────────────────────────

_JSON_STRING = r'"{field}"\s*:\s*"((?:[^"\\]|\\.)*)'
_JSON_BOOL = r'"evidence_enough"\s*:\s*(true|false)'
# A labelled line: "Root cause: ...", "**Root cause:** ...", "- Fix: ...", "## Fix: ...".
_LINE = re.compile(
    r"^[#*\-\s]*(what is broken|root cause|evidence enough|evidence|findings|fix|check next)"
    r"\s*\**\s*:\s*\**\s*(.*)$",
    re.IGNORECASE,
)
_LINE_FIELDS = {
    "what is broken": "broken",
    "root cause": "root_cause",
    "evidence": "evidence",
    "findings": "findings",
    "fix": "fix",
    "evidence enough": "evidence_enough",
    "check next": "check_next",
}


def _unescape(raw: str) -> str:
    try:
        return str(json.loads(f'"{raw}"'))
    except ValueError:
        return raw.replace('\\"', '"').replace("\\n", "\n")


def _from_json(text: str) -> CompactAnswer | None:
    """A JSON answer, whole or cut at the output limit (each field read as far as it got)."""
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if isinstance(value, dict):
        known = {k: v for k, v in value.items() if k in CompactAnswer.model_fields}
        try:
            return CompactAnswer.model_validate(known)
        except ValueError:
            pass
    fields: dict[str, Any] = {}
    for name in (*ANSWER_FIELDS, "check_next"):
        match = re.search(_JSON_STRING.format(field=name), text)
        if match:
            fields[name] = _unescape(match.group(1))
    cited = re.search(r'"findings"\s*:\s*\[([^\]]*)', text)
    if cited:
        fields["findings"] = cited.group(1)
    enough = re.search(_JSON_BOOL, text)
    if enough:
        fields["evidence_enough"] = enough.group(1) == "true"
    return CompactAnswer.model_validate(fields) if fields else None


def _from_lines(text: str) -> CompactAnswer | None:
    """An answer in labelled lines; a label's text runs on until the next label."""
    fields: dict[str, str] = {}
    current: str | None = None
    for line in text.splitlines():
        match = _LINE.match(line)
        if match:
            current = _LINE_FIELDS[match.group(1).lower()]
            fields[current] = match.group(2).strip()
        elif current is not None and line.strip():
            fields[current] = f"{fields[current]} {line.strip()}".strip()
    if not fields:
        return None
    enough = fields.pop("evidence_enough", "yes").strip().lower()
    return CompactAnswer(**fields, evidence_enough=not enough.startswith("no"))


def parse_answer(text: str) -> CompactAnswer | None:
    """The answer in ``text``, JSON or labelled lines; None when it holds neither."""
    stripped = text.strip()
    fenced = re.match(r"^```(?:json)?\s*(.*?)\s*(?:```)?$", stripped, re.DOTALL)
    if fenced:
        stripped = fenced.group(1)
    answer = _from_json(stripped) if stripped.startswith("{") else _from_lines(stripped)
    return answer if answer is not None and answer.written else None


def follow_up_result_chars(capabilities: Capabilities, settings: CompactPathSettings) -> int:
    """How much of one tool result a follow-up shows: its share of the reading time.

    The follow-up reads ``follow_up_calls`` results; each gets an equal share of
    what the model reads in ``read_seconds`` (or of ``brief_tokens`` when its
    speed is unknown), so the follow-up costs about one more opening, not the
    15,000-18,000 tokens whole results came to (measured, 3 runs of 15).
    """
    speed = capabilities.prompt_tokens_per_second
    reading = int(speed * settings.read_seconds) if speed else settings.brief_tokens
    share = max(MIN_BRIEF_TOKENS, reading // max(settings.follow_up_calls, 1))
    return int(share * CHARS_PER_TOKEN)


def shown_to_small_model(result: ToolResult, max_chars: int) -> ToolResult:
    """A follow-up's tool result as the brief shows results: compact, then cut to ``max_chars``.

    Only what the model reads changes (``content``); the record keeps ``full_content``.
    """
    shape = shape_of_tool(result.tool)
    shown = compact_result(shape, result.full_content, result.is_error)
    if len(shown) > max_chars:
        more = len(shown) - max_chars
        shown = f"{shown[:max_chars]}\n[… {more} more characters not shown: ask a narrower query]"
        return result.model_copy(update={"content": shown, "shown_as": "truncated"})
    if len(shown) < len(result.content):
        return result.model_copy(update={"content": shown})
    return result


FINAL_REQUEST = (
    "That was the last tool call of the follow-up. Give your final answer now, in the form "
    "you were given first, from everything above."
)


def follow_up_request(answer: CompactAnswer, calls: int) -> str:
    """The user message that opens the follow-up: what the model asked to check, and the bound."""
    wanted = answer.check_next.strip() or "what the evidence leaves unexplained"
    return (
        f"{FOLLOW_UP_HEAD} Check {wanted} with the tools: at most {calls} calls, one per "
        "reply; then you answer again in the form you were given first."
    )


# ─── sizing the opening ───────────────────────────────────────────────────────


def brief_tokens(
    capabilities: Capabilities,
    settings: CompactPathSettings,
    budget_tokens: int,
    rest_tokens: int,
) -> int:
    """The brief's size on the compact path: what the reading time leaves, within the budget.

    Args:
        capabilities: The model's profile; its reading speed, where known, sizes the opening.
        settings: The compact path's budgets.
        budget_tokens: The brief's configured budget (``evidence.brief_tokens``), never exceeded.
        rest_tokens: The opening without the brief (instructions, alert, runbook, findings).
    """
    speed = capabilities.prompt_tokens_per_second
    if speed is None:
        wanted = settings.brief_tokens
    else:
        wanted = int(speed * settings.read_seconds) - rest_tokens
    return max(MIN_BRIEF_TOKENS, min(wanted, budget_tokens))
