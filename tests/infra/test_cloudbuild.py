"""cloudbuild.yaml: the pipeline runs the real checks and deploys only from one branch."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
# Substitutions Cloud Build provides itself (a subset; only these may be used).
BUILT_INS = {"PROJECT_ID", "BRANCH_NAME", "COMMIT_SHA", "SHORT_SHA", "BUILD_ID", "LOCATION"}


def _build() -> dict[str, Any]:
    loaded = yaml.safe_load((ROOT / "cloudbuild.yaml").read_text())
    assert isinstance(loaded, dict)
    return loaded


def _script(step: dict[str, Any]) -> str:
    return "\n".join(str(a) for a in step.get("args", []))


def test_steps_run_in_order_and_test_the_whole_suite() -> None:
    steps = _build()["steps"]
    ids = [s["id"] for s in steps]
    order = ["install", "lint", "test", "package", "terraform-plan", "terraform-apply"]
    assert [i for i in ids if i in order] == order
    by_id = {s["id"]: s for s in steps}
    assert "make lint" in _script(by_id["lint"])
    assert "make test" in _script(by_id["test"])
    assert "scripts/package_functions.py" in _script(by_id["package"])
    # The suite needs the emulators (gcloud + Java) and terraform for infra-check.
    assert "google-cloud-cli" in by_id["test"]["name"]
    assert "jre" in _script(by_id["test"])
    assert any("/workspace/.ci-bin" in e for e in by_id["test"].get("env", []))


def test_apply_is_gated_on_the_deploy_branch() -> None:
    steps = {s["id"]: s for s in _build()["steps"]}
    apply = _script(steps["terraform-apply"])
    assert '"$BRANCH_NAME" != "${_DEPLOY_BRANCH}"' in apply
    gate, command = apply.index("_DEPLOY_BRANCH"), apply.index("terraform apply")
    assert gate < command
    assert "terraform plan" in _script(steps["terraform-plan"])
    assert "_DEPLOY_BRANCH" in _build()["substitutions"]


def test_every_substitution_is_declared_and_documented() -> None:
    text = (ROOT / "cloudbuild.yaml").read_text()
    declared = set(_build()["substitutions"])
    body = re.sub(r"\$\$", "", text.split("\nsteps:", 1)[1])
    used = set(re.findall(r"\$\{?([A-Z_][A-Z0-9_]*)", body))
    assert {u for u in used if u.startswith("_")} <= declared
    assert {u for u in used if not u.startswith("_")} <= BUILT_INS
    header = text.split("\nsubstitutions:", 1)[0]
    for name in declared:
        assert f"#   {name}" in header, f"{name} is not documented in the header comment"
