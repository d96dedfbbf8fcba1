"""Whether a final answer is one: not a template copied back, and naming something it found.

Design constraint: these checks judge only the shape of an answer, never its
correctness, and they are generic: no alert type, tool or resource is named
here. Small models answer with the instructions' own placeholders
(``<your final analysis in Markdown>``, ``Final Answer: <your complete
analysis>``) or with prose that names nothing the investigation saw ("Your
final analysis is in Markdown."). A copied template is never an analysis; an
answer that names nothing from the evidence gets one nudge, recognised later by
its marker in the conversation, so that it happens once per execution, and the
next answer is accepted whatever it names.

All functions here are pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from tarsy.models import ConversationMessage

# A whole line that is one <angle-bracketed> or [square-bracketed] phrase.
_PLACEHOLDER = re.compile(r"^(?:<[^<>\n]*>|\[[^\[\]\n]*\])$")
# A labelled template line: "Final Answer: <your complete analysis>".
_LABELLED_PLACEHOLDER = re.compile(r"^[A-Za-z][\w ]{0,30}:\s*(?:<[^<>\n]*>|\[[^\[\]\n]*\])$")

_LABEL = re.compile(r"^[A-Za-z][\w ]{0,30}$")

# The marker of the nudge in the conversation: its presence means "already nudged".
NUDGE_MARKER = "names nothing from the evidence"
NUDGE = (
    f"the final answer {NUDGE_MARKER} this investigation gathered: no resource, object or "
    "value that the tool results show. Name the affected resource, the root cause, and the "
    "evidence for it from the results above (the object, event or log line), then give your "
    "final answer again"
)

# Tokens shaped like Kubernetes names, as written in tool output: letters, digits,
# dots and dashes; underscores and upper case make a token that is not one.
_TOKEN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*[A-Za-z0-9_]")
_VERSION = re.compile(r"^v?\d+(?:[.-]\d+)*$")
MIN_NAME_LENGTH = 4
# Dashed or dotted tokens of any cluster's output, or of prose, that name nothing of
# the incident's own.
COMMON_NAMES = frozenset(
    {
        "e.g.", "i.e.", "etc.", "n.a.", "built-in", "read-only", "up-to-date", "follow-up",
        "non-zero", "re-run", "self-hosted", "well-known", "so-called", "on-call",
        "kube-system", "kube-public", "kube-node-lease", "kube-root-ca.crt", "kube-api-access",
        "last-applied-configuration", "pod-template-hash", "pod-template-generation",
        "controller-revision-hash", "default-scheduler", "default-token", "cluster.local",
        "svc.cluster.local", "not-ready", "no-execute", "no-schedule", "best-effort",
        "config.json", "ca.crt", "tls.crt", "tls.key", "service-account", "serviceaccount",
        "kubectl-client-side-apply", "kubectl-edit", "kubectl-patch", "kube-controller-manager",
        "kube-scheduler", "kube-proxy", "helm.sh", "image-pull", "back-off",
        "server.tool",
    }
)  # fmt: skip
_COMMON_SUFFIXES = ("kubernetes.io", "k8s.io")
# What precedes a tool result in the text strategies' conversations.
_OBSERVATION_FROM = "Observation from "
_OBSERVATION = "Observation:"
# ReAct's feedback on a malformed answer is worded as an observation, but is none.
_REACT_FEEDBACK = "Observation: Error in reasoning"
# Delimited sections of the opening message that carry gathered evidence
# (``<<<BEGIN FINDINGS>>>``, ``<<<BEGIN EVIDENCE>>>``); alert data and runbooks do not.
_SECTION = re.compile(r"<<<BEGIN (?P<label>[^>\n]*)>>>\n(?P<body>.*?)\n<<<END (?P=label)>>>", re.S)
EVIDENCE_LABELS = ("EVIDENCE", "FINDING", "DETECTION")


def is_template(answer: str, templates: Sequence[str] = ()) -> bool:
    """Whether ``answer`` is nothing but the instructions' template, copied back.

    Every non-empty line must be a placeholder (``<...>``, ``[...]``, or one
    after a label such as ``Final Answer:``) or a line of ``templates`` (the
    strategy's own instructions). An analysis that merely contains angle
    brackets is not a template.
    """
    lines = [line.strip() for line in answer.splitlines() if line.strip()]
    template_lines = template_lines_of(templates)
    return bool(lines) and all(
        line in template_lines or _PLACEHOLDER.match(line) or _LABELLED_PLACEHOLDER.match(line)
        for line in lines
    )


def template_lines_of(templates: Sequence[str]) -> set[str]:
    """The lines of ``templates``, each also without its label (``Thought: x`` gives ``x``)."""
    lines: set[str] = set()
    for text in templates:
        for line in text.splitlines():
            line = line.strip()
            if not line:
                continue
            lines.add(line)
            label, colon, rest = line.partition(":")
            if colon and rest.strip() and _LABEL.match(label):
                lines.add(rest.strip())
    return lines


def unwritten_answer(answer: str, templates: Sequence[str] = ()) -> str | None:
    """Why a final answer is still no analysis, or None if it is one.

    A structured reply's schema, or ReAct's parser, can only say "a text": an
    empty one, or the instructions' own placeholder or template copied back
    (small models do), would otherwise become the session's final analysis.

    Args:
        answer: The final answer as the model gave it.
        templates: The strategy's instructions, whose lines a copied template repeats.

    Returns:
        The problem, in words the model is told, or None.
    """
    text = answer.strip()
    if not text:
        return "the final answer is empty"
    if is_template(text, templates):
        shown = text if len(text) <= 120 else text[:117] + "..."
        return (
            f"the final answer {shown!r} is the placeholder from the instructions, not an "
            "analysis: write what is broken, the root cause and its evidence, and the fix"
        )
    return None


def is_name(token: str) -> bool:
    """Whether ``token`` looks like a Kubernetes-style name worth finding in an answer."""
    return (
        len(token) >= MIN_NAME_LENGTH
        and token == token.lower()
        and "_" not in token
        and ("-" in token or "." in token)
        and any(c.isalpha() for c in token)
        and not _VERSION.match(token)
        and token not in COMMON_NAMES
        and not token.endswith(_COMMON_SUFFIXES)
    )


def names_in(text: str) -> set[str]:
    """The Kubernetes-style names in ``text`` (lower-case tokens with dashes or dots).

    A dotted name also gives its dashed parts: ``orders-db.orders.svc``
    gives ``orders-db`` too, the way an answer names it.
    """
    names: set[str] = set()
    for token in _TOKEN.findall(text):
        if not is_name(token):
            continue
        names.add(token)
        names.update(part for part in token.split(".") if is_name(part))
    return names


def evidence_texts(messages: Sequence[ConversationMessage]) -> list[str]:
    """What the conversation holds as evidence: tool results and the opening's evidence.

    Tool results are tool messages (native tool calling) and observations (the
    text strategies' user messages; the line naming the call is left out, since
    its arguments are the model's own). The opening user message counts only in
    its delimited evidence sections, never its alert data or runbook.
    """
    texts: list[str] = []
    opening = next((m for m in messages if m.role == "user"), None)
    if opening is not None:
        texts += [
            match["body"]
            for match in _SECTION.finditer(opening.content)
            if any(label in match["label"].upper() for label in EVIDENCE_LABELS)
        ]
    for message in messages:
        if message.role == "tool":
            texts.append(message.content)
        elif message.role == "user" and message.content.startswith(_OBSERVATION_FROM):
            texts.append(message.content.partition("\n")[2])
        elif message.role == "user" and message.content.startswith(_REACT_FEEDBACK):
            continue
        elif message.role == "user" and message.content.startswith(_OBSERVATION):
            texts.append(message.content)
    return texts


def evidence_names(messages: Sequence[ConversationMessage]) -> set[str]:
    """The names the conversation's evidence shows (see :func:`evidence_texts`)."""
    return {name for text in evidence_texts(messages) for name in names_in(text)}


def mentions_any(answer: str, names: Iterable[str]) -> bool:
    """Whether ``answer`` names any of ``names`` (case ignored, whole names only).

    A name the answer gives also names what it owns: ``orders-web`` names the
    pod ``orders-web-5f6d7c8b9-q7w2e`` that the evidence shows, as a
    Deployment's name starts each of its pods' names.
    """
    said = names_in(answer.lower())
    return any(
        name in said or any(name.startswith(f"{owner}-") for owner in said) for name in names
    )


def already_nudged(messages: Sequence[ConversationMessage]) -> bool:
    """Whether the execution's conversation already holds the nudge."""
    return any(m.role == "user" and NUDGE_MARKER in m.content for m in messages)


def unnamed_evidence(answer: str, messages: Sequence[ConversationMessage]) -> str | None:
    """The nudge for an answer that names nothing from the evidence, or None to accept it.

    None when the execution was nudged before (the second answer is accepted
    whatever it names), when the evidence names nothing (there is nothing to
    point at), or when the answer names one of the evidence's names.
    """
    if already_nudged(messages):
        return None
    names = evidence_names(messages)
    if not names or mentions_any(answer, names):
        return None
    return NUDGE
