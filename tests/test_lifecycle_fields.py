"""The lifecycle fields a job spec parses: a deadline's length, the defaults of onSuccess and
onFailure (as the reference documents them), and every hint that says how a job's pods are
freed naming the field for a job that gave up too."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tfcompile.spec import misplaced_fields
from tfcompile.spec.models import JobSpec, OnFailure, OnSuccess, TrainingJob

ROOT = Path(__file__).resolve().parent.parent


def _spec(**fields: object) -> TrainingJob:
    return TrainingJob.model_validate({
        "apiVersion": "tfcompile.dev/v1alpha1", "kind": "TrainingJob",
        "metadata": {"name": "demo"},
        "spec": {"image": "trainer:1", "command": ["python", "train.py"],
                 "roles": {"worker": {"replicas": 2}}, **fields},
    })


@pytest.mark.parametrize(("deadline", "seconds"), [
    ("48h", 172800), ("90m", 5400), ("1h30m", 5400), ("45s", 45), ("2h0m5s", 7205),
    ("1m30s", 90), ("8784h", 31622400),
])
def test_a_deadline_is_read_as_seconds(deadline: str, seconds: int) -> None:
    assert _spec(deadline=deadline).spec.deadline_seconds() == seconds


def test_a_job_without_lifecycle_fields_has_no_deadline_and_idles_on_failure() -> None:
    spec = _spec().spec
    assert spec.deadline_seconds() is None
    assert spec.on_failure is OnFailure.IDLE


def test_a_job_that_ends_keeps_its_pods_by_default() -> None:
    """Both default to idle: right on every cluster (release needs the launcher policy, and
    under Flux a MutatingAdmissionPolicy), and a failed task's log stays."""
    spec = _spec().spec
    assert spec.on_success is OnSuccess.IDLE
    assert spec.on_failure is OnFailure.IDLE
    assert "on_success" not in spec.model_fields_set  # launcher: none refuses only what is written


@pytest.mark.parametrize(("field", "python_name"), [("onSuccess", "on_success"),
                                                  ("onFailure", "on_failure")])
def test_the_reference_gives_the_defaults_the_models_have(field: str, python_name: str) -> None:
    reference = (ROOT / "docs" / "job-spec.md").read_text(encoding="utf-8")
    row = re.search(rf"^\| `{field}` \| `([a-z]+)` \|", reference, re.MULTILINE)
    assert row is not None
    assert row.group(1) == JobSpec.model_fields[python_name].default.value
    assert "### Why these defaults" in reference


def _hints() -> dict[str, str]:
    """Every text a build or the scaffold shows that says how a job's pods are freed."""
    texts = {f"misplaced_fields.{name}": value for name, value in vars(misplaced_fields).items()
             if isinstance(value, str)}
    texts.update({f"misplaced_fields.{name}": value
                  for name, value in misplaced_fields.RUN_POLICY_FIELDS.items()})
    texts.update({f"JobSpec.{name}": field.description or ""
                  for name, field in JobSpec.model_fields.items()})
    for deploy in ("applicationset.yaml", "flux.yaml"):
        path = ROOT / "compiler" / "scaffold" / "files" / deploy
        texts[deploy] = " ".join(line.strip().lstrip("#").strip()
                                 for line in path.read_text(encoding="utf-8").splitlines())
    return texts


def test_every_hint_that_frees_pods_names_the_field_for_a_job_that_gave_up() -> None:
    """`onSuccess: release` alone never releases a job that gave up: a hint that speaks of
    freeing pods after a failure, or once a job has ended, names onFailure too."""
    for name, text in _hints().items():
        if "onSuccess: release" not in text:
            continue
        about_an_end = re.search(r"fail|given up|gave up|ended|finished", text)
        assert about_an_end is None or "onFailure" in text, name


def test_a_cleanpodpolicy_hint_says_what_the_default_keeps() -> None:
    advice = misplaced_fields.RUN_POLICY_FIELDS["cleanPodPolicy"]
    assert "onSuccess: idle and onFailure: idle" in advice
    assert "spec.onFailure: release once it has given up" in advice


def test_the_longest_deadline_is_366_days_and_a_second_more_is_refused() -> None:
    """366 days (a year with its leap day) are 8784 hours; 8784h1s is one second more."""
    from tfcompile.spec.lifecycle_rules import check_lifecycle

    assert list(check_lifecycle(_spec(deadline="8784h").spec)) == []
    (problem,) = check_lifecycle(_spec(deadline="8784h1s").spec)
    assert problem.path == ("spec", "deadline")
    assert problem.message == "8784h1s is 31622401 s; give at least 1s and at most 8784h"
