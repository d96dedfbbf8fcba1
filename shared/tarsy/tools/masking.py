"""Masking of secrets in text before it reaches the model or Firestore.

Tool results and alert data pass through a :class:`Masker` first. Masking is pure
(no I/O), conservative (it masks values it can tell are secret from their shape or
their context, never by entropy alone, so pod names, image digests, UUIDs,
timestamps and addresses survive) and idempotent: masking masked text changes
nothing, because every rule leaves a value that is already a mask token alone.

Built-in groups, each replaced by ``[MASKED_<GROUP>]``:

* ``kubernetes_secrets``: values under ``data:``/``stringData:`` of a ``kind: Secret``
  object, in YAML and in JSON (also in an escaped ``last-applied-configuration``);
  the keys stay.
* ``certificates``: the bodies of PEM blocks (private keys and certificates), and
  base64-encoded PEM; the ``BEGIN``/``END`` lines stay.
* ``tokens``: Bearer and Basic credentials, API keys (``api_key=``, ``X-API-Key:``),
  AWS access keys, GitHub, GitLab and Slack tokens, Slack webhooks, JWTs, Google API keys.
* ``passwords``: passwords in URLs (``scheme://user:pass@host``) and the values of
  password, secret and token settings (``DB_PASSWORD=...``, ``client_secret: ...``,
  ``"api_token": "..."``, pod ``env`` entries).

A custom pattern replaces its whole match, or only its group named ``secret`` when it
has one, by its replacement (taken literally).
"""

from __future__ import annotations

import json
import re
import string
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from pydantic import ConfigDict, Field, field_validator, model_validator

from tarsy._pydantic import DeferredModel

PatternGroup = Literal["kubernetes_secrets", "tokens", "certificates", "passwords"]
BUILTIN_GROUPS: tuple[PatternGroup, ...] = get_args(PatternGroup)

_TOKEN_SHAPE = re.compile(r"\[MASKED_[A-Z0-9_]+\]")


def mask_token(group: str) -> str:
    """Return the replacement used for a group: ``[MASKED_<GROUP>]``."""
    return f"[MASKED_{re.sub(r'[^A-Z0-9]+', '_', group.upper()).strip('_')}]"


def _is_masked(value: str) -> bool:
    return _TOKEN_SHAPE.fullmatch(value.strip().strip("\"'")) is not None


# ─── configuration ────────────────────────────────────────────────────────────


class CustomPattern(DeferredModel):
    """A site-specific pattern; its group named ``secret``, if any, is what gets replaced."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.\-]+$")
    pattern: str = Field(min_length=1)
    replacement: str | None = Field(
        default=None, description="Literal replacement; default ``[MASKED_<NAME>]``."
    )

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            compiled = re.compile(value)
        except re.error as e:
            raise ValueError(f"invalid regular expression: {e}") from e
        if compiled.fullmatch(""):
            raise ValueError("the pattern matches the empty string")
        return value

    @property
    def token(self) -> str:
        """The text a match is replaced with."""
        return self.replacement if self.replacement is not None else mask_token(self.name)


class MaskingConfig(DeferredModel):
    """Which secrets to mask: built-in groups and custom patterns."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    pattern_groups: list[PatternGroup] = Field(default_factory=lambda: list(BUILTIN_GROUPS))
    custom_patterns: list[CustomPattern] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique_names(self) -> MaskingConfig:
        seen: set[str] = set(_BUILTIN_RULE_NAMES)
        for custom in self.custom_patterns:
            if custom.name in seen:
                raise ValueError(f"custom pattern name {custom.name!r} is already used")
            seen.add(custom.name)
        return self


# ─── results ──────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class MaskResult:
    """Masked text, and how many values each pattern masked (only patterns that masked some)."""

    text: str
    counts: Mapping[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        """Number of values masked."""
        return sum(self.counts.values())


@dataclass(frozen=True)
class JsonMaskResult:
    """A masked copy of a JSON-like value, with counts as in :class:`MaskResult`."""

    value: Any
    counts: Mapping[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        """Number of values masked."""
        return sum(self.counts.values())


# ─── rules ────────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class _Rule:
    """A function from text to (masked text, values masked per pattern name)."""

    names: tuple[str, ...]  # the pattern names it counts under
    group: str
    apply: Callable[[str], tuple[str, dict[str, int]]]


def _single(name: str, group: str, apply: Callable[[str], tuple[str, int]]) -> _Rule:
    """A rule counting under one name."""

    def counted(text: str) -> tuple[str, dict[str, int]]:
        text, count = apply(text)
        return text, ({name: count} if count else {})

    return _Rule((name,), group, counted)


def _replace_secrets(match: re.Match[str], groups: list[str], token: str) -> str:
    """The match with each participating ``secret*`` group (or all of it) replaced by ``token``.

    Values that are blank or already masked are kept, which makes every rule idempotent.
    """
    spans = [match.span(g) for g in groups if match.start(g) >= 0] if groups else [match.span()]
    pieces: list[str] = []
    cursor = match.start()
    for start, end in spans:
        value = match.string[start:end]
        if not value.strip() or _is_masked(value) or value == token:
            continue
        pieces.append(match.string[cursor:start])
        pieces.append(token)
        cursor = end
    if not pieces:
        return match.group(0)
    pieces.append(match.string[cursor : match.end()])
    return "".join(pieces)


def _secret_groups(pattern: re.Pattern[str]) -> list[str]:
    return [g for g in pattern.groupindex if g.startswith("secret")]


def _regex_rule(name: str, group: str, pattern: re.Pattern[str], token: str) -> _Rule:
    """A rule replacing each group whose name starts with ``secret`` (or the whole match)."""
    groups = _secret_groups(pattern)

    def apply(text: str) -> tuple[str, int]:
        count = 0

        def counted(match: re.Match[str]) -> str:
            nonlocal count
            new = _replace_secrets(match, groups, token)
            if new != match.group(0):
                count += 1
            return new

        return pattern.sub(counted, text), count

    return _single(name, group, apply)


# A key=value rule leaves these values alone: earlier mask tokens, ${VAR} and $(cmd)
# references, <angle-bracket> template values, and true/false/null/none.
_NOT_A_VALUE = r"(?!\[MASKED_|\$\{|\$\(|<|(?:true|false|null|none)[\"']?(?:[\s,}\]]|$))"

# Keys whose value is a password, secret or token (group "passwords").
_PASSWORD_KEY = (
    r"(?:(?i:[a-z0-9_.\-]{0,64}(?:password|passwd|passphrase))"
    r"|(?i:[a-z0-9_.\-]{0,64}[_.\-](?:secret|token|pwd|credentials?|private[_\-]?key))"
    r"|[a-z][A-Za-z0-9]*(?:Secret|Token)"
    r"|(?i:secret|token))"
)
_PASSWORD_KEY_RE = re.compile(_PASSWORD_KEY)
# Keys whose value is an API or access key (group "tokens").
_API_KEY = (
    r"(?i:[a-z0-9_.\-]{0,64}(?:api[_\-]?key|access[_\-]?key(?:[_\-]?id)?|secret[_\-]?key"
    r"|auth[_\-]?key|private[_\-]?token))"
)
_API_KEY_RE = re.compile(_API_KEY)


def _value(bare: str) -> str:
    """A value: double-quoted, single-quoted or bare (``bare`` is its regex)."""
    return rf"(?:\"(?P<secret1>[^\"\n]*)\"|'(?P<secret2>[^'\n]*)'|(?P<secret3>{bare}))"


_LINE_VALUE = _value(r"[^\s|>#][^\n]*?")
_ASSIGN_VALUE = _value(r"""[^\s"'&;,]+""")
_COLON_VALUE = _value(r"""[^\s"',;}]+""")

# What follows a sensitive key, per form; the key itself is found by _keyed_rule.
_KEY_FORMS: dict[str, re.Pattern[str]] = {
    # "key": "value" (JSON)
    "json": re.compile(rf'"\s*:\s*"{_NOT_A_VALUE}(?P<secret>(?:[^"\\\n]|\\.)+)"'),
    # key: value, on a line of its own (YAML, describe, HTTP headers): the rest of the line
    "line": re.compile(
        rf"[ \t]*:[ \t]+{_NOT_A_VALUE}{_LINE_VALUE}(?:[ \t]+#.*)?[ \t]*$", re.MULTILINE
    ),
    # key=value, key="value" (env dumps, logs, query strings, flags)
    "assign": re.compile(rf"[ \t]*=[ \t]*{_NOT_A_VALUE}{_ASSIGN_VALUE}"),
    # key: value inside a line of log text
    "colon": re.compile(rf"[ \t]*:[ \t]+{_NOT_A_VALUE}{_COLON_VALUE}"),
}
# Where a sensitive key may be: every key regex above contains one of these words.
_KEYWORD = re.compile(
    r"passw(?:or)?d|passphrase|secret|token|pwd|credential"
    r"|api[_\-]?key|access[_\-]?key|auth[_\-]?key|private[_\-]?key"
)
_KEY_CHARS = frozenset(string.ascii_letters + string.digits + "_.-")
_LINE_PREFIX = re.compile(r"[ \t]*(?:-[ \t]+)?")


_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


def _key_around(text: str, word_start: int, word_end: int) -> tuple[int, int]:
    """The span of the key holding a sensitive word: widened over key characters, bounded."""
    start = word_start
    while start > word_start - 64 and start > 0 and text[start - 1] in _KEY_CHARS:
        start -= 1
    while start < word_start and text[start] in "_.-":
        start += 1
    end = word_end
    while end < len(text) and end - start < 128 and text[end] in _KEY_CHARS:
        end += 1
    return start, end


def _key_fits(text: str, start: int, form: str) -> bool:
    """Whether the key at ``start`` stands where ``form`` expects it (quoted, line start)."""
    if form == "json":
        return start > 0 and text[start - 1] == '"'
    if form == "line":
        line_start = text.rfind("\n", 0, start) + 1
        return _LINE_PREFIX.fullmatch(text, line_start, start) is not None
    return True


def _keyed_rule(prefix: str, group: str, key: re.Pattern[str], token: str) -> _Rule:
    """A rule masking the value after a sensitive key, in any of the forms of ``_KEY_FORMS``.

    It finds the key words first (in an ASCII-lowercased copy, same length) and only then
    looks at the key around them: a regex starting with an open-ended key would be tried at
    every position of the text. Counts go to ``<prefix>_<form>``.
    """
    forms = [
        (f"{prefix}_{form}", form, tail, _secret_groups(tail)) for form, tail in _KEY_FORMS.items()
    ]

    def apply(text: str) -> tuple[str, dict[str, int]]:
        pieces: list[str] = []
        cursor = 0
        counts: Counter[str] = Counter()
        done = 0
        for hit in _KEYWORD.finditer(text.translate(_LOWER)):
            if hit.start() < done:
                continue
            start, end = _key_around(text, hit.start(), hit.end())
            done = end
            if start > 0 and text[start - 1].isalnum():
                continue  # the key is longer than we looked
            if key.fullmatch(text, start, end) is None:
                continue
            for name, form, tail, groups in forms:
                match = tail.match(text, end)
                if match is None or not _key_fits(text, start, form):
                    continue
                done = match.end()
                new = _replace_secrets(match, groups, token)
                if new != match.group(0):
                    pieces.append(text[cursor : match.start()])
                    pieces.append(new)
                    cursor = match.end()
                    counts[name] += 1
                break
        if not counts:
            return text, {}
        pieces.append(text[cursor:])
        return "".join(pieces), dict(counts)

    return _Rule(tuple(name for name, *_ in forms), group, apply)


_PEM = re.compile(
    r"-----BEGIN (?P<label>[A-Z0-9 ]{1,64})-----(?:\s|\\n)*"
    r"(?P<secret>[A-Za-z0-9+/=\s\\:,\-\[\]_]+?)"
    r"(?:\s|\\n)*-----END (?P=label)-----"
)
_PEM_BASE64 = re.compile(r"(?<![A-Za-z0-9+/])LS0tLS1CRUdJTi[A-Za-z0-9+/]{8,}={0,2}")

_TOKEN_PATTERNS: dict[str, re.Pattern[str]] = {
    "bearer_token": re.compile(
        r"(?i:\bbearer)[ \t]+(?P<secret>(?=[A-Za-z0-9\-._~+/]{0,4096}\d)[A-Za-z0-9\-._~+/]{10,}=*)"
    ),
    "basic_auth": re.compile(
        r"(?i:authorization)[\"']?[ \t]*[:=][ \t]*[\"']?(?i:basic)[ \t]+"
        r"(?P<secret>[A-Za-z0-9+/]{6,}=*)"
    ),
    "aws_access_key": re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}\b"),
    "github_token": re.compile(
        r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b"
    ),
    "gitlab_token": re.compile(r"\bglpat-[A-Za-z0-9_\-]{20,}"),
    "slack_token": re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}"),
    "slack_webhook": re.compile(
        r"hooks\.slack\.com/services/(?P<secret>T[A-Za-z0-9]+/B[A-Za-z0-9]+/[A-Za-z0-9]+)"
    ),
    "jwt": re.compile(r"\beyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]+"),
    "google_api_key": re.compile(r"\bAIza[0-9A-Za-z_\-]{35}(?![0-9A-Za-z_\-])"),
}

_URL_PASSWORD = re.compile(
    r"\b[a-zA-Z][a-zA-Z0-9+.\-]{0,30}://[^\s:/@\"'<>]{0,256}:(?P<secret>[^\s@/\"'<>]+)@(?=[A-Za-z0-9\[])"
)
_ENV_ENTRY_YAML = re.compile(
    rf"(?m)^[ \t]*(?:-[ \t]+)?name:[ \t]*[\"']?(?:{_PASSWORD_KEY}|{_API_KEY})[\"']?[ \t]*\n"
    rf"[ \t]*value:[ \t]+{_NOT_A_VALUE}(?:\"(?P<secret1>[^\"\n]*)\"|'(?P<secret2>[^'\n]*)'"
    rf"|(?P<secret3>[^\s|>][^\n]*?))[ \t]*$"
)
_ENV_ENTRY_JSON = re.compile(
    rf'"name"\s*:\s*"(?:{_PASSWORD_KEY}|{_API_KEY})"\s*,\s*'
    rf'"value"\s*:\s*"{_NOT_A_VALUE}(?P<secret>(?:[^"\\\n]|\\.)+)"'
)


# ─── kubernetes secrets ───────────────────────────────────────────────────────


_YAML_KEY_LINE = re.compile(
    r"^(?P<indent>[ ]*)(?P<dash>-[ ]+)?(?P<key>\"[^\"\n]*\"|'[^'\n]*'|[^\s#\"'\-][^\s]*?|-[^\s]+?)"
    r"[ ]*:(?:[ ]+(?P<value>.*?))?[ ]*$"
)


@dataclass(frozen=True)
class _YamlLine:
    col: int  # column of the key
    dash: bool
    key: str
    value: str


def _yaml_line(line: str) -> _YamlLine | None:
    match = _YAML_KEY_LINE.match(line.rstrip("\r\n"))
    if match is None:
        return None
    col = len(match["indent"]) + len(match["dash"] or "")
    return _YamlLine(
        col, match["dash"] is not None, match["key"].strip("\"'"), match["value"] or ""
    )


def _eol(line: str) -> str:
    return line[len(line.rstrip("\r\n")) :]


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _is_blank(line: str) -> bool:
    stripped = line.strip()
    return not stripped or stripped.startswith("#")


def _is_doc_marker(line: str) -> bool:
    return line.rstrip() in ("---", "...") or line.startswith("--- ")


def _yaml_sibling(lines: list[str], i: int, col: int, seen: set[str]) -> _YamlLine | bool | None:
    """The key at ``col`` on line ``i``; None: skip the line; False: the mapping ended."""
    line = lines[i]
    if _is_doc_marker(line):
        return False
    if _is_blank(line):
        return None
    if _indent(line) > col:
        return None  # inside a sibling's value
    parsed = _yaml_line(line)
    if parsed is None or parsed.col != col or parsed.key in seen:
        return False  # a shallower line, or a repeated key: another mapping
    seen.add(parsed.key)
    return parsed


def _is_secret_kind(parsed: _YamlLine) -> bool:
    return parsed.key == "kind" and parsed.value.strip("\"' ") == "Secret"


def _secret_kind_above(lines: list[str], index: int, col: int, seen: set[str]) -> bool:
    """Backwards from line ``index``, to the start of its mapping (a "- " line)."""
    for i in range(index - 1, -1, -1):
        found = _yaml_sibling(lines, i, col, seen)
        if found is False:
            return False
        if isinstance(found, _YamlLine):
            if _is_secret_kind(found):
                return True
            if found.dash:
                return False
    return False


def _secret_kind_below(lines: list[str], index: int, col: int, seen: set[str]) -> bool:
    """Forwards from line ``index``, to the end of its mapping (shallower, or the next "- ")."""
    for i in range(index + 1, len(lines)):
        found = _yaml_sibling(lines, i, col, seen)
        if found is False or (isinstance(found, _YamlLine) and found.dash):
            return False
        if isinstance(found, _YamlLine) and _is_secret_kind(found):
            return True
    return False


def _yaml_mapping_is_secret(lines: list[str], index: int, col: int) -> bool:
    """Whether the mapping holding the key on line ``index`` (at column ``col``) has kind Secret."""
    this = _yaml_line(lines[index])
    own_key = {this.key} if this is not None else set()
    # The mapping starts above unless it starts on this line (a "- " line).
    if this is not None and not this.dash and _secret_kind_above(lines, index, col, set(own_key)):
        return True
    return _secret_kind_below(lines, index, col, set(own_key))


def _mask_block_values(lines: list[str], i: int, col: int, token: str, drop: set[int]) -> int:
    """Mask each value of the block mapping under line ``i``; continuation lines go to ``drop``."""
    count = 0
    child_col: int | None = None
    in_value = False
    for j in range(i + 1, len(lines)):
        child = lines[j]
        if _is_doc_marker(child):
            break
        if not child.strip():
            continue
        indent = _indent(child)
        if indent <= col:
            break
        if child_col is None:
            child_col = indent
        if indent > child_col:
            if in_value:
                drop.add(j)
            continue
        entry = _yaml_line(child)
        if entry is None or entry.dash:
            in_value = False
            continue
        # A block scalar or a multi-line plain scalar continues on more-indented lines.
        in_value = True
        if _is_masked(entry.value):
            continue
        key_end = child.index(":", entry.col) + 1
        lines[j] = f"{child[:key_end]} {token}{_eol(child)}"
        count += 1
    return count


def _mask_yaml_secret_data(text: str, token: str) -> tuple[str, int]:
    """Mask the values under ``data:``/``stringData:`` of YAML Secrets, keeping the keys."""
    if "Secret" not in text or "ata:" not in text:
        return text, 0
    lines = text.splitlines(keepends=True)
    drop: set[int] = set()
    count = 0
    for i, line in enumerate(lines):
        if "ata:" not in line:
            continue
        parsed = _yaml_line(line)
        if parsed is None or parsed.key not in ("data", "stringData"):
            continue
        flow = parsed.value.strip()
        if flow and (flow == "{}" or not flow.startswith("{") or _is_masked(flow)):
            continue
        if not _yaml_mapping_is_secret(lines, i, parsed.col):
            continue
        if flow:  # data: {key: value, ...} on one line: mask it whole
            key_end = line.index(":", parsed.col) + 1
            lines[i] = f"{line[:key_end]} {token}{_eol(line)}"
            count += 1
            continue
        count += _mask_block_values(lines, i, parsed.col, token, drop)
    if not count and not drop:
        return text, 0
    return "".join(line for i, line in enumerate(lines) if i not in drop), count


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_JSON_WS = re.compile(r"\s*")
_DECODER = json.JSONDecoder()


def _skip_ws(text: str, pos: int) -> int:
    match = _JSON_WS.match(text, pos)
    return match.end() if match is not None else pos


def _json_members(text: str, start: int) -> list[tuple[str, int, int]] | None:
    """Direct members of the JSON object starting at ``text[start] == '{'``: (key, value span)."""
    members: list[tuple[str, int, int]] = []
    pos = _skip_ws(text, start + 1)
    if text.startswith("}", pos):
        return members
    while True:
        key_match = _JSON_STRING.match(text, pos)
        if key_match is None:
            return None
        pos = _skip_ws(text, key_match.end())
        if not text.startswith(":", pos):
            return None
        pos = _skip_ws(text, pos + 1)
        try:
            _, end = _DECODER.raw_decode(text, pos)
        except ValueError:
            return None
        members.append((json.loads(key_match.group(0)), pos, end))
        pos = _skip_ws(text, end)
        if text.startswith(",", pos):
            pos = _skip_ws(text, pos + 1)
            continue
        if text.startswith("}", pos):
            return members
        return None


def _enclosing_object(text: str, pos: int) -> int | None:
    """Index of the ``{`` opening the JSON object that contains ``pos`` (scanning backwards)."""
    depth = 0
    in_string = False
    i = pos - 1
    while i >= 0:
        char = text[i]
        if char == '"':
            backslashes = 0
            j = i - 1
            while j >= 0 and text[j] == "\\":
                backslashes += 1
                j -= 1
            if backslashes % 2 == 0:
                in_string = not in_string
        elif not in_string:
            if char in "}]":
                depth += 1
            elif char in "{[":
                if depth == 0:
                    return i if char == "{" else None
                depth -= 1
        i -= 1
    return None


_JSON_DATA_KEY = re.compile(r'"(?:data|stringData)"\s*:\s*\{')


def _mask_json_secret_data(text: str, token: str) -> tuple[str, int]:
    """Mask the string values of ``"data"``/``"stringData"`` of JSON Secrets."""
    if '"Secret"' not in text:
        return text, 0
    replacements: list[tuple[int, int]] = []
    for match in _JSON_DATA_KEY.finditer(text):
        owner = _enclosing_object(text, match.start())
        if owner is None:
            continue
        owner_members = _json_members(text, owner)
        if owner_members is None or not any(
            key == "kind" and text[start:end] == '"Secret"' for key, start, end in owner_members
        ):
            continue
        data_members = _json_members(text, match.end() - 1)
        for _, start, end in data_members or []:
            value = text[start:end]
            if value.startswith('"') and value != '""' and not _is_masked(value):
                replacements.append((start, end))
    if not replacements:
        return text, 0
    pieces: list[str] = []
    cursor = 0
    for start, end in sorted(set(replacements)):
        pieces.append(text[cursor:start])
        pieces.append(json.dumps(token))
        cursor = end
    pieces.append(text[cursor:])
    return "".join(pieces), len(set(replacements))


# JSON escaped inside a JSON string, as in a last-applied-configuration annotation.
_ESCAPED_DATA = re.compile(r'\\"(?:data|stringData)\\"\s*:\s*\{(?P<body>[^{}]*)\}')
_ESCAPED_MEMBER = re.compile(r'\\"[^"\\]+\\"\s*:\s*\\"(?P<secret>[^"\\]*)\\"')


def _mask_escaped_secret_data(text: str, token: str) -> tuple[str, int]:
    if '\\"Secret\\"' not in text:
        return text, 0
    count = 0

    def member(match: re.Match[str]) -> str:
        nonlocal count
        value = match["secret"]
        if not value or _is_masked(value):
            return match.group(0)
        count += 1
        return match.group(0)[: match.start("secret") - match.start()] + token + '\\"'

    def data(match: re.Match[str]) -> str:
        line_start = text.rfind("\n", 0, match.start()) + 1
        line_end = text.find("\n", match.end())
        line = text[line_start : line_end if line_end >= 0 else len(text)]
        if not re.search(r'\\"kind\\"\s*:\s*\\"Secret\\"', line):
            return match.group(0)
        return _ESCAPED_MEMBER.sub(member, match.group(0))

    return _ESCAPED_DATA.sub(data, text), count


def _kubernetes_secret_rules() -> list[_Rule]:
    token = mask_token("kubernetes_secrets")
    group = "kubernetes_secrets"
    return [
        _single("k8s_secret_yaml", group, lambda text: _mask_yaml_secret_data(text, token)),
        _single("k8s_secret_json", group, lambda text: _mask_json_secret_data(text, token)),
        _single("k8s_secret_escaped", group, lambda text: _mask_escaped_secret_data(text, token)),
    ]


def _builtin_rules(group: PatternGroup) -> list[_Rule]:
    token = mask_token(group)
    if group == "kubernetes_secrets":
        return _kubernetes_secret_rules()
    if group == "certificates":
        return [
            _regex_rule("pem_block", group, _PEM, token),
            _regex_rule("pem_base64", group, _PEM_BASE64, token),
        ]
    if group == "tokens":
        rules = [_regex_rule(name, group, p, token) for name, p in _TOKEN_PATTERNS.items()]
        return [*rules, _keyed_rule("api_key", group, _API_KEY_RE, token)]
    rules = [
        _regex_rule("url_password", group, _URL_PASSWORD, token),
        _regex_rule("env_entry_yaml", group, _ENV_ENTRY_YAML, token),
        _regex_rule("env_entry_json", group, _ENV_ENTRY_JSON, token),
    ]
    return [*rules, _keyed_rule("password", group, _PASSWORD_KEY_RE, token)]


# Order matters: structure first (a Secret's data), then whole blocks, then single values.
_GROUP_ORDER: tuple[PatternGroup, ...] = (
    "kubernetes_secrets",
    "certificates",
    "tokens",
    "passwords",
)
_BUILTIN_RULE_NAMES = frozenset(
    name for g in _GROUP_ORDER for rule in _builtin_rules(g) for name in rule.names
)
_SENSITIVE_KEY = {
    "tokens": re.compile(_API_KEY + "|(?i:authorization)"),
    "passwords": _PASSWORD_KEY_RE,
}


# ─── the masker ───────────────────────────────────────────────────────────────


class Masker:
    """Masks text and JSON-like values according to a :class:`MaskingConfig`."""

    def __init__(self, config: MaskingConfig | None = None) -> None:
        self.config = config if config is not None else MaskingConfig()
        self._rules: list[_Rule] = []
        if not self.config.enabled:
            return
        for group in _GROUP_ORDER:
            if group in self.config.pattern_groups:
                self._rules.extend(_builtin_rules(group))
        for custom in self.config.custom_patterns:
            self._rules.append(
                _regex_rule(custom.name, "custom", re.compile(custom.pattern), custom.token)
            )

    @property
    def enabled(self) -> bool:
        """Whether this masker changes anything at all."""
        return bool(self._rules)

    def mask(self, text: str) -> MaskResult:
        """Return ``text`` with every secret the enabled rules recognise replaced."""
        counts: Counter[str] = Counter()
        for rule in self._rules:
            text, rule_counts = rule.apply(text)
            counts.update(rule_counts)
        return MaskResult(text=text, counts=dict(counts))

    def mask_json(self, value: Any) -> JsonMaskResult:
        """Return a masked copy of a JSON-like value (dicts, lists, strings, scalars).

        Strings are masked as text; a value under a password, secret, token or API-key
        key is masked whole; ``data``/``stringData`` of a ``kind: Secret`` mapping are
        masked value by value. The input is not modified.
        """
        counts: Counter[str] = Counter()
        masked = self._mask_value(value, counts)
        return JsonMaskResult(value=masked, counts=dict(counts))

    def _mask_value(self, value: Any, counts: Counter[str]) -> Any:
        if not self._rules:
            return value
        if isinstance(value, str):
            result = self.mask(value)
            counts.update(result.counts)
            return result.text
        if isinstance(value, Mapping):
            return self._mask_mapping(value, counts)
        if isinstance(value, list | tuple):
            return [self._mask_value(item, counts) for item in value]
        return value

    def _mask_mapping(self, value: Mapping[Any, Any], counts: Counter[str]) -> dict[Any, Any]:
        groups = self.config.pattern_groups
        is_secret = "kubernetes_secrets" in groups and value.get("kind") == "Secret"
        # An env entry, {"name": "DB_PASSWORD", "value": "..."}: its value is the secret.
        env_group = self._sensitive_group(value.get("name")) if "value" in value else None
        out: dict[Any, Any] = {}
        for key, item in value.items():
            if env_group is not None and key == "value" and self._maskable(item):
                out[key] = mask_token(env_group)
                counts["env_entry_json"] += 1
                continue
            if is_secret and key in ("data", "stringData") and isinstance(item, Mapping):
                token = mask_token("kubernetes_secrets")
                masked_data: dict[Any, Any] = {}
                for data_key, data_value in item.items():
                    if data_value in (None, "") or (
                        isinstance(data_value, str) and _is_masked(data_value)
                    ):
                        masked_data[data_key] = data_value
                    else:
                        masked_data[data_key] = token
                        counts["k8s_secret_json"] += 1
                out[key] = masked_data
                continue
            group = self._sensitive_group(key)
            if group is not None and self._maskable(item):
                out[key] = mask_token(group)
                counts[f"{'api_key' if group == 'tokens' else 'password'}_json"] += 1
                continue
            out[key] = self._mask_value(item, counts)
        return out

    @staticmethod
    def _maskable(item: Any) -> bool:
        """Whether a scalar under a sensitive key is to be masked (not empty, not a reference)."""
        if isinstance(item, bool) or not isinstance(item, str | int | float):
            return False
        return not (isinstance(item, str) and (not item or _is_masked(item) or item[0] in "<$"))

    def _sensitive_group(self, key: Any) -> str | None:
        if not isinstance(key, str):
            return None
        for group, pattern in _SENSITIVE_KEY.items():
            if group in self.config.pattern_groups and pattern.fullmatch(key):
                return group
        return None
