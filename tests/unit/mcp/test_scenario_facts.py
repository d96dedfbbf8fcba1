"""Matching a written analysis against a scenario's expected facts: tolerant, negation-aware."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tarsy_dev.demo_cluster.facts import Finding, Forbidden, clauses, find, normalize, sentences


def test_normalize_ignores_case_punctuation_and_separators() -> None:
    assert normalize("DATABASE_HOST") == normalize("database host") == "database host"
    assert normalize("`payments-db-primary`") == "payments db primary"
    assert normalize("exitCode: 137") == "exitcode 137"


def test_sentences_join_wrapped_lines_but_keep_list_items_apart() -> None:
    text = (
        "## Root cause\n"
        "The ConfigMap was edited\nat 07:54. It now names a missing host.\n"
        "- first item\n  wrapped on\n- second item\n"
    )
    assert sentences(text) == [
        "## Root cause",
        "The ConfigMap was edited at 07:54.",
        "It now names a missing host.",
        "- first item wrapped on",
        "- second item",
    ]


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("The pod was OOMKilled.", True),
        ("the pod was oomkilled twice", True),
        ("Killed by the OOM killer: exceeded its memory limit.", True),
        ("The room was quiet.", False),  # "oom" inside a word is no match
    ],
)
def test_synonyms_case_and_word_boundaries(text: str, found: bool) -> None:
    finding = Finding(fact="OOM kill", match=["oomkill*", ["exceed*", "memory limit"]])
    assert (finding.found_in(text) is not None) is found


def test_a_list_synonym_needs_all_its_terms_in_one_sentence() -> None:
    synonyms: list[str | list[str]] = [["memory", "limit"]]
    assert find("It hit its memory limit.", synonyms) == "It hit its memory limit."
    assert find("Memory is fine. The limit is 512Mi.", synonyms) is None


def test_a_prefix_term_matches_word_starts_only() -> None:
    assert find("CPU is throttled.", ["throttl*"]) == "CPU is throttled."
    assert find("Unthrottled CPU.", ["throttl*"]) is None


def test_forbidden_conclusions_skip_negated_sentences() -> None:
    forbidden = Forbidden(claim="The root cause is the OTel collector.", match=[["otel", "cause*"]])
    assert forbidden.found_in("The root cause is the OTel collector.") is not None
    assert forbidden.found_in("The OTel errors are unrelated noise, not the cause.") is None
    assert forbidden.found_in("OTel isn't what causes the 500s.") is None
    # A finding counts wherever it is stated, negated or not.
    finding = Finding(fact="OTel", match=["otel"])
    assert finding.found_in("The OTel errors are unrelated.") is not None


def test_negation_inside_the_pattern_itself_does_not_cancel_it() -> None:
    forbidden = Forbidden(claim="There are no issues.", match=["no issues"])
    assert forbidden.found_in("Everything is fine: there are no issues.") is not None


def test_empty_synonyms_are_refused() -> None:
    with pytest.raises(ValidationError):
        Finding(fact="x", match=["  "])
    with pytest.raises(ValidationError):
        Forbidden(claim="x", match=[[]])
    with pytest.raises(ValidationError):
        Finding(fact="x", match=[])


def test_a_negation_counts_only_in_the_clauses_of_the_match() -> None:
    forbidden = Forbidden(claim="The database is down.", match=["database is down"])
    assert forbidden.found_in("The database is down, so payments-api cannot start.") is not None
    assert forbidden.found_in("It is not true that the database is down.") is None
    two_terms = Forbidden(claim="OTel causes it.", match=[["otel", "cause*"]])
    # The terms sit in two clauses; a negation in either of them counts.
    assert two_terms.found_in("The OTel errors are loud, but they are not the cause.") is None
    assert two_terms.found_in("The OTel errors, as the logs show, cause the 500s.") is not None


def test_clauses_split_at_punctuation_and_conjunctions() -> None:
    assert clauses("The DB is down, so the API fails; retry (later) because X") == (
        "the db is down | so the api fails | retry | later | because x"
    )
