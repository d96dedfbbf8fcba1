"""ReAct text parser: turn one complete LLM response into a tool call or a final answer.

Seed 000 Q2. The parser runs once per iteration on the complete response text
(never on streaming chunks) and does no I/O. It is a line-by-line state machine
over four sections (``Thought``, ``Action``, ``Action Input``, ``Final Answer``):

1. Sections may span several lines; a section ends where the next header starts.
2. Headers are found in three tiers: at the start of a line (markdown emphasis
   such as ``**Thought:**`` is tolerated); ``Final Answer:`` mid-line after a
   sentence boundary (``"...done. Final Answer: X"``); ``Action:`` mid-line after
   a sentence boundary and ``Action Input:`` anywhere mid-line (it is specific
   enough not to occur in prose).
3. When ``Action Input`` is present without an ``Action``, the tool name is
   recovered by backtracking through the text before it (an ``Action:`` glued to
   prose, a line holding only a tool name, or a known tool named on that line).
4. Tool names must match ``server.tool`` and be one of the available tools.
5. Parameters are read as JSON, then YAML, then comma-separated ``key: value``,
   then ``key=value`` pairs; code fences are removed and empty input means ``{}``.
6. Parsing stops at a hallucinated ``Observation:`` line or ``[Based on ...``;
   everything from there on is discarded.
7. Failures carry specific feedback naming the sections found and missing.
8. :func:`continuation_prompt` reminds the model of the exact format.

Action versus Final Answer: the first one written wins. ``Final Answer`` is
terminal (the rest of the response is its content, so an answer may contain
lines such as ``Action: restart the pod``); once an action block has started,
any later ``Thought``/``Final Answer`` or a repeated ``Action``/``Action Input``
ends parsing, because it was written before the tool ran.
"""

from __future__ import annotations

import difflib
import json
import re
import textwrap
from collections.abc import Collection
from typing import Any, Literal

import yaml
from pydantic import ConfigDict, Field

from tarsy._pydantic import DeferredModel
from tarsy.llm.tool_names import is_canonical

Section = Literal["thought", "action", "action_input", "final_answer"]
ResultKind = Literal["final_answer", "action", "thought_only", "malformed"]
StopReason = Literal["observation", "based_on", "after_action"]

SECTION_LABELS: dict[Section, str] = {
    "thought": "Thought",
    "action": "Action",
    "action_input": "Action Input",
    "final_answer": "Final Answer",
}
_LABEL_TO_SECTION: dict[str, Section] = {label: key for key, label in SECTION_LABELS.items()}

FORMAT_REMINDER = """\
To call a tool, write exactly:
Thought: <your reasoning about what to do next>
Action: <one tool name from the available tools, in server.tool form>
Action Input: <the tool parameters as a JSON object, e.g. {"namespace": "default"}; {} if none>
Then stop. The Observation with the tool result will be given to you; never write it yourself.

To conclude, write exactly:
Thought: I have enough information to answer.
Final Answer: <your complete analysis>

Start every section header at the beginning of its own line, and give either an Action \
or a Final Answer in one response, never both."""

# Markdown emphasis that models wrap headers in: **Thought:**, `Action:`, __Final Answer__:
_MD = r"[*_`]*"
_LABELS = r"Thought|Action Input|Action|Final Answer"
_HEADER_RE = re.compile(
    rf"^(?:#+\s*|>\s*)*{_MD}\s*(?P<label>{_LABELS}){_MD}\s*:{_MD}[ \t]*(?P<rest>.*)$"
)
_BARE_THOUGHT_RE = re.compile(rf"^(?:#+\s*)*{_MD}Thought{_MD}$")
_STOP_OBSERVATION_RE = re.compile(rf"^{_MD}\s*Observation{_MD}\s*:")
_STOP_BASED_ON_RE = re.compile(r"^\[Based on")

# Mid-line markers. The split point is just after the sentence-ending punctuation.
_TAIL = rf"{_MD}\s*:{_MD}[ \t]*"
_MID_FINAL_RE = re.compile(rf"[.!?][`*\s]*(?P<label>Final Answer){_TAIL}")
_MID_ACTION_RE = re.compile(rf"[.!?][`*\s]*(?P<label>Action){_TAIL}")
_MID_ACTION_INPUT_RE = re.compile(rf"(?P<label>Action Input){_TAIL}")

# Backtracking (missing Action): an Action: glued to prose, or a bare tool name.
_GLUED_ACTION_RE = re.compile(rf"Action{_MD}\s*:{_MD}[ \t]*(?P<name>[^\s`*]+)")
_TOOL_TOKEN_RE = re.compile(r"[\w\-]+\.[\w\-]+")

_CODE_FENCE_RE = re.compile(r"^```[\w\-]*[ \t]*\n?(?P<body>.*?)(?:\n?```|\Z)", re.DOTALL)
_COLON_KEY_RE = re.compile(r"(?:^|(?<=[,\n]))[ \t]*(?P<key>[A-Za-z_][\w\-.]*)[ \t]*:(?!//)")
_EQUALS_KEY_RE = re.compile(r"(?:^|(?<=[\s,;]))(?P<key>[A-Za-z_][\w\-.]*)[ \t]*=")
_EMPTY_INPUTS = frozenset({"", "{}", "none", "null", "n/a", "-"})
_TOOL_NAME_EXAMPLE = "kubernetes-server.resources_get"


class ReActResult(DeferredModel):
    """The parsed form of one ReAct response.

    Attributes:
        kind: ``final_answer`` and ``action`` are usable results; ``thought_only``
            (a Thought with no Action or Final Answer) and ``malformed`` need a
            correction round with :meth:`feedback`.
        thought: The reasoning text (text before any header counts when no
            ``Thought:`` header was written).
        action: The validated canonical tool name (``server.tool``) when kind is
            ``action``; the name as written otherwise.
        action_input: The parsed tool parameters when kind is ``action``.
        raw_action_input: The ``Action Input`` text as written.
        final_answer: The final answer text when kind is ``final_answer``.
        sections_found: Sections present, in order of first appearance.
        error: What is wrong with the response (``None`` for usable results).
        stop_reason: Why parsing stopped before the end of the text, if it did.
        fallbacks: The recovery paths used (mid-line headers, backtracking).
    """

    model_config = ConfigDict(frozen=True)

    kind: ResultKind
    thought: str | None = None
    action: str | None = None
    action_input: dict[str, Any] | None = None
    raw_action_input: str | None = None
    final_answer: str | None = None
    sections_found: list[Section] = Field(default_factory=list)
    error: str | None = None
    stop_reason: StopReason | None = None
    fallbacks: list[str] = Field(default_factory=list)

    def feedback(self) -> str | None:
        """Return the observation that tells the model what to fix, or ``None`` if nothing.

        The text starts with ``Observation:`` like a tool result, carries the
        specific :attr:`error` and ends with the :func:`continuation_prompt`.
        """
        if self.error is None:
            return None
        return f"Observation: Error in reasoning - {self.error}\n\n{continuation_prompt(self)}"


class ActionInputError(ValueError):
    """``Action Input`` text that cannot be read as tool parameters."""


def continuation_prompt(result: ReActResult) -> str:
    """Return a reminder of the exact ReAct format, worded for ``result``'s problem."""
    if result.kind == "thought_only":
        lead = (
            "You wrote a Thought but no Action or Final Answer. Continue from your "
            "reasoning with either a tool call or your conclusion."
        )
    elif result.kind == "malformed":
        lead = "Your previous response could not be processed. Reply again in the required format."
    else:
        lead = "Continue in the required format."
    return f"{lead}\n\n{FORMAT_REMINDER}"


def parse_react(text: str, available_tools: Collection[str]) -> ReActResult:
    """Parse one complete ReAct response.

    Args:
        text: The complete LLM response.
        available_tools: Canonical names (``server.tool``) of the tools the model
            may call in this iteration.

    Returns:
        The parsed result; never raises on bad model output.
    """
    scanner = _Scanner()
    scanner.feed(text)
    return _resolve(scanner, available_tools)


def parse_action_input(raw: str) -> dict[str, Any]:
    """Parse ``Action Input`` text into tool parameters.

    Tries, in order: JSON (trailing prose after the object is ignored), YAML,
    comma- or newline-separated ``key: value`` pairs, then ``key=value`` pairs.
    Code fences are removed first; empty input (or ``none``/``null``) gives ``{}``.

    Args:
        raw: The text after ``Action Input:``.

    Returns:
        JSON-compatible parameters with string keys.

    Raises:
        ActionInputError: If no format yields a mapping.
    """
    text = _strip_code_fence(raw.strip())
    if text.lower() in _EMPTY_INPUTS:
        return {}

    json_error: str | None = None
    try:
        value, end = json.JSONDecoder().raw_decode(text)
    except json.JSONDecodeError as exc:
        json_error = str(exc)
    else:
        if isinstance(value, dict):
            return _json_compatible(value)
        if not text[end:].strip():
            if value is None:
                return {}
            raise ActionInputError(
                f"Action Input must be a JSON object of named parameters, got a JSON "
                f"{type(value).__name__}: {_excerpt(text)}. "
                'Write it as e.g. {"namespace": "default"}.'
            )

    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError:
        loaded = None
    if isinstance(loaded, dict) and all(
        isinstance(key, str) and key.strip() and not re.search(r"\s", key) for key in loaded
    ):
        return _json_compatible(loaded)

    for pairs in (_split_pairs(text, _COLON_KEY_RE), _split_pairs(text, _EQUALS_KEY_RE)):
        if pairs is not None:
            return pairs

    detail = f" (JSON error: {json_error})" if text.startswith("{") and json_error else ""
    raise ActionInputError(
        f"Could not parse Action Input {_excerpt(text)} as parameters{detail}. "
        'Write it as a JSON object, e.g. {"namespace": "default"}, or {} for no parameters.'
    )


# --------------------------------------------------------------------------- scanning


class _Scanner:
    """The line-by-line section state machine; collects raw section text."""

    def __init__(self) -> None:
        self.section: Section | None = None  # None: text before the first header
        self.lines: dict[Section, list[str]] = {key: [] for key in SECTION_LABELS}
        self.preamble: list[str] = []
        self.seen: list[Section] = []
        self.stop_reason: StopReason | None = None
        self.fallbacks: list[str] = []

    @property
    def action_block_started(self) -> bool:
        return "action" in self.seen or "action_input" in self.seen

    def feed(self, text: str) -> None:
        for raw_line in text.splitlines():
            line = raw_line.rstrip()
            stripped = line.strip()
            if _STOP_OBSERVATION_RE.match(stripped):
                self.stop_reason = "observation"
                return
            if _STOP_BASED_ON_RE.match(stripped):
                self.stop_reason = "based_on"
                return
            header = self._header(stripped)
            if header is not None:
                section, rest = header
                if not self._open(section):
                    return
                line = rest
            if not self._consume(line):
                return

    def _header(self, stripped: str) -> tuple[Section, str] | None:
        if self.section == "final_answer":  # terminal: the rest is answer content
            return None
        match = _HEADER_RE.match(stripped)
        if match:
            return _LABEL_TO_SECTION[match["label"]], match["rest"]
        if _BARE_THOUGHT_RE.match(stripped):
            return "thought", ""
        return None

    def _open(self, section: Section) -> bool:
        """Enter ``section``; return False when the response must end here."""
        if self.action_block_started and (
            section in ("thought", "final_answer") or section in self.seen
        ):
            self.stop_reason = "after_action"
            return False
        if section == "thought" and self.lines["thought"]:
            self.lines["thought"].append("")
        if section not in self.seen:
            self.seen.append(section)
        self.section = section
        return True

    def _consume(self, text: str) -> bool:
        """Add ``text`` to the current section, splitting it at mid-line headers."""
        while True:
            match = self._midline_marker(text)
            if match is None:
                self._append(text)
                return True
            label = match["label"]
            split = match.start("label") if label == "Action Input" else match.start() + 1
            self._append(text[:split].rstrip())
            self.fallbacks.append(f"mid-line {label}")
            if not self._open(_LABEL_TO_SECTION[label]):
                return False
            text = text[match.end() :]

    def _midline_marker(self, text: str) -> re.Match[str] | None:
        patterns: tuple[re.Pattern[str], ...]
        if self.section in (None, "thought"):
            patterns = (_MID_FINAL_RE, _MID_ACTION_RE, _MID_ACTION_INPUT_RE)
        elif self.section == "action":
            patterns = (_MID_ACTION_INPUT_RE,)
        else:  # action_input content is data; final_answer is terminal
            return None
        matches = [m for m in (p.search(text) for p in patterns) if m is not None]
        return min(matches, key=lambda m: m.start(), default=None)

    def _append(self, text: str) -> None:
        if self.section is None:
            self.preamble.append(text)
        else:
            self.lines[self.section].append(text)

    def text_of(self, section: Section) -> str | None:
        if section not in self.seen:
            return None
        return textwrap.dedent("\n".join(self.lines[section])).strip()


# --------------------------------------------------------------------------- resolving


def _resolve(scanner: _Scanner, available_tools: Collection[str]) -> ReActResult:
    thought = scanner.text_of("thought")
    if thought is None:
        thought = "\n".join(scanner.preamble).strip()
    action = scanner.text_of("action")
    raw_input = scanner.text_of("action_input")
    final_answer = scanner.text_of("final_answer")
    seen = list(scanner.seen)
    fallbacks = list(scanner.fallbacks)

    if raw_input is not None and action is None:
        recovered = _backtrack_action(thought, available_tools)
        if recovered is not None:
            action, thought = recovered
            seen.insert(seen.index("action_input"), "action")
            fallbacks.append("Action recovered from the text before Action Input")

    common: dict[str, Any] = {"stop_reason": scanner.stop_reason, "fallbacks": fallbacks}

    thought_or_none = thought or None
    if "action" in seen or "action_input" in seen:
        return _resolve_action(thought_or_none, action, raw_input, seen, available_tools, common)

    if final_answer is not None:
        if final_answer:
            return ReActResult(
                kind="final_answer",
                thought=thought_or_none,
                final_answer=final_answer,
                sections_found=seen,
                **common,
            )
        return ReActResult(
            kind="malformed",
            thought=thought_or_none,
            final_answer=final_answer,
            sections_found=seen,
            error=(
                "The Final Answer is empty: write your complete analysis after "
                f"'Final Answer:'. {_sections_summary(seen, ['final_answer'])}"
            ),
            **common,
        )

    if "thought" in seen:
        return ReActResult(
            kind="thought_only",
            thought=thought_or_none,
            sections_found=seen,
            error=(
                "The response has a Thought but neither an Action (with Action Input) "
                "nor a Final Answer, so there is nothing to do next. "
                f"{_sections_summary(seen, ['action', 'action_input'], ['final_answer'])}"
            ),
            **common,
        )

    if scanner.stop_reason in ("observation", "based_on"):
        problem = (
            "The response starts with an Observation you wrote yourself; observations "
            "come only from tool results."
        )
    else:
        problem = "The response is not in ReAct format."
    return ReActResult(
        kind="malformed",
        thought=thought_or_none,
        sections_found=seen,
        error=(
            f"{problem} {_sections_summary(seen, ['action', 'action_input'], ['final_answer'])}"
        ),
        **common,
    )


def _resolve_action(
    thought: str | None,
    action: str | None,
    raw_input: str | None,
    seen: list[Section],
    available_tools: Collection[str],
    common: dict[str, Any],
) -> ReActResult:
    expected: list[Section] = ["action", "action_input"]

    def malformed(error: str, name: str | None = None) -> ReActResult:
        return ReActResult(
            kind="malformed",
            thought=thought,
            action=name,
            raw_action_input=raw_input,
            sections_found=seen,
            error=error,
            **common,
        )

    if action is None:
        return malformed(
            "The response has an Action Input but no Action, so the tool to call is "
            "unknown. Put the tool name on its own line as 'Action: server.tool' right "
            f"before 'Action Input:'. {_sections_summary(seen, expected)} "
            f"{_tools_sentence(available_tools)}"
        )
    name = _clean_tool_name(action)
    if not name:
        return malformed(
            "The Action is empty: write the tool name after 'Action:'. "
            f"{_sections_summary(seen, expected)} {_tools_sentence(available_tools)}"
        )
    if raw_input is None:
        return malformed(
            f"The response has Action '{name}' but no Action Input. Add a line "
            "'Action Input:' with the parameters as a JSON object ({} if the tool takes "
            f"none). {_sections_summary(seen, expected)}",
            name,
        )
    tool_error = _tool_name_error(name, available_tools)
    if tool_error is not None:
        return malformed(tool_error, name)
    try:
        params = parse_action_input(raw_input)
    except ActionInputError as exc:
        return malformed(f"{exc} (tool '{name}')", name)
    return ReActResult(
        kind="action",
        thought=thought,
        action=name,
        action_input=params,
        raw_action_input=raw_input,
        sections_found=seen,
        **common,
    )


def _backtrack_action(preceding: str, available_tools: Collection[str]) -> tuple[str, str] | None:
    """Find the tool name written before ``Action Input`` without a proper header.

    Returns:
        ``(tool name, preceding text without it)``, or ``None``.
    """
    glued = list(_GLUED_ACTION_RE.finditer(preceding))
    if glued:
        last = glued[-1]
        return last["name"], preceding[: last.start()].rstrip()
    lines = preceding.rstrip().splitlines()
    if not lines:
        return None
    last_line = lines[-1]
    candidate = _clean_tool_name(last_line)
    if is_canonical(candidate):
        return candidate, "\n".join(lines[:-1]).rstrip()
    known = [tok for tok in _TOOL_TOKEN_RE.findall(last_line) if tok in available_tools]
    if known:
        return known[-1], preceding
    return None


def _clean_tool_name(text: str) -> str:
    first_line = next((ln for ln in text.splitlines() if ln.strip()), "")
    name = first_line.strip().strip("`*'\"").strip()
    name = name.removesuffix("()")
    return name.rstrip(".,;:").strip("`*'\"")


def _tool_name_error(name: str, available_tools: Collection[str]) -> str | None:
    tools = sorted(available_tools)
    if not is_canonical(name):
        same_tool = [t for t in tools if t.split(".", 1)[-1] == name]
        hint = f" Did you mean '{same_tool[0]}'?" if len(same_tool) == 1 else ""
        return (
            f"'{name}' is not a valid tool name: tool names have the form 'server.tool' "
            f"(e.g. '{tools[0] if tools else _TOOL_NAME_EXAMPLE}').{hint} "
            f"{_tools_sentence(tools)}"
        )
    if name not in available_tools:
        close = difflib.get_close_matches(name, tools, n=1)
        hint = f" Did you mean '{close[0]}'?" if close else ""
        return f"Unknown tool '{name}'.{hint} {_tools_sentence(tools)}"
    return None


def _tools_sentence(available_tools: Collection[str]) -> str:
    if not available_tools:
        return "No tools are available in this step: give a Final Answer instead."
    return f"Available tools: {', '.join(sorted(available_tools))}."


def _sections_summary(
    seen: list[Section], required: list[Section], alternative: list[Section] | None = None
) -> str:
    found = ", ".join(SECTION_LABELS[s] for s in seen) or "none"
    missing = " and ".join(SECTION_LABELS[s] for s in required if s not in seen)
    if alternative:
        other = " and ".join(SECTION_LABELS[s] for s in alternative if s not in seen)
        missing = f"{missing} (or {other})" if missing and other else missing or other
    return f"Sections found: {found}; missing: {missing or 'none'}."


# --------------------------------------------------------------------------- parameters


def _strip_code_fence(text: str) -> str:
    match = _CODE_FENCE_RE.match(text)
    if match:
        return match["body"].strip()
    if len(text) >= 2 and text[0] == text[-1] == "`":
        return text.strip("`").strip()
    return text


def _split_pairs(text: str, key_re: re.Pattern[str]) -> dict[str, Any] | None:
    """Read ``key<sep>value`` pairs; values run to the next key. None if not that format."""
    keys = list(key_re.finditer(text))
    if not keys or text[: keys[0].start()].strip(" \t\n,;"):
        return None
    pairs: dict[str, Any] = {}
    for index, match in enumerate(keys):
        end = keys[index + 1].start() if index + 1 < len(keys) else len(text)
        value = text[match.end() : end].strip().rstrip(",;").strip()
        pairs[match["key"]] = _scalar(value)
    return pairs


def _scalar(value: str) -> Any:
    """Convert a ``key: value`` value: quoted string, JSON literal, or plain text."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    lowered = value.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("null", "none"):
        return None
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


def _json_compatible(value: dict[Any, Any]) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(json.dumps(value, default=str))
    return result


def _excerpt(text: str, limit: int = 200) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")
