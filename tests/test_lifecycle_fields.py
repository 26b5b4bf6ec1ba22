"""The lifecycle fields a job spec parses: a deadline's length, onFailure's default."""

from __future__ import annotations

import pytest

from tfcompile.spec.models import OnFailure, TrainingJob


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
