"""The offline infra checks fail when a deliberate violation is introduced.

Each case copies ``infra/`` to a temporary directory, breaks one thing with a
text substitution, points the structural checks of ``test_terraform`` at the
copy and expects them to fail; ``terraform fmt`` and checkov are run on broken
copies too. A check that passes on broken input proves nothing, so this file
proves the checks.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.infra import test_monitoring as monitoring
from tests.infra import test_terraform as checks

ROOT = Path(__file__).resolve().parents[2]
CHECKOV = ROOT / ".venv-checkov" / "bin" / "checkov"
TERRAFORM = shutil.which("terraform")


@pytest.fixture
def broken_infra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A copy of infra/ that the checks read instead of the real one."""
    copy = tmp_path / "infra"
    shutil.copytree(checks.INFRA, copy, ignore=shutil.ignore_patterns(".terraform*"))
    monkeypatch.setattr(checks, "INFRA", copy)
    checks._parsed.cache_clear()
    yield copy
    checks._parsed.cache_clear()


def replace_in(directory: Path, old: str, new: str) -> None:
    """Replace ``old`` (which must occur) in the .tf files of ``directory``."""
    hits = 0
    for path in directory.glob("*.tf"):
        text = path.read_text()
        if old in text:
            path.write_text(text.replace(old, new))
            hits += 1
    assert hits, f"the fixture text {old!r} is not in infra/ any more"


Violation = tuple[str, str, Callable[[], None]]

VIOLATIONS: dict[str, Violation] = {
    "basic role on a service account": (
        'role    = "roles/datastore.user"',
        'role    = "roles/editor"',
        checks.test_no_basic_roles_and_no_authoritative_bindings,
    ),
    "no dead-letter policy on the step trigger": (
        "  dead_letter_policy {\n"
        "    dead_letter_topic     = google_pubsub_topic.dead_letter.id\n"
        "    max_delivery_attempts = var.max_delivery_attempts\n"
        "  }\n",
        "",
        checks.test_step_trigger_retries_with_backoff_then_dead_letters,
    ),
    "an env var the step code reads is not set": (
        "    step = {\n"
        "      GOOGLE_CLOUD_PROJECT        = var.project_id\n"
        "      TARSY_FIRESTORE_DATABASE    = google_firestore_database.main.name\n"
        "      TARSY_STEPS_TOPIC           = google_pubsub_topic.steps.name\n",
        "    step = {\n"
        "      GOOGLE_CLOUD_PROJECT        = var.project_id\n"
        "      TARSY_FIRESTORE_DATABASE    = google_firestore_database.main.name\n",
        lambda: checks.test_environment_matches_settings("step"),
    ),
    "two functions share a service account": (
        "service_account_email            = google_service_account.api.email",
        "service_account_email            = google_service_account.ingest.email",
        checks.test_every_function_has_its_own_service_account,
    ),
    "the TTL policy watches the wrong field": (
        'field      = "expire_at"',
        'field      = "expires"',
        checks.test_thought_signatures_expire_by_ttl,
    ),
    "a collection group of a session has no TTL policy": (
        '    "answers",\n',
        "",
        monitoring.test_every_collection_group_of_a_session_has_a_ttl_policy,
    ),
    "an alert policy notifies nobody": (
        "notification_channels = var.notification_channels",
        "notification_channels = []",
        monitoring.test_alert_policies_cover_dead_letters_deadlines_steps_models_and_the_sweeper,
    ),
    "a log-based metric reads a field no metric line carries": (
        'outcome = "EXTRACT(jsonPayload.outcome)"',
        'outcome = "EXTRACT(jsonPayload.result)"',
        monitoring.test_log_based_metrics_read_fields_the_metric_lines_carry,
    ),
    "the failure-rate alert counts every step as a failure": (
        r'steps.name}\" AND metric.labels.outcome=\"error\""',
        r'steps.name}\""',
        monitoring.test_alert_policies_cover_dead_letters_deadlines_steps_models_and_the_sweeper,
    ),
}


@pytest.mark.parametrize("case", sorted(VIOLATIONS))
def test_structural_checks_catch(case: str, broken_infra: Path) -> None:
    old, new, check = VIOLATIONS[case]
    check()  # passes on the real configuration...
    checks._parsed.cache_clear()
    replace_in(broken_infra, old, new)
    with pytest.raises(AssertionError):
        check()  # ...and fails on the broken copy


def test_terraform_fmt_catches_bad_formatting(tmp_path: Path) -> None:
    assert TERRAFORM, "terraform is needed for the infra checks (make test runs them)"
    copy = tmp_path / "infra"
    shutil.copytree(checks.INFRA, copy, ignore=shutil.ignore_patterns(".terraform*"))
    ok = subprocess.run([TERRAFORM, "fmt", "-check", "-recursive", str(copy)], check=False)
    assert ok.returncode == 0
    path = copy / "pubsub.tf"
    path.write_text(path.read_text().replace("  name  ", "      name  ", 1).replace(" = ", "=", 3))
    bad = subprocess.run(
        [TERRAFORM, "fmt", "-check", "-recursive", str(copy)], capture_output=True, check=False
    )
    assert bad.returncode != 0


def test_checkov_catches_an_unjustified_weakening(tmp_path: Path) -> None:
    assert CHECKOV.exists(), "run `make infra-check` once: it installs checkov in .venv-checkov"
    copy = tmp_path / "infra"
    shutil.copytree(checks.INFRA, copy, ignore=shutil.ignore_patterns(".terraform*"))
    argv = [str(CHECKOV), "--directory", str(copy), "--framework", "terraform",
            "--skip-download", "--compact", "--quiet"]  # fmt: skip
    assert subprocess.run(argv, capture_output=True, check=False).returncode == 0
    # A public bucket: the kind of change checkov exists to stop.
    (copy / "zz_violation.tf").write_text(
        'resource "google_storage_bucket" "leaky" {\n'
        '  name                        = "leaky-bucket"\n'
        '  location                    = "US"\n'
        "  uniform_bucket_level_access = false\n"
        "}\n"
    )
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert result.returncode != 0
    assert "google_storage_bucket.leaky" in result.stdout
