"""Expected facts of a scenario, and how a written analysis is matched against them.

A scenario lists the findings a correct analysis states and the conclusions a
wrong one draws. Each is matched tolerantly, since a model words things its own
way: case, punctuation and separators do not count (``DATABASE_HOST``,
``database host`` and ``Database-Host`` are the same words), a fact lists
synonyms, and a synonym may be a set of terms that must all appear in one
sentence (``[memory, limit]``). A term ending in ``*`` matches any word that
starts with it (``throttl*``), ``a|b`` matches either alternative
(``restore|revert``), and ``{restore}`` any verb form of :data:`VERB_GROUPS`
that proposes a change rather than narrates one.

A forbidden conclusion only counts where its clause does not negate it: "the TLS
errors are unrelated" mentions TLS without blaming it, while in "the database is
down, so the api cannot start" the negation belongs to another clause.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache

from pydantic import BaseModel, ConfigDict, Field, field_validator

# A phrase, or terms that must all appear in one sentence.
Synonym = str | list[str]

# Words that turn a sentence's claim around ("is not the cause", "unrelated noise").
_NEGATIONS = (
    "not",
    "no",
    "never",
    "none",
    "nothing",
    "unrelated",
    "irrelevant",
    "red herring",
    "rather than",
    "instead of",
    "ruled out",
    "rule out",
    "rules out",
    "isn t",
    "wasn t",
    "aren t",
    "weren t",
    "doesn t",
    "didn t",
    "don t",
    "cannot",
    "can t",
    "neither",
    "nor",
    "unlikely",
    "noise",
    "benign",
    "pre existing",
    "preexisting",
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
# A line that starts a block of its own: a list item, a heading, a quote, a table row.
_BLOCK_START = re.compile(r"^\s*(?:[-*+>|#]|\d+[.)])")
_NOT_WORD = re.compile(r"[^a-z0-9]+")
_CLAUSE_END = re.compile(
    r"[,;()]|\s(?=(?:but|so|because|while|whereas|although|though)\s)", re.IGNORECASE
)
_NOT_TERM = re.compile(r"[^a-z0-9*]+")


def normalize(text: str) -> str:
    """Lower case, other characters as single spaces: ``exit_code: 137`` -> ``exit code 137``."""
    return " ".join(_NOT_WORD.sub(" ", text.lower()).split())


def sentences(text: str) -> list[str]:
    """Split Markdown or plain prose into sentences.

    Wrapped lines are joined back; list items, headings and paragraphs never share a
    sentence with what comes before them.
    """
    blocks: list[list[str]] = []
    for line in text.splitlines():
        if not line.strip():
            blocks.append([])
        elif not blocks or not blocks[-1] or _BLOCK_START.match(line):
            blocks.append([line.strip()])
        else:
            blocks[-1].append(line.strip())
        if line.lstrip().startswith("#"):
            blocks.append([])  # a heading is a line of its own
    found: list[str] = []
    for block in blocks:
        joined = " ".join(block)
        found.extend(part for part in (p.strip() for p in _SENTENCE_END.split(joined)) if part)
    return found


# Verb forms that propose a change rather than narrate one: the imperative, the gerund
# and "be" with the participle ("restore", "restoring", "be restored"; never "restored").
# A term names a group as ``{restore}``.
VERB_GROUPS: dict[str, str] = {
    "restore": "restore|restoring|revert|reverting|undo|undoing|roll back|rolling back|put back"
    "|be restored|be reverted|be rolled back|be undone",
    "rollback": "roll back|rolling back|rollback|roll it back|rollout undo|be rolled back"
    "|revert|reverting|be reverted",
    "change": "fix|fixing|correct|correcting|change the|change its|change it|changing the"
    "|changing its|update|updating|point|pointing|switch|switching|be fixed|be corrected"
    "|be changed|be updated|be pointed|be switched",
    "raise": "raise|raising|increase the|increase its|increasing the|increasing its|bump|bumping"
    "|be raised|be increased",
    "lower": "reduce|reducing|lower the|lower its|lower their|lowering the|lowering its"
    "|lowering their|decrease the|decrease its|decreasing|be reduced|be lowered|be decreased",
    "add": "add|adding|create|creating|give|giving|configure|configuring|be added|be created"
    "|be given|be configured",
    "stop": "stop|stopping|suspend|suspending|pause|pausing|delete|deleting|remove|removing"
    "|disable|disabling|turn off|turning off|be stopped|be suspended|be paused|be deleted"
    "|be removed|be disabled",
}
_GROUP = re.compile(r"^\{([a-z]+)\}$")


def _expand(term: str) -> list[str]:
    """A term's alternatives, verb groups (``{restore}``) spelled out."""
    parts: list[str] = []
    for part in term.split("|"):
        group = _GROUP.match(part.strip())
        if group is None:
            parts.append(part)
        elif group[1] in VERB_GROUPS:
            parts += VERB_GROUPS[group[1]].split("|")
        else:
            raise ValueError(f"unknown verb group {part.strip()!r}; known: {sorted(VERB_GROUPS)}")
    return parts


@lru_cache(maxsize=1024)
def _term_pattern(term: str) -> re.Pattern[str]:
    """A term's pattern; ``a|b`` is either alternative, each of one or more words."""
    alternatives = [_alternative(part, term) for part in _expand(term)]
    return re.compile(r"(?<![a-z0-9])(?:" + "|".join(alternatives) + ")")


def _alternative(text: str, term: str) -> str:
    words = _NOT_TERM.sub(" ", text.lower()).split()
    if not words or not words[-1].strip("*"):
        raise ValueError(f"empty term {term!r}")
    prefix = words[-1].endswith("*")
    words[-1] = words[-1].rstrip("*")
    body = r"\s".join(re.escape(word.replace("*", "")) for word in words)
    tail = r"[a-z0-9]*" if prefix else r"(?![a-z0-9])"
    return body + tail


def _terms(synonym: Synonym) -> list[str]:
    return [synonym] if isinstance(synonym, str) else list(synonym)


def _match_in(sentence: str, synonym: Synonym) -> list[tuple[int, int]] | None:
    """The spans of every term of ``synonym`` in a normalized sentence, or None if one is absent."""
    spans: list[tuple[int, int]] = []
    for term in _terms(synonym):
        found = _term_pattern(term).search(sentence)
        if found is None:
            return None
        spans.append(found.span())
    return spans


def clauses(sentence: str) -> str:
    """A sentence normalized clause by clause, the clauses joined by `` | ``.

    Clauses end at commas, semicolons and brackets, and before ``but``, ``so``,
    ``because``, ``while``, ``whereas``, ``although`` and ``though``: "the database
    is down, so the api cannot start" holds two claims, and the second one's
    negation says nothing about the first.
    """
    parts = (normalize(part) for part in _CLAUSE_END.split(sentence))
    return " | ".join(part for part in parts if part)


def _negated(sentence: str, spans: Sequence[tuple[int, int]]) -> bool:
    """Whether the clauses holding the matched terms, outside them, hold a negation.

    Args:
        sentence: The sentence as :func:`clauses` gives it.
        spans: Where the terms matched in it.
    """
    first = sentence.count("|", 0, min(start for start, _ in spans))
    last = sentence.count("|", 0, max(start for start, _ in spans))
    kept = list(sentence)
    for start, end in spans:
        kept[start:end] = " " * (end - start)
    scope = "".join(kept).split("|")[first : last + 1]
    rest = f" {' '.join(scope)} "
    return any(f" {cue} " in rest for cue in _NEGATIONS)


def find(text: str, synonyms: Iterable[Synonym], *, skip_negated: bool = False) -> str | None:
    """The first sentence of ``text`` that states one of ``synonyms`` (None: none does).

    Args:
        text: The analysis, Markdown or plain.
        synonyms: Phrases, or lists of terms that must share a sentence.
        skip_negated: Ignore a match that its clauses negate (for forbidden conclusions).

    Returns:
        The matching sentence as written, or None.
    """
    options = list(synonyms)
    for raw in sentences(text):
        sentence = clauses(raw) if skip_negated else normalize(raw)
        for synonym in options:
            spans = _match_in(sentence, synonym)
            if spans is not None and not (skip_negated and _negated(sentence, spans)):
                return raw
    return None


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _check_synonyms(value: list[Synonym]) -> list[Synonym]:
    for synonym in value:
        terms = _terms(synonym)
        if not terms:
            raise ValueError(f"empty synonym in {value!r}")
        for term in terms:
            _term_pattern(term)  # an empty alternative or an unknown verb group raises
    return value


class Finding(_Model):
    """Something a correct analysis states: an entity, a cause, a decision."""

    fact: str = Field(min_length=1, description="The finding, in words (for the report).")
    match: list[Synonym] = Field(min_length=1, description="Any one of these states it.")

    _synonyms = field_validator("match")(_check_synonyms)

    def found_in(self, text: str) -> str | None:
        """The sentence of ``text`` that states this finding, or None."""
        return find(text, self.match)


class Forbidden(_Model):
    """A wrong conclusion: stating it (not negated) fails the run."""

    claim: str = Field(
        min_length=1,
        description="The wrong conclusion as a careless investigator would write it; "
        "the scripted sloppy model concludes with it.",
    )
    match: list[Synonym] = Field(min_length=1, description="Any one of these, not negated.")

    _synonyms = field_validator("match")(_check_synonyms)

    def found_in(self, text: str) -> str | None:
        """The sentence of ``text`` that draws this conclusion, or None."""
        return find(text, self.match, skip_negated=True)


class Fix(_Model):
    """A remedy a reviewer would accept: the change that ends the incident (or "no action").

    Design constraint: written from the scenario's own facts, before any model
    ran, and never tuned to a model's answers. It is matched like a finding
    (synonyms, terms sharing a sentence, ``a|b`` alternatives); a proposal is
    best told from a history by the verb's form ("restore|be restored", not
    "restored", which narrates the incident).
    """

    accept: str = Field(min_length=1, description="The fix a reviewer accepts, in words.")
    match: list[Synonym] = Field(min_length=1, description="Any one of these proposes it.")

    _synonyms = field_validator("match")(_check_synonyms)

    def found_in(self, text: str) -> str | None:
        """The sentence of ``text`` that proposes this fix, or None."""
        return find(text, self.match)
